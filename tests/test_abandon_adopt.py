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
import time

import pytest
import yaml

from converge import exception
from converge.engine import request
from converge.engine import service
from tests import enginetools as et
from tests.distributed import wait_for
from tests.test_heat_api import api  # noqa: F401

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


# -- nested stacks: abandoned with their owner, adopted from its entry --------

INNER = {'heat_template_version': '2021-04-16',
         'parameters': {'salt': {'type': 'string', 'default': 'x'}},
         'resources': {
             'one': {'type': 'OS::Heat::RandomString',
                     'properties': {'salt': {'get_param': 'salt'}}},
             'two': {'type': 'OS::Heat::RandomString'}},
         'outputs': {'one': {'value': {'get_attr': ['one', 'value']}},
                     'two': {'value': {'get_attr': ['two', 'value']}}}}

OUTER = {'heat_template_version': '2021-04-16',
         'resources': {
             'word': {'type': 'OS::Heat::RandomString'},
             'inner': {'type': 'inner.yaml', 'properties': {'salt': 's'}}},
         'outputs': {'word': {'value': {'get_attr': ['word', 'value']}},
                     'one': {'value': {'get_attr': ['inner', 'one']}},
                     'two': {'value': {'get_attr': ['inner', 'two']}}}}


def _outer(engine, svc, ctx, tmp_path):
    et.bundle(tmp_path, INNER, 'inner.yaml')
    started = svc.stack_create(ctx, 'outer',
                               et.bundle(tmp_path, OUTER, 'outer.yaml'), {})
    et.wait(engine, started['id'], started['traversal_id'])
    return {k: v['value'] for k, v in svc.output_list(ctx, 'outer').items()}


def _states(svc, ctx, stack):
    return {r['resource_name']: (r['resource_status'],
                                 r['physical_resource_id'])
            for r in svc.resource_list(ctx, stack)}


def test_a_nested_stack_is_abandoned_with_its_owner_and_adopted_alone(
        engine, tmp_path, svc_ctx):
    """As Heat's abandon: the owner's entry holds the nested stack's own
    template and resources, and the nested stack goes with its owner
    (its resources could not be adopted while a live stack holds them).
    Those resources alone can be adopted as a stack of their own
    (heat_integrationtests NestedStackAdoptTest)."""
    svc, ctx = svc_ctx
    before = _outer(engine, svc, ctx, tmp_path)
    inner_ids = {n: pid for n, (_, pid) in _states(
        svc, ctx, svc.stack_list(ctx, show_nested=True)[-1]['id']).items()
        if n in ('one', 'two')}
    doc = svc.stack_abandon(ctx, 'outer')
    entry = doc['resources']['inner']
    assert entry['template'] == INNER
    assert {n: r['resource_id'] for n, r in entry['resources'].items()} == \
        inner_ids
    assert svc.stack_list(ctx, show_nested=True) == []
    started = svc.stack_adopt(ctx, 'alone', {
        'template': entry['template'], 'resources': entry['resources'],
        'environment': entry['environment']})
    et.wait(engine, started['id'], started['traversal_id'])
    assert _states(svc, ctx, 'alone') == {
        n: ('ADOPT_COMPLETE', pid) for n, pid in inner_ids.items()}
    after = svc.output_list(ctx, 'alone')
    assert (after['one']['value'], after['two']['value']) == (
        before['one'], before['two'])


def test_adopting_the_owner_adopts_its_nested_stack(engine, tmp_path,
                                                    svc_ctx):
    svc, ctx = svc_ctx
    before = _outer(engine, svc, ctx, tmp_path)
    doc = json.loads(json.dumps(svc.stack_abandon(ctx, 'outer')))
    inner_ids = {n: r['resource_id'] for n, r in
                 doc['resources']['inner']['resources'].items()}
    started = svc.stack_adopt(ctx, 'outer', doc)
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    assert et.status(stack) == 'ADOPT_COMPLETE'
    after = {k: v['value'] for k, v in svc.output_list(ctx, 'outer').items()}
    assert after == before
    [child] = [s for s in svc.stack_list(ctx, show_nested=True)
               if s['stack_name'] != 'outer']
    assert _states(svc, ctx, child['id']) == {
        n: ('ADOPT_COMPLETE', pid) for n, pid in inner_ids.items()}


GROUP = {'heat_template_version': '2013-05-23',
         'resources': {'group1': {
             'type': 'OS::Heat::ResourceGroup', 'properties': {
                 'count': 2,
                 'resource_def': {'type': 'OS::Heat::RandomString'}}}},
         'outputs': {
             'test0': {'value': {'get_attr': ['group1', 'resource.0.value']}},
             'test1': {'value': {'get_attr': ['group1',
                                              'resource.1.value']}}}}


def _random(value, rid):
    return {'status': 'COMPLETE', 'name': rid, 'resource_data': {
        'value': value}, 'resource_id': rid, 'action': 'CREATE',
        'type': 'OS::Heat::RandomString', 'metadata': {}}


def test_a_group_adopts_its_members_from_heats_document(engine, svc_ctx):
    """Heat's format (heat_integrationtests ResourceGroupAdoptTest): the
    group's resource_id names no object of the cloud (nothing is taken
    over by it), its members are adopted into its nested stack."""
    svc, ctx = svc_ctx
    doc = {'template': GROUP, 'environment': {'parameters': {}},
           'resources': {'group1': {
               'status': 'COMPLETE', 'name': 'group1', 'resource_data': {},
               'metadata': {}, 'resource_id': 'test-group1-id',
               'action': 'CREATE', 'type': 'OS::Heat::ResourceGroup',
               'resources': {'0': _random('goopie', 'ID-0'),
                             '1': _random('different', 'ID-1')}}}}
    started = svc.stack_adopt(ctx, 'grp', doc)
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    assert et.status(stack) == 'ADOPT_COMPLETE'
    out = svc.output_list(ctx, 'grp')
    assert (out['test0']['value'], out['test1']['value']) == (
        'goopie', 'different')
    group_id = _states(svc, ctx, 'grp')['group1'][1]
    assert group_id != 'test-group1-id'
    assert _states(svc, ctx, group_id) == {
        '0': ('ADOPT_COMPLETE', 'ID-0'), '1': ('ADOPT_COMPLETE', 'ID-1')}


PROVIDER_MAIN = '''HeatTemplateFormatVersion: '2012-12-12'
Resources:
  the_nested:
    Type: the.yaml
    Properties:
      one: my_name
Outputs:
  value:
    Value: {'Fn::GetAtt': [the_nested, the_str]}
'''

PROVIDER = '''HeatTemplateFormatVersion: '2012-12-12'
Parameters:
  one:
    Default: foo
    Type: String
Resources:
  RealRandom:
    Type: OS::Heat::RandomString
    Properties:
      salt: {Ref: one}
Outputs:
  the_str:
    Value: {'Fn::GetAtt': [RealRandom, value]}
'''


def test_adopt_reads_a_provider_template_from_the_files_sent(api):
    """Heat's API takes the files the client sends with adopt data (the
    provider template its template names); the nested stack's resources
    come from the entry of the resource owning it
    (heat_integrationtests TemplateResourceAdoptTest)."""
    client = api.client('demo', api.token('demo')['token'])
    client.stacks.create(
        stack_name='prov', files={'the.yaml': PROVIDER}, parameters={},
        environment={}, disable_rollback=True,
        adopt_stack_data=json.dumps({
            'template': yaml.safe_load(PROVIDER_MAIN),
            'environment': {'parameters': {}},
            'resources': {'the_nested': {
                'type': 'the.yaml', 'resources': {'RealRandom': {
                    'type': 'OS::Heat::RandomString',
                    'resource_data': {'value': 'goopie'},
                    'resource_id': 'froggy'}}}}}))
    deadline = time.monotonic() + 120
    while client.stacks.get('prov').stack_status != 'ADOPT_COMPLETE':
        assert time.monotonic() < deadline
        time.sleep(0.05)   # polling the API, not synchronising
    stack = client.stacks.get('prov')
    assert [o['output_value'] for o in stack.outputs] == ['goopie']
    nested = client.resources.get('prov', 'the_nested').physical_resource_id
    assert [r.physical_resource_id for r in
            client.resources.list(nested)] == ['froggy']
