"""Nested stacks as a user meets them through the CLI: provider templates
(a file as a resource type, directly or through the environment's
resource_registry), OS::Heat::Stack, files read relative to the file that
names them, the child's outputs as attributes, resource_facade, updates
that reach a child through a file, delete, the depth limit, and the
listings (--show-nested, --nested-depth)."""

import json
import os
import signal
import time

import pytest

pytestmark = pytest.mark.slow

HOT = 'heat_template_version: 2018-08-31\n'

CHILD = HOT + '''
parameters:
  greeting: {type: string}
  times: {type: number, default: 2}
resources:
  text:
    type: OS::Heat::Value
    properties:
      value:
        str_replace:
          template: $g x $n ($f)
          params:
            $g: {get_param: greeting}
            $n: {get_param: times}
            $f: {get_file: ../data/word.txt}
  facade:
    type: OS::Heat::Value
    properties:
      value: {resource_facade: metadata}
outputs:
  text: {value: {get_attr: [text, value]}}
  meta: {value: {get_attr: [facade, value]}}
  me: {value: {get_param: OS::stack_id}}
'''

INNER = HOT + '''
parameters:
  x: {type: string}
outputs:
  y: {value: {list_join: ['-', [{get_param: x}, inner]]}}
'''

TOP = HOT + '''
resources:
  web:
    type: lib/child.yaml
    metadata: {role: web}
    properties:
      greeting: hello
  copy:
    type: OS::Heat::Value
    properties:
      value: {get_attr: [web, text]}
  db:
    type: My::Child
    properties:
      greeting: {get_attr: [copy, value]}
      times: 1
  inline:
    type: OS::Heat::Stack
    properties:
      template: {get_file: inner.yaml}
      parameters: {x: {get_attr: [db, text]}}
outputs:
  web: {value: {get_attr: [web, text]}}
  role: {value: {get_attr: [web, meta, role]}}
  child_id: {value: {get_attr: [web, OS::stack_id]}}
  inner: {value: {get_attr: [inline, outputs, y]}}
'''

# the environment sits elsewhere: its registry entry is relative to it
ENV = '''resource_registry:
  My::Child: ../tmpl/lib/child.yaml
'''


@pytest.fixture
def files(tmp_path):
    (tmp_path / 'tmpl' / 'lib').mkdir(parents=True)
    (tmp_path / 'tmpl' / 'data').mkdir()
    (tmp_path / 'envs').mkdir()
    (tmp_path / 'tmpl' / 'lib' / 'child.yaml').write_text(CHILD)
    (tmp_path / 'tmpl' / 'data' / 'word.txt').write_text('apple')
    (tmp_path / 'tmpl' / 'inner.yaml').write_text(INNER)
    (tmp_path / 'tmpl' / 'top.yaml').write_text(TOP)
    (tmp_path / 'envs' / 'env.yaml').write_text(ENV)
    return tmp_path


def outputs(cli, name):
    return cli.json('stack', 'output', 'show', name, '--all')


@pytest.mark.long  # 20-30 s beside a busy machine
def test_providers_and_nested_stacks_create_update_delete(cli, files):
    top = str(files / 'tmpl' / 'top.yaml')
    env = str(files / 'envs' / 'env.yaml')
    cli.run('stack', 'create', 'ov', '-t', top, '-e', env, '--wait')
    out = outputs(cli, 'ov')
    # properties became the child's parameters, its outputs attributes
    # (with a path), get_file relative to the provider file, ../ included
    assert out['web'] == 'hello x 2 (apple)'
    assert out['role'] == 'web'   # resource_facade: the owner's metadata
    assert out['inner'] == 'hello x 2 (apple) x 1 (apple)-inner'
    shown = cli.json('stack', 'show', 'ov')
    nested = cli.json('stack', 'list', '--show-nested')
    children = [s for s in nested if s['Parent'] == shown['id']]
    assert len(children) == 3
    assert out['child_id'] in {s['ID'] for s in children}
    assert all(s['Stack Status'] == 'CREATE_COMPLETE' for s in children)
    # a plain list shows the stacks the user made, not their children
    assert [s['Stack Name'] for s in cli.json('stack', 'list')] == ['ov']
    res = cli.json('stack', 'resource', 'list', 'ov', '--nested-depth', '1')
    web = next(s['Stack Name'] for s in children
               if s['Stack Name'].startswith('ov-web-'))
    assert {(r['resource_name'], r['stack_name']) for r in res} >= {
        ('web', 'ov'), ('text', web), ('facade', web)}
    assert {r['parent_resource'] for r in res
            if r['stack_name'] == web} == {'web'}
    # each resource's type as the template names it (Heat's), not the
    # plug-in the registry or a file name maps it to: in the list, in
    # show, in its events and in a filter
    assert {r['resource_name']: r['resource_type'] for r in res
            if r['stack_name'] == 'ov'} == {
        'web': 'lib/child.yaml', 'copy': 'OS::Heat::Value',
        'db': 'My::Child', 'inline': 'OS::Heat::Stack'}
    assert cli.json('stack', 'resource', 'show', 'ov', 'db')[
        'resource_type'] == 'My::Child'
    events = cli.json('stack', 'event', 'list', 'ov', '--resource', 'db')
    assert {cli.json('stack', 'event', 'show', 'ov', 'db', e['id'])[
        'resource_type'] for e in events} == {'My::Child'}
    assert [r['resource_name'] for r in cli.json(
        'stack', 'resource', 'list', 'ov', '--filter',
        'type=My::Child')] == ['db']

    # a change inside a file reaches the children built from it and what
    # depends on them, though no property of the parent changed
    (files / 'tmpl' / 'data' / 'word.txt').write_text('pear')
    cli.run('stack', 'update', 'ov', '-t', top, '-e', env, '--wait')
    out = outputs(cli, 'ov')
    assert out['web'] == 'hello x 2 (pear)'
    assert out['inner'] == 'hello x 2 (pear) x 1 (pear)-inner'
    # an update that changes nothing leaves every child as it was
    before = {s['ID']: s['Updated Time']
              for s in cli.json('stack', 'list', '--show-nested')}
    cli.run('stack', 'update', 'ov', '-t', top, '-e', env, '--wait')
    after = {s['ID']: s['Updated Time']
             for s in cli.json('stack', 'list', '--show-nested')}
    assert {k: v for k, v in after.items() if k != shown['id']} == \
        {k: v for k, v in before.items() if k != shown['id']}

    # suspend and resume reach every child with its owner
    for verb, state in (('suspend', 'SUSPEND_COMPLETE'),
                        ('resume', 'RESUME_COMPLETE')):
        cli.run('stack', verb, 'ov', '--wait')
        assert {s['Stack Status'] for s in
                cli.json('stack', 'list', '--show-nested')} == {state}

    cli.run('stack', 'delete', 'ov', '--wait')
    assert cli.json('stack', 'list', '--show-nested') == []


def test_a_child_that_fails_fails_its_parent_with_the_reason(cli, tmp_path):
    (tmp_path / 'bad.yaml').write_text(HOT + '''
parameters:
  v: {type: string}
resources:
  t:
    type: OS::Heat::TestResource
    properties: {fail: true, value: {get_param: v}}
''')
    (tmp_path / 'top.yaml').write_text(HOT + '''
resources:
  n:
    type: bad.yaml
    properties: {v: x}
''')
    proc = cli.run('stack', 'create', 'f', '-t', str(tmp_path / 'top.yaml'),
                   '--wait', check=False)
    assert proc.returncode != 0
    show = cli.json('stack', 'show', 'f')
    assert show['stack_status'] == 'CREATE_FAILED'
    # Heat's words (heat_integrationtests' TemplateResourceErrorMessage
    # Test): the failed resource's class, its path down, its message
    assert show['stack_status_reason'] == (
        'Resource CREATE failed: ValueError: resources.n.resources.t: '
        'Test Resource failed t')
    inner = cli.json('stack', 'resource', 'show', 'f', 'n')
    assert inner['resource_status_reason'] == (
        'ValueError: resources.n.resources.t: Test Resource failed t')
    # a group's member: its index as Heat writes one
    (tmp_path / 'group.yaml').write_text(HOT + '''
resources:
  g:
    type: OS::Heat::ResourceGroup
    properties:
      count: 1
      resource_def:
        type: OS::Heat::TestResource
        properties: {fail: true}
''')
    cli.run('stack', 'create', 'fg', '-t', str(tmp_path / 'group.yaml'),
            '--wait', check=False)
    assert cli.json('stack', 'show', 'fg')['stack_status_reason'] == (
        'Resource CREATE failed: ValueError: resources.g.resources[0]: '
        'Test Resource failed 0')


def test_bad_nested_templates_are_refused_before_anything_is_stored(
        cli, tmp_path):
    (tmp_path / 'loop.yaml').write_text(HOT + '''
resources:
  again: {type: loop.yaml}
''')
    (tmp_path / 'child.yaml').write_text(HOT + '''
resources:
  r:
    type: OS::Heat::Value
    properties:
      value: 1
      colour: red
''')
    (tmp_path / 'top.yaml').write_text(HOT + '''
resources:
  c: {type: child.yaml}
''')
    proc = cli.run('stack', 'create', 'l', '-t', str(tmp_path / 'loop.yaml'),
                   check=False)
    assert proc.returncode != 0
    assert 'loop.yaml:4' in proc.stderr
    assert 'Recursion depth exceeds 5' in proc.stderr
    proc = cli.run('stack', 'create', 'c', '-t', str(tmp_path / 'top.yaml'),
                   check=False)
    assert proc.returncode != 0
    # the file and line of the bad property, inside the provider
    assert '%s:8' % (tmp_path / 'child.yaml') in proc.stderr
    assert 'colour' in proc.stderr
    assert cli.json('stack', 'list', '--show-nested') == []


GROUP = HOT + '''
parameters:
  count: {type: number, default: 3}
  removed: {type: json, default: []}
resources:
  servers:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: count}
      removal_policies: [{resource_list: {get_param: removed}}]
      resource_def:
        type: OS::Heat::Value
        properties:
          value: node-%index%
  joined:
    type: OS::Heat::Value
    properties:
      value: {list_join: [',', {get_attr: [servers, value]}]}
outputs:
  joined: {value: {get_attr: [joined, value]}}
  first: {value: {get_attr: [servers, resource.0, value]}}
  by_name: {value: {get_attr: [servers, attributes, value]}}
  refs: {value: {get_attr: [servers, refs]}}
  removed: {value: {get_attr: [servers, removed_rsrc_list]}}
'''


ZERO_GROUP = HOT + '''
parameters:
  n: {type: number, default: 0}
resources:
  random_group:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: n}
      resource_def:
        type: My::RandomString
        properties: {length: 30, salt: initial}
'''
BAD_MEMBER = HOT + '''
parameters:
  length: {type: string, default: 50}
  salt: {type: string, default: initial}
resources:
  random:
    type: OS::Heat::RandomString
    properties:
      length: BAD
'''


def test_a_group_of_no_members_does_not_check_its_member(engine,
                                                         tmp_path):
    """Heat's ResourceGroupTest.test_resource_group_zero_novalidate: a
    group of count 0 (a feature turned off) is made, empty, though its
    member's template would be refused; given members, it is refused,
    naming the member template's file, line and property, and nothing
    changes."""
    from converge import exception, template
    from converge.engine import stacks
    from tests import enginetools as et
    (tmp_path / 'provider.yaml').write_text(BAD_MEMBER)
    (tmp_path / 'top.yaml').write_text(ZERO_GROUP)
    (tmp_path / 'env.yaml').write_text(
        'resource_registry:\n  My::RandomString: provider.yaml\n')
    bundle = template.load_bundle(str(tmp_path / 'top.yaml'),
                                  [str(tmp_path / 'env.yaml')])
    stack = et.run(engine, stacks.create, 'g', bundle, {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    group = et.resources(engine, stack)['random_group']
    child = et.stack_of(engine, group.physical_id)
    assert et.resources(engine, child) == {}
    with pytest.raises(exception.InvalidTemplate) as err:
        stacks.update(engine, stack.id, bundle, {'n': '2'})
    # the file and line, then the way there and why, as Heat says them
    assert str(err.value) == (
        "%s:10: resources.random_group<nested_stack>.resources.0"
        "<provider.yaml>.resources.random: : Value 'BAD' is not an integer"
        % (tmp_path / 'provider.yaml'))
    assert et.status(et.stack_of(engine, stack.id)) == 'CREATE_COMPLETE'


GROUP_OF_GROUPS = HOT + '''
resources:
  parent_group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def: {type: child.yaml}
'''
CHILD_GROUP = HOT + '''
resources:
  child_group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def: {type: OS::Heat::Value, properties: {value: test}}
'''


def test_nested_stacks_have_their_parents_timeout(engine, tmp_path):
    """Heat's test_create_nested_groups_with_timeout: every nested stack
    (a group's, a provider's, the groups' in those) has the timeout the
    top stack was given."""
    from converge import template
    from converge.engine import stacks
    from tests import enginetools as et
    (tmp_path / 'child.yaml').write_text(CHILD_GROUP)
    (tmp_path / 'top.yaml').write_text(GROUP_OF_GROUPS)
    bundle = template.load_bundle(str(tmp_path / 'top.yaml'))

    def timeouts(stack):
        found = []
        for row in et.resources(engine, stack).values():
            if row.physical_id and row.type != 'OS::Heat::Value':
                child = et.stack_of(engine, row.physical_id)
                found += [child.timeout_mins] + timeouts(child)
        return found
    stack = et.run(engine, stacks.create, 't', bundle, {}, timeout=10)
    assert et.status(stack) == 'CREATE_COMPLETE'
    # the top group, its two members (child.yaml), their two groups
    assert timeouts(stack) == [10] * 5


OVERRIDDEN = HOT + '''
resources:
  secret1:
    type: OS::Heat::RandomString
outputs:
  out: {value: {get_attr: [secret1, value]}}
'''
OVERRIDING = HOT + '''
resources:
  secret2:
    type: OS::Heat::RandomString
outputs:
  value: {value: {get_attr: [secret2, value]}}
'''


def test_a_provider_overriding_a_type_uses_the_type_itself(engine,
                                                           tmp_path):
    """Heat's TemplateResourceTest.test_no_infinite_recursion: the
    registry maps OS::Heat::RandomString to a template that uses
    OS::Heat::RandomString; inside it the mapping that made it does not
    apply (it would include itself), so the real type is made there."""
    from converge import template
    from converge.engine import stacks
    from tests import enginetools as et
    (tmp_path / 'nested.yaml').write_text(OVERRIDING)
    (tmp_path / 'top.yaml').write_text(OVERRIDDEN)
    (tmp_path / 'env.yaml').write_text(
        'resource_registry:\n  "OS::Heat::RandomString": nested.yaml\n')
    stack = et.run(engine, stacks.create, 'r', template.load_bundle(
        str(tmp_path / 'top.yaml'), [str(tmp_path / 'env.yaml')]), {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    secret1 = et.resources(engine, stack)['secret1']
    child = et.stack_of(engine, secret1.physical_id)
    inner = et.resources(engine, child)['secret2']
    assert (inner.type, len(inner.attributes['value'])) == (
        'OS::Heat::RandomString', 32)
    assert secret1.attributes['value'] == inner.attributes['value']


INSTANCES = '''{
  "AWSTemplateFormatVersion" : "2010-09-09",
  "Resources": {
    "JobServerGroup": {
      "Type": "OS::Heat::InstanceGroup",
      "Properties": {
        "LaunchConfigurationName" : {"Ref": "JobServerConfig"},
        "Size" : "2", "AvailabilityZones" : ["nova"]}},
    "JobServerConfig" : {
      "Type" : "AWS::AutoScaling::LaunchConfiguration",
      "Properties": {"ImageId": "cirros", "InstanceType": "m1.tiny",
                     "SecurityGroups": ["sg-1"], "UserData": "data"}}}
}'''
INSTANCE = HOT + '''
parameters:
  ImageId: {type: string}
  InstanceType: {type: string}
  SecurityGroups: {type: comma_delimited_list}
  UserData: {type: string}
  Tags: {type: comma_delimited_list}
resources:
  random1:
    type: OS::Heat::TestResource
outputs:
  PublicIp: {value: {get_attr: [random1, output]}}
'''


def test_an_instance_groups_members_are_given_tags(engine, tmp_path):
    """Heat's InstanceGroupBasicTest: AWS::EC2::Instance mapped to a
    template whose Tags parameter has no default; the group gives its
    members Tags (none here) as Heat's does, so they are made."""
    from converge import template
    from converge.engine import stacks
    from tests import enginetools as et
    (tmp_path / 'provider.yaml').write_text(INSTANCE)
    (tmp_path / 'top.json').write_text(INSTANCES)
    (tmp_path / 'env.yaml').write_text(
        'resource_registry:\n  AWS::EC2::Instance: provider.yaml\n')
    stack = et.run(engine, stacks.create, 'i', template.load_bundle(
        str(tmp_path / 'top.json'), [str(tmp_path / 'env.yaml')]), {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    group = et.resources(engine, stack)['JobServerGroup']
    members = et.resources(engine, et.stack_of(engine, group.physical_id))
    assert len(members) == 2


@pytest.mark.parametrize('group,sized', [
    ('OS::Heat::InstanceGroup', '"Size": "1"'),
    ('AWS::AutoScaling::AutoScalingGroup',
     '"MinSize": "1", "MaxSize": "3"')])
def test_a_changed_availability_zone_replaces_an_aws_group(
        engine, tmp_path, group, sized):
    """Heat's test_update_group_replace: AvailabilityZones cannot be
    updated, so a change of it replaces the group (a new nested stack);
    the change of the launch configuration alone would not."""
    from converge import template
    from converge.engine import stacks
    from tests import enginetools as et
    (tmp_path / 'provider.yaml').write_text(INSTANCE)
    doc = json.loads(INSTANCES)
    grp = doc['Resources']['JobServerGroup']
    grp['Type'] = group
    grp['Properties'] = dict(json.loads('{%s}' % sized), **{
        'LaunchConfigurationName': {'Ref': 'JobServerConfig'},
        'AvailabilityZones': [{'Ref': 'AZ'}]})
    doc['Parameters'] = {'AZ': {'Type': 'String', 'Default': 'nova'},
                         'data': {'Type': 'String', 'Default': 'one'}}
    doc['Resources']['JobServerConfig']['Properties']['UserData'] = {
        'Ref': 'data'}
    (tmp_path / 'top.json').write_text(json.dumps(doc))
    (tmp_path / 'env.yaml').write_text(
        'resource_registry:\n  AWS::EC2::Instance: provider.yaml\n')
    b = template.load_bundle(str(tmp_path / 'top.json'),
                             [str(tmp_path / 'env.yaml')])
    stack = et.run(engine, stacks.create, 'z', b, {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    first = et.resources(engine, stack)['JobServerGroup'].physical_id
    stack = et.run(engine, stacks.update, stack.id, b, {'data': 'two'})
    assert et.status(stack) == 'UPDATE_COMPLETE', stack.status_reason
    assert et.resources(engine, stack)['JobServerGroup'].physical_id == \
        first
    stack = et.run(engine, stacks.update, stack.id, b,
                   {'data': 'three', 'AZ': 'wibble'})
    assert et.status(stack) == 'UPDATE_COMPLETE', stack.status_reason
    assert et.resources(engine, stack)['JobServerGroup'].physical_id != \
        first


def test_a_resource_group_names_its_members_and_removes_by_policy(
        cli, tmp_path):
    (tmp_path / 'g.yaml').write_text(GROUP)
    t = str(tmp_path / 'g.yaml')
    cli.run('stack', 'create', 'g', '-t', t, '--wait')
    out = outputs(cli, 'g')
    assert out['joined'] == 'node-0,node-1,node-2'
    assert out['first'] == 'node-0'
    assert out['by_name'] == {'0': 'node-0', '1': 'node-1', '2': 'node-2'}
    assert len(out['refs']) == 3
    members = cli.json('stack', 'resource', 'list', 'g', '--nested-depth',
                       '1')
    assert sorted(r['resource_name'] for r in members
                  if r['parent_resource'] == 'servers') == ['0', '1', '2']
    # scale up, then take member 1 out: its name is never used again
    cli.run('stack', 'update', 'g', '--existing', '--parameter', 'count=4',
            '--wait')
    assert outputs(cli, 'g')['joined'] == 'node-0,node-1,node-2,node-3'
    cli.run('stack', 'update', 'g', '--existing', '--parameter',
            'removed=["1"]', '--wait')
    out = outputs(cli, 'g')
    assert out['joined'] == 'node-0,node-2,node-3,node-4'
    assert out['removed'] == ['1']
    # scale down: the highest names go
    cli.run('stack', 'update', 'g', '--existing', '--parameter', 'count=2',
            '--wait')
    assert outputs(cli, 'g')['joined'] == 'node-0,node-2'
    cli.run('stack', 'delete', 'g', '--wait')
    assert cli.json('stack', 'list', '--show-nested') == []


ROLLING = HOT + '''
parameters:
  stamp: {type: string, default: one}
resources:
  group:
    type: OS::Heat::ResourceGroup
    update_policy:
      rolling_update: {max_batch_size: 3, min_in_service: 4, pause_time: 0}
    properties:
      count: 6
      resource_def:
        type: OS::Heat::TestResource
        properties:
          value: {get_param: stamp}
          action_wait_secs: {update: 0.3}
outputs:
  values: {value: {get_attr: [group, output]}}
'''


def _most_at_once(events, status):
    """The most members in `status`_IN_PROGRESS at once, and the order
    they started in (the events in time order)."""
    busy, most, order = set(), 0, []
    for e in events:
        if e['resource_status'] == status + '_IN_PROGRESS':
            busy.add(e['resource_name'])
            order.append(e['resource_name'])
            most = max(most, len(busy))
        elif e['resource_status'] == status + '_COMPLETE':
            busy.discard(e['resource_name'])
    return most, order


def test_batch_create_creates_members_a_batch_at_a_time(cli, tmp_path):
    (tmp_path / 'b.yaml').write_text(HOT + '''
resources:
  group:
    type: OS::Heat::ResourceGroup
    update_policy:
      batch_create: {max_batch_size: 2}
    properties:
      count: 5
      resource_def:
        type: OS::Heat::TestResource
        properties:
          action_wait_secs: {create: 0.3}
outputs:
  refs: {value: {get_attr: [group, refs]}}
''')
    cli.run('stack', 'create', 'b', '-t', str(tmp_path / 'b.yaml'), '--wait')
    assert len(outputs(cli, 'b')['refs']) == 5
    events = [e for e in cli.json('stack', 'event', 'list', 'b',
                                  '--nested-depth', '1')
              if e.get('stack_name', 'b') != 'b']
    most, order = _most_at_once(events, 'CREATE')
    assert most == 2
    assert [set(order[i:i + 2]) for i in (0, 2, 4)] == [
        {'0', '1'}, {'2', '3'}, {'4'}]


def test_a_rolling_update_keeps_the_minimum_in_service(cli, tmp_path):
    (tmp_path / 'r.yaml').write_text(ROLLING)
    cli.run('stack', 'create', 'r', '-t', str(tmp_path / 'r.yaml'), '--wait')
    cli.run('stack', 'update', 'r', '--existing', '--parameter',
            'stamp=two', '--wait')
    assert outputs(cli, 'r')['values'] == ['two'] * 6
    events = cli.json('stack', 'event', 'list', 'r', '--nested-depth', '1')
    updates = [e for e in events if e.get('stack_name', 'r') != 'r' and
               e['resource_status'].startswith('UPDATE_')]
    # 6 members, at least 4 in service: two at a time, highest first,
    # each pair done before the next starts
    most, order = _most_at_once(updates, 'UPDATE')
    assert most == 2
    assert [set(order[i:i + 2]) for i in (0, 2, 4)] == [
        {'5', '4'}, {'3', '2'}, {'1', '0'}]


CORPUS_GROUPS = [
    # (corpus file, parameters, output: what it must hold)
    ('heat-templates/hot/resource_group/resource_group_index_lookup.yaml',
     [], 'all_values', lambda v: [len(x) for x in v] == [4, 5, 6]),
    ('heat-templates/hot/multi_region_hello_world.yaml',
     ['--parameter', 'key_name=demo', '--parameter', 'image=cirros',
      '--parameter', 'admin_pass=Secret1'], None, None),
]


@pytest.mark.parametrize('rel,params,key,check', CORPUS_GROUPS)
def test_corpus_groups_and_nested_stacks_converge(cli, rel, params, key,
                                                  check):
    from tests.conftest import CORPUS
    path = os.path.join(CORPUS, rel)
    if not os.path.exists(path):
        pytest.skip('corpus not found at %s' % CORPUS)
    cli.run('stack', 'create', 'c', '-t', path, *params, '--wait')
    assert cli.json('stack', 'show', 'c')['stack_status'] == \
        'CREATE_COMPLETE'
    if key:
        assert check(outputs(cli, 'c')[key])
    cli.run('stack', 'delete', 'c', '--wait')
    assert cli.json('stack', 'list', '--show-nested') == []


def test_a_resource_chain_creates_its_types_in_order(cli, tmp_path):
    (tmp_path / 'svc.yaml').write_text(HOT + '''
parameters:
  EndpointMap: {type: json, default: {}}
resources:
  v:
    type: OS::Heat::Value
    properties: {value: {get_param: [EndpointMap, host]}}
outputs:
  role_data: {value: {get_attr: [v, value]}}
''')
    (tmp_path / 'env.yaml').write_text('''resource_registry:
  My::Services::A: svc.yaml
  My::Services::B: OS::Heat::TestResource
''')
    (tmp_path / 'top.yaml').write_text(HOT + '''
resources:
  chain:
    type: OS::Heat::ResourceChain
    properties:
      resources: [My::Services::A, My::Services::A]
      resource_properties:
        EndpointMap: {host: db1}
outputs:
  data: {value: {get_attr: [chain, role_data]}}
''')
    cli.run('stack', 'create', 'ch', '-t', str(tmp_path / 'top.yaml'),
            '-e', str(tmp_path / 'env.yaml'), '--wait')
    assert outputs(cli, 'ch')['data'] == ['db1', 'db1']
    events = [e for e in cli.json('stack', 'event', 'list', 'ch',
                                  '--nested-depth', '1')
              if e['resource_name'] in ('0', '1')]
    # not concurrent: 1 starts only once 0 is complete
    names = [(e['resource_name'], e['resource_status']) for e in events]
    assert names.index(('0', 'CREATE_COMPLETE')) < \
        names.index(('1', 'CREATE_IN_PROGRESS'))


def test_a_rollout_resumes_at_its_batch_after_kill_9(cli, tmp_path):
    (tmp_path / 'r.yaml').write_text(ROLLING.replace(
        'pause_time: 0', 'pause_time: 4'))
    cli.run('stack', 'create', 'r', '-t', str(tmp_path / 'r.yaml'), '--wait')
    proc = cli.popen('stack', 'update', 'r', '--existing', '--parameter',
                     'stamp=two', '--wait')

    def pausing():
        # either pause will do (a loaded machine's CLI calls may take
        # longer than one): killed in it, the rollout goes on from there
        reason = cli.json('stack', 'resource', 'show', 'r', 'group')[
            'resource_status_reason']
        return reason.startswith(('pausing after batch 1 of 3',
                                  'pausing after batch 2 of 3'))
    deadline = time.time() + 60
    while not pausing():
        assert time.time() < deadline, 'the rollout never paused'
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert cli.json('stack', 'show', 'r')['stack_status'] == \
        'UPDATE_IN_PROGRESS'
    cli.run('stack', 'converge', 'r', '--wait')
    assert outputs(cli, 'r')['values'] == ['two'] * 6
    events = [e for e in cli.json('stack', 'event', 'list', 'r',
                                  '--nested-depth', '1')
              if e.get('stack_name', 'r') != 'r']
    most, order = _most_at_once(events, 'UPDATE')
    # the plan went on where it stopped: each member updated once, two at
    # a time, in the same order
    assert most == 2 and sorted(order) == ['0', '1', '2', '3', '4', '5']
    assert [set(order[i:i + 2]) for i in (0, 2, 4)] == [
        {'5', '4'}, {'3', '2'}, {'1', '0'}]


def _group_reason(cli, stack):
    return cli.json('stack', 'resource', 'show', stack, 'group')[
        'resource_status_reason']


def _until(what, check, timeout=60):
    deadline = time.time() + timeout
    while not check():
        assert time.time() < deadline, what


def test_a_canary_batch_waits_for_the_operator(cli, tmp_path):
    (tmp_path / 'c.yaml').write_text(ROLLING.replace(
        'count: 6', 'count: 5').replace(
        'min_in_service: 4, pause_time: 0',
        'min_in_service: 0, canary_size: 1'))
    cli.run('stack', 'create', 'c', '-t', str(tmp_path / 'c.yaml'), '--wait')
    proc = cli.popen('stack', 'update', 'c', '--existing', '--parameter',
                     'stamp=two', '--wait')
    _until('the canary never finished', lambda: _group_reason(
        cli, 'c').startswith('canary batch done (4); waiting for '
                             '`converge stack update --resume c`'))
    updated = {e['resource_name'] for e in cli.json(
        'stack', 'event', 'list', 'c', '--nested-depth', '1')
        if e['resource_status'] == 'UPDATE_COMPLETE'}
    assert updated == {'4'}
    # stack show says where the rollout is
    [rollout] = cli.json('stack', 'show', 'c')['rollouts']
    assert (rollout['stack'], rollout['resource'], rollout['batch'],
            rollout['batches']) == ('c', 'group', 2, 3)
    assert rollout['progress'].startswith('canary batch done (4)')
    cli.run('stack', 'update', '--resume', 'c', '--wait')
    assert proc.wait(timeout=120) == 0
    assert outputs(cli, 'c')['values'] == ['two'] * 5
    events = cli.json('stack', 'event', 'list', 'c', '--nested-depth', '1')
    most, order = _most_at_once(
        [e for e in events if e.get('stack_name', 'c') != 'c'], 'UPDATE')
    assert most == 3 and order[0] == '4'
    assert [set(order[1:4]), set(order[4:])] == [{'3', '2', '1'}, {'0'}]
    assert 'resumed by the operator after batch 1 of 3' in [
        e['resource_status_reason'] for e in events
        if e['resource_name'] == 'group']
    again = cli.run('stack', 'update', '--resume', 'c', check=False)
    assert again.returncode != 0
    assert 'Stack c has no rolling update waiting to be resumed' in \
        again.stderr


def test_converge_resumes_a_rollout_killed_mid_batch(cli, tmp_path):
    """kill -9 of the engine while a batch's members update: `stack
    converge` picks the child's stranded work up at once (the sweeper,
    set to wait an hour here, is not what saves it), at the same batch
    of the same plan, and no member is updated twice."""
    conf = tmp_path / 'converge.conf'
    conf.write_text('[worker]\nstall_timeout = 3600\n')
    (tmp_path / 'r.yaml').write_text(ROLLING.replace(
        '{update: 0.3}', '{update: 3}'))
    cli.run('--config-file', str(conf), 'stack', 'create', 'r', '-t',
            str(tmp_path / 'r.yaml'), '--wait')
    proc = cli.popen('--config-file', str(conf), 'stack', 'update', 'r',
                     '--existing', '--parameter', 'stamp=two', '--wait')
    _until('batch 2 never started', lambda: any(
        e['resource_status_reason'].startswith(
            'rolling update: batch 2 of 3 (3, 2) started')
        for e in cli.json('stack', 'event', 'list', 'r')))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert cli.json('stack', 'show', 'r')['stack_status'] == \
        'UPDATE_IN_PROGRESS'
    cli.run('--config-file', str(conf), 'stack', 'converge', 'r', '--wait',
            timeout=120)
    assert outputs(cli, 'r')['values'] == ['two'] * 6
    events = cli.json('stack', 'event', 'list', 'r', '--nested-depth', '1')
    done = [e['resource_name'] for e in events
            if e.get('stack_name', 'r') != 'r' and
            e['resource_status'] == 'UPDATE_COMPLETE']
    assert sorted(done) == ['0', '1', '2', '3', '4', '5']
    started = [e['resource_status_reason'] for e in events
               if e['resource_name'] == 'group' and
               ' started; ' in e['resource_status_reason']]
    # the plan kept: batch 3 of the same 3 after the kill, none recomputed
    assert [s.split(' (')[0] for s in started] == [
        'rolling update: batch %d of 3' % n for n in (1, 2, 3)]


def test_tripleo_role_templates_converge_with_their_registry(cli, tmp_path):
    """TripleO's Controller role (puppet/controller-role.yaml: the node,
    its ports, its server) and its services (common/services/
    controller-role.yaml: a ResourceChain of service templates whose
    role_data the role merges) converge with TripleO's own resource
    registry; entries whose templates the corpus lacks map to
    OS::Heat::None, and its omitted programs are placeholders, as the
    corpus's NOTICE asks of a harness."""
    import shutil
    import sys
    from tests.conftest import CORPUS, REPO
    src = os.path.join(CORPUS, 'tripleo-heat-templates')
    if not os.path.isdir(src):
        pytest.skip('corpus not found at %s' % CORPUS)
    sys.path.insert(0, os.path.join(REPO, 'tools'))
    import corpus
    hot = tmp_path / 'hot'
    shutil.copytree(src, hot / 'tripleo-heat-templates')
    for url, text in corpus.omitted(str(hot)).items():
        path = url[len('file://'):]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
    env = corpus.tripleo_environment(str(hot))
    base = hot / 'tripleo-heat-templates'
    cli.run('stack', 'create', 'svc', '-t',
            str(base / 'common/services/controller-role.yaml'), '-e', env,
            '--parameter', 'Services=OS::TripleO::Services::Apache,'
            'OS::TripleO::Services::MySQLClient,OS::TripleO::Services::Aide',
            '--wait')
    role = cli.json('stack', 'output', 'show', 'svc', 'role_data')[
        'output_value']
    # Apache and the MySQL client are real service templates; Aide's is
    # not in the corpus (None): its role data is left out
    assert role['service_names'] == ['apache', 'mysql_client']
    assert 'apache::default_vhost' in role['config_settings']
    cli.run('stack', 'create', 'node', '-t',
            str(base / 'puppet/controller-role.yaml'), '-e', env,
            '--parameter', 'UserData=none', '--wait')
    rows = {r['resource_name']: r for r in cli.json(
        'stack', 'resource', 'list', 'node')}
    # shown as the template names it (the registry maps it, through
    # OS::TripleO::Server, to OS::Nova::Server), as Heat shows it
    assert rows['Controller']['resource_type'] == \
        'OS::TripleO::ControllerServer'
    assert {r['resource_status'] for r in rows.values()} == {
        'CREATE_COMPLETE'}
    assert len(cli.json('sim', 'server', 'list')) == 1


CHECKED_MEMBER = '''heat_template_version: 2016-10-14
parameters:
  index: {type: string}
  stamp: {type: string}
resources:
  app:
    type: OS::Heat::SoftwareComponent
    properties:
      configs:
        - actions: [CREATE, UPDATE]
          tool: script
          config: |
            #!/bin/sh
            echo "$deploy_action $stamp" >> app.log
        - actions: [CHECK]
          tool: script
          config: |
            #!/bin/sh
            echo "CHECK $stamp" >> app.log
            # member 1 is unhealthy on the new version
            [ "$index" != 1 ] || [ "$stamp" = one ]
      inputs:
        - name: stamp
        - name: index
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.tiny
      user_data_format: SOFTWARE_CONFIG
  deployment:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: app}
      server: {get_resource: server}
      input_values:
        stamp: {get_param: stamp}
        index: {get_param: index}
'''


def test_a_batch_gate_runs_each_members_check_config(cli, tmp_path):
    """health_check: a batch passes its gate only once its members'
    CHECK configs pass on their servers; a failing check halts the
    rollout (max_failures 0) before the next batch."""
    (tmp_path / 'member.yaml').write_text(CHECKED_MEMBER)
    (tmp_path / 'top.yaml').write_text(HOT + '''
parameters:
  stamp: {type: string, default: one}
resources:
  group:
    type: OS::Heat::ResourceGroup
    update_policy:
      rolling_update: {max_batch_size: 1, health_check: true}
    properties:
      count: 3
      resource_def:
        type: member.yaml
        properties:
          index: "%index%"
          stamp: {get_param: stamp}
''')
    cli.run('stack', 'create', 'h', '-t', str(tmp_path / 'top.yaml'),
            '--wait', timeout=240)
    done = cli.run('stack', 'update', 'h', '--existing', '--parameter',
                   'stamp=two', '--wait', check=False, timeout=240)
    assert done.returncode == 1
    assert cli.json('stack', 'resource', 'show', 'h', 'group')[
        'resource_status_reason'].endswith(
        'rolling update halted at batch 2 of 3: 1 members failed (1), '
        'more than max_failures 0')
    logs = []
    for server in cli.json('sim', 'server', 'list'):
        disk = cli.json('sim', 'server', 'show', server['ID'])['disk']
        with open(os.path.join(disk, 'app.log')) as f:
            logs.append(f.read().split('\n')[:-1])
    # member 2 updated and checked, member 1 updated and failed its check,
    # member 0 never reached
    assert sorted(logs) == [
        ['CREATE one'],
        ['CREATE one', 'UPDATE two', 'CHECK two'],
        ['CREATE one', 'UPDATE two', 'CHECK two']]


REMOTE = '''heat_template_version: 2015-10-15
resources:
  remote:
    type: OS::Heat::Stack
    properties:
      context: {region_name: %s}
      template:
        heat_template_version: 2015-10-15
        resources:
          v: {type: OS::Heat::Value, properties: {value: here}}
'''


def test_a_stack_in_another_region_is_refused_naming_it(engine, tmp_path):
    """heat-tempest-plugin's test_stack_create_bad_region: an
    OS::Heat::Stack whose context names a region this converge does not
    serve ([cloud] region_name) is refused before anything is stored,
    in Heat's words; its own region is made here."""
    from converge import conf
    from converge import exception
    from converge import template
    from converge.engine import stacks
    from tests import enginetools as et
    conf.CONF.set_override('region_name', 'RegionOne', 'cloud')
    try:
        (tmp_path / 'far.yaml').write_text(REMOTE % 'DARKHOLE')
        with pytest.raises(exception.InvalidTemplate) as err:
            stacks.create(engine, 'far', template.load_bundle(
                str(tmp_path / 'far.yaml')), {})
        # Heat's text first (its resource validate() error has no
        # path: heat-tempest-plugin matches it from the start), then
        # where it is
        said = str(err.value)
        assert said.startswith(
            'Cannot establish connection to Heat endpoint at region '
            '"DARKHOLE" due to "public endpoint for orchestration service '
            'in DARKHOLE region not found"'), said
        assert said.endswith(' (at %s:6: resources.remote.properties.'
                             'context.region_name)'
                             % (tmp_path / 'far.yaml')), said
        (tmp_path / 'near.yaml').write_text(REMOTE % 'RegionOne')
        stack = et.run(engine, stacks.create, 'near', template.load_bundle(
            str(tmp_path / 'near.yaml')), {})
        assert et.status(stack) == 'CREATE_COMPLETE'
    finally:
        conf.CONF.clear_override('region_name', 'cloud')
