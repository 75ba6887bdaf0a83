"""kill -9 of the engine and of the agent host in the middle of a
20-server deployment, then recovery: every script ran exactly once.

As a user runs it: the CLI in subprocesses (embedded: the command is the
engine and serves the agents' routes), the simulated cloud's agent host
running real scripts on the servers' disks. Each script appends a line to
``runs.log`` on its server's disk, then waits for a gate file the test
creates, then appends to ``finished.log``. Three kinds of servers:

- A: no gate; done and signalled before anything is killed;
- B: gated; the engine is killed while they wait, the gate opens, they
  finish while no engine listens (their results journalled, unsent), then
  the agent host is killed: the restarted agents signal them again;
- C: gated; the agent host is killed while they wait: they are cut off
  mid-hook and must be reported interrupted (FAILED), never re-run.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests import agent_stub
from tests.test_software_deployment import api  # noqa: F401 (fixture)

pytestmark = [pytest.mark.filterwarnings(
    'ignore:Using fork:DeprecationWarning'), pytest.mark.slow]

N = 20
A = ['d%02d' % i for i in range(0, 7)]
B = ['d%02d' % i for i in range(7, 14)]
C = ['d%02d' % i for i in range(14, N)]

SCRIPT = '''#!/bin/sh
echo "$deploy_resource_name $deploy_action $round" >> runs.log
echo $$ > hook.pid
while [ -n "$gate" ] && [ ! -e "$gate" ]; do sleep 0.05; done
echo "$deploy_action $round" >> finished.log
'''


def template(gates):
    resources = {'config': {
        'type': 'OS::Heat::SoftwareConfig', 'properties': {
            'group': 'script', 'config': SCRIPT,
            'inputs': [{'name': 'gate', 'default': ''},
                       {'name': 'round'}]}}}
    for name in A + B + C:
        server = 's' + name[1:]
        resources[server] = {'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.tiny', 'name': server,
            'user_data_format': 'SOFTWARE_CONFIG'}}
        values = {'round': {'get_param': 'round'}}
        if name in gates:
            values['gate'] = gates[name]
        resources[name] = {'type': 'OS::Heat::SoftwareDeployment',
                           'properties': {
                               'config': {'get_resource': 'config'},
                               'server': {'get_resource': server},
                               'input_values': values}}
    return json.dumps({
        'heat_template_version': '2016-10-14',
        'parameters': {'round': {'type': 'string', 'default': 'one'}},
        'resources': resources})


def wait_until(predicate, timeout=30, what='condition'):
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for %s' % what)
        time.sleep(0.05)   # polling a condition, not synchronising


def read_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except (FileNotFoundError, NotADirectoryError):
        return []


def journal_of(disk):
    """The entries of the agent's journal on `disk` (docs/software.md:
    journal/<id>/<action>-<run>.json)."""
    entries = []
    root = os.path.join(disk, 'journal')
    for dep in os.listdir(root) if os.path.isdir(root) else ():
        for name in os.listdir(os.path.join(root, dep)):
            if name.endswith('.json'):
                with open(os.path.join(root, dep, name)) as f:
                    entries.append(json.load(f))
    return entries


class Disks:
    """The servers' disks ([sim] disks_dir, by default
    $CONVERGE_HOME/sim-disks), found by what their scripts wrote."""

    def __init__(self, home):
        self.root = os.path.join(home, 'sim-disks')

    def by_deployment(self):
        found = {}
        if not os.path.isdir(self.root):
            return found
        for server in os.listdir(self.root):
            lines = read_lines(os.path.join(self.root, server, 'runs.log'))
            if lines:
                found[lines[0].split()[0]] = os.path.join(self.root, server)
        return found

    def host_pid(self):
        with open(os.path.join(self.root, 'agent-host.pid')) as f:
            return int(f.read())


def kill9(pid):
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not agent_stub.alive(pid), timeout=10,
               what='process %d to die' % pid)


def resources(cli, stack):
    return {r['resource_name']: r for r in cli.json(
        'stack', 'resource', 'list', stack)}


def test_kill9_of_engine_and_agent_host_runs_every_script_once(
        cli, tmp_path):
    # a gate is a file on the server's own disk (the script's working
    # directory): a simulated server's /tmp is its own, not the test's
    gates = dict({n: 'gate-b' for n in B}, **{n: 'gate-c' for n in C})
    path = tmp_path / 'crash.yaml'
    path.write_text(template(gates))
    disks = Disks(cli.home)

    with open(tmp_path / 'create.out', 'w') as out:
        engine = subprocess.Popen(
            [sys.executable, '-m', 'converge.cmd.cli', '--home', cli.home,
             'stack', 'create', 'crash', '-t', str(path)],
            stdout=out, stderr=subprocess.STDOUT, env=cli.env())
    try:
        # every script started; A's ended and the engine recorded them
        found = wait_until(lambda: len(disks.by_deployment()) == N and
                           disks.by_deployment(), timeout=60,
                           what='all %d scripts to start' % N)
        wait_until(lambda: all(
            r['resource_status'] == 'CREATE_COMPLETE'
            for n, r in resources(cli, 'crash').items() if n in A),
            what='the engine to record A complete')
        assert engine.poll() is None, (tmp_path / 'create.out').read_text()
        kill9(engine.pid)
    finally:
        if engine.poll() is None:
            engine.kill()
        engine.wait()
    assert cli.json('stack', 'show', 'crash')['stack_status'] == \
        'CREATE_IN_PROGRESS'

    # B finishes while no engine listens: results journalled, unsent
    for n in B:
        open(os.path.join(found[n], 'gate-b'), 'w').close()
    wait_until(lambda: all(
        [e.get('state') for e in journal_of(found[n])] == ['done']
        for n in B), what='B to finish')
    assert not any(e.get('acked') for n in B
                   for e in journal_of(found[n]))
    # C is cut off mid-hook by the agent host's death, as by a power cut
    hooks_c = [agent_stub.host_pid(found[n], int(read_lines(
        os.path.join(found[n], 'hook.pid'))[0])) for n in C]
    assert None not in hooks_c, hooks_c
    assert all(agent_stub.alive(pid) for pid in hooks_c)
    kill9(disks.host_pid())
    wait_until(lambda: not any(agent_stub.alive(p) for p in hooks_c),
               what='the hooks of C to die with their agent')
    # were one re-run, it would end now
    for n in C:
        open(os.path.join(found[n], 'gate-c'), 'w').close()

    # recovery: the engine resumes the create; the agent host comes back
    # and reports B's results and C's interruption
    proc = cli.run('stack', 'converge', 'crash', '--wait', check=False,
                   timeout=120)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    shown = cli.json('stack', 'show', 'crash')
    assert shown['stack_status'] == 'CREATE_FAILED', shown
    assert 'interrupted' in shown['stack_status_reason'], shown
    listed = resources(cli, 'crash')
    events = cli.json('stack', 'event', 'list', 'crash')
    assert not [n for n, r in listed.items()
                if r['resource_status'].endswith('IN_PROGRESS')], listed
    for name in A:
        assert listed[name]['resource_status'] == 'CREATE_COMPLETE'
    for name in C:
        assert listed[name]['resource_status'] == 'CREATE_FAILED'
    assert not [e for e in events if e['resource_name'] in A + B and
                'interrupted' in e['resource_status_reason']
                and 'Stopped waiting' not in e['resource_status_reason']]
    for name, disk in found.items():
        assert read_lines(os.path.join(disk, 'runs.log')) == [
            '%s CREATE one' % name], name
        assert read_lines(os.path.join(disk, 'finished.log')) == (
            [] if name in C else ['CREATE one']), name
        [entry] = journal_of(disk)
        assert entry['state'] == 'done'
        assert entry['result']['deploy_status_code'] == (
            -1 if name in C else 0), (name, entry)

    # the operator's explicit retry: an update that changes the input
    # runs each script once more (a plain converge would run none of them:
    # test_an_operators_rerun_of_an_interrupted_deployment_counts)
    cli.run('stack', 'update', 'crash', '-t', str(path), '--parameter',
            'round=two', '--wait', timeout=120)
    for name, disk in found.items():
        lines = read_lines(os.path.join(disk, 'runs.log'))
        assert len(lines) == 2 and lines[1].endswith(' two'), (name, lines)
        if name in C:
            assert lines[1] == '%s CREATE two' % name


# -- the pieces, closer up ---------------------------------------------------

def test_a_run_asked_for_again_is_answered_from_the_journal(stub, tmp_path):
    """The engine lists a run the agent's journal holds as IN_PROGRESS
    again (its step wrote that run key anew): the agent signals the
    journalled result again and does not run the hook."""
    from converge.agent import runner
    creds = stub.add_agent()
    disk = tmp_path / 'disk'
    host = runner.Host(backoff_max=0.3)
    try:
        host.start(creds, str(disk))
        dep = stub.deploy(creds['agent_id'], '#!/bin/sh\necho x >> count\n'
                          'echo cut >&2\nexit 3\n')
        stub.wait_for(lambda: stub.signals_of(dep['id']), what='a signal')
        wait_until(lambda: all(e.get('acked') for e in journal_of(str(disk))),
                   what='the ack')
        with stub.cond:
            stub.deployments[creds['agent_id']][dep['id']]['status'] = \
                'IN_PROGRESS'
            stub.versions[creds['agent_id']] += 1
            stub.cond.notify_all()
        stub.wait_for(lambda: len(stub.signals_of(dep['id'])) == 2,
                      what='the journalled result again')
        first, again = stub.signals_of(dep['id'])
        assert again['accepted'] and again['run'] == dep['run']
        assert again['payload'] == first['payload']
        assert again['payload']['deploy_status_code'] == 3
        assert (disk / 'count').read_text() == 'x\n'
        assert stub.status(creds['agent_id'], dep['id']) == 'FAILED'
    finally:
        host.stop()


def test_an_operators_rerun_of_an_interrupted_deployment_counts(
        engine, api, tmp_path):
    """Interrupted, then run again by `deployment action run ... CREATE`:
    the resumed create takes that run's outcome; it does not ask the
    agent for the interrupted run again (its journal has it: the stack
    would wait for a signal that never comes, or be told the old
    result)."""
    import threading
    from converge.agent import journal
    from converge.engine import request, service, stacks
    from tests import enginetools as et
    from tests.test_software_deployment import Agent, _outputs, _start, \
        _template
    svc, ctx = service.Service(engine), request.make()
    started = _start(engine, tmp_path, _template())
    agent = Agent(engine)
    first = agent.next_run()
    agent.signal(first, deploy_status_code=-1,
                 deploy_stderr=journal.INTERRUPTED)
    stack = et.wait(engine, *started).stack
    assert et.status(stack) == 'CREATE_FAILED'
    assert 'interrupted' in stack.status_reason

    def converge():
        done = []
        thread = threading.Thread(target=lambda: done.append(et.wait(
            engine, *stacks.converge(engine, 'sw')).stack), daemon=True)
        thread.start()
        thread.join(30)
        assert done, 'stack converge did not end (waiting for a signal)'
        return done[0]

    # converging again runs nothing: the failed run stays failed
    assert et.status(converge()) == 'CREATE_FAILED'
    agent.version = None   # a signal does not move it: look afresh
    [doc] = agent.pull(wait=0)
    assert (doc['run'], doc['status']) == (first['run'], 'FAILED')

    [action] = svc.deployment_action_run(ctx, 'sw', 'deployment', 'CREATE')
    redo = agent.next_run()
    assert redo['run'] != first['run'] and redo['action'] == 'CREATE'
    agent.signal(redo, deploy_status_code=0, result='again')
    assert svc.deployment_action_show(ctx, action['id'])['status'] == \
        'COMPLETE'
    stack = converge()
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    assert _outputs(engine, stack)['result'] == 'again'
    agent.version = None
    [doc] = agent.pull(wait=0)
    assert (doc['run'], doc['status']) == (redo['run'], 'COMPLETE')
