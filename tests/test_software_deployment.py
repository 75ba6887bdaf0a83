"""OS::Heat::SoftwareDeployment through converge-api's agent routes.

The engine runs in-process; converge-api serves the agents' routes on
loopback; the test plays the server's agent over real HTTP (the real agent
is tested in test_agent*.py): it decodes its credential from the server's
user_data, pulls its deployments, and signals results.
"""

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from converge import conf
from converge import userdata
from converge.api import server as api_server
from converge.engine import stacks
from converge.engine import views
from tests import enginetools as et

CONFIG = '''#!/bin/sh
echo "hello $foo"
'''


@pytest.fixture
def api(engine):
    served = api_server.Served(engine, '127.0.0.1', 0, threads=8)
    conf.CONF.set_override('public_endpoint', served.url, 'api')
    # the test plays the servers' agents: no real one competes
    conf.CONF.set_override('boot_agents', False, 'sim')
    yield served
    served.stop()
    conf.CONF.clear_override('boot_agents', 'sim')
    conf.CONF.clear_override('public_endpoint', 'api')


def _template(actions=None, foo='bar', transport=None, outputs=None):
    deployment = {'config': {'get_resource': 'config'},
                  'server': {'get_resource': 'server'},
                  'input_values': {'foo': foo}}
    if actions is not None:
        deployment['actions'] = actions
    if transport:
        deployment['signal_transport'] = transport
    return et.hot({
        'config': {'type': 'OS::Heat::SoftwareConfig', 'properties': {
            'group': 'script', 'config': CONFIG,
            'inputs': [{'name': 'foo'}, {'name': 'unused', 'default': 'u'}],
            'outputs': outputs or [{'name': 'result'}]}},
        'server': {'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.tiny',
            'user_data_format': 'SOFTWARE_CONFIG'}},
        'deployment': {'type': 'OS::Heat::SoftwareDeployment',
                       'properties': deployment},
    }, outputs={
        'result': {'value': {'get_attr': ['deployment', 'result']}},
        'stdout': {'value': {'get_attr': ['deployment', 'deploy_stdout']}},
    })


class Agent:
    """The server's side, by hand: its credential from its user_data."""

    def __init__(self, engine, server=None):
        if server is None:
            [server] = _servers(engine, 1)
        self.settings = userdata.decode(server['user_data'])
        assert self.settings is not None, 'no agent part in user_data'
        self.version = None

    def _request(self, method, path, body=None, headers=None, creds=None):
        creds = creds or self.settings
        req = urllib.request.Request(
            self.settings['endpoint'] + path, method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers=dict({'X-Agent-Id': creds['agent_id'],
                          'X-Agent-Token': creds['token'],
                          'Content-Type': 'application/json'},
                         **(headers or {})))
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b'null')
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, json.loads(raw) if raw else None

    def pull(self, wait=10):
        """The next version of the deployments (long poll)."""
        headers = {}
        if self.version is not None:
            headers['If-None-Match'] = '"%s"' % self.version
        code, body = self._request('GET', '/v1/agent/deployments?wait=%s'
                                   % wait, headers=headers)
        if code == 304:
            return None
        assert code == 200, body
        self.version = body['version']
        return body['deployments']

    def next_run(self, wait=20):
        """Pull until a deployment is IN_PROGRESS; returns it."""
        for _ in range(20):
            docs = self.pull(wait=wait) or []
            running = [d for d in docs if d['status'] == 'IN_PROGRESS']
            if running:
                return running[0]
        raise AssertionError('no deployment to run')

    def signal(self, doc, creds=None, **payload):
        return self._request(
            'POST', '/v1/agent/deployments/%s/signal?run=%s'
            % (doc['id'], doc['run']), body=payload, creds=creds)


def _servers(engine, count):
    """The cloud's servers, once `count` of them were booted."""
    deadline = time.monotonic() + 30
    while len(engine.clients.compute.list_servers()) < count:
        assert time.monotonic() < deadline, 'the servers were not booted'
        time.sleep(0.02)  # polling the cloud, not synchronising
    return engine.clients.compute.list_servers()


def _start(engine, tmp_path, doc, name='sw'):
    b = et.bundle(tmp_path, doc)
    return stacks.create(engine, name, b, {})


def _finish(engine, started):
    return et.wait(engine, *started).stack


def _outputs(engine, stack):
    return {k: v['value'] for k, v in views.outputs(engine, stack).items()}


def _inputs(doc):
    return {i['name']: i['value'] for i in doc['inputs']}


def test_a_deployment_waits_for_its_signal_and_takes_its_outputs(
        engine, api, tmp_path):
    started = _start(engine, tmp_path, _template())
    agent = Agent(engine)
    doc = agent.next_run()
    assert doc['group'] == 'script' and doc['config'] == CONFIG
    assert doc['action'] == 'CREATE'
    inputs = _inputs(doc)
    assert inputs['foo'] == 'bar' and inputs['unused'] == 'u'
    assert inputs['deploy_action'] == 'CREATE'
    assert inputs['deploy_resource_name'] == 'deployment'
    assert inputs['deploy_server_id'] == engine.clients.compute.list_servers(
        )[0]['id']
    assert inputs['deploy_stack_id'].startswith('sw/')
    code, body = agent.signal(doc, deploy_stdout='hello bar\n',
                              deploy_stderr='', deploy_status_code=0,
                              result='42')
    assert code == 200 and body['accepted'] is True
    stack = _finish(engine, started)
    assert et.status(stack) == 'CREATE_COMPLETE'
    assert _outputs(engine, stack) == {'result': '42',
                                       'stdout': 'hello bar\n'}


def test_a_duplicate_signal_changes_nothing(engine, api, tmp_path):
    started = _start(engine, tmp_path, _template())
    agent = Agent(engine)
    doc = agent.next_run()
    assert agent.signal(doc, deploy_status_code=0, result='1')[1][
        'accepted']
    code, body = agent.signal(doc, deploy_status_code=0, result='2')
    assert code == 200 and body['accepted'] is False
    stack = _finish(engine, started)
    assert _outputs(engine, stack)['result'] == '1'


def test_a_non_zero_exit_fails_the_deployment_with_its_output(
        engine, api, tmp_path):
    started = _start(engine, tmp_path, _template())
    agent = Agent(engine)
    doc = agent.next_run()
    agent.signal(doc, deploy_status_code=3, deploy_stdout='',
                 deploy_stderr='boom: disk full\n')
    stack = _finish(engine, started)
    assert et.status(stack) == 'CREATE_FAILED'
    assert 'non-zero status code: 3' in stack.status_reason
    assert 'boom: disk full' in stack.status_reason


def test_an_error_output_fails_the_deployment(engine, api, tmp_path):
    started = _start(engine, tmp_path, _template(outputs=[
        {'name': 'result'}, {'name': 'oops', 'error_output': True}]))
    agent = Agent(engine)
    doc = agent.next_run()
    agent.signal(doc, deploy_status_code=0, oops='the database is down')
    stack = _finish(engine, started)
    assert et.status(stack) == 'CREATE_FAILED'
    assert 'the database is down' in stack.status_reason


def test_credentials_of_another_server_forged_or_revoked_are_refused(
        engine, api, tmp_path):
    started = _start(engine, tmp_path, _template())
    agent = Agent(engine)
    doc = agent.next_run()
    forged = dict(agent.settings, token='0' * 64)
    code, _ = agent.signal(doc, creds=forged, deploy_status_code=0)
    assert code == 403
    code, _ = agent._request('GET', '/v1/agent/deployments', creds=forged)
    assert code == 403
    # a credential of another server (valid, but not this deployment's)
    other = dict(agent.settings, agent_id='a-server-that-is-not-this-one')
    from converge.drivers import tokens
    other['token'] = tokens.token_for(engine.db, other['agent_id'])
    engine.clients.agents.register(other['agent_id'], None, 'converge', 'x')
    code, _ = agent.signal(doc, creds=other, deploy_status_code=0)
    assert code == 403
    assert agent.signal(doc, deploy_status_code=0)[1]['accepted']
    stack = _finish(engine, started)
    assert et.status(stack) == 'CREATE_COMPLETE'
    # deleting the server revokes its credential
    et.run(engine, stacks.delete, 'sw')
    code, _ = agent._request('GET', '/v1/agent/deployments')
    assert code == 403


def test_an_update_that_changes_an_input_runs_update_once(
        engine, api, tmp_path):
    started = _start(engine, tmp_path, _template())
    agent = Agent(engine)
    create = agent.next_run()
    agent.signal(create, deploy_status_code=0)
    assert et.status(_finish(engine, started)) == 'CREATE_COMPLETE'

    b = et.bundle(tmp_path, _template(foo='baz'), 'u.yaml')
    started = stacks.update(engine, 'sw', b, {})
    update = agent.next_run()
    assert update['action'] == 'UPDATE' and _inputs(update)['foo'] == 'baz'
    assert update['run'] != create['run']
    agent.signal(update, deploy_status_code=0, result='updated')
    stack = _finish(engine, started)
    assert et.status(stack) == 'UPDATE_COMPLETE'
    # the signal came from the agent itself: its version does not move
    assert agent.pull(wait=0) is None
    agent.version = None
    assert [d['status'] for d in agent.pull(wait=0)] == ['COMPLETE']

    # the same template again: nothing the config sees changed
    b = et.bundle(tmp_path, _template(foo='baz'), 'v.yaml')
    stack = et.run(engine, stacks.update, 'sw', b, {})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    docs = agent.pull(wait=0)
    assert docs is None  # its version did not move: nothing new to run


def test_no_signal_completes_at_once(engine, api, tmp_path):
    stack = et.run(engine, stacks.create, 'sw', et.bundle(
        tmp_path, _template(transport='NO_SIGNAL')), {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    docs = Agent(engine).pull(wait=0)
    assert [d['status'] for d in docs] == ['COMPLETE']


def test_an_idle_agent_is_answered_when_its_server_gets_work(
        engine, api, tmp_path):
    """The long poll is held while nothing changes and answers as soon as
    a deployment for this server appears."""
    started = _start(engine, tmp_path, _template())
    agent = Agent(engine)
    doc = agent.next_run()
    agent.signal(doc, deploy_status_code=0)
    _finish(engine, started)
    agent.pull(wait=0)          # up to date
    answered = []
    poller = threading.Thread(target=lambda: answered.append(
        agent.pull(wait=20)))
    poller.start()
    b = et.bundle(tmp_path, _template(foo='new'), 'u.yaml')
    started = stacks.update(engine, 'sw', b, {})
    poller.join(timeout=30)
    assert answered and answered[0] is not None
    assert [d['status'] for d in answered[0]] == ['IN_PROGRESS']
    agent.signal(answered[0][0], deploy_status_code=0)
    assert et.status(_finish(engine, started)) == 'UPDATE_COMPLETE'


def test_suspend_resume_and_delete_run_their_actions_once_each(
        engine, api, tmp_path):
    actions = ['CREATE', 'SUSPEND', 'RESUME', 'DELETE']
    started = _start(engine, tmp_path, _template(actions=actions))
    agent = Agent(engine)
    seen = []

    def serve(started):
        doc = agent.next_run()
        seen.append((doc['action'], doc['run']))
        assert _inputs(doc)['deploy_action'] == doc['action']
        agent.signal(doc, deploy_status_code=0)
        return _finish(engine, started)

    assert et.status(serve(started)) == 'CREATE_COMPLETE'
    assert et.status(serve(stacks.suspend(engine, 'sw'))) == \
        'SUSPEND_COMPLETE'
    assert et.status(serve(stacks.resume(engine, 'sw'))) == 'RESUME_COMPLETE'
    assert et.status(serve(stacks.suspend(engine, 'sw'))) == \
        'SUSPEND_COMPLETE'
    assert et.status(serve(stacks.resume(engine, 'sw'))) == 'RESUME_COMPLETE'
    assert et.status(serve(stacks.delete(engine, 'sw'))) == 'DELETE_COMPLETE'
    assert [a for a, _ in seen] == ['CREATE', 'SUSPEND', 'RESUME', 'SUSPEND',
                                    'RESUME', 'DELETE']
    # each run its own key: the second suspend is not the first again
    assert len({r for _, r in seen}) == len(seen)


def test_suspend_goes_dependents_first_and_resume_the_other_way(
        engine, tmp_path):
    doc = et.hot({
        'a': {'type': 'OS::Heat::TestResource'},
        'b': {'type': 'OS::Heat::TestResource', 'depends_on': ['a']},
        'c': {'type': 'OS::Heat::TestResource', 'depends_on': ['b']},
    })
    et.run(engine, stacks.create, 'order', et.bundle(tmp_path, doc), {})
    stack = et.run(engine, stacks.suspend, 'order')
    assert et.status(stack) == 'SUSPEND_COMPLETE'
    stack = et.run(engine, stacks.resume, 'order')
    assert et.status(stack) == 'RESUME_COMPLETE'
    done = [(e.resource_name, e.action) for e in et.events(engine, stack.id)
            if e.status == 'COMPLETE' and e.action in ('SUSPEND', 'RESUME')]
    assert done == [('c', 'SUSPEND'), ('b', 'SUSPEND'), ('a', 'SUSPEND'),
                    ('a', 'RESUME'), ('b', 'RESUME'), ('c', 'RESUME')]


def _component_stack(component):
    """A SOFTWARE_CONFIG server and a deployment of `component`'s
    properties (an OS::Heat::SoftwareComponent)."""
    return et.hot({
        'component': {'type': 'OS::Heat::SoftwareComponent',
                      'properties': component},
        'server': {'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.tiny',
            'user_data_format': 'SOFTWARE_CONFIG'}},
        'deployment': {'type': 'OS::Heat::SoftwareDeployment', 'properties': {
            'config': {'get_resource': 'component'},
            'server': {'get_resource': 'server'}}},
    })


def _component_template():
    def entry(action):
        return {'actions': [action], 'tool': 'script',
                'config': '#!/bin/sh\necho %s >> lifecycle.log\n' % action}
    return _component_stack({'configs': [
        entry(a) for a in ('CREATE', 'SUSPEND', 'RESUME', 'DELETE')]})


def test_a_component_runs_the_config_of_each_action_the_stack_performs(
        engine, api, tmp_path):
    started = _start(engine, tmp_path, _component_template())
    agent = Agent(engine)
    ran = []

    def serve(started):
        doc = agent.next_run()
        assert doc['group'] == 'script'
        ran.append(doc['config'].split()[2])
        agent.signal(doc, deploy_status_code=0)
        return _finish(engine, started)

    assert et.status(serve(started)) == 'CREATE_COMPLETE'
    assert et.status(serve(stacks.suspend(engine, 'sw'))) == \
        'SUSPEND_COMPLETE'
    assert et.status(serve(stacks.resume(engine, 'sw'))) == 'RESUME_COMPLETE'
    # the component has no UPDATE config: an update runs nothing
    assert et.status(serve(stacks.delete(engine, 'sw'))) == 'DELETE_COMPLETE'
    assert ran == ['CREATE', 'SUSPEND', 'RESUME', 'DELETE']


def test_a_structured_deployment_fills_its_inputs_in(engine, api, tmp_path):
    doc = et.hot({
        'config': {'type': 'OS::Heat::StructuredConfig', 'properties': {
            'config': {'foo': {'get_input': 'foo'},
                       'nested': [{'get_input': 'bar'}, 'plain']}}},
        'server': {'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.tiny',
            'user_data_format': 'SOFTWARE_CONFIG'}},
        'deployment': {'type': 'OS::Heat::StructuredDeployment',
                       'properties': {
                           'signal_transport': 'NO_SIGNAL',
                           'config': {'get_resource': 'config'},
                           'server': {'get_resource': 'server'},
                           'input_values': {'foo': 'fooooo',
                                            'bar': ['b', 'a']}}},
    })
    stack = et.run(engine, stacks.create, 'sw', et.bundle(tmp_path, doc), {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    [deployment] = Agent(engine).pull(wait=0)
    assert deployment['config'] == {'foo': 'fooooo',
                                    'nested': [['b', 'a'], 'plain']}


def _backup_template():
    return _component_stack({
        'inputs': [{'name': 'target', 'default': '/backups'}],
        'outputs': [{'name': 'archive'}],
        'configs': [
            {'actions': ['CREATE'], 'tool': 'script',
             'config': '#!/bin/sh\necho install\n'},
            {'actions': ['backup'], 'tool': 'script',
             'config': '#!/bin/sh\necho backup to $target\n'}]})


def test_a_day2_action_runs_without_touching_the_stack(
        engine, api, tmp_path):
    from converge.engine import request, service
    svc, ctx = service.Service(engine), request.make()
    started = _start(engine, tmp_path, _backup_template())
    agent = Agent(engine)
    agent.signal(agent.next_run(), deploy_status_code=0)
    stack = _finish(engine, started)
    before = (stack.updated_at, stack.template_id, stack.action,
              stack.status)

    [action] = svc.deployment_action_run(ctx, 'sw', 'deployment', 'backup',
                                         {'target': '/mnt/b'})
    assert action['status'] == 'IN_PROGRESS'
    doc = agent.next_run()
    assert doc['action'] == 'backup'
    assert doc['config'] == '#!/bin/sh\necho backup to $target\n'
    assert _inputs(doc)['target'] == '/mnt/b'
    assert _inputs(doc)['deploy_action'] == 'backup'
    agent.signal(doc, deploy_status_code=0, deploy_stdout='backup to /mnt/b',
                 archive='/mnt/b/1.tgz')
    action = svc.deployment_action_show(ctx, action['id'])
    assert action['status'] == 'COMPLETE'
    assert action['output_values']['archive'] == '/mnt/b/1.tgz'
    assert action['output_values']['deploy_stdout'] == 'backup to /mnt/b'
    [listed] = svc.deployment_action_list(ctx, 'sw')
    assert listed['id'] == action['id']
    with engine.db.read() as s:
        from converge.db import api as db_api
        stack = db_api.stack_get(s, 'sw')
    assert (stack.updated_at, stack.template_id, stack.action,
            stack.status) == before
    assert [(e.action, e.status) for e in et.events(engine, stack.id)
            if e.resource_name == 'deployment'][-2:] == [
        ('BACKUP', 'IN_PROGRESS'), ('BACKUP', 'COMPLETE')]
    # the same action again runs again (an explicit request)
    [again] = svc.deployment_action_run(ctx, 'sw', 'deployment', 'backup')
    doc2 = agent.next_run()
    assert doc2['run'] != doc['run']
    agent.signal(doc2, deploy_status_code=0)
    assert svc.deployment_action_show(ctx, again['id'])['status'] == \
        'COMPLETE'
    # an action the component does not have is refused, naming those it has
    with pytest.raises(Exception) as e:
        svc.deployment_action_run(ctx, 'sw', 'deployment', 'restore')
    assert 'no config for action restore' in str(e.value)
    assert 'backup' in str(e.value)
    # another project does not see the stack
    other = request.make(project_id='other')
    with pytest.raises(Exception) as e:
        svc.deployment_action_run(other, 'sw', 'deployment', 'backup')
    assert 'not found' in str(e.value).lower()


def test_a_deployment_group_runs_on_every_member_in_batches(
        engine, api, tmp_path):
    servers = {'s%d' % i: {'type': 'OS::Nova::Server', 'properties': {
        'image': 'cirros', 'flavor': 'm1.tiny', 'name': 's%d' % i,
        'user_data_format': 'SOFTWARE_CONFIG'}} for i in range(3)}
    doc = et.hot(dict(servers, **{
        'config': {'type': 'OS::Heat::SoftwareConfig', 'properties': {
            'group': 'script', 'config': CONFIG,
            'outputs': [{'name': 'result'}]}},
        'group': {'type': 'OS::Heat::SoftwareDeploymentGroup',
                  'update_policy': {'batch_create': {'max_batch_size': 2}},
                  'properties': {
                      'config': {'get_resource': 'config'},
                      'servers': {n: {'get_resource': n} for n in servers},
                      'input_values': {'foo': 'all'}}},
    }), outputs={'results': {'value': {'get_attr': ['group', 'result']}},
                 'codes': {'value': {'get_attr': ['group',
                                                  'deploy_status_codes']}}})
    started = _start(engine, tmp_path, doc)
    agents = {s['name']: Agent(engine, s) for s in _servers(engine, 3)}
    ran = []
    deadline = time.monotonic() + 60
    while len(ran) < 3:
        assert time.monotonic() < deadline, 'ran only %s' % ran
        busy = {}
        for name, agent in sorted(agents.items()):
            docs = agent.pull(wait=0) or []
            running = [d for d in docs if d['status'] == 'IN_PROGRESS']
            if running:
                busy[name] = running[0]
        if not busy:
            time.sleep(0.05)  # polling: the next batch is being written
            continue
        assert len(busy) <= 2, 'more members ran than max_batch_size'
        for name, d in busy.items():
            assert _inputs(d)['deploy_resource_name'] == name
            agents[name].signal(d, deploy_status_code=0, result=name + '!')
            ran.append(name)
    stack = _finish(engine, started)
    assert et.status(stack) == 'CREATE_COMPLETE'
    assert sorted(ran) == ['s0', 's1', 's2']
    outs = _outputs(engine, stack)
    assert outs['results'] == {'s0': 's0!', 's1': 's1!', 's2': 's2!'}
    assert outs['codes'] == {'s0': 0, 's1': 0, 's2': 0}


def test_a_deployment_whose_server_is_gone_fails_saying_so(
        engine, api, tmp_path):
    """Deleted from outside while its deployment waits: the server never
    signals, and the deployment's recheck says why instead of waiting
    out the stack's timeout."""
    conf.CONF.set_override('deployment_recheck', 1.0, 'software')
    try:
        started = _start(engine, tmp_path, _template())
        agent = Agent(engine)
        agent.next_run()
        [server] = _servers(engine, 1)
        engine.clients.compute.delete_server(server['id'])
        stack = _finish(engine, started)
    finally:
        conf.CONF.clear_override('deployment_recheck', 'software')
    assert et.status(stack) == 'CREATE_FAILED'
    row = et.resources(engine, stack)['deployment']
    assert (row.action, row.status) == ('CREATE', 'FAILED')
    assert 'server %s is gone' % server['id'] in row.status_reason


def test_a_deployment_whose_unit_died_after_writing_it_runs_once(
        engine, api, tmp_path, monkeypatch):
    """A deployment's create is not claimed before it writes the
    deployment (made again, it is the same deployment and run): a unit
    that dies between the write and its record is sent again and finds
    that run, whose one signal completes the stack."""
    from converge.workers import reconcile
    real, died = reconcile.Unit.handle, []

    def dies_once(self, outcome):
        if self.name == 'deployment' and not died:
            died.append(self.row.action)
            raise RuntimeError('the process died here')
        return real(self, outcome)
    monkeypatch.setattr(reconcile.Unit, 'handle', dies_once)
    started = _start(engine, tmp_path, _template())
    agent = Agent(engine)
    doc = agent.next_run()
    assert agent.signal(doc, deploy_status_code=0, result='1')[1][
        'accepted']
    stack = _finish(engine, started)
    assert et.status(stack) == 'CREATE_COMPLETE'
    assert died == ['INIT']   # it died before anything recorded the row
    assert _outputs(engine, stack)['result'] == '1'
    # one run, the one signalled: the agent has nothing new to do
    assert agent.pull(wait=0) is None
    server = engine.clients.compute.list_servers()[0]['id']
    assert [(d['run'], d['status']) for d in
            engine.clients.deployments.for_server(server)] == [
        (doc['run'], 'COMPLETE')]


def test_a_signal_that_comes_while_its_unit_looks_is_not_missed(
        engine, api, tmp_path, monkeypatch):
    """The signal wakes the unit in its own transaction, under no lock: a
    signal taken after the step saw the deployment running, but before
    the unit recorded its wait, is seen when the wait is recorded (the
    unit goes again at once) instead of waiting out the recheck period
    (an hour here)."""
    from converge.resources import software_deployment as sd
    conf.CONF.set_override('deployment_recheck', 3600.0, 'software')
    real, signalled = sd.SoftwareDeployment._wait, []

    def signal_meanwhile(self, running):
        if not signalled:
            agent = Agent(engine)
            doc = agent.next_run()
            signalled.append(agent.signal(doc, deploy_status_code=0,
                                          result='early')[1]['accepted'])
        return real(self, running)
    monkeypatch.setattr(sd.SoftwareDeployment, '_wait', signal_meanwhile)
    try:
        started = _start(engine, tmp_path, _template())
        done = []
        waiter = threading.Thread(
            target=lambda: done.append(_finish(engine, started)),
            daemon=True)
        waiter.start()
        waiter.join(120)   # a bound on failure: a lost wake takes an hour
    finally:
        conf.CONF.clear_override('deployment_recheck', 'software')
    assert signalled == [True]
    assert done, 'the signal was missed: the unit waits for its recheck'
    assert et.status(done[0]) == 'CREATE_COMPLETE'
    assert _outputs(engine, done[0])['result'] == 'early'


def test_an_agent_hosts_batch_of_signals_is_answered_one_by_one(
        engine, api, tmp_path):
    """POST /v1/agent/signals (an agent host's servers' signals in one
    request): each signal is checked against its own credential and
    answered in order; the refused ones change nothing."""
    from converge.agent import client
    from converge.drivers import tokens
    started = _start(engine, tmp_path, _template(), name='sw')
    agent = Agent(engine)
    doc = agent.next_run()
    mine = agent.settings
    other = {'agent_id': 'a-server-that-is-not-this-one'}
    other['token'] = tokens.token_for(engine.db, other['agent_id'])
    engine.clients.agents.register(other['agent_id'], None, 'converge', 'x')

    def item(creds, payload, deployment_id=doc['id']):
        return {'deployment_id': deployment_id, 'run': doc['run'],
                'agent_id': creds['agent_id'], 'token': creds['token'],
                'payload': payload}
    endpoint = client.Endpoint(mine['endpoint'])
    answers = client.signals(endpoint, [
        item(dict(mine, token='0' * 64), {'result': 'forged'}),
        item(other, {'result': 'other'}),
        item(mine, {'result': 'lost'}, deployment_id='no-such-deployment'),
        item(mine, {'deploy_status_code': 0, 'result': 'mine'}),
        item(mine, {'deploy_status_code': 0, 'result': 'again'}),
    ])
    assert [a.get('error') for a in answers] == [403, 403, 404, None, None]
    assert [a.get('accepted') for a in answers[3:]] == [True, False]
    assert answers[4]['reason'] == 'signalled already'
    stack = _finish(engine, started)
    assert et.status(stack) == 'CREATE_COMPLETE'
    assert _outputs(engine, stack)['result'] == 'mine'

    code, body = agent._request('POST', '/v1/agent/signals',
                                body={'signals': [{'run': 'x'}]})
    assert code == 400 and 'deployment_id' in body['error']['message']
    conf.CONF.set_override('max_signals_per_request', 2, 'api')
    try:
        code, body = agent._request('POST', '/v1/agent/signals', body={
            'signals': [item(mine, {})] * 3})
    finally:
        conf.CONF.clear_override('max_signals_per_request', 'api')
    assert code == 400 and 'max_signals_per_request' in \
        body['error']['message']


def test_a_held_poll_of_many_agents_answers_only_what_changed(engine):
    """An agent host's held poll for many servers answers nothing while
    nothing changed, and, once one server's deployments change (here by
    another process, which no in-process notice reaches), that server
    alone, at its next look."""
    from converge.db import software as db_software
    from converge.drivers import tokens
    from converge.engine import software
    ids = ['agent-%d' % i for i in range(50)]
    with engine.db.begin() as conn:
        for i, agent_id in enumerate(ids):
            db_software.agent_register(conn, agent_id, None, 'converge', 'x')
            db_software.agent_bind(conn, agent_id, 'server-%d' % i)
    with engine.db.connect() as conn:
        entries = [{'agent_id': a, 'token': tokens.token_for(engine.db, a),
                    'version': db_software.agent_get(conn, a).version}
                   for a in ids]
    assert software.poll(engine, entries, wait=0.3, interval=0.05) == []
    with engine.db.begin() as conn:  # the server of agent-7 is another now
        db_software.agent_bind(conn, 'agent-7', 'server-new')
    answer = software.poll(engine, entries, wait=10, interval=0.05)
    assert answer == [{'agent_id': 'agent-7',
                       'version': entries[7]['version'] + 1,
                       'deployments': []}]
