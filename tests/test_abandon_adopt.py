"""`stack abandon` and `stack adopt` as a user runs them (the CLI in a
subprocess, embedded): a stack with a server whose agent has run a
deployment is abandoned and adopted back with nothing created and nothing
run again, and its agent still serves the next update. Then, in-process
through the service layer (fast): what the file does not record, what the
cloud lost, an edited template, a failed save, the operator's switches;
and once on PostgreSQL, RabbitMQ and Redis.
"""

import json
import os
import signal

import pytest

from converge import exception
from converge.engine import request
from converge.engine import service
from tests import enginetools as et
from tests.distributed import wait_for

TEMPLATE = json.dumps({
    'heat_template_version': '2016-10-14',
    'parameters': {'greeting': {'type': 'string', 'default': 'hello'}},
    'resources': {
        'config': {'type': 'OS::Heat::SoftwareConfig', 'properties': {
            'group': 'script', 'inputs': [{'name': 'greeting'}],
            'outputs': [{'name': 'said'}],
            'config': '#!/bin/sh\n'
                      'echo "$deploy_action $greeting" >> runs.log\n'
                      'echo -n "said $greeting" > "$heat_outputs_path.said"'
                      '\n'}},
        'server': {'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.tiny',
            'user_data_format': 'SOFTWARE_CONFIG'}},
        'deployment': {'type': 'OS::Heat::SoftwareDeployment',
                       'properties': {
                           'config': {'get_resource': 'config'},
                           'server': {'get_resource': 'server'},
                           'input_values': {
                               'greeting': {'get_param': 'greeting'}}}},
        'word': {'type': 'OS::Heat::RandomString'}},
    'outputs': {
        'said': {'value': {'get_attr': ['deployment', 'said']}},
        'server': {'value': {'get_resource': 'server'}},
        'address': {'value': {'get_attr': ['server', 'first_address']}},
        'word': {'value': {'get_attr': ['word', 'value']}}}})

SERVER_ONLY = '''heat_template_version: 2018-08-31
resources:
  server:
    type: OS::Nova::Server
    properties: {image: cirros, flavor: m1.tiny}
'''


def _physical_ids(cli, stack):
    return {r['resource_name']: r['physical_resource_id']
            for r in cli.json('stack', 'resource', 'list', stack)}


def _runs(disk):
    with open(os.path.join(disk, 'runs.log')) as f:
        return f.read().split('\n')[:-1]


@pytest.mark.long   # 19-37 s: in .ci/run's long group
def test_abandon_then_adopt_creates_nothing_and_reruns_nothing(
        cli, write, tmp_path):
    cli.run('stack', 'create', 'app', '-t', write('app.json', TEMPLATE),
            '--wait', timeout=240)
    outputs = cli.json('stack', 'output', 'show', 'app', '--all')
    ids = _physical_ids(cli, 'app')
    [server] = cli.json('sim', 'server', 'list')
    disk = cli.json('sim', 'server', 'show', server['ID'])['disk']
    assert _runs(disk) == ['CREATE hello']

    adopt_file = tmp_path / 'app-abandoned.json'
    proc = cli.run('stack', 'abandon', 'app', '--output-file',
                   str(adopt_file))
    assert proc.stdout == ''
    doc = json.loads(adopt_file.read_text())
    # Heat's abandon format
    assert {'id', 'name', 'action', 'status', 'template', 'files',
            'environment', 'project_id', 'stack_user_project_id',
            'resources'} <= set(doc)
    assert (doc['name'], doc['action'], doc['status']) == \
        ('app', 'CREATE', 'COMPLETE')
    assert {n: r['resource_id'] for n, r in doc['resources'].items()} == ids
    assert doc['resources']['server']['type'] == 'OS::Nova::Server'
    # the deployment's book of applied runs goes with it
    assert doc['resources']['deployment']['resource_data']['runs'] == 1
    # the stack is gone, the cloud untouched
    assert cli.json('stack', 'list') == []
    assert cli.json('sim', 'server', 'list') == [server]

    cli.run('stack', 'adopt', 'app', '--adopt-file', str(adopt_file),
            '--wait', timeout=240)
    shown = cli.json('stack', 'show', 'app')
    assert shown['stack_status'] == 'ADOPT_COMPLETE'
    assert shown['id'] == doc['id']
    rows = cli.json('stack', 'resource', 'list', 'app')
    assert {r['resource_status'] for r in rows} == {'ADOPT_COMPLETE'}
    assert {r['resource_name']: r['physical_resource_id']
            for r in rows} == ids
    assert cli.json('sim', 'server', 'list') == [server]
    assert len(cli.json('sim', 'log', '--op', 'create')) == 1
    assert cli.json('stack', 'output', 'show', 'app', '--all') == outputs
    assert _runs(disk) == ['CREATE hello']

    # the same file cannot be adopted twice
    twice = cli.run('stack', 'adopt', 'again', '--adopt-file',
                    str(adopt_file), check=False)
    assert twice.returncode == 4, twice.stderr
    assert 'still managed here' in twice.stderr

    # the adopted book: an update that changes nothing the script sees
    # runs nothing; one that does runs it once, on the agent that kept
    # its credential
    cli.run('stack', 'update', 'app', '--existing', '--wait', timeout=240)
    assert _runs(disk) == ['CREATE hello']
    cli.run('stack', 'update', 'app', '--existing', '--parameter',
            'greeting=bonjour', '--wait', timeout=240)
    assert _runs(disk) == ['CREATE hello', 'UPDATE bonjour']
    after = cli.json('stack', 'output', 'show', 'app', '--all')
    assert after == dict(outputs, said='said bonjour')
    assert cli.json('sim', 'server', 'list') == [server]


MINIMAL = {'heat_template_version': '2018-08-31',
           'resources': {'v': {'type': 'OS::Heat::Value',
                               'properties': {'value': 'x'}}}}
BAD_FILES = {
    'not-json': ('{"template": ', 'not-json.json:1: not JSON'),
    'no template': (json.dumps({'resources': {}}),
                    'template: the adopt file has no template'),
    'unknown resource': (json.dumps({
        'template': MINIMAL,
        'resources': {'ghost': {'resource_id': 'abc'}}}),
        'resources.ghost: the template has no resource ghost'),
    'wrong type': (json.dumps({
        'template': MINIMAL,
        'resources': {'v': {'resource_id': 'abc',
                            'type': 'OS::Nova::Server'}}}),
        'resources.v.type: is OS::Nova::Server, the template\'s v is '
        'OS::Heat::Value'),
}


def test_bad_adopt_files_are_refused_naming_what_is_wrong(cli, write):
    for case, (text, expected) in sorted(BAD_FILES.items()):
        name = case.replace(' ', '-') + '.json'
        proc = cli.run('stack', 'adopt', 'bad', '--adopt-file',
                       write(name, text), check=False)
        assert proc.returncode == 2, (case, proc.stderr)
        assert expected in proc.stderr, (case, proc.stderr)
        assert name in proc.stderr, proc.stderr
    # nothing was stored by any of them
    assert cli.json('stack', 'list') == []


def test_a_stack_in_progress_is_not_abandoned(cli, write, tmp_path):
    # the server stays BUILD for a minute: the create is under way
    cli.run('sim', 'fault', 'set', 'create', '--latency', '60')
    proc = cli.popen('stack', 'create', 'busy', '-t',
                     write('s.yaml', SERVER_ONLY))
    try:
        wait_for(lambda: len(cli.json('sim', 'server', 'list')) == 1,
                 timeout=60)
        out = tmp_path / 'busy.json'
        refused = cli.run('stack', 'abandon', 'busy', '--output-file',
                          str(out), check=False)
        assert refused.returncode == 4, refused.stderr
        assert 'CREATE_IN_PROGRESS' in refused.stderr
        assert not out.exists()
        assert cli.json('stack', 'show', 'busy')['stack_status'] == \
            'CREATE_IN_PROGRESS'
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


# -- in-process, through the service layer (no subprocess: fast) --------------

VALUES = {'heat_template_version': '2021-04-16',
          'resources': {
              'word': {'type': 'OS::Heat::RandomString'},
              'other': {'type': 'OS::Heat::RandomString'},
              'echo': {'type': 'OS::Heat::Value', 'properties': {
                  'value': {'get_attr': ['word', 'value']}}}},
          'outputs': {'word': {'value': {'get_attr': ['echo', 'value']}},
                      'other': {'value': {'get_attr': ['other', 'value']}}}}


@pytest.fixture
def svc_ctx(engine):
    """The service layer of an in-process engine, and a request of the
    default project."""
    return service.Service(engine), request.make()


def _created(engine, svc, ctx, tmp_path):
    started = svc.stack_create(ctx, 'vals', et.bundle(tmp_path, VALUES), {})
    et.wait(engine, started['id'], started['traversal_id'])
    return started['id']


def test_adopt_creates_what_the_file_does_not_record(engine, tmp_path,
                                                     svc_ctx):
    svc, ctx = svc_ctx
    _created(engine, svc, ctx, tmp_path)
    before = svc.output_list(ctx, 'vals')
    doc = svc.stack_abandon(ctx, 'vals')
    assert svc.stack_list(ctx) == []
    del doc['resources']['other']
    started = svc.stack_adopt(ctx, 'vals', json.loads(json.dumps(doc)))
    et.wait(engine, started['id'], started['traversal_id'])
    states = {r['resource_name']: r['resource_status']
              for r in svc.resource_list(ctx, 'vals')}
    assert states == {'word': 'ADOPT_COMPLETE', 'echo': 'ADOPT_COMPLETE',
                      'other': 'CREATE_COMPLETE'}
    after = svc.output_list(ctx, 'vals')
    assert after['word'] == before['word']   # its value came with its data
    assert after['other'] != before['other']   # made anew


def test_adopting_what_the_cloud_lost_is_refused_naming_it(
        engine, tmp_path, svc_ctx):
    """A server the cloud no longer has is not found with the project's
    credentials, as another project's is not: the adopt is refused
    before anything is stored (tests/test_ownership.py)."""
    svc, ctx = svc_ctx
    started = svc.stack_create(ctx, 'lone', et.bundle(tmp_path, SERVER_ONLY),
                               {})
    et.wait(engine, started['id'], started['traversal_id'])
    doc = svc.stack_abandon(ctx, 'lone')
    server_id = doc['resources']['server']['resource_id']
    compute = engine.clients.compute
    compute.delete_server(server_id)
    with pytest.raises(exception.InvalidTemplate) as err:
        svc.stack_adopt(ctx, 'lone', doc, source='lone.json')
    assert str(err.value).startswith(
        'lone.json: resources.server.resource_id: OS::Nova::Server %s '
        'could not be found' % server_id)
    assert svc.stack_list(ctx) == []
    live = [s for s in compute.list_servers()
            if s.get('status') not in ('DELETED', 'SOFT_DELETED')]
    assert live == []   # adopting made nothing in its place
    # without it, the adopt creates it (the template asks for it)
    del doc['resources']['server']
    started = svc.stack_adopt(ctx, 'lone', doc)
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    assert et.status(stack) == 'ADOPT_COMPLETE'
    [row] = svc.resource_list(ctx, 'lone')
    assert row['resource_status'] == 'CREATE_COMPLETE'
    assert row['physical_resource_id'] != server_id


def test_a_failed_save_keeps_the_stack(engine, tmp_path, svc_ctx):
    svc, ctx = svc_ctx
    _created(engine, svc, ctx, tmp_path)

    def disk_full(doc):
        raise OSError(28, 'No space left on device')

    with pytest.raises(OSError):
        svc.stack_abandon(ctx, 'vals', save=disk_full)
    assert svc.stack_show(ctx, 'vals')['stack_status'] == 'CREATE_COMPLETE'
    assert len(svc.resource_list(ctx, 'vals')) == 3
    # another project's stack is not found, as for every verb
    with pytest.raises(exception.StackNotFound):
        svc.stack_abandon(request.make('elsewhere'), 'vals')


BAD_DOCUMENTS = [
    ([], 'an adopt file is a JSON object'),
    ({'template': VALUES, 'resources': {'word': {
        'resource_id': 'x', 'resource_data': 'value'}}},
     'resources.word.resource_data: must be a mapping'),
    ({'template': VALUES, 'resources': {'word': {'resource_id': 7}}},
     'resources.word.resource_id: must be a physical resource id'),
    ({'template': VALUES, 'environment': {'parameters': {'nope': 1}}},
     'The Parameter (nope) was not defined'),
    ({'template': {'heat_template_version': '2021-04-16', 'resources': {
        'v': {'type': 'OS::No::Such'}}}}, 'OS::No::Such'),
]


def test_bad_documents_store_nothing(engine, svc_ctx):
    svc, ctx = svc_ctx
    for doc, expected in BAD_DOCUMENTS:
        with pytest.raises(exception.InvalidTemplate) as err:
            svc.stack_adopt(ctx, 'bad', doc, source='f.json')
        assert expected in str(err.value)
        assert str(err.value).startswith('f.json')
    assert svc.stack_list(ctx) == []


@pytest.mark.distributed
@pytest.mark.xdist_group('services')
def test_abandon_and_adopt_on_a_distributed_deployment(dist, write):
    """PostgreSQL (its cascades and row locks), RabbitMQ and Redis: the
    same verbs, the traversal run by a worker."""
    dist.start_worker()
    tmpl = write('d.yaml', SERVER_ONLY + '''  word:
    type: OS::Heat::RandomString
outputs:
  word: {value: {get_attr: [word, value]}}
''')
    dist.cli('stack', 'create', 'd', '-t', tmpl, '--wait')
    outputs = dist.json('stack', 'output', 'show', 'd', '--all')
    servers = dist.json('sim', 'server', 'list')
    doc = json.loads(dist.cli('stack', 'abandon', 'd').stdout)
    assert dist.json('stack', 'list') == []
    assert dist.sql("SELECT count(*) FROM resources") == [(0,)]
    adopt_file = write('d.json', json.dumps(doc))
    dist.cli('stack', 'adopt', 'd', '--adopt-file', adopt_file, '--wait')
    assert dist.json('stack', 'show', 'd')['stack_status'] == \
        'ADOPT_COMPLETE'
    assert dist.json('sim', 'server', 'list') == servers
    assert dist.json('stack', 'output', 'show', 'd', '--all') == outputs


def test_the_operator_can_turn_the_verbs_off(engine, tmp_path, svc_ctx):
    from converge import conf
    svc, ctx = svc_ctx
    _created(engine, svc, ctx, tmp_path)
    conf.CONF.set_override('enable_stack_abandon', False)
    conf.CONF.set_override('enable_stack_adopt', False)
    try:
        with pytest.raises(exception.InvalidInput, match='enable_stack_'
                           'abandon'):
            svc.stack_abandon(ctx, 'vals')
        with pytest.raises(exception.InvalidInput, match='enable_stack_'
                           'adopt'):
            svc.stack_adopt(ctx, 'other', {'template': VALUES})
    finally:
        conf.CONF.clear_override('enable_stack_abandon')
        conf.CONF.clear_override('enable_stack_adopt')
    assert [s['stack_name'] for s in svc.stack_list(ctx)] == ['vals']


def test_a_template_edited_in_the_file_updates_what_was_adopted(
        engine, tmp_path, svc_ctx):
    """The file records the properties last applied: an adopt whose
    template asks for others changes the adopted resource to match."""
    svc, ctx = svc_ctx
    _created(engine, svc, ctx, tmp_path)
    before = svc.output_list(ctx, 'vals')
    doc = svc.stack_abandon(ctx, 'vals')
    doc['template']['resources']['echo']['properties']['value'] = 'edited'
    # a random string's every change replaces it
    doc['template']['resources']['other']['properties'] = {'length': 8}
    started = svc.stack_adopt(ctx, 'vals', doc)
    et.wait(engine, started['id'], started['traversal_id'])
    states = {r['resource_name']: r['resource_status']
              for r in svc.resource_list(ctx, 'vals')}
    assert states == {'word': 'ADOPT_COMPLETE', 'other': 'CREATE_COMPLETE',
                      'echo': 'UPDATE_COMPLETE'}
    after = svc.output_list(ctx, 'vals')
    assert after['word']['value'] == 'edited'
    assert len(after['other']['value']) == 8
    assert after['other'] != before['other']
    with engine.db.read() as s:   # the replaced version was cleaned up
        from converge.db import api
        rows = api.resources_live(s, started['id'])
    assert sorted(r.name for r in rows) == ['echo', 'other', 'word']
