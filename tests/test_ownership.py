"""A physical id that enters from outside names the requesting project's
own objects only: another project's server (or network, config ...) is
not found with this project's credentials, as on a real cloud, so
`stack adopt` (the CLI and POST /stacks with adopt_stack_data) and a
template's external_id refuse it, naming the resource and the id, and
store nothing. An object a live stack holds is not adopted a second
time. Through the CLI and the API as users run them, and the service
layer for the engine's own kinds."""

import io
import json
import time
import urllib.error
import urllib.request

import pytest
import yaml

from converge import exception
from converge.engine import request
from converge.engine import service
from tests import enginetools as et
# a converge-api on loopback and tokens for it
from tests.test_heat_api import api  # noqa: F401

A = ('--os-project-id', 'alpha')
B = ('--os-project-id', 'beta')

SERVER = '''heat_template_version: "2018-08-31"
resources:
  server:
    type: OS::Nova::Server
    properties: {image: cirros, flavor: m1.tiny,
                 user_data_format: SOFTWARE_CONFIG}
  net:
    type: OS::Neutron::Net
'''


def _doc(template_text, resources):
    """An adopt file naming `resources` ({name: (type, id)})."""
    return {'template': yaml.safe_load(template_text),
            'resources': {n: {'resource_id': pid, 'type': t}
                          for n, (t, pid) in resources.items()}}


def _ids(cli, *args):
    return {r['resource_name']: r['physical_resource_id']
            for r in cli.json(*args, 'stack', 'resource', 'list', 'mine')}


def test_another_projects_server_cannot_be_adopted(cli, write):
    cli.run(*A, 'stack', 'create', 'mine', '-t', write('a.yaml', SERVER),
            '--wait', timeout=240)
    ids = _ids(cli, *A)
    servers = cli.json('sim', 'server', 'list')
    for name, rtype in (('server', 'OS::Nova::Server'),
                        ('net', 'OS::Neutron::Net')):
        doc = _doc(SERVER, {name: (rtype, ids[name])})
        proc = cli.run(*B, 'stack', 'adopt', 'theirs', '--adopt-file',
                       write('steal.json', json.dumps(doc)), check=False)
        assert proc.returncode == 2, proc.stderr
        assert 'steal.json: resources.%s.resource_id: %s %s could not be ' \
            'found in project beta' % (name, rtype, ids[name]) in \
            proc.stderr, proc.stderr
        assert 'Traceback' not in proc.stderr
    # nothing stored, nothing touched
    assert cli.json(*B, 'stack', 'list') == []
    assert cli.json(*A, 'stack', 'show', 'mine')['stack_status'] == \
        'CREATE_COMPLETE'
    assert cli.json('sim', 'server', 'list') == servers
    # nor can a deployment of beta's name alpha's server
    deploy = write('d.yaml', '''heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: 'cat /etc/shadow'}
  run:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: %s}
''' % ids['server'])
    proc = cli.run(*B, 'stack', 'create', 'theirs', '-t', deploy,
                   check=False)
    assert proc.returncode == 2, proc.stderr
    assert 'resources.run.properties.server: Error validating value ' \
        "'%s': The Server (%s) could not be found." % (
            ids['server'], ids['server']) in proc.stderr
    assert cli.json(*B, 'stack', 'list') == []
    # alpha itself still can (its own abandon document)
    doc = json.loads(cli.run(*A, 'stack', 'abandon', 'mine').stdout)
    cli.run(*A, 'stack', 'adopt', 'mine', '--adopt-file',
            write('mine.json', json.dumps(doc)), '--wait', timeout=240)
    assert cli.json(*A, 'stack', 'show', 'mine')['stack_status'] == \
        'ADOPT_COMPLETE'
    assert _ids(cli, *A) == ids


def test_an_external_id_of_another_project_is_refused(cli, write):
    cli.run(*A, 'stack', 'create', 'mine', '-t', write('a.yaml', SERVER),
            '--wait', timeout=240)
    ids = _ids(cli, *A)
    template = '''heat_template_version: 2018-08-31
parameters:
  server: {type: string}
  public: {type: string}
resources:
  server:
    type: OS::Nova::Server
    external_id: {get_param: server}
  public:
    type: OS::Neutron::Net
    external_id: {get_param: public}
outputs:
  ip: {value: {get_attr: [server, first_address]}}
'''
    tmpl = write('ext.yaml', template)
    # the seeded public network: shared, the operator's
    public = '--parameter', 'public=%s' % _sim(cli).resolve('network',
                                                            'public')
    proc = cli.run(*B, 'stack', 'create', 'theirs', '-t', tmpl, *public,
                   '--parameter', 'server=%s' % ids['server'], check=False)
    assert proc.returncode == 2, proc.stderr
    assert 'ext.yaml:' in proc.stderr
    assert 'resources.server.external_id: OS::Nova::Server %s could not ' \
        'be found in project beta' % ids['server'] in proc.stderr
    assert cli.json(*B, 'stack', 'list') == []
    # its own server, and a shared network it may use, it can name
    cli.run(*A, 'stack', 'create', 'ext', '-t', tmpl, *public, '--parameter',
            'server=%s' % ids['server'], '--wait', timeout=240)
    assert cli.json(*A, 'stack', 'show', 'ext')['stack_status'] == \
        'CREATE_COMPLETE'
    # an update to another project's is refused as a create is
    cli.run(*B, 'stack', 'create', 'other', '-t', write('b.yaml', SERVER),
            '--wait', timeout=240)
    theirs = {r['resource_name']: r['physical_resource_id'] for r in
              cli.json(*B, 'stack', 'resource', 'list', 'other')}
    proc = cli.run(*A, 'stack', 'update', 'ext', '--existing',
                   '--parameter', 'server=%s' % theirs['server'],
                   check=False)
    assert proc.returncode == 2, proc.stderr
    assert theirs['server'] in proc.stderr
    assert cli.json(*A, 'stack', 'show', 'ext')['stack_status'] == \
        'CREATE_COMPLETE'


def _sim(cli):
    from converge.drivers.sim import objects
    return objects.SimCloud('sqlite:///%s/sim.db' % cli.home, 'admin').admin()


def _post(api, project, token, path, body):
    req = urllib.request.Request(
        '%s/v1/%s%s' % (api.url, project, path), method='POST',
        data=json.dumps(body).encode(),
        headers={'X-Auth-Token': token, 'Content-Type': 'application/json'})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_api_refuses_adopt_data_naming_another_projects_server(api):
    owner = api.client('owner', api.token('owner')['token'])
    owner.stacks.create(stack_name='mine', template=yaml.safe_load(SERVER))
    deadline = time.monotonic() + 120
    while owner.stacks.get('mine').stack_status != 'CREATE_COMPLETE':
        assert time.monotonic() < deadline
        time.sleep(0.05)   # polling the API, not synchronising
    server = {r.resource_name: r.physical_resource_id
              for r in owner.resources.list('mine')}['server']
    token = api.token('thief')['token']
    code, body = _post(api, 'thief', token, '/stacks', {
        'stack_name': 'theirs', 'template': yaml.safe_load(SERVER),
        'adopt_stack_data': json.dumps(_doc(SERVER, {
            'server': ('OS::Nova::Server', server)}))})
    assert code == 400, body
    assert body['code'] == 400 and body['title'] == 'Bad Request'
    assert 'resources.server.resource_id: OS::Nova::Server %s could not ' \
        'be found in project thief' % server in body['error']['message']
    thief = api.client('thief', token)
    assert list(thief.stacks.list()) == []
    assert owner.stacks.get('mine').stack_status == 'CREATE_COMPLETE'


# -- the service layer: what the engine keeps, and twice adopted ---------------

CONFIG = {'heat_template_version': '2021-04-16', 'resources': {
    'config': {'type': 'OS::Heat::SoftwareConfig', 'properties': {
        'group': 'script', 'config': 'echo secret'}},
    'word': {'type': 'OS::Heat::RandomString'}}}


def test_what_the_engine_keeps_of_another_project_is_not_adopted(
        engine, tmp_path):
    svc = service.Service(engine)
    alpha, beta = request.make('alpha'), request.make('beta')
    started = svc.stack_create(alpha, 'mine', et.bundle(tmp_path, CONFIG),
                               {})
    et.follow(engine, started['id'], started['traversal_id'], ctx=alpha,
              out=io.StringIO(), tty=False)
    config = {r['resource_name']: r['physical_resource_id']
              for r in svc.resource_list(alpha, 'mine')}['config']
    doc = {'template': CONFIG, 'resources': {'config': {
        'resource_id': config, 'type': 'OS::Heat::SoftwareConfig'}}}
    with pytest.raises(exception.InvalidTemplate) as err:
        svc.stack_adopt(beta, 'theirs', doc, source='f.json')
    assert str(err.value) == (
        'f.json: resources.config.resource_id: OS::Heat::SoftwareConfig '
        '%s could not be found in project beta: only what the project '
        'itself owns can be taken over' % config)
    assert svc.stack_list(beta) == []


def test_an_object_a_live_stack_holds_is_not_adopted_twice(engine,
                                                           tmp_path):
    svc, ctx = service.Service(engine), request.make()
    started = svc.stack_create(ctx, 'one', et.bundle(tmp_path, SERVER), {})
    et.wait(engine, started['id'], started['traversal_id'])
    doc = svc.stack_export(ctx, 'one')
    # the same objects under another stack (not the export's own id,
    # which is refused as still managed here)
    doc.pop('id')
    for entry in doc['resources'].values():
        entry.pop('uuid')
    with pytest.raises(exception.Conflict) as err:
        svc.stack_adopt(ctx, 'two', doc, source='f.json')
    assert 'f.json: resources.net.resource_id: OS::Neutron::Net %s is ' \
        'held by net of stack one already' % (
            doc['resources']['net']['resource_id']) in str(err.value)
    assert [s['stack_name'] for s in svc.stack_list(ctx)] == ['one']


def test_the_sim_shows_a_project_its_own_servers_only(engine):
    """As Nova answers a project's token: another project's server is not
    found by any call, nor listed, nor looked up by name; its key is not
    handed over; the operator sees every project's."""
    compute = engine.clients.compute
    alpha, beta = compute.for_project('alpha'), compute.for_project('beta')
    mine = alpha.create_server('a', 'cirros', 'm1.tiny',
                               idempotency_key='key-a')
    for call in (beta.get_server, beta.delete_server, beta.stop_server,
                 beta.reboot_server):
        with pytest.raises(exception.CloudNotFound):
            call(mine['id'])
    assert beta.list_servers() == []
    assert beta.find_server_by_key('key-a') is None
    assert not beta.owns_server(mine['id'])
    with pytest.raises(exception.CloudNotFound):
        engine.clients.sim_cloud('beta').resolve('server', 'a')
    with pytest.raises(exception.CloudError) as err:
        beta.create_server('b', 'cirros', 'm1.tiny', idempotency_key='key-a')
    assert err.value.code == 409
    assert alpha.owns_server(mine['id'])
    assert [s['id'] for s in alpha.list_servers()] == [mine['id']]
    assert engine.clients.sim_cloud('alpha').resolve('server', 'a') == \
        mine['id']
    assert [s['id'] for s in compute.admin().list_servers()] == [mine['id']]
    # a stack's plug-ins act as its project
    assert engine.clients.for_stack(None, 'beta').compute.list_servers() \
        == []


def test_a_nested_stacks_external_id_is_checked_when_converged(
        engine, tmp_path):
    """A child stack's external_id is known once its parent passes it
    down: converging it refuses another project's software config (the
    resource fails naming it, its body is never read) and another
    project's server (not found with this project's credentials)."""
    svc = service.Service(engine)
    alpha, beta = request.make('alpha'), request.make('beta')
    started = svc.stack_create(alpha, 'mine', et.bundle(tmp_path, CONFIG),
                               {})
    et.follow(engine, started['id'], started['traversal_id'], ctx=alpha,
              out=io.StringIO(), tty=False)
    config = {r['resource_name']: r['physical_resource_id']
              for r in svc.resource_list(alpha, 'mine')}['config']
    server = engine.clients.for_stack(None, 'alpha').compute.create_server(
        'theirs', 'cirros', 'm1.tiny', idempotency_key='key-theirs')['id']
    for rtype, physical_id, reason in (
            ('OS::Heat::SoftwareConfig', config, 'is not this project\'s'),
            ('OS::Nova::Server', server, 'not found')):
        child = {'heat_template_version': '2021-04-16',
                 'parameters': {'ref': {'type': 'string'}},
                 'resources': {'it': {'type': rtype,
                                      'external_id': {'get_param': 'ref'}}},
                 'outputs': {'got': {'value': {'get_attr': ['it', 'show']}}}}
        if rtype == 'OS::Nova::Server':
            child['resources']['it']['properties'] = {
                'image': 'cirros', 'flavor': 'm1.tiny'}
        doc = et.hot({'child': {'type': 'OS::Heat::Stack', 'properties': {
            'template': json.dumps(child),
            'parameters': {'ref': physical_id}}}})
        started = svc.stack_create(beta, 'ext', et.bundle(tmp_path, doc), {})
        stack = et.follow(engine, started['id'], started['traversal_id'],
                          ctx=beta, out=io.StringIO(), tty=False).stack
        assert et.status(stack) == 'CREATE_FAILED'
        assert 'external resource %s %s' % (physical_id, reason) in \
            stack.status_reason, stack.status_reason
        started = svc.stack_delete(beta, 'ext')
        et.follow(engine, started['id'], started['traversal_id'], ctx=beta,
                  out=io.StringIO(), tty=False)
    # what was named is as it was
    assert engine.clients.configs.get(config) is not None
    assert [s['id'] for s in engine.clients.compute.list_servers()] == [
        server]


def test_a_server_runs_no_deployment_of_another_project(engine, tmp_path):
    """A deployment whose server comes from an attribute (not checked at
    validate) names another project's server: that server's agent is
    never shown it, and may not signal it."""
    from converge import conf
    from converge import userdata
    from converge.engine import software
    from converge.engine import standalone
    conf.CONF.set_override('boot_agents', False, 'sim')
    try:
        svc = service.Service(engine)
        alpha, beta = request.make('alpha'), request.make('beta')
        started = svc.stack_create(alpha, 'mine', et.bundle(tmp_path, et.hot(
            {'server': {'type': 'OS::Nova::Server', 'properties': {
                'image': 'cirros', 'flavor': 'm1.tiny',
                'user_data_format': 'SOFTWARE_CONFIG'}}})), {})
        et.follow(engine, started['id'], started['traversal_id'],
                  ctx=alpha, out=io.StringIO(), tty=False)
        [server] = engine.clients.compute.list_servers()
        creds = userdata.decode(server['user_data'])
        doc = et.hot({
            'id': {'type': 'OS::Heat::Value',
                   'properties': {'value': server['id']}},
            'config': {'type': 'OS::Heat::SoftwareConfig', 'properties': {
                'group': 'script', 'config': 'cat /etc/shadow'}},
            'run': {'type': 'OS::Heat::SoftwareDeployment', 'properties': {
                'config': {'get_resource': 'config'},
                'server': {'get_attr': ['id', 'value']}}}})
        svc.stack_create(beta, 'theirs', et.bundle(tmp_path, doc), {})
        found = []
        deadline = time.monotonic() + 60
        while not found:
            assert time.monotonic() < deadline
            found = standalone.deployment_list(engine, 'beta')
            time.sleep(0.02)   # polling the engine's state
        [dep] = found
        assert dep['server_id'] == server['id']
        _, shown = software.deployments(engine, creds['agent_id'],
                                        creds['token'])
        assert shown == []
        with pytest.raises(exception.ConvergeError):
            software.signal(engine, dep['id'], creds['agent_id'],
                            creds['token'], '', {'deploy_status_code': 0})
    finally:
        conf.CONF.clear_override('boot_agents', 'sim')


def test_a_snapshot_restore_checks_its_external_ids(engine, tmp_path):
    """Restoring is an update to the kept template: an external_id in it
    that no longer names the project's own object (the network was
    deleted since, or given to another project) is refused naming it,
    and the stack is left as it was."""
    svc, ctx = service.Service(engine), request.make()
    net = engine.clients.for_stack(None, ctx.project_id).cloud.create(
        'network', {'name': 'kept'}, key='key-kept')
    doc = et.hot({'net': {'type': 'OS::Neutron::Net',
                          'external_id': net['id']}})
    started = svc.stack_create(ctx, 'ext', et.bundle(tmp_path, doc), {})
    et.wait(engine, started['id'], started['traversal_id'])
    snap = svc.stack_snapshot(ctx, 'ext')
    et.wait(engine, started['id'], snap['traversal_id'])  # it is made
    engine.clients.for_stack(None, ctx.project_id).cloud.delete(
        'network', net['id'])
    with pytest.raises(exception.InvalidTemplate) as err:
        svc.stack_snapshot_restore(ctx, 'ext', snap['id'])
    assert 'resources.net.external_id: OS::Neutron::Net %s could not be ' \
        'found' % net['id'] in str(err.value)
    # as the snapshot left it (Heat's SNAPSHOT_COMPLETE), not restoring
    assert svc.stack_show(ctx, 'ext')['stack_status'] == 'SNAPSHOT_COMPLETE'
