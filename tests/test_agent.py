"""converge-agent against a stub converge-api served over real HTTP: the
script hook's contract, exactly-once across restarts and kills, lost
signals, and one host serving many servers through the batch poll."""

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from converge import userdata
from converge.agent import hooks
from converge.agent import journal
from converge.agent import runner
from tests import agent_stub

# the hooks are started with a preexec_fn (PR_SET_PDEATHSIG), which forks:
# eventlet, imported by oslo.service in this process only, warns
pytestmark = pytest.mark.filterwarnings(
    'ignore:Using fork:DeprecationWarning')


def wait_until(predicate, timeout=30, what='condition'):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for %s' % what)
        time.sleep(0.02)


@pytest.fixture
def host():
    made = []

    def make(**kw):
        kw.setdefault('backoff_max', 0.3)
        h = runner.Host(**kw)
        made.append(h)
        return h
    yield make
    for h in made:
        h.stop()


class Agents:
    """converge-agent processes (standalone), killed at the end."""

    def __init__(self):
        self.procs = []

    def start(self, creds, disk, *extra):
        proc = subprocess.Popen(
            [sys.executable, '-m', 'converge.agent.cli', '--endpoint',
             creds['endpoint'], '--agent-id', creds['agent_id'], '--token',
             creds['token'], '--disk', disk, '--max-backoff', '0.3']
            + list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(proc)
        return proc

    def close(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture
def agents():
    a = Agents()
    yield a
    a.close()


SCRIPT = """#!/bin/sh
echo "out:$foo"
echo "err:$bar" >&2
pwd > where
printf '%s' "$list" > "${heat_outputs_path}.the_list"
printf 'r-%s' "$foo" > "${heat_outputs_path}.result"
exit 3
"""


def test_script_hook_follows_heats_contract(tmp_path):
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    dep = {'id': 'dep-1', 'group': 'script', 'config': SCRIPT,
           'inputs': [{'name': 'foo', 'value': 'hello'},
                      {'name': 'bar', 'value': 42},
                      {'name': 'list', 'value': ['a', {'b': 1}]}],
           'outputs': [{'name': 'result'}, {'name': 'the_list'},
                       {'name': 'never_written'}]}
    result = hooks.run(dep, disk, hooks.ProcessRunner())
    assert result['deploy_stdout'] == 'out:hello\n'
    assert result['deploy_stderr'] == 'err:42\n'
    assert result['deploy_status_code'] == 3
    assert result['result'] == 'r-hello'
    assert json.loads(result['the_list']) == ['a', {'b': 1}]
    assert 'never_written' not in result
    script = os.path.join(disk, 'heat-config-script', 'dep-1')
    assert stat.S_IMODE(os.stat(script).st_mode) == 0o700
    with open(os.path.join(disk, 'where')) as f:
        assert f.read().strip() == os.path.realpath(disk)


def test_hook_output_is_trimmed_and_unknown_group_fails(tmp_path):
    disk = str(tmp_path)
    dep = {'id': 'big', 'group': 'Heat::Ungrouped',
           'config': '#!/bin/sh\nhead -c 2000000 /dev/zero | tr "\\0" x\n'}
    result = hooks.run(dep, disk, hooks.ProcessRunner())
    assert result['deploy_status_code'] == 0
    assert len(result['deploy_stdout'].encode()) <= hooks.MAX_OUTPUT
    assert result['deploy_stdout'].endswith('xxxx')
    none = hooks.run({'id': 'x', 'group': 'chef', 'config': ''}, disk,
                     hooks.ProcessRunner())
    assert none['deploy_status_code'] == 1
    assert "'chef'" in none['deploy_stderr']


@pytest.mark.parametrize('group,tool', [('ansible', 'ansible-playbook'),
                                        ('puppet', 'puppet')])
def test_missing_tool_is_reported(tmp_path, monkeypatch, group, tool):
    monkeypatch.setenv('PATH', str(tmp_path / 'empty'))
    # nor installed beside the agent's interpreter
    monkeypatch.setattr(hooks.sys, 'executable',
                        str(tmp_path / 'empty' / 'python'))
    result = hooks.run({'id': 'd', 'group': group, 'config': 'x'},
                       str(tmp_path), hooks.ProcessRunner())
    assert result['deploy_status_code'] == 1
    assert tool in result['deploy_stderr']


def test_ansible_hook_runs_the_playbook_with_inputs(tmp_path, monkeypatch):
    # a stand-in ansible-playbook that shows how it was called
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    fake = bindir / 'ansible-playbook'
    fake.write_text('#!/bin/sh\necho "$@"\nfor a; do case "$a" in @*) '
                    'cat "${a#@}";; esac; done\n')
    fake.chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (bindir, os.environ['PATH']))
    result = hooks.run({'id': 'd', 'group': 'ansible', 'config': '- hosts: '
                        'all\n', 'inputs': [{'name': 'n', 'value': 5}]},
                       str(tmp_path), hooks.ProcessRunner())
    assert result['deploy_status_code'] == 0
    assert 'd_playbook.yaml' in result['deploy_stdout']
    # Heat's extra vars: the inputs, the config id, the outputs path
    variables = json.loads(result['deploy_stdout'].split('\n', 1)[1])
    assert variables['n'] == 5
    assert variables['heat_config_id'] == 'd'
    assert variables['heat_outputs_path'].endswith(
        os.path.join('heat-config-ansible-outputs', 'd'))


def test_deployment_runs_and_signals_heats_payload(stub, host, tmp_path):
    creds = stub.add_agent()
    h = host()
    h.start(creds, str(tmp_path / 'disk'))
    dep = stub.deploy(creds['agent_id'], SCRIPT, inputs=[
        {'name': 'foo', 'value': 'v'}, {'name': 'bar', 'value': 'w'},
        {'name': 'list', 'value': [1]}], outputs=[{'name': 'result'}])
    stub.wait_for(lambda: stub.signals_of(dep['id']), what='the signal')
    [sig] = stub.signals_of(dep['id'])
    assert sig['accepted'] and sig['run'] == dep['run']
    assert sig['payload']['deploy_status_code'] == 3
    assert sig['payload']['deploy_stdout'] == 'out:v\n'
    assert sig['payload']['result'] == 'r-v'
    entry = journal.Journal(str(tmp_path / 'disk')).get(
        dep['id'], 'CREATE', dep['run'])
    wait_until(lambda: journal.Journal(str(tmp_path / 'disk')).get(
        dep['id'], 'CREATE', dep['run']).get('acked'), what='the ack')
    assert entry['state'] == 'done'


def test_deployments_run_in_name_order_once_each(stub, host, tmp_path):
    creds = stub.add_agent()
    log = tmp_path / 'order'
    script = '#!/bin/sh\necho "$deploy_action:$me" >> %s\n' % log
    # written before the agent starts: both arrive in one list
    stub.deploy(creds['agent_id'], script, name='b-second',
                inputs=[{'name': 'me', 'value': 'b'}])
    stub.deploy(creds['agent_id'], script, name='a-first',
                inputs=[{'name': 'me', 'value': 'a'}])
    host().start(creds, str(tmp_path / 'disk'))
    stub.wait_for(lambda: len(stub.signals) == 2, what='two signals')
    assert log.read_text() == 'CREATE:a\nCREATE:b\n'


def test_signal_retried_through_5xx_without_rerun(stub, host, tmp_path):
    creds = stub.add_agent()
    count = tmp_path / 'count'
    stub.fail_signals = 4
    host().start(creds, str(tmp_path / 'disk'))
    dep = stub.deploy(creds['agent_id'],
                      '#!/bin/sh\necho x >> %s\n' % count)
    stub.wait_for(lambda: stub.signals_of(dep['id'], accepted=True),
                  what='the signal once the API is back')
    assert stub.fail_signals == 0
    assert count.read_text() == 'x\n'


def test_signal_refused_stops_the_server(stub, host, tmp_path):
    creds = stub.add_agent()
    gate = tmp_path / 'gate'
    h = host()
    agent = h.start(creds, str(tmp_path / 'disk'))
    stub.deploy(creds['agent_id'], '#!/bin/sh\nwhile [ ! -e %s ]; do '
                'sleep 0.02; done\n' % gate)
    wait_until(lambda: agent.busy, what='the hook to start')
    # the credential is revoked while the hook runs
    stub.revoke(creds['agent_id'])
    gate.write_text('')
    wait_until(lambda: agent.stopped, what='the agent to stop')
    assert '403' in agent.stop_reason
    wait_until(lambda: creds['agent_id'] not in h.agents,
               what='the host to let it go')


def test_runs_once_across_agent_restart(stub, agents, tmp_path):
    creds = stub.add_agent()
    disk = str(tmp_path / 'disk')
    count = tmp_path / 'count'
    script = '#!/bin/sh\necho "$me" >> %s\n' % count
    first = stub.deploy(creds['agent_id'], script, name='a',
                        inputs=[{'name': 'me', 'value': 'a'}])
    proc = agents.start(creds, disk)
    stub.wait_for(lambda: stub.signals_of(first['id']), what='a signal')
    wait_until(lambda: journal.Journal(disk).get(
        first['id'], 'CREATE', first['run'])['acked'])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    # the same deployment is still listed (as the engine's list would
    # show it, IN_PROGRESS again if its row were not yet updated)
    stub.deployments[creds['agent_id']][first['id']]['status'] = \
        'IN_PROGRESS'
    stub.versions[creds['agent_id']] += 1
    agents.start(creds, disk)
    second = stub.deploy(creds['agent_id'], script, name='b',
                         inputs=[{'name': 'me', 'value': 'b'}])
    stub.wait_for(lambda: stub.signals_of(second['id']),
                  what='the second deployment')
    # in name order, a would have run again before b
    assert count.read_text() == 'a\nb\n'
    # listed IN_PROGRESS again, a is answered with its journalled result
    # (docs/software.md), not run
    first_signals = stub.signals_of(first['id'])
    assert len(first_signals) == 2
    assert first_signals[1]['payload'] == first_signals[0]['payload']


def test_kill_during_hook_is_reported_interrupted(stub, agents, tmp_path):
    creds = stub.add_agent()
    disk = str(tmp_path / 'disk')
    marker = tmp_path / 'marker'
    pidfile = tmp_path / 'hook.pid'
    dep = stub.deploy(creds['agent_id'], '#!/bin/sh\necho $$ > %s\n'
                      'echo ran >> %s\nexec sleep 120\n' % (pidfile, marker))
    proc = agents.start(creds, disk)
    wait_until(lambda: marker.exists() and pidfile.exists()
               and pidfile.read_text().strip(), what='the hook to start')
    hook_pid = int(pidfile.read_text())
    proc.kill()
    proc.wait(10)
    # the hook died with its agent (as with the server's power)
    wait_until(lambda: not agent_stub.alive(hook_pid), what='the hook to die')
    assert not stub.signals_of(dep['id'])
    agents.start(creds, disk)
    stub.wait_for(lambda: stub.signals_of(dep['id']),
                  what='the interrupted signal')
    [sig] = stub.signals_of(dep['id'])
    assert sig['accepted']
    assert sig['payload']['deploy_status_code'] == -1
    assert 'interrupted' in sig['payload']['deploy_stderr']
    assert stub.status(creds['agent_id'], dep['id']) == 'FAILED'
    assert marker.read_text() == 'ran\n'   # not run again


def test_lost_signal_is_sent_again_not_rerun(stub, agents, tmp_path):
    creds = stub.add_agent()
    disk = str(tmp_path / 'disk')
    count = tmp_path / 'count'
    stub.fail_signals = 10 ** 6   # the API goes away after the poll
    dep = stub.deploy(creds['agent_id'], '#!/bin/sh\necho x >> %s\n'
                      'echo done\n' % count)
    proc = agents.start(creds, disk)
    jour = journal.Journal(disk)
    wait_until(lambda: (jour.get(dep['id'], 'CREATE', dep['run']) or {}
                        ).get('state') == 'done', what='the hook to finish')
    proc.kill()
    proc.wait(10)
    assert not stub.signals_of(dep['id'])
    stub.fail_signals = 0
    agents.start(creds, disk)
    stub.wait_for(lambda: stub.signals_of(dep['id']), what='the signal')
    [sig] = stub.signals_of(dep['id'])
    assert sig['accepted'] and sig['payload']['deploy_stdout'] == 'done\n'
    assert count.read_text() == 'x\n'
    wait_until(lambda: jour.get(dep['id'], 'CREATE', dep['run'])['acked'])


def test_user_data_mode_and_bad_arguments(stub, agents, tmp_path):
    creds = stub.add_agent()
    path = tmp_path / 'user_data'
    path.write_text(userdata.encode('#!/bin/sh\n', **creds))
    proc = subprocess.Popen(
        [sys.executable, '-m', 'converge.agent.cli', '--user-data',
         str(path), '--disk', str(tmp_path / 'disk')])
    agents.procs.append(proc)
    dep = stub.deploy(creds['agent_id'], '#!/bin/sh\necho hi\n')
    stub.wait_for(lambda: stub.signals_of(dep['id']), what='the signal')
    plain = tmp_path / 'plain'
    plain.write_text('#!/bin/sh\n')
    bad = subprocess.run(
        [sys.executable, '-m', 'converge.agent.cli', '--user-data',
         str(plain), '--disk', str(tmp_path / 'd2')],
        capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert 'text/x-converge-agent' in bad.stderr and str(plain) in bad.stderr


def test_host_serves_fifty_servers_with_one_held_poll(stub, host, tmp_path):
    h = host(batch=True, wait=30)
    before = threading.active_count()
    creds = [stub.add_agent() for _ in range(50)]
    for i, c in enumerate(creds):
        h.start(c, str(tmp_path / ('disk%d' % i)))
    deps = [stub.deploy(c['agent_id'], '#!/bin/sh\necho "$deploy_server_id"'
                        '\n') for c in creds]
    stub.wait_for(lambda: all(stub.signals_of(d['id']) for d in deps),
                  timeout=60, what='50 signals')
    for c, d in zip(creds, deps):
        [sig] = stub.signals_of(d['id'])
        assert sig['payload']['deploy_stdout'] == c['agent_id'] + '\n', sig
    # idle: one request held for all fifty, and no thread per server
    stub.wait_for(lambda: stub.held == 1 and len(stub.last_poll) == 50,
                  what='one held poll for all')
    wait_until(lambda: not any(a.busy for a in h.agents.values()))
    assert threading.active_count() - before <= 4
    polls = stub.polls
    # a change for one server reaches it through the held request
    late = stub.deploy(creds[7]['agent_id'], '#!/bin/sh\necho late\n')
    stub.wait_for(lambda: stub.signals_of(late['id']), what='late signal')
    assert stub.polls - polls <= 3


def test_endpoint_away_between_commands(stub, host, tmp_path):
    """converge-api goes away (an embedded command ended) while a hook
    runs, and comes back at the same address: the result arrives once,
    nothing runs twice, and the agent pulls again."""
    creds = stub.add_agent()
    gate = tmp_path / 'gate'
    count = tmp_path / 'count'
    h = host(batch=True)
    agent = h.start(creds, str(tmp_path / 'disk'))
    dep = stub.deploy(creds['agent_id'], '#!/bin/sh\necho x >> %s\n'
                      'while [ ! -e %s ]; do sleep 0.02; done\n'
                      % (count, gate))
    wait_until(count.exists, what='the hook to start')
    stub.close()
    gate.write_text('')
    jour = journal.Journal(agent.disk)
    wait_until(lambda: jour.get(dep['id'], 'CREATE', dep['run'])['state']
               == 'done', what='the hook to finish')
    assert not stub.signals
    stub.reopen()
    stub.wait_for(lambda: stub.signals_of(dep['id']), what='the signal')
    later = stub.deploy(creds['agent_id'], '#!/bin/sh\necho y >> %s\n'
                        % count)
    stub.wait_for(lambda: stub.signals_of(later['id']), what='a new one')
    assert count.read_text() == 'x\ny\n'
    assert [s['accepted'] for s in stub.signals] == [True, True]


def test_a_batch_answer_that_is_no_answer_leaves_no_agent_waiting():
    """An agent host's batch of signals answered with something that is
    not an answer per signal: each agent is told the endpoint is
    unavailable (it sends again later), none waits for ever."""
    import http.server
    from converge.agent import client

    answers = [{'signals': ['not an answer']},
               {'signals': [{'error': 'teapot'}]},
               {'signals': []}]

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers['Content-Length']))
            data = json.dumps(answers.pop(0)).encode()
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    signaller = runner.Signaller('http://127.0.0.1:%d'
                                 % server.server_address[1])
    creds = {'agent_id': 'a', 'token': 't'}
    try:
        for _ in range(3):
            result = []

            def send():
                try:
                    result.append(signaller.signal(creds, 'd', 'r', {}))
                except client.Unavailable as e:
                    result.append(e)
            sender = threading.Thread(target=send, daemon=True)
            sender.start()
            sender.join(30)   # a bound on failure: it would wait for ever
            assert len(result) == 1, 'the agent still waits'
            assert isinstance(result[0], client.Unavailable)
    finally:
        signaller.stop()
        server.shutdown()
    assert answers == []
