"""Heat's orchestration API v1 served by converge-api, driven by the real
clients: python-heatclient (as scripts and tripleoclient use it) and the
`openstack stack` commands (python-openstackclient with the heat plug-in),
each with an endpoint and a token, against a live converge-api on
loopback: embedded (SQLite, the API process being the engine) and
distributed (PostgreSQL, RabbitMQ, Redis, a separate converge-worker)."""

import json
import os
import subprocess
import sys
import time

import pytest

from converge.bench import fleet
from tests.conftest import EXAMPLES, stop_agents

BIN = os.path.dirname(sys.executable)

NESTED = '''\
heat_template_version: 2018-08-31
parameters:
  greeting: {type: string}
resources:
  word:
    type: OS::Heat::Value
    properties: {value: {get_param: greeting}}
outputs:
  said: {value: {get_attr: [word, value]}}
'''

TOP = '''\
heat_template_version: 2018-08-31
description: a stack sent with its files
parameters:
  greeting: {type: string, default: hello}
resources:
  motd:
    type: OS::Heat::Value
    properties: {value: {get_file: motd.txt}}
  inner:
    type: inner.yaml
    properties: {greeting: {get_param: greeting}}
  box:
    type: OS::Nova::Server
    properties: {image: cirros, flavor: m1.small}
outputs:
  motd: {value: {get_attr: [motd, value]}}
  said: {value: {get_attr: [inner, said]}}
'''


class API:
    """A converge-api on loopback over one home (embedded) or deployment,
    and tokens for it."""

    def __init__(self, conf, url, env=None):
        self.conf, self.url, self.env = conf, url, env

    def token(self, project, *args):
        out = subprocess.run(
            [os.path.join(BIN, 'converge-manage'), '--config-file',
             self.conf, 'token', 'create', '--project', project, '-f',
             'json'] + list(args), capture_output=True, text=True,
            check=True, env=self.env)
        return json.loads(out.stdout)

    def client(self, project, token):
        from heatclient import client as heat_client
        endpoint = '%s/v1/%s' % (self.url, project)
        return heat_client.Client('1', endpoint=endpoint, token=token)

    def openstack(self, project, token, *args, check=True):
        env = dict(os.environ, OS_AUTH_TYPE='admin_token',
                   OS_ENDPOINT='%s/v1/%s' % (self.url, project),
                   OS_TOKEN=token)
        for k in ('OS_CLOUD', 'OS_AUTH_URL', 'OS_USERNAME'):
            env.pop(k, None)
        proc = subprocess.run([os.path.join(BIN, 'openstack')] + list(args),
                              capture_output=True, text=True, env=env,
                              timeout=300)
        if check and proc.returncode:
            raise AssertionError('openstack %s (%d):\n%s\n%s' % (
                ' '.join(args), proc.returncode, proc.stdout, proc.stderr))
        return proc


def _start_api(conf, log, env=None):
    port = fleet.free_port()
    proc = subprocess.Popen(
        [os.path.join(BIN, 'converge-api'), '--bind', '127.0.0.1:%d' % port,
         '--config-file', conf, '--log-file', log],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, env=env)
    # it says so once it serves
    line = proc.stdout.readline()
    assert 'serving on' in line, open(log).read() if os.path.exists(
        log) else line
    return proc, 'http://127.0.0.1:%d' % port


@pytest.fixture(scope='module')
def api(tmp_path_factory):
    """Embedded: one home, its converge-api being its engine."""
    d = tmp_path_factory.mktemp('heatapi')
    home = str(d / 'home')
    conf = str(d / 'converge.conf')
    with open(conf, 'w') as f:
        # Heat's devstack hides the stacks Sahara makes
        f.write('[DEFAULT]\nhome = %s\nhidden_stack_tags = '
                'data-processing-cluster\n' % home)
    proc, url = _start_api(conf, str(d / 'api.log'))
    yield API(conf, url)
    proc.terminate()
    proc.wait(timeout=30)
    stop_agents(home)


def _settled(hc, name, timeout=120):
    """The stack's status once it leaves IN_PROGRESS."""
    deadline = time.monotonic() + timeout
    while True:
        st = hc.stacks.get(name)
        if not st.stack_status.endswith('_IN_PROGRESS'):
            return st
        assert time.monotonic() < deadline, st.stack_status
        time.sleep(0.05)


def _sent(tmp_path, template_text, files=None, env_text=None):
    """What python-heatclient sends for a template file and an
    environment file: the template, the files map (get_file targets and
    provider templates, by URL) and the environment."""
    from heatclient.common import template_utils
    for name, text in dict(files or {}, **{'top.yaml': template_text}
                           ).items():
        (tmp_path / name).write_text(text)
    tpl_files, template = template_utils.get_template_contents(
        str(tmp_path / 'top.yaml'))
    env_files, env = {}, {}
    env_list = []
    if env_text is not None:
        (tmp_path / 'env.yaml').write_text(env_text)
        env_files, env = \
            template_utils.process_multiple_environments_and_files(
                env_paths=[str(tmp_path / 'env.yaml')],
                env_list_tracker=env_list)
    fields = {'template': template, 'files': dict(tpl_files, **env_files),
              'environment': env}
    if env_list:
        fields['environment_files'] = env_list
    return fields


def test_heatclient_drives_a_stack_through_its_life(api, tmp_path):
    """Create with get_file, a provider template and an environment;
    show, list, resources down a level, events, outputs, the stored
    template; update --existing; check, suspend, resume; abandon, adopt;
    delete: each answered as Heat answers python-heatclient."""
    from heatclient import exc
    hc = api.client('life', api.token('life')['token'])
    fields = _sent(tmp_path, TOP, {'motd.txt': 'welcome\n',
                                   'inner.yaml': NESTED},
                   env_text='parameters:\n  greeting: bonjour\n')
    made = hc.stacks.create(stack_name='app', parameters={},
                            disable_rollback=True, **fields)
    stack_id = made['stack']['id']
    assert made['stack']['links'][0]['href'].endswith('/stacks/app/' +
                                                      stack_id)
    st = _settled(hc, 'app')
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    assert st.id == stack_id and st.description == 'a stack sent with ' \
        'its files'
    assert st.parameters['greeting'] == 'bonjour'
    assert st.parameters['OS::stack_id'] == stack_id
    outs = {o['output_key']: o['output_value'] for o in st.outputs}
    assert outs == {'motd': 'welcome\n', 'said': 'bonjour'}
    assert hc.stacks.output_show('app', 'said')['output'][
        'output_value'] == 'bonjour'
    assert [s.stack_name for s in hc.stacks.list()] == ['app']
    # by id too (Heat's lookup answers both)
    assert hc.stacks.get(stack_id).stack_name == 'app'

    top = {r.resource_name for r in hc.resources.list('app')}
    assert top == {'motd', 'inner', 'box'}
    nested = hc.resources.list('app', nested_depth=1)
    word = [r for r in nested if r.resource_name == 'word']
    assert len(word) == 1 and word[0].parent_resource == 'inner'
    box = hc.resources.get('app', 'box')
    assert box.resource_status == 'CREATE_COMPLETE'
    assert box.attributes['first_address']

    events = hc.events.list('app')
    by_name = {(e.resource_name, e.resource_status) for e in events}
    assert ('box', 'CREATE_COMPLETE') in by_name
    # the stack's own events, as heatclient's --wait looks for them
    assert ('app', 'CREATE_IN_PROGRESS') in by_name
    assert ('app', 'CREATE_COMPLETE') in by_name
    # pages: after a marker come only later events, each once
    first = hc.events.list('app', limit=2, sort_dir='asc')
    rest = hc.events.list('app', marker=first[-1].id, sort_dir='asc')
    ids = [e.id for e in first + rest]
    assert len(ids) == len(set(ids)) == len(events)
    one = hc.events.get('app', 'box', first[0].id if first[0].resource_name
                        == 'box' else [e for e in events
                                       if e.resource_name == 'box'][0].id)
    assert one.resource_name == 'box'
    # ... and under the stack's own name as a resource's, as Heat's
    own = hc.events.list('app', resource_name='app')
    assert [e.resource_status for e in own] == [
        'CREATE_IN_PROGRESS', 'CREATE_COMPLETE']
    assert hc.events.get('app', 'app', own[-1].id).resource_status == \
        'CREATE_COMPLETE'

    assert hc.stacks.template('app')['resources']['motd']['type'] == \
        'OS::Heat::Value'
    assert hc.stacks.environment('app')['parameters'] == {
        'greeting': 'bonjour'}
    assert any(k.endswith('/motd.txt') for k in hc.stacks.files('app'))

    # update --existing: a PATCH with one parameter
    hc.stacks.update(stack_id, existing=True, parameters={
        'greeting': 'hej'})
    st = _settled(hc, 'app')
    assert st.stack_status == 'UPDATE_COMPLETE', st.stack_status_reason
    assert hc.stacks.output_show('app', 'said')['output'][
        'output_value'] == 'hej'

    for verb, status in (('check', 'CHECK_COMPLETE'),
                         ('suspend', 'SUSPEND_COMPLETE'),
                         ('resume', 'RESUME_COMPLETE')):
        getattr(hc.actions, verb)('app')
        assert _settled(hc, 'app').stack_status == status

    # abandon, then adopt: the same resources taken back, none created
    doc = hc.stacks.abandon(stack_id)
    assert doc['resources']['box']['resource_id'] == box.physical_resource_id
    with pytest.raises(exc.HTTPNotFound):
        hc.stacks.get('app')
    hc.stacks.create(stack_name='app', adopt_stack_data=json.dumps(doc),
                     disable_rollback=True, **fields)
    st = _settled(hc, 'app')
    assert st.stack_status == 'ADOPT_COMPLETE', st.stack_status_reason
    assert hc.resources.get('app', 'box').physical_resource_id == \
        box.physical_resource_id
    assert {o['output_key']: o['output_value'] for o in st.outputs} == {
        'motd': 'welcome\n', 'said': 'hej'}

    hc.stacks.delete('app')
    deadline = time.monotonic() + 120
    while any(s.stack_name == 'app' for s in hc.stacks.list()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with pytest.raises(exc.HTTPNotFound):
        hc.stacks.get('app')


@pytest.mark.long  # among the slowest of ./run-tests
def test_openstack_stack_commands(api, tmp_path):
    """The README's commands: `openstack stack create --wait` of the
    demo, then list, resource list, event list, output show, delete
    --wait, with OS_AUTH_TYPE=admin_token, OS_ENDPOINT and OS_TOKEN."""
    token = api.token('osc')['token']
    osc = lambda *a, **kw: api.openstack('osc', token, *a, **kw)  # noqa
    env = tmp_path / 'env.yaml'
    env.write_text('parameters:\n  flavor: m1.medium\n')
    out = osc('stack', 'create', '--wait', '--poll', '1', '-t',
              os.path.join(EXAMPLES, 'demo.yaml'), '-e', str(env),
              '--parameter', 'domain=example.net', 'demo')
    # the events while it waited, then OSC's short summary
    assert '[demo.web1]: CREATE_COMPLETE' in out.stdout
    summary = out.stdout.split('| stack_status ')[-1]
    assert summary.split('|')[1].strip() == 'CREATE_COMPLETE'
    listed = json.loads(osc('stack', 'list', '-f', 'json').stdout)
    assert [(s['Stack Name'], s['Stack Status']) for s in listed] == [
        ('demo', 'CREATE_COMPLETE')]
    resources = json.loads(osc('stack', 'resource', 'list', 'demo', '-f',
                               'json').stdout)
    assert len(resources) == 20
    assert {r['resource_status'] for r in resources} == {'CREATE_COMPLETE'}
    url = json.loads(osc('stack', 'output', 'show', 'demo', 'url', '-f',
                         'json').stdout)
    assert 'example.net' in url['output_value']
    # the environment file was sent and applied
    hc = api.client('osc', token)
    assert hc.stacks.get('demo').parameters['flavor'] == 'm1.medium'
    events = osc('stack', 'event', 'list', 'demo').stdout
    assert '[demo.lb_server]: CREATE_COMPLETE' in events
    osc('stack', 'delete', '--wait', '-y', 'demo')
    missing = osc('stack', 'show', 'demo', check=False)
    assert missing.returncode != 0 and 'not found' in (
        missing.stdout + missing.stderr).lower()
    assert list(hc.stacks.list()) == []


def test_another_project_sees_nothing(api, tmp_path):
    """Project B's token, by name and by id, on B's URL or on A's: every
    read and write of A's stack is "not found", and A's stack is
    unchanged. Expired and revoked tokens are refused (401)."""
    from heatclient import exc
    a = api.client('proj-a', api.token('proj-a')['token'])
    made = a.stacks.create(stack_name='mine', template={
        'heat_template_version': '2018-08-31',
        'resources': {'v': {'type': 'OS::Heat::Value',
                            'properties': {'value': 'x'}}},
        'outputs': {'o': {'value': {'get_attr': ['v', 'value']}}}},
        parameters={}, disable_rollback=True)
    stack_id = made['stack']['id']
    before = _settled(a, 'mine')
    b_token = api.token('proj-b')['token']
    b = api.client('proj-b', b_token)
    for ident in ('mine', stack_id, 'mine/%s' % stack_id):
        attempts = [
            lambda: b.stacks.get(ident),
            lambda: b.stacks.update(ident, existing=True,
                                    parameters={}),
            lambda: b.stacks.delete(ident),
            lambda: b.events.list(ident),
            lambda: b.resources.get(ident, 'v'),
            lambda: b.resources.signal(ident, 'v', data={}),
            lambda: b.stacks.output_show(ident, 'o'),
            lambda: b.actions.check(ident),
        ]
        for attempt in attempts:
            with pytest.raises(exc.HTTPNotFound):
                attempt()
    # B's token on A's URL: the project is not B's either
    wrong = api.client('proj-a', b_token)
    with pytest.raises(exc.HTTPNotFound):
        list(wrong.stacks.list())
    assert [s.stack_name for s in b.stacks.list()] == []
    after = a.stacks.get('mine')
    assert (after.stack_status, after.updated_time) == (
        before.stack_status, before.updated_time)

    expired = api.token('proj-a', '--expires', '0')['token']
    with pytest.raises(exc.HTTPUnauthorized):
        list(api.client('proj-a', expired).stacks.list())
    revoked = api.token('proj-a')
    assert len(list(api.client('proj-a', revoked['token']).stacks.list())) == 1
    subprocess.run([os.path.join(BIN, 'converge-manage'), '--config-file',
                    api.conf, 'token', 'revoke', revoked['id']], check=True,
                   capture_output=True)
    with pytest.raises(exc.HTTPUnauthorized):
        list(api.client('proj-a', revoked['token']).stacks.list())
    with pytest.raises(exc.HTTPUnauthorized):
        list(api.client('proj-a', 'made-up').stacks.list())


def test_policy_roles(api):
    """A reader lists but cannot create (403); only an admin lists every
    project's stacks (global_tenant)."""
    from heatclient import exc
    reader = api.client('pol', api.token('pol', '--role', 'reader')['token'])
    assert list(reader.stacks.list()) == []
    with pytest.raises(exc.HTTPForbidden):
        reader.stacks.create(stack_name='no', template={
            'heat_template_version': '2018-08-31'}, parameters={})
    member = api.client('pol', api.token('pol')['token'])
    member.stacks.create(stack_name='yes', template={
        'heat_template_version': '2018-08-31'}, parameters={})
    assert [s.stack_name for s in reader.stacks.list()] == ['yes']
    with pytest.raises(exc.HTTPForbidden):
        list(member.stacks.list(global_tenant=True))
    elsewhere = api.client('pol-other', api.token('pol-other')['token'])
    elsewhere.stacks.create(stack_name='theirs', template={
        'heat_template_version': '2018-08-31'}, parameters={})
    admin = api.client('pol', api.token('pol', '--role', 'admin')['token'])
    assert {'yes', 'theirs'} <= {
        s.stack_name for s in admin.stacks.list(global_tenant=True)}
    assert [s.stack_name for s in admin.stacks.list()] == ['yes']


def test_bad_requests_say_what_and_store_nothing(api, tmp_path):
    """An invalid template, a taken name, a stack that does not exist,
    a body that is not JSON: Heat's status codes and error body, no
    traceback, and nothing stored."""
    import requests
    token = api.token('bad')['token']
    hc = api.client('bad', token)
    from heatclient import exc
    with pytest.raises(exc.HTTPBadRequest) as err:
        hc.stacks.create(stack_name='broken', parameters={}, template={
            'heat_template_version': '2018-08-31',
            'resources': {'v': {'type': 'OS::Heat::Value',
                                'properties': {'valeu': 1}}}})
    assert 'resources.v.properties' in str(err.value)
    assert 'valeu' in str(err.value)
    assert list(hc.stacks.list()) == []
    hc.stacks.create(stack_name='taken', parameters={}, template={
        'heat_template_version': '2018-08-31'})
    with pytest.raises(exc.HTTPConflict):
        hc.stacks.create(stack_name='taken', parameters={}, template={
            'heat_template_version': '2018-08-31'})
    with pytest.raises(exc.HTTPNotFound):
        hc.stacks.get('nowhere')
    base = '%s/v1/bad' % api.url
    r = requests.post(base + '/stacks', data='{not json',
                      headers={'X-Auth-Token': token,
                               'Content-Type': 'application/json'})
    assert r.status_code == 400
    body = r.json()
    assert body['code'] == 400 and body['error']['traceback'] is None
    assert 'not valid JSON' in body['error']['message']
    r = requests.get(base + '/stacks/taken/nope/resources',
                     headers={'X-Auth-Token': token})
    assert r.status_code == 404
    assert [s.stack_name for s in hc.stacks.list()] == ['taken']


def test_engine_catalog(api):
    """Template validate, resource types, template versions and their
    functions, build info."""
    hc = api.client('cat', api.token('cat')['token'])
    info = hc.stacks.validate(template={
        'heat_template_version': '2018-08-31',
        'description': 'checked',
        'parameters': {'n': {'type': 'number', 'default': 2}}})
    assert info['Description'] == 'checked'
    assert info['Parameters']['n']['Default'] == 2
    types = hc.resource_types.list()
    names = {t.resource_type for t in types}
    assert {'OS::Nova::Server', 'OS::Heat::SoftwareDeployment'} <= names
    schema = hc.resource_types.get('OS::Heat::Value')
    assert schema['properties']['value']['required'] is True
    assert 'value' in schema['attributes']
    versions = {v.version for v in hc.template_versions.list()}
    assert 'heat_template_version.2018-08-31' in versions
    funcs = {f.functions for f in hc.template_versions.get(
        'heat_template_version.2018-08-31')}
    assert {'get_attr', 'yaql', 'list_concat'} <= funcs
    assert 'list_concat' not in {f.functions for f in
                                 hc.template_versions.get(
                                     'heat_template_version.2016-10-14')}
    assert hc.build_info.build_info()['engine']['revision']
    # a stack's parameters come back as text, whatever their type, as
    # Heat's do
    hc.stacks.create(stack_name='typed', template={
        'heat_template_version': '2018-08-31',
        'parameters': {'n': {'type': 'number', 'default': 2,
                             'immutable': True},
                       'b': {'type': 'boolean', 'default': True},
                       'l': {'type': 'comma_delimited_list',
                             'default': 'x,y'},
                       'j': {'type': 'json', 'default': {'k': [1]}}},
        'resources': {'r': {'type': 'OS::Heat::None'}}}, parameters={})
    assert {k: v for k, v in _settled(hc, 'typed').parameters.items()
            if not k.startswith('OS::')} == {
        'n': '2', 'b': 'True', 'l': 'x,y', 'j': '{"k": [1]}'}
    # an immutable parameter cannot change; the same value can be given
    from heatclient import exc
    with pytest.raises(exc.HTTPBadRequest) as refused:
        hc.stacks.update('typed', existing=True, parameters={'n': 3})
    assert 'The following parameters are immutable and may not be ' \
        'updated: n' in str(refused.value)
    hc.stacks.update('typed', existing=True, parameters={'n': 2, 'b': False})
    assert _settled(hc, 'typed').parameters['b'] == 'False'
    # the root, with no token: Heat's versions document (300)
    import urllib.error
    import urllib.request
    with pytest.raises(urllib.error.HTTPError) as root:
        urllib.request.urlopen(api.url + '/', timeout=60)
    assert root.value.code == 300
    assert json.loads(root.value.read()) == {'versions': [{
        'id': 'v1.0', 'status': 'CURRENT',
        'links': [{'rel': 'self', 'href': api.url + '/v1/'}]}]}


@pytest.fixture
def dist_api(dist):
    """Distributed: converge-api and one converge-worker, separate
    processes sharing only PostgreSQL, RabbitMQ and Redis."""
    dist.start_worker()
    proc, url = _start_api(dist.conf, str(dist.dir / 'api.log'))
    dist.apis.append((proc, str(dist.dir / 'api.log')))
    yield API(dist.conf, url)


def test_distributed_heatclient(dist_api, tmp_path):
    """The same client calls on a distributed deployment: the API stores
    and casts, the worker converges."""
    hc = dist_api.client('d', dist_api.token('d')['token'])
    fields = _sent(tmp_path, TOP, {'motd.txt': 'hi\n',
                                   'inner.yaml': NESTED})
    hc.stacks.create(stack_name='far', parameters={'greeting': 'salut'},
                     disable_rollback=True, **fields)
    st = _settled(hc, 'far')
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    assert {o['output_key']: o['output_value'] for o in st.outputs} == {
        'motd': 'hi\n', 'said': 'salut'}
    assert ('far', 'CREATE_COMPLETE') in {
        (e.resource_name, e.resource_status) for e in hc.events.list('far')}
    # a second API process, sharing nothing with the first but the
    # database, the bus and the locks (two behind a load balancer)
    proc, url2 = _start_api(dist_api.conf, str(tmp_path / 'api2.log'))
    try:
        hc2 = API(dist_api.conf, url2).client('d', dist_api.token('d')[
            'token'])
        assert hc2.stacks.get('far').stack_status == 'CREATE_COMPLETE'
        hc2.stacks.delete('far')
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    deadline = time.monotonic() + 120
    while list(hc.stacks.list()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # and the openstack commands, the workers converging
    token = dist_api.token('d')['token']
    osc = lambda *a, **kw: dist_api.openstack('d', token, *a, **kw)  # noqa
    out = osc('stack', 'create', '--wait', '--poll', '1', '-t',
              os.path.join(EXAMPLES, 'demo.yaml'), 'demo')
    assert '[demo.web1]: CREATE_COMPLETE' in out.stdout
    assert [r['resource_status'] for r in json.loads(osc(
        'stack', 'resource', 'list', 'demo', '-f', 'json').stdout)] == [
        'CREATE_COMPLETE'] * 20
    osc('stack', 'delete', '--wait', '-y', 'demo')
    assert list(hc.stacks.list()) == []


def test_software_config_and_deployment_of_no_stack(api):
    """`software config create` and `software deployment create` through
    the API: the server's agent runs the script once and its outputs are
    the deployment's; the server's metadata lists it; another project
    sees neither and cannot deploy to the server."""
    from heatclient import exc
    token = api.token('sw')['token']
    hc = api.client('sw', token)
    hc.stacks.create(stack_name='host', parameters={}, template={
        'heat_template_version': '2018-08-31',
        'resources': {'box': {'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.small',
            'user_data_format': 'SOFTWARE_CONFIG'}}}})
    assert _settled(hc, 'host').stack_status == 'CREATE_COMPLETE'
    server = hc.resources.get('host', 'box').physical_resource_id
    config = hc.software_configs.create(
        name='greet', group='script',
        config='#!/bin/sh\nprintf "hi %s" "$who" > "$heat_outputs_path.said"'
               '\necho ran >> /tmp/greet-runs\n'
               'wc -l < /tmp/greet-runs | tr -d " " > '
               '"$heat_outputs_path.runs"\n',
        inputs=[{'name': 'who'}], outputs=[{'name': 'said'},
                                           {'name': 'runs'}])
    assert hc.software_configs.get(config.id).group == 'script'
    dep = hc.software_deployments.create(
        config_id=config.id, server_id=server, action='CREATE',
        status='IN_PROGRESS', input_values={'who': 'there'})
    deadline = time.monotonic() + 120
    while True:
        shown = hc.software_deployments.get(dep.id)
        if shown.status != 'IN_PROGRESS':
            break
        assert time.monotonic() < deadline, shown.status
        time.sleep(0.05)
    assert shown.status == 'COMPLETE', shown.status_reason
    assert shown.output_values['said'] == 'hi there'
    assert shown.output_values['runs'].strip() == '1'
    meta = hc.software_deployments.metadata(server)
    assert [m['id'] for m in meta] == [dep.id]
    assert [d.id for d in hc.software_deployments.list(
        server_id=server)] == [dep.id]

    other = api.client('sw-other', api.token('sw-other')['token'])
    with pytest.raises(exc.HTTPNotFound):
        other.software_configs.get(config.id)
    with pytest.raises(exc.HTTPNotFound):
        other.software_deployments.get(dep.id)
    mine = other.software_configs.create(group='script', config='true')
    with pytest.raises(exc.HTTPNotFound):
        other.software_deployments.create(config_id=mine.id,
                                          server_id=server)
    assert [c.id for c in other.software_configs.list()] == [mine.id]

    hc.software_deployments.delete(dep.id)
    with pytest.raises(exc.HTTPNotFound):
        hc.software_deployments.get(dep.id)
    hc.software_configs.delete(config.id)
    with pytest.raises(exc.HTTPNotFound):
        hc.software_configs.get(config.id)


def test_stacks_per_project_limit(tmp_path):
    """`max_stacks_per_project` refuses one stack too many (409, nothing
    stored) in that project only; deleting one makes room."""
    from heatclient import exc
    home = str(tmp_path / 'home')
    conf = str(tmp_path / 'converge.conf')
    with open(conf, 'w') as f:
        f.write('[DEFAULT]\nhome = %s\nmax_stacks_per_project = 2\n' % home)
    proc, url = _start_api(conf, str(tmp_path / 'api.log'))
    try:
        api = API(conf, url)
        hc = api.client('full', api.token('full')['token'])
        tmpl = {'heat_template_version': '2018-08-31'}
        for name in ('one', 'two'):
            hc.stacks.create(stack_name=name, template=tmpl, parameters={})
        with pytest.raises(exc.HTTPConflict) as err:
            hc.stacks.create(stack_name='three', template=tmpl,
                             parameters={})
        assert 'maximum stacks per project, 2' in str(err.value)
        assert sorted(s.stack_name for s in hc.stacks.list()) == [
            'one', 'two']
        other = api.client('roomy', api.token('roomy')['token'])
        other.stacks.create(stack_name='three', template=tmpl,
                            parameters={})
        _settled(hc, 'one')
        hc.stacks.delete('one')
        deadline = time.monotonic() + 60
        while len(list(hc.stacks.list())) > 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        hc.stacks.create(stack_name='three', template=tmpl, parameters={})
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_snapshot_and_restore(api):
    """`stack snapshot create` (Heat's: IN_PROGRESS, then the stack
    SNAPSHOT_COMPLETE), list, show; an update that changes a value and
    adds a resource; restore: the stack is back to the snapshot's
    definition (the value as it was, the added resource gone),
    RESTORE_COMPLETE."""
    from heatclient import exc
    hc = api.client('snap', api.token('snap')['token'])

    def tmpl(extra=False):
        t = {'heat_template_version': '2018-08-31',
             'parameters': {'word': {'type': 'string'}},
             'resources': {'v': {'type': 'OS::Heat::Value', 'properties': {
                 'value': {'get_param': 'word'}}}},
             'outputs': {'o': {'value': {'get_attr': ['v', 'value']}}}}
        if extra:
            t['resources']['w'] = {'type': 'OS::Heat::None'}
        return t
    hc.stacks.create(stack_name='s', template=tmpl(),
                     parameters={'word': 'before'})
    assert _settled(hc, 's').stack_status == 'CREATE_COMPLETE'
    snap = hc.stacks.snapshot('s', 'first')
    assert snap['status'] == 'IN_PROGRESS' and snap['name'] == 'first'
    st = _settled(hc, 's')
    assert st.stack_status == 'SNAPSHOT_COMPLETE', st.stack_status_reason
    assert [x['id'] for x in hc.stacks.snapshot_list('s')['snapshots']] == [
        snap['id']]
    kept = hc.stacks.snapshot_show('s', snap['id'])['snapshot']
    assert kept['status'] == 'COMPLETE'
    assert kept['data']['resources']['v']['type'] == 'OS::Heat::Value'

    # what the update would do, before doing it
    changes = hc.stacks.preview_update('s', template=tmpl(extra=True),
                                       parameters={'word': 'after'})
    changes = {k: [r['resource_name'] for r in v]
               for k, v in changes['resource_changes'].items()}
    assert changes == {'added': ['w'], 'updated': ['v'], 'replaced': [],
                       'deleted': [], 'unchanged': []}
    other = tmpl()
    other['resources']['v']['type'] = 'OS::Heat::RandomString'
    other['resources']['v']['properties'] = {}
    other['outputs'] = {}
    changes = hc.stacks.preview_update('s', template=other,
                                       parameters={'word': 'x'})
    assert [r['resource_name'] for r in
            changes['resource_changes']['replaced']] == ['v']
    gone = {'heat_template_version': '2018-08-31',
            'resources': {'w': {'type': 'OS::Heat::None'}}}
    changes = hc.stacks.preview_update('s', template=gone, parameters={})
    assert [r['resource_name'] for r in
            changes['resource_changes']['deleted']] == ['v']
    same = hc.stacks.preview_update('s', existing=True, parameters={})
    assert [r['resource_name'] for r in
            same['resource_changes']['unchanged']] == ['v']
    hc.stacks.update('s', template=tmpl(extra=True),
                     parameters={'word': 'after'})
    assert _settled(hc, 's').stack_status == 'UPDATE_COMPLETE'
    assert {r.resource_name for r in hc.resources.list('s')} == {'v', 'w'}

    hc.stacks.restore('s', snap['id'])
    st = _settled(hc, 's')
    assert st.stack_status == 'RESTORE_COMPLETE', st.stack_status_reason
    assert st.outputs[0]['output_value'] == 'before'
    assert {r.resource_name for r in hc.resources.list('s')} == {'v'}

    hc.stacks.snapshot_delete('s', snap['id'])
    with pytest.raises(exc.HTTPNotFound):
        hc.stacks.snapshot_show('s', snap['id'])


def test_snapshot_restore_rebuilds_the_server(api):
    """Heat's test_snapshot_restore on the sim: the snapshot makes an
    image of the server; restore rebuilds the same server from it, the
    stack RESTORE_COMPLETE."""
    hc = api.client('snapsrv', api.token('snapsrv')['token'])
    hc.stacks.create(stack_name='s', parameters={}, template={
        'heat_template_version': 'ocata',
        'resources': {'box': {'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.small'}}}})
    assert _settled(hc, 's').stack_status == 'CREATE_COMPLETE'
    box = hc.resources.get('s', 'box')
    server, boot = box.physical_resource_id, box.attributes['show']['image']
    snap = hc.stacks.snapshot('s')
    st = _settled(hc, 's')
    assert st.stack_status == 'SNAPSHOT_COMPLETE', st.stack_status_reason
    assert hc.resources.get('s', 'box').resource_status == \
        'SNAPSHOT_COMPLETE'
    kept = hc.stacks.snapshot_show('s', snap['id'])['snapshot']
    image = kept['data']['resources']['box']['resource_data'][
        'snapshot_image_id']
    assert image and image != boot

    hc.stacks.restore('s', snap['id'])
    st = _settled(hc, 's')
    assert st.stack_status == 'RESTORE_COMPLETE', st.stack_status_reason
    box = hc.resources.get('s', 'box')
    assert box.physical_resource_id == server
    assert box.attributes['show']['image'] == image
    hc.stacks.snapshot_delete('s', snap['id'])
    assert hc.stacks.snapshot_list('s')['snapshots'] == []


def test_rally_task_through_the_api(api, tmp_path):
    """`converge-bench --rally TASK --api URL`: Rally's HeatStacks
    scenarios through the REST API with python-heatclient."""
    extra = os.path.join(os.path.dirname(EXAMPLES), 'rally-jobs', 'extra')
    task = tmp_path / 'task.yaml'
    task.write_text(
        'HeatStacks.create_update_delete_stack:\n'
        '  - args:\n'
        '      template_path: "%s/random_strings.yaml"\n'
        '      updated_template_path: "%s/updated_random_strings_add.yaml"\n'
        '    runner: {type: constant, times: 3, concurrency: 2}\n'
        '    sla: {failure_rate: {max: 0}}\n' % (extra, extra))
    token = api.token('rally')['token']
    out = subprocess.run(
        [os.path.join(BIN, 'converge-bench'), '--rally', str(task),
         '--api', '%s/v1/rally' % api.url, '--api-token', token,
         '--json', str(tmp_path / 'rows.json')],
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = json.loads((tmp_path / 'rows.json').read_text())
    assert rows[0]['total']['count'] == 3
    assert rows[0]['total']['success_pct'] == 100.0
    assert set(rows[0]['atomic']) == {'heat.create_stack',
                                      'heat.update_stack',
                                      'heat.delete_stack'}
    hc = api.client('rally', token)
    assert list(hc.stacks.list()) == []


def test_keystone_tokens(engine):
    """`[api] auth_strategy = keystone`: keystonemiddleware validates the
    token (keystone's answers stood in by its own test fixture) and the
    API reads who it is from what the middleware leaves; identity headers
    a client sends itself count for nothing, and the agents' routes keep
    their own credentials."""
    import requests
    from heatclient import exc
    from keystonemiddleware import fixture as ksm_fixture
    from converge import conf
    from converge.api import server
    conf.CONF.set_override('auth_strategy', 'keystone', group='api')
    ks = ksm_fixture.AuthTokenFixture()
    ks.setUp()
    from keystonemiddleware import auth_token
    for group, opts in auth_token.list_opts():
        conf.CONF.register_opts(opts, group=group)
    # where a refused client is sent to authenticate
    conf.CONF.set_override('www_authenticate_uri', 'http://keystone.test',
                           group='keystone_authtoken')
    served = server.Served(engine, '127.0.0.1', 0, threads=4)
    try:
        mine, theirs = 'kp-token', 'other-token'
        ks.add_token_data(token_id=mine, project_id='kp', user_id='u1',
                          role_list=['member', 'reader'])
        ks.add_token_data(token_id=theirs, project_id='other',
                          user_id='u2', role_list=['member', 'reader'])
        hc = API(None, served.url).client('kp', mine)
        hc.stacks.create(stack_name='k', parameters={}, template={
            'heat_template_version': '2018-08-31'})
        assert [s.stack_name for s in hc.stacks.list()] == ['k']
        with pytest.raises(exc.HTTPNotFound):
            API(None, served.url).client('kp', theirs).stacks.get('k')
        with pytest.raises(exc.HTTPUnauthorized):
            list(API(None, served.url).client('kp', 'nope').stacks.list())
        forged = requests.get(served.url + '/v1/kp/stacks', headers={
            'X-Identity-Status': 'Confirmed', 'X-Project-Id': 'kp',
            'X-Roles': 'admin'})
        assert forged.status_code == 401
        agent = requests.get(served.url + '/v1/agent/deployments', headers={
            'X-Agent-Id': 'x', 'X-Agent-Token': 'y'})
        assert agent.status_code == 403   # its own refusal, not keystone's
    finally:
        served.stop()
        ks.cleanUp()
        conf.CONF.clear_override('auth_strategy', group='api')
        conf.CONF.clear_override('www_authenticate_uri',
                                 group='keystone_authtoken')


def test_requests_per_minute(tmp_path):
    """`[api] max_requests_per_minute`: a token beyond it is answered 429
    with Retry-After, in Heat's error body; another token is not."""
    import requests
    home = str(tmp_path / 'home')
    conf = str(tmp_path / 'converge.conf')
    with open(conf, 'w') as f:
        f.write('[DEFAULT]\nhome = %s\n[api]\nmax_requests_per_minute = 5\n'
                % home)
    proc, url = _start_api(conf, str(tmp_path / 'api.log'))
    try:
        api = API(conf, url)
        busy, calm = api.token('rate')['token'], api.token('rate')['token']
        answers = []
        # a minute may turn mid-way (the count starts again): within
        # twice the cap and one, the cap is met
        for _ in range(11):
            r = requests.get(url + '/v1/rate/stacks',
                             headers={'X-Auth-Token': busy})
            answers.append(r.status_code)
            if r.status_code == 429:
                break
        assert answers[-1] == 429 and answers.count(200) >= 5, answers
        assert int(r.headers['Retry-After']) <= 60
        assert 'max_requests_per_minute' in r.json()['error']['message']
        assert requests.get(url + '/v1/rate/stacks', headers={
            'X-Auth-Token': calm}).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


SCALED = '''\
heat_template_version: 2018-08-31
resources:
  asg:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 3
      desired_capacity: 1
      resource:
        type: OS::Heat::Value
        properties: {value: member}
  up:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: asg}
      adjustment_type: change_in_capacity
      scaling_adjustment: 1
  box:
    type: OS::Heat::Value
    properties: {value: box}
outputs:
  size: {value: {get_attr: [asg, current_size]}}
'''


def test_signal_and_mark_unhealthy(api, tmp_path):
    """`stack resource signal` with a user's token scales the group once
    per signal; `stack resource mark unhealthy` makes a resource
    CHECK_FAILED with the reason given, and the next update does it
    again (UPDATE_COMPLETE); marking it healthy undoes only a mark."""
    from heatclient import exc
    hc = api.client('sig', api.token('sig')['token'])
    hc.stacks.create(stack_name='g', parameters={},
                     **_sent(tmp_path, SCALED))
    assert _settled(hc, 'g').stack_status == 'CREATE_COMPLETE'
    hc.resources.signal('g', 'up', data={'current': 'alarm'})
    st = _settled(hc, 'g')
    assert st.stack_status == 'UPDATE_COMPLETE', st.stack_status_reason
    assert st.outputs[0]['output_value'] == 2
    # a signal with no data (an alarm's, heatclient's signal(stack, name))
    hc.resources.signal('g', 'up')
    st = _settled(hc, 'g')
    assert st.outputs[0]['output_value'] == 3, st.stack_status_reason
    with pytest.raises(exc.HTTPBadRequest):
        hc.resources.signal('g', 'box')   # takes no signals

    hc.resources.mark_unhealthy('g', 'box', True, 'disk looks bad')
    box = hc.resources.get('g', 'box')
    assert (box.resource_status, box.resource_status_reason) == (
        'CHECK_FAILED', 'disk looks bad')
    hc.stacks.update('g', existing=True, parameters={})
    assert _settled(hc, 'g').stack_status == 'UPDATE_COMPLETE'
    assert hc.resources.get('g', 'box').resource_status == 'UPDATE_COMPLETE'
    # healthy again: only a mark is undone
    hc.resources.mark_unhealthy('g', 'box', False, '')
    assert hc.resources.get('g', 'box').resource_status == 'UPDATE_COMPLETE'
    hc.resources.mark_unhealthy('g', 'box', True, 'again')
    hc.resources.mark_unhealthy('g', 'box', False, 'fine after all')
    box = hc.resources.get('g', 'box')
    assert (box.resource_status, box.resource_status_reason) == (
        'CHECK_COMPLETE', 'fine after all')



def test_a_signal_during_suspend_is_refused_as_heats(api, tmp_path):
    """Heat's test_signal_during_suspend: a signal to a suspended policy
    is a 400 saying so, an event of the policy (SUSPEND_COMPLETE) says
    it could not be signalled, and the group stays as it was."""
    from heatclient import exc
    hc = api.client('susp', api.token('susp')['token'])
    hc.stacks.create(stack_name='s', parameters={},
                     **_sent(tmp_path, SCALED))
    assert _settled(hc, 's').stack_status == 'CREATE_COMPLETE'
    hc.actions.suspend('s')
    assert _settled(hc, 's').stack_status == 'SUSPEND_COMPLETE'
    with pytest.raises(exc.HTTPBadRequest) as e:
        hc.resources.signal('s', 'up')
    assert 'Signal resource during SUSPEND is not supported' in str(e.value)
    said = [ev for ev in hc.events.list('s', resource_name='up')
            if ev.resource_status_reason ==
            'Cannot signal resource during SUSPEND']
    assert [ev.resource_status for ev in said] == ['SUSPEND_COMPLETE']
    st = _settled(hc, 's')
    assert st.stack_status == 'SUSPEND_COMPLETE'
    assert st.outputs[0]['output_value'] == 1

PREVIEWED = '''heat_template_version: 2015-04-30
parameters:
  incomming:
    type: string
  secret: {type: string, hidden: true, default: hush}
resources:
  one:
    type: OS::Heat::TestResource
    properties:
      value: fred
  two:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: incomming}
    depends_on: one
  three:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: secret}
outputs:
  main_out:
    value: {get_attr: [two, output]}
'''
PREVIEW_MAIN = '''heat_template_version: 2015-04-30
parameters:
  incomming:
    type: string
resources:
  main:
    type: nested.yaml
    properties:
      value: {get_param: incomming}
  rg:
    type: OS::Heat::ResourceGroup
    properties:
      count: 1
      resource_def:
        type: nested.yaml
        properties:
          value: {get_attr: [main, output]}
'''
PREVIEW_NESTED = '''heat_template_version: 2015-04-30
parameters:
  value:
    type: string
resources:
  nested:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: value}
outputs:
  output:
    value: {get_attr: [nested, output]}
'''


def test_preview_answers_as_heats(api, tmp_path):
    """Heat's functional test_preview: a stack that is not stored (id
    'None', no parent), each resource as a create would start it, a
    nested stack's resources as a list in its place (a group's members'
    too), a hidden value shown as ******; nothing is stored."""
    from heatclient import exc
    project = 'preview'
    hc = api.client(project, api.token(project)['token'])
    env = '''parameters:\n  incomming: abc\n'''
    result = hc.stacks.preview(
        template=PREVIEWED, stack_name='p', disable_rollback=True,
        environment=env).to_dict()
    assert (result['stack_name'], result['id'], result['parent'],
            result['disable_rollback'], result['template_description']) \
        == ('p', 'None', None, True, 'No description')
    assert {k: result['parameters'][k] for k in (
        'OS::stack_id', 'OS::stack_name', 'incomming', 'secret')} == {
        'OS::stack_id': 'None', 'OS::stack_name': 'p', 'incomming': 'abc',
        'secret': '******'}
    by_name = {r['resource_name']: r for r in result['resources']}
    assert sorted(by_name) == ['one', 'three', 'two']
    for name, res in by_name.items():
        assert (res['stack_name'], res['resource_action'],
                res['resource_status'], res['resource_type']) == (
            'p', 'INIT', 'COMPLETE', 'OS::Heat::TestResource')
        assert [res[f] for f in ('resource_status_reason',
                                 'physical_resource_id', 'description',
                                 'creation_time', 'updated_time')] == [
            '', '', '', None, None]
        assert 'output' in res['attributes']
        assert res['resource_identity'] == {
            'stack_name': 'p', 'stack_id': 'None', 'tenant': project,
            'path': '/resources/%s' % name}
        assert res['stack_identity'] == dict(res['resource_identity'],
                                             path='')
        assert (res['properties']['fail'], res['properties']['wait_secs'],
                res['properties']['update_replace']) == (False, 0, False)
    assert (by_name['one']['properties']['value'],
            by_name['one']['required_by']) == ('fred', ['two'])
    assert (by_name['two']['properties']['value'],
            by_name['two']['required_by']) == ('abc', [])
    assert by_name['three']['properties']['value'] == '******'
    assert list(hc.stacks.list()) == []   # nothing stored

    with pytest.raises(exc.HTTPBadRequest) as err:
        hc.stacks.preview(template=PREVIEWED.replace(
            'get_param: incomming', 'get_param: missing'),
            stack_name='p', disable_rollback=True, environment=env)
    assert 'missing' in str(err.value)

    fields = _sent(tmp_path, PREVIEW_MAIN, {'nested.yaml': PREVIEW_NESTED},
                   env_text=env)
    result = hc.stacks.preview(stack_name='n', disable_rollback=True,
                               **fields).to_dict()
    main, rg = result['resources']
    # the provider's resources in its place, named by its stack
    assert [(r['resource_name'], r['parent_resource'], r['stack_name'],
             r['properties']['value']) for r in main] == [
        ('nested', 'main', 'n-main', 'abc')]
    # a group: its members, each a nested stack of its own
    assert [[(r['resource_name'], r['parent_resource'],
              r['properties']['value']) for r in member]
            for member in rg] == [[('nested', '0', None)]]


UNICODE = u'''heat_template_version: 2014-10-16
description: \u8fd9\u662f\u4e00\u4e2a\u63cf\u8ff0
parameters:
  \u53c2\u6570:
    type: number
    default: 10
  listed:
    type: comma_delimited_list
    default: [a, b]
resources:
  \u8d44\u6e90:
    type: OS::Heat::RandomString
    properties:
      length: {get_param: \u53c2\u6570}
'''


def test_a_previews_parameters_are_text_as_heats(api):
    """heat-tempest-plugin's test_unicode_template.test_stack_preview: a
    preview gives every parameter as text, as stack show does (a number
    as written, a list joined by commas)."""
    hc = api.client('unipreview', api.token('unipreview')['token'])
    result = hc.stacks.preview(template=UNICODE, stack_name='u',
                               disable_rollback=True).to_dict()
    assert result['parameters'][u'\u53c2\u6570'] == '10'
    assert result['parameters']['listed'] == 'a,b'
    assert result['template_description'] == \
        u'\u8fd9\u662f\u4e00\u4e2a\u63cf\u8ff0'
    res = result['resources'][0]
    assert res['resource_identity']['path'] == \
        '/resources/%s' % res['resource_name']


FAIL_TOP = '''HeatTemplateFormatVersion: '2012-12-12'
Resources:
  victim:
    Type: fail.yaml
'''
FAIL_NESTED = '''HeatTemplateFormatVersion: '2012-12-12'
Resources:
  oops:
    Type: OS::Heat::TestResource
    Properties:
      fail: true
      wait_secs: 2
'''


def test_a_failure_reason_is_worded_as_heats(api):
    """heat_integrationtests' TemplateResourceErrorMessageTest: a
    resource's failure reason is the class of the exception Heat raises,
    the resource's path and the message; through a provider template the
    path goes down to the resource that failed, and the stack's says
    `Resource CREATE failed: ` and that."""
    hc = api.client('wording', api.token('wording')['token'])
    hc.stacks.create(stack_name='direct', template=FAIL_NESTED)
    st = _settled(hc, 'direct')
    assert st.stack_status_reason == ('Resource CREATE failed: ValueError: '
                                      'resources.oops: Test Resource failed '
                                      'oops')
    oops = hc.resources.get('direct', 'oops')
    assert oops.resource_status_reason == \
        'ValueError: resources.oops: Test Resource failed oops'
    failed = [e.resource_status_reason for e in hc.events.list('direct')
              if e.resource_status == 'CREATE_FAILED' and
              e.resource_name == 'oops']
    assert failed == [oops.resource_status_reason]

    hc.stacks.create(stack_name='nested', template=FAIL_TOP,
                     files={'fail.yaml': FAIL_NESTED})
    st = _settled(hc, 'nested')
    assert (st.stack_status, st.stack_status_reason) == (
        'CREATE_FAILED', 'Resource CREATE failed: ValueError: '
        'resources.victim.resources.oops: Test Resource failed oops')
    assert hc.resources.get('nested', 'victim').resource_status_reason == \
        'ValueError: resources.victim.resources.oops: Test Resource ' \
        'failed oops'


DRAINED = '''heat_template_version: 2018-08-31
resources:
  inner: {type: inner.yaml}
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 1
      resource_def: {type: OS::Heat::Value, properties: {value: member}}
  bad:
    type: OS::Heat::TestResource
    properties: {fail: true}
'''
DRAINED_INNER = '''heat_template_version: 2018-08-31
resources:
  word: {type: OS::Heat::Value, properties: {value: hi}}
'''
#: each held at its create until the test lets it go: `bad` fails while
#: the nested stacks are being made
DRAINED_HOOKS = '''resource_registry:
  resources:
    bad: {hooks: pre-create}
    inner:
      word: {hooks: pre-create}
    group:
      "0": {hooks: pre-create}
'''


def test_a_failure_lets_nested_stacks_in_flight_finish(api, tmp_path):
    """As Heat: when a resource fails while nested stacks are being made
    (a provider's, a group's), those run on to their end and are
    CREATE_COMPLETE; the stack is CREATE_FAILED at once, for the
    failure (not "Stopped waiting")."""
    project = 'drained'
    token = api.token(project)['token']
    hc = api.client(project, token)
    hc.stacks.create(stack_name='dr', **_sent(
        tmp_path, DRAINED, files={'inner.yaml': DRAINED_INNER},
        env_text=DRAINED_HOOKS))

    def paused():
        out = api.openstack(project, token, 'stack', 'hook', 'poll', 'dr',
                            '--nested-depth', '2', '-f', 'json')
        return sorted(r['Resource Name'] for r in json.loads(out.stdout))
    deadline = time.monotonic() + 120
    while paused() != ['0', 'bad', 'word']:
        assert time.monotonic() < deadline, paused()
    hc.resources.signal('dr', 'bad', data={'unset_hook': 'pre-create'})
    st = _settled(hc, 'dr')
    assert (st.stack_status, st.stack_status_reason) == (
        'CREATE_FAILED', 'Resource CREATE failed: ValueError: '
        'resources.bad: Test Resource failed bad')
    # the nested stacks are still being made: nobody stopped waiting
    for name in ('inner', 'group'):
        assert hc.resources.get('dr', name).resource_status == \
            'CREATE_IN_PROGRESS', name
    # (`stack hook clear` asks for a stack in progress: the resources'
    # own signals)
    for name, member in (('inner', 'word'), ('group', '0')):
        nested = hc.resources.get('dr', name).physical_resource_id
        hc.resources.signal(nested, member,
                            data={'unset_hook': 'pre-create'})
    deadline = time.monotonic() + 120
    while any(hc.resources.get('dr', name).resource_status ==
              'CREATE_IN_PROGRESS' for name in ('inner', 'group')):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for name in ('inner', 'group'):
        res = hc.resources.get('dr', name)
        assert (res.resource_status, res.resource_status_reason) == (
            'CREATE_COMPLETE', 'state changed'), name
    st = hc.stacks.get('dr')
    assert (st.stack_status, st.stack_status_reason) == (
        'CREATE_FAILED', 'Resource CREATE failed: ValueError: '
        'resources.bad: Test Resource failed bad')
    assert not [e for e in hc.events.list('dr')
                if 'Stopped waiting' in (e.resource_status_reason or '')]


VALIDATED = '''heat_template_version: 2014-10-16
description: the stack description
parameters:
  aparam:
    type: number
    default: 10
    description: the param description
resources:
  myres:
    type: OS::Heat::RandomString
    properties:
      length: {get_param: aparam}
'''
VALIDATED_PARENT = '''heat_template_version: 2014-10-16
description: the parent template
parameters:
  pparam:
    type: number
    default: 5
    description: the param description
resources:
  nres:
    type: mynested.yaml
    properties:
      aparam: {get_param: pparam}
'''


def test_validate_answers_as_heats(api):
    """Heat's functional test_template_validate through heatclient: the
    answer as Heat's, to the key: the environment it read (a registry
    entry for each provider template named), and with show_nested the
    nested stacks' parameters (the values their properties give)."""
    hc = api.client('validate', api.token('validate')['token'])
    aparam = {'Default': 10, 'Description': 'the param description',
              'Label': 'aparam', 'NoEcho': 'false', 'Type': 'Number'}
    pparam = dict(aparam, Default=5, Label='pparam')

    def environment(parameters=None, **registry):
        return {'event_sinks': [], 'parameter_defaults': {},
                'parameters': parameters or {},
                'resource_registry': dict(registry, resources={})}
    assert hc.stacks.validate(template=VALIDATED) == {
        'Description': 'the stack description',
        'Parameters': {'aparam': aparam}, 'Environment': environment()}
    assert hc.stacks.validate(
        template=VALIDATED, environment={'parameters': {'aparam': 5}}) == {
        'Description': 'the stack description',
        'Parameters': {'aparam': dict(aparam, Value=5)},
        'Environment': environment({'aparam': 5})}
    none = {'OS::Heat::RandomString': 'OS::Heat::None'}
    assert hc.stacks.validate(
        template=VALIDATED, environment={'resource_registry': none}) == {
        'Description': 'the stack description',
        'Parameters': {'aparam': aparam},
        'Environment': environment(**none)}
    provider = {'mynested.yaml': 'mynested.yaml'}
    assert hc.stacks.validate(template=VALIDATED_PARENT, files={
        'mynested.yaml': VALIDATED}) == {
        'Description': 'the parent template',
        'Parameters': {'pparam': pparam},
        'Environment': environment(**provider)}
    # show_nested: two levels down, Heat's own case: `length` is passed
    # to mynested2.yaml, which has no such parameter; validate reads no
    # nested resource's property (a create refuses it)
    deeper = VALIDATED.replace('OS::Heat::RandomString', 'mynested2.yaml')
    assert hc.stacks.validate(template=VALIDATED_PARENT, files={
        'mynested.yaml': deeper, 'mynested2.yaml': VALIDATED},
        show_nested=True) == {
        'Description': 'the parent template',
        'Parameters': {'pparam': pparam},
        'NestedParameters': {'nres': {
            'Description': 'the stack description',
            'Parameters': {'aparam': dict(aparam, Value=5)},
            'Type': 'mynested.yaml',
            'NestedParameters': {'myres': {
                'Description': 'the stack description',
                'Parameters': {'aparam': aparam},
                'Type': 'mynested2.yaml'}}}},
        'Environment': environment(**provider)}
    from heatclient import exc
    with pytest.raises(exc.HTTPBadRequest, match='Unknown property length'):
        hc.stacks.create(stack_name='deeper', template=VALIDATED_PARENT,
                         files={'mynested.yaml': deeper,
                                'mynested2.yaml': VALIDATED})


def _preempt(rsrcs, output=None):
    tmpl = {'heat_template_version': 'queens',
            'parameters': {'input': {'type': 'string'}},
            'resources': rsrcs}
    if output is not None:
        tmpl['outputs'] = {'delay_stack': {'value': output}}
    return json.dumps(tmpl)


def test_an_update_preempts_one_running_in_a_nested_stack(api):
    """Heat's functional test_simultaneous_update
    test_nested_preemption: a provider's reference (its nested stack's
    ARN) names the stack to heatclient; an update started while another
    waits inside a nested stack takes over, and the output whose
    attribute the new provider template no longer has is no error."""
    hc = api.client('preempt', api.token('preempt')['token'])
    root = _preempt({'nested_stack': {
        'type': 'preempt.yaml',
        'properties': {'input': {'get_param': 'input'}}}},
        {'get_attr': ['nested_stack', 'delay_stack']})
    files = {'preempt.yaml': _preempt({'delay_stack': {
        'type': 'delay.yaml',
        'properties': {'input': {'get_param': 'input'}}}},
        {'get_resource': 'delay_stack'}),
        'delay.yaml': _preempt({'delay_resource': {
            'type': 'OS::Heat::TestResource',
            'properties': {'action_wait_secs': {'update': 6000},
                           'value': {'get_param': 'input'}}}})}
    hc.stacks.create(stack_name='pre', template=root, files=files,
                     parameters={'input': 'foo'})
    st = _settled(hc, 'pre')
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    arn = hc.stacks.output_show('pre', 'delay_stack')['output'][
        'output_value']
    assert arn.startswith('arn:openstack:heat::preempt:stacks/')
    # a nested stack's resource names the resource owning its stack
    assert hc.resources.get(arn, 'delay_resource').parent_resource == \
        'delay_stack'
    hc.stacks.update(st.id, template=root, files=files,
                     parameters={'input': 'bar'})
    deadline = time.monotonic() + 60
    while hc.resources.get(arn, 'delay_resource').resource_status != \
            'UPDATE_IN_PROGRESS':
        assert time.monotonic() < deadline
        time.sleep(0.05)
    hc.stacks.update(st.id, template=root,
                     files={'preempt.yaml': _preempt({})},
                     parameters={'input': 'baz'})
    deadline = time.monotonic() + 120
    while True:
        st = hc.stacks.get(st.id)
        if st.stack_status != 'UPDATE_IN_PROGRESS':
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert st.stack_status == 'UPDATE_COMPLETE', st.stack_status_reason


def test_a_stack_with_a_hidden_tag_is_listed_only_when_asked(api):
    """[DEFAULT] hidden_stack_tags: such a stack is left out of a list
    (heat-tempest-plugin's test_hidden_stack), and listed with
    show_hidden (`openstack stack list --hidden`)."""
    hc = api.client('hidden', api.token('hidden')['token'])
    template = {'heat_template_version': '2018-08-31',
                'resources': {'v': {'type': 'OS::Heat::None'}}}
    hc.stacks.create(stack_name='seen', template=template, tags='foo')
    hc.stacks.create(stack_name='unseen', template=template,
                     tags='foo,data-processing-cluster')
    assert _settled(hc, 'unseen').stack_status == 'CREATE_COMPLETE'
    assert [s.stack_name for s in hc.stacks.list()] == ['seen']
    assert sorted(s.stack_name for s in hc.stacks.list(
        show_hidden=True)) == ['seen', 'unseen']
    # shown by name or id all the same
    assert hc.stacks.get('unseen').tags == ['foo', 'data-processing-cluster']


_PARENT = 'heat_template_version: 2016-04-08\nresources:\n' \
    '  nested1: {type: nested1.yaml}\n'
_NESTED1 = 'heat_template_version: 2016-04-08\nresources:\n' \
    '  nested2: {type: nested2.yaml}\n'
_NESTED2 = 'heat_template_version: 2016-04-08\nresources:\n' \
    '  random: {type: OS::Heat::RandomString}\n'


def test_update_preview_shows_nested_stacks_as_heats(api):
    """heat_integrationtests' UpdatePreviewStackTestNested: with
    show_nested, a provider's nested stack is updated with it and its
    resources' changes follow with their parent_resource; a replaced
    provider's nested resources are deleted."""
    hc = api.client('pnested', api.token('pnested')['token'])
    files = {'nested1.yaml': _NESTED1, 'nested2.yaml': _NESTED2}
    hc.stacks.create(stack_name='pn', template=_PARENT, files=files)
    assert _settled(hc, 'pn').stack_status == 'CREATE_COMPLETE'

    def preview(template, files=None):
        got = hc.stacks.preview_update('pn', template=template,
                                       files=files or {}, show_nested=True)
        return {kind: sorted((i['resource_name'],
                              i.get('parent_resource'))
                             for i in items)
                for kind, items in got['resource_changes'].items()}

    assert preview(_PARENT, files) == {
        'added': [], 'deleted': [], 'replaced': [],
        'updated': [('nested1', None), ('nested2', 'nested1')],
        'unchanged': [('random', 'nested2')]}
    more = dict(files, **{'nested2.yaml': _NESTED2 +
                          '  random2: {type: OS::Heat::RandomString}\n'})
    assert preview(_PARENT, more)['added'] == [('random2', 'nested2')]
    assert preview(_PARENT.replace('nested1.yaml', 'OS::Heat::None')) == {
        'added': [], 'updated': [], 'unchanged': [],
        'replaced': [('nested1', None)],
        'deleted': [('nested2', 'nested1'), ('random', 'nested2')]}
    # without it, the stack's own resources only
    plain = hc.stacks.preview_update('pn', template=_PARENT, files=files)
    assert [i['resource_name'] for kind in plain['resource_changes']
            for i in plain['resource_changes'][kind]] == ['nested1']
