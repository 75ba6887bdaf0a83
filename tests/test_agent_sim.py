"""The simulated cloud runs the agents of its servers: a server created
with a bootstrap part gets an agent (one host process per sim), which
really runs scripts on the server's disk; delete, reboot and shutdown act
on it. Against a stub converge-api served over real HTTP."""

import os
import signal
import time

import pytest

from converge import userdata
from converge.agent import journal
from converge.drivers import sim
from converge.drivers.sim import agents
from converge.drivers.sim import store
from tests import agent_stub

pytestmark = [pytest.mark.filterwarnings(
    'ignore:Using fork:DeprecationWarning'), pytest.mark.slow]


def wait_until(predicate, timeout=30, what='condition'):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for %s' % what)
        time.sleep(0.02)


@pytest.fixture
def home(tmp_path):
    """A converge home whose sim's agent host is shut down at the end."""
    path = tmp_path / 'home'
    path.mkdir()
    yield path
    disks = str(path / 'sim-disks')
    pid = agents._pid(disks)
    try:
        agents.shutdown('sqlite:///%s' % (path / 'sim.db'), disks)
    finally:
        store.forget()
        # never leave one behind
        if pid is not None and agent_stub.alive(pid):
            os.kill(pid, signal.SIGKILL)


def cloud_of(home):
    return sim.SimCompute('sqlite:///%s' % (home / 'sim.db'),
                          disks_dir=str(home / 'sim-disks'))


def boot(cloud, stub, name='vm'):
    creds = stub.add_agent()
    server = cloud.create_server(
        name, 'img', 'm1', user_data=userdata.encode('#!/bin/sh\n',
                                                      **creds))
    return server, creds


def host_pid(home):
    with open(home / 'sim-disks' / agents.PID_FILE) as f:
        return int(f.read())


def test_plain_servers_start_no_host(home):
    cloud = cloud_of(home)
    cloud.create_server('plain', 'img', 'm1', user_data='#!/bin/sh\necho\n')
    server = cloud.create_server('none', 'img', 'm1')
    assert cloud.get_server(server['id'])['status'] == 'ACTIVE'
    assert not cloud.agents_running()
    assert not (home / 'sim-disks').exists()


def test_sim_server_runs_its_deployments(home, stub):
    cloud = cloud_of(home)
    server, creds = boot(cloud, stub)
    disk = home / 'sim-disks' / server['id']
    dep = stub.deploy(creds['agent_id'], '#!/bin/sh\npwd > here\n'
                      'echo "$deploy_server_id"\n')
    stub.wait_for(lambda: stub.signals_of(dep['id']), timeout=60,
                  what='the signal from the sim server')
    [sig] = stub.signals_of(dep['id'])
    assert sig['accepted']
    assert sig['payload']['deploy_status_code'] == 0
    assert (disk / 'here').read_text().strip() == os.path.realpath(disk)
    entry = journal.Journal(str(disk)).get(dep['id'], 'CREATE', dep['run'])
    assert entry['state'] == 'done'
    # a second server: the same host, no second process
    pid = host_pid(home)
    other, creds2 = boot(cloud, stub, 'vm2')
    dep2 = stub.deploy(creds2['agent_id'], '#!/bin/sh\necho two\n')
    stub.wait_for(lambda: stub.signals_of(dep2['id']), what='second')
    assert host_pid(home) == pid
    assert cloud.disk(cloud.get_server(other['id'])) == str(
        home / 'sim-disks' / other['id'])

    # deleted: its agent leaves the poll and runs nothing more
    cloud.admin().delete_server(server['id'])
    stub.wait_for(lambda: stub.last_poll == {creds2['agent_id']},
                  what='the deleted server\'s agent to stop')
    late = stub.deploy(creds['agent_id'], '#!/bin/sh\necho late\n')
    dep3 = stub.deploy(creds2['agent_id'], '#!/bin/sh\necho three\n')
    stub.wait_for(lambda: stub.signals_of(dep3['id']), what='third')
    assert not stub.signals_of(late['id'])


def test_reboot_interrupts_the_hook_and_shutdown_stops(home, stub):
    cloud = cloud_of(home)
    server, creds = boot(cloud, stub)
    disk = home / 'sim-disks' / server['id']
    dep = stub.deploy(creds['agent_id'], '#!/bin/sh\necho $$ > hook.pid\n'
                      'echo ran >> ran\nexec sleep 120\n')
    wait_until(lambda: (disk / 'hook.pid').exists() and
               (disk / 'hook.pid').read_text().strip(), timeout=60,
               what='the hook to start')
    hook = agent_stub.host_pid(disk, int((disk / 'hook.pid').read_text()))
    assert hook is not None
    rebooted = cloud.admin().reboot_server(server['id'])
    assert rebooted['status'] == 'ACTIVE'
    stub.wait_for(lambda: stub.signals_of(dep['id']),
                  what='the interrupted report')
    [sig] = stub.signals_of(dep['id'])
    assert sig['payload']['deploy_status_code'] == -1
    assert sig['payload']['deploy_stderr'] == journal.INTERRUPTED
    wait_until(lambda: not agent_stub.alive(hook),
               what='the reboot to kill the hook')
    assert (disk / 'ran').read_text() == 'ran\n'
    # after the reboot the agent carries on
    dep2 = stub.deploy(creds['agent_id'], '#!/bin/sh\necho after\n')
    stub.wait_for(lambda: stub.signals_of(dep2['id']), what='after reboot')

    pid = host_pid(home)
    assert cloud.shutdown_agents()
    wait_until(lambda: not agent_stub.alive(pid), what='the host to exit')
    assert not cloud.agents_running()
    assert not cloud.shutdown_agents()   # nothing left to stop
    # stays stopped: nothing runs
    stub.deploy(creds['agent_id'], '#!/bin/sh\necho never\n', name='zz')
    # until the engine reads a server with an agent again
    cloud.get_server(server['id'])
    wait_until(cloud.agents_running, what='the host to start again')
    stub.wait_for(lambda: len(stub.signals) == 3, what='the held-back one')


def test_cli_show_reboot_shutdown(home, stub, cli):
    cli.home = str(home)
    cloud = cloud_of(home)
    server, creds = boot(cloud, stub)
    shown = cli.json('sim', 'server', 'show', server['id'])
    assert shown['disk'] == str(home / 'sim-disks' / server['id'])
    plain = cloud.create_server('plain', 'img', 'm1')
    assert 'disk' not in cli.json('sim', 'server', 'show', plain['id'])
    dep = stub.deploy(creds['agent_id'], '#!/bin/sh\necho hi\n')
    stub.wait_for(lambda: stub.signals_of(dep['id']), timeout=60,
                  what='the signal')
    disk = home / 'sim-disks' / server['id']
    slow = stub.deploy(creds['agent_id'], '#!/bin/sh\necho > started\n'
                       'exec sleep 120\n')
    wait_until(lambda: (disk / 'started').exists(), what='the slow hook')
    cli.run('sim', 'server', 'reboot', 'vm')
    stub.wait_for(lambda: stub.signals_of(slow['id']), what='interrupted')
    assert stub.signals_of(slow['id'])[0]['payload'][
        'deploy_status_code'] == -1
    log = cli.json('sim', 'log', '--op', 'reboot')
    assert [e['Server'] for e in log] == [server['id']]
    pid = host_pid(home)
    out = cli.run('sim', 'shutdown').stdout
    assert 'Stopped the agent host' in out
    wait_until(lambda: not agent_stub.alive(pid), what='the host to exit')
    assert 'No agent host' in cli.run('sim', 'shutdown').stdout
    # a command that needs the host starts it, and it outlives the command
    later = stub.deploy(creds['agent_id'], '#!/bin/sh\necho later\n',
                        name='zz')
    cli.run('sim', 'server', 'reboot', server['id'])
    stub.wait_for(lambda: stub.signals_of(later['id']), timeout=60,
                  what='the host the CLI started')
    assert agent_stub.alive(host_pid(home))
    bad = cli.run('sim', 'server', 'reboot', 'nope', check=False)
    assert bad.returncode != 0 and 'nope' in bad.stderr


def test_reboot_of_an_old_database(home):
    """A sim database made before agents and reboots gets the columns."""
    import sqlalchemy as sa
    url = 'sqlite:///%s' % (home / 'old.db')
    engine = sa.create_engine(url)
    store.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql('DROP INDEX ix_sim_servers_agent')
        for column in ('agent', 'reboots'):
            conn.exec_driver_sql('ALTER TABLE sim_servers DROP COLUMN %s'
                                 % column)
    engine.dispose()
    cloud = sim.SimCompute(url, disks_dir=str(home / 'disks'))
    server = cloud.create_server('a', 'img', 'm1')
    cloud.admin().reboot_server(server['id'])
    again = cloud.admin().reboot_server(server['id'])
    assert again['status'] == 'ACTIVE'
    assert [e['detail']['reboots'] for e in cloud.api_log(op='reboot')] \
        == [1, 2]


def test_one_host_per_cloud_whatever_the_disks_dir(home, stub, tmp_path):
    """Two homes (disks directories) sharing one sim database: one host
    serves the cloud; a shutdown from the other reaches it."""
    import subprocess
    import sys
    cloud = cloud_of(home)
    server, creds = boot(cloud, stub)
    dep = stub.deploy(creds['agent_id'], '#!/bin/sh\necho one\n')
    stub.wait_for(lambda: stub.signals_of(dep['id']), timeout=60,
                  what='the first host to serve')
    pid = host_pid(home)
    other_disks = tmp_path / 'other-disks'
    other = sim.SimCompute(cloud.url, disks_dir=str(other_disks))
    other.ensure_agents()
    assert not other.agents_running()
    # a host started by hand for the other directory stands aside
    proc = subprocess.run(
        [sys.executable, '-m', 'converge.agent.cli', '--sim-connection',
         cloud.url, '--disks', str(other_disks)], timeout=60)
    assert proc.returncode == 0
    assert 'another agent host serves' in (
        other_disks / agents.LOG_FILE).read_text()
    assert agent_stub.alive(pid)
    assert other.shutdown_agents()
    wait_until(lambda: not agent_stub.alive(pid),
               what='the first host to stop')
    assert not cloud.agents_running()
