"""Exactly once on servers of image `heat-agents` (issue 40, point 4):
Heat's own tooling (os-collect-config, os-refresh-config, heat-config
and heat-config-notify) in the simulated server's root, served by
converge-api. Each script leaves a line per run in a file on the
server's disk (`converge sim server show SERVER -f json`: its disk), and
the tests count them:

- a signal delivered twice (heat-config-notify's own payload re-sent with
  curl, then another one) records once: the outputs stay the first's;
- os-collect-config killed while a hook runs, then started again by its
  service: the hook ends and signals once, nothing runs again;
- the server rebooted while a hook runs (`converge sim server reboot`):
  heat-config's record says it ran, it does not run again;
- an UPDATE with the same inputs runs nothing, with changed inputs each
  script once more;
- the engine killed (SIGKILL) while a deployment runs, then `converge
  stack converge`: the script ran once and the stack completes;
- a server of the image with converge's own transport (CONVERGE_AGENT)
  is refused at create, naming the transports to use.
"""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest
import requests

from converge.agent import rootfs
from tests.conftest import stop_agents
from tests.test_heat_api import _settled, _start_api, API

BIN = os.path.dirname(sys.executable)

needs_roots = pytest.mark.skipif(
    not rootfs.available(), reason='no roots here (not root on Linux?)')

# two deployments on one server, in name order (heat-config's): `a` ends
# at once, `b` waits for a gate file in the server's /tmp (its disk's
# tmp) named by the input, so a test can cut it off mid-hook
TEMPLATE = '''
heat_template_version: 2018-08-31
parameters:
  transport: {type: string}
  signal: {type: string}
  who: {type: string}
resources:
  server:
    type: OS::Nova::Server
    properties:
      image: heat-agents
      flavor: m1.small
      user_data_format: SOFTWARE_CONFIG
      software_config_transport: {get_param: transport}
  config_a:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: who}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        echo "a $who" >> /var/lib/runs.log
        printf 'hello %s' "$who" > "$heat_outputs_path.said"
  config_b:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: who}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        echo "b $who" >> /var/lib/runs.log
        while [ ! -e "/tmp/gate-$who" ]; do sleep 0.1; done
        printf 'gated %s' "$who" > "$heat_outputs_path.said"
  a:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config_a}
      server: {get_resource: server}
      input_values: {who: {get_param: who}}
      signal_transport: {get_param: signal}
  b:
    type: OS::Heat::SoftwareDeployment
    depends_on: a
    properties:
      config: {get_resource: config_b}
      server: {get_resource: server}
      input_values: {who: {get_param: who}}
      signal_transport: {get_param: signal}
outputs:
  a: {value: {get_attr: [a, said]}}
  b: {value: {get_attr: [b, said]}}
'''

PAIRS = [('POLL_TEMP_URL', 'TEMP_URL_SIGNAL'),
         ('POLL_SERVER_CFN', 'CFN_SIGNAL')]


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        assert time.monotonic() < deadline, 'timed out waiting for ' + what
        time.sleep(0.2)   # polling a condition, not synchronising


def lines(path):
    try:
        return pathlib.Path(path).read_text().splitlines()
    except FileNotFoundError:
        return []


@pytest.fixture
def tree():
    """The image, built once per machine (the agent host's cache)."""
    from converge.agent import image
    return image.ensure(uid=rootfs.DEFAULT_UID)


@pytest.fixture
def api(tmp_path):
    """converge-api over one home (it is that home's engine): it serves
    the servers' metadata and signals from one test step to the next."""
    home = str(tmp_path / 'home')
    conf = str(tmp_path / 'converge.conf')
    with open(conf, 'w') as f:
        f.write('[DEFAULT]\nhome = %s\n' % home)
    env = dict(os.environ, CONVERGE_SIM_RESTART_SEC='0.2')
    env.pop('CONVERGE_HOME', None)
    proc, url = _start_api(conf, str(tmp_path / 'api.log'), env=env)
    found = API(conf, url, env=env)
    found.home = home
    yield found
    proc.terminate()
    proc.wait(timeout=30)
    stop_agents(home)


def sim(api, *args):
    out = subprocess.run(
        [os.path.join(BIN, 'converge'), '--config-file', api.conf, 'sim',
         'server'] + list(args), capture_output=True, text=True,
        env=api.env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


class Server:
    """What a user sees of the server: its disk, heat-config's records,
    os-collect-config's log, its boots."""

    def __init__(self, api, server_id):
        self.id = server_id
        self.disk = pathlib.Path(json.loads(sim(
            api, 'show', server_id, '-f', 'json'))['disk'])
        self.root = self.disk / 'rootfs'
        self.host_log = self.disk.parent / 'agent-host.log'

    def runs(self, path='rootfs/var/lib/runs.log'):
        return lines(self.disk / path)

    def notified(self, dep_id):
        path = self.root / 'var/lib/heat-config/deployed' / (
            dep_id + '.notify.json')
        return path.exists() and json.loads(path.read_text())

    def occ_log(self):
        try:
            return (self.disk / 'var/log/os-collect-config.log').read_text()
        except FileNotFoundError:
            return ''

    def skipped(self, dep_id):
        return self.occ_log().count(
            'Skipping config %s, already deployed' % dep_id)

    def boots(self):
        try:
            return json.loads((self.disk / 'firstboot.json').read_text()
                              ).get('boots', 0)
        except (FileNotFoundError, ValueError):
            return 0

    def occ_starts(self):
        try:
            text = self.host_log.read_text()
        except FileNotFoundError:
            return []
        return re.findall(r'os-collect-config started \(pid (\d+)\)', text)

    def open_gate(self, who):
        (self.disk / 'tmp' / ('gate-' + who)).write_text('')


def deployments(hc, stack):
    """The server's deployments as heat-config gets them, by resource."""
    meta = hc.resources.metadata(stack, 'server')
    found = {}
    for dep in meta.get('deployments') or ():
        inputs = {i['name']: i['value'] for i in dep['inputs']}
        found[inputs['deploy_resource_name']] = dict(dep, values=inputs)
    return found


def running(hc, stack, names):
    """The deployments `names` once the server's metadata lists each of
    them as a run in progress (a new id per run)."""
    def listed():
        found = deployments(hc, stack)
        return all(n in found for n in names) and found
    return wait_until(listed, 120, 'deployments %s listed' % names)


def outputs(hc, stack):
    return {o['output_key']: o['output_value']
            for o in hc.stacks.get(stack).outputs}


def resend(dep, payload):
    """The signal heat-config-notify sent, sent again by hand, as it
    would be (the verb it was given, the URL, a JSON body): curl."""
    out = subprocess.run(
        ['curl', '-sS', '-X', dep['values']['deploy_signal_verb'], '-H',
         'Content-Type: application/json', '--data-binary',
         json.dumps(payload), dep['values']['deploy_signal_id']],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.long
@needs_roots
@pytest.mark.parametrize('transport,signal_transport', PAIRS)
def test_each_script_runs_once_per_deployment_action_and_inputs(
        tree, api, tmp_path, transport, signal_transport):
    hc = api.client('once', api.token('once')['token'])
    params = {'transport': transport, 'signal': signal_transport,
              'who': 'world'}
    hc.stacks.create(stack_name='s', template=TEMPLATE, parameters=params)
    first = running(hc, 's', ['a', 'b'])
    server = Server(api, first['a']['values']['deploy_server_id'])
    # `a` ran and signalled; `b` runs, held by its gate
    wait_until(lambda: server.runs() == ['a world', 'b world'], 300,
               'a to run and b to start')
    assert server.notified(first['a']['id'])

    # os-collect-config killed while `b` runs: its service starts it
    # again; `b` ends (its gate opened) and signals; the restarted
    # os-collect-config sees heat-config's record and runs nothing again
    starts = server.occ_starts()
    os.kill(int(starts[-1]), signal.SIGKILL)
    wait_until(lambda: len(server.occ_starts()) > len(starts), 60,
               'os-collect-config to start again')
    server.open_gate('world')
    st = _settled(hc, 's', timeout=300)
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    assert outputs(hc, 's') == {'a': 'hello world', 'b': 'gated world'}
    wait_until(lambda: server.skipped(first['b']['id']), 120,
               'the restarted os-collect-config to see b deployed')
    assert server.runs() == ['a world', 'b world']

    # the signal delivered twice: heat-config-notify's payload again,
    # then another one: neither is taken
    payload = server.notified(first['a']['id'])
    assert payload['said'] == 'hello world', payload
    assert resend(first['a'], payload) == {
        'accepted': False, 'reason': 'signalled already'}
    answer = resend(first['b'], dict(payload, said='forged'))
    assert answer['accepted'] is False, answer
    assert outputs(hc, 's') == {'a': 'hello world', 'b': 'gated world'}
    assert server.runs() == ['a world', 'b world']

    # an UPDATE with the same inputs runs nothing
    hc.stacks.update('s', template=TEMPLATE, parameters=params)
    st = _settled(hc, 's', timeout=300)
    assert st.stack_status == 'UPDATE_COMPLETE', st.stack_status_reason
    same = deployments(hc, 's')
    assert {n: d['id'] for n, d in same.items()} == {
        n: d['id'] for n, d in first.items()}
    assert server.runs() == ['a world', 'b world']

    # changed inputs: each script once more; the server rebooted while
    # `b` runs: heat-config's record is on the disk, `b` does not run
    # again after the reboot
    params['who'] = 'again'
    hc.stacks.update('s', template=TEMPLATE, parameters=params)
    wait_until(lambda: server.runs()[2:] == ['a again', 'b again'], 300,
               'the update to run a and start b')
    second = running(hc, 's', ['a', 'b'])
    assert second['b']['id'] != first['b']['id']
    boots = server.boots()
    skipped = server.skipped(second['b']['id'])
    sim(api, 'reboot', server.id)
    wait_until(lambda: server.boots() > boots, 120, 'the reboot')
    wait_until(lambda: server.skipped(second['b']['id']) > skipped, 120,
               'os-collect-config, after the reboot, to see b deployed')
    server.open_gate('again')
    assert server.runs() == ['a world', 'b world', 'a again', 'b again']
    # what the reboot cut off is never signalled by heat-config (Heat's
    # tooling has no interrupted record): the operator signals it by
    # hand, once; a second signal is not taken
    b = deployments(hc, 's')['b']
    assert resend(b, {'deploy_status_code': 0, 'said': 'by hand'})[
        'accepted'] is True
    assert resend(b, {'deploy_status_code': 0, 'said': 'twice'})[
        'accepted'] is False
    st = _settled(hc, 's', timeout=300)
    assert st.stack_status == 'UPDATE_COMPLETE', st.stack_status_reason
    assert outputs(hc, 's') == {'a': 'hello again', 'b': 'by hand'}
    assert server.runs() == ['a world', 'b world', 'a again', 'b again']


@pytest.mark.soak
@needs_roots
@pytest.mark.parametrize('hook_ends', ['once it serves', 'while down'])
def test_engine_killed_while_a_heat_agents_deployment_runs(
        tree, cli, tmp_path, hook_ends):
    """SIGKILL of the engine (the embedded command, which serves
    converge-api) while heat-config runs `b`; `converge stack converge`
    resumes the create. `b` ends once converge-api serves again, or
    while nothing serves (heat-config-notify's retries, about six minutes
    of them, reach the resumed command); each script ran once and the
    stack completes with `b`'s outputs."""
    tpl = tmp_path / 't.yaml'
    tpl.write_text(TEMPLATE)
    args = ['--parameter', 'transport=POLL_TEMP_URL', '--parameter',
            'signal=TEMP_URL_SIGNAL', '--parameter', 'who=world']
    engine = cli.popen('stack', 'create', 's', '-t', str(tpl), *args)
    disks = pathlib.Path(cli.home) / 'sim-disks'

    def runs_logs():
        return {p.parent.parent.parent.parent.name: lines(p)
                for p in disks.glob('*/rootfs/var/lib/runs.log')}
    try:
        found = wait_until(
            lambda: [d for d, ls in runs_logs().items()
                     if ls == ['a world', 'b world']], 400,
            'a to run and b to start')
        assert engine.poll() is None, engine.communicate()
        engine.send_signal(signal.SIGKILL)
        engine.wait()
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()
    disk = disks / found[0]
    gate = disk / 'tmp' / 'gate-world'
    if hook_ends == 'while down':
        gate.write_text('')
        # heat-config wrote b's result and runs heat-config-notify, which
        # finds no converge-api
        deployed = disk / 'rootfs/var/lib/heat-config/deployed'
        wait_until(lambda: len(list(deployed.glob('*.notify.json'))) == 2,
                   120, 'b to end')
    resumed = cli.popen('stack', 'converge', 's', '--wait')
    try:
        url = (pathlib.Path(cli.home) / 'api.url').read_text().strip()

        def serving():
            # any answer: the resumed command serves (it binds first
            # and answers once its engine is up)
            try:
                requests.get(url, timeout=10)
            except (requests.ConnectionError, requests.Timeout):
                return False
            return True
        wait_until(serving, 120, 'converge-api to serve again')
        gate.write_text('')
        out, err = resumed.communicate(timeout=600)
    finally:
        if resumed.poll() is None:
            resumed.kill()
            resumed.wait()
    assert resumed.returncode == 0, (out, err)
    shown = cli.json('stack', 'show', 's')
    assert shown['stack_status'] == 'CREATE_COMPLETE', shown
    said = cli.json('stack', 'output', 'show', 's', '--all')
    assert said == {'a': 'hello world', 'b': 'gated world'}, said
    assert lines(disk / 'rootfs/var/lib/runs.log') == [
        'a world', 'b world']


CIRROS = TEMPLATE.replace('image: heat-agents', 'image: cirros').replace(
    '/var/lib/runs.log', 'runs.log')


@pytest.mark.long
@needs_roots
def test_the_same_on_cirros_with_converge_agent(api, tmp_path):
    """The same steps on a `cirros` server with converge's own agent and
    transport (the script's working directory is the server's disk):
    a signal sent again to the run's signal URL is not taken; an UPDATE
    with the same inputs runs nothing, with changed inputs once more;
    a reboot while a hook runs cuts it off, and converge-agent's journal
    reports it interrupted (FAILED) instead of running it again."""
    hc = api.client('once', api.token('once')['token'])
    params = {'transport': 'CONVERGE_AGENT', 'signal': 'CFN_SIGNAL',
              'who': 'world'}
    hc.stacks.create(stack_name='s', template=CIRROS, parameters=params)
    first = running(hc, 's', ['a', 'b'])
    server = Server(api, first['a']['values']['deploy_server_id'])
    wait_until(lambda: server.runs('runs.log') == ['a world', 'b world'],
               120, 'a to run and b to start')
    server.open_gate('world')
    st = _settled(hc, 's', timeout=120)
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    assert outputs(hc, 's') == {'a': 'hello world', 'b': 'gated world'}

    # a signal again, by hand, for a run the agent signalled
    assert resend(first['a'], {'deploy_status_code': 0, 'said': 'x'}) == {
        'accepted': False, 'reason': 'signalled already'}
    assert outputs(hc, 's') == {'a': 'hello world', 'b': 'gated world'}

    hc.stacks.update('s', template=CIRROS, parameters=params)
    st = _settled(hc, 's', timeout=120)
    assert st.stack_status == 'UPDATE_COMPLETE', st.stack_status_reason
    assert server.runs('runs.log') == ['a world', 'b world']

    params['who'] = 'again'
    hc.stacks.update('s', template=CIRROS, parameters=params)
    wait_until(lambda: server.runs('runs.log')[2:] == ['a again',
                                                       'b again'],
               120, 'the update to run a and start b')
    sim(api, 'reboot', server.id)
    st = _settled(hc, 's', timeout=120)
    assert st.stack_status == 'UPDATE_FAILED', st.stack_status_reason
    assert 'interrupted' in st.stack_status_reason, st.stack_status_reason
    server.open_gate('again')
    assert server.runs('runs.log') == [
        'a world', 'b world', 'a again', 'b again']

    # the operator's retry: changed inputs, each script once more
    params['who'] = 'third'
    server.open_gate('third')
    hc.stacks.update('s', template=CIRROS, parameters=params)
    st = _settled(hc, 's', timeout=120)
    assert st.stack_status == 'UPDATE_COMPLETE', st.stack_status_reason
    assert server.runs('runs.log') == [
        'a world', 'b world', 'a again', 'b again', 'a third', 'b third']


REFUSED = '''
heat_template_version: 2018-08-31
resources:
  server:
    type: OS::Nova::Server
    properties:
      image: heat-agents
      flavor: m1.small
      user_data_format: SOFTWARE_CONFIG
'''


def test_heat_agents_server_with_converges_own_transport_is_refused(
        cli, tmp_path):
    """The image runs os-collect-config, not converge-agent: with
    converge's default transport nothing on it would collect its
    deployments, which would wait until their timeout. The create fails
    at once, naming the transports to use."""
    tpl = tmp_path / 't.yaml'
    tpl.write_text(REFUSED)
    proc = cli.run('stack', 'create', 's', '-t', str(tpl), '--wait',
                   check=False, timeout=120)
    assert proc.returncode != 0, proc.stdout
    shown = cli.json('stack', 'show', 's')
    assert shown['stack_status'] == 'CREATE_FAILED', shown
    reason = shown['stack_status_reason']
    assert 'CONVERGE_AGENT' in reason and 'POLL_TEMP_URL' in reason, reason
    assert 'heat-agents' in reason, reason
    # no server was made
    assert json.loads(cli.run('sim', 'server', 'list', '-f', 'json'
                              ).stdout) == []
