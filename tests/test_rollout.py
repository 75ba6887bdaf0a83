"""Rolling updates of a group as the operator sees them, in-process:
Heat's ResourceGroup update-policy expectations (members kept, created,
deleted), the failure budget (within it the rollout completes and
reports the failed members; beyond it it halts, and rolls back the
batches done when the stack's rollback is enabled), failure domains,
and the progress a rollout writes as events."""

import time

import pytest

from converge.db import api
from converge.engine import stacks
from tests import enginetools as et
from tests.test_nested import INSTANCE  # Heat's member template

pytestmark = pytest.mark.slow

HOT = 'heat_template_version: 2018-08-31\n'

# Heat's functional test template (heat_integrationtests, test_resource_
# group.py: ResourceGroupUpdatePolicyTest), with no pause
HEAT_GROUP = HOT + '''
parameters:
  count: {type: number, default: 10}
  value: {type: string, default: initial}
  replace: {type: boolean, default: false}
  min_in_service: {type: number, default: 1}
  max_batch_size: {type: number, default: 2}
resources:
  random_group:
    type: OS::Heat::ResourceGroup
    update_policy:
      rolling_update:
        min_in_service: {get_param: min_in_service}
        max_batch_size: {get_param: max_batch_size}
    properties:
      count: {get_param: count}
      resource_def:
        type: OS::Heat::TestResource
        properties:
          value: {get_param: value}
          update_replace: {get_param: replace}
'''

# (update parameters) -> members (kept, created, deleted), as Heat's
# functional tests expect them
HEAT_EXPECTATIONS = [
    ('update', dict(min_in_service=1, max_batch_size=3), (10, 0, 0)),
    ('replace', dict(min_in_service=1, max_batch_size=3, replace=True),
     (0, 10, 10)),
    ('scaledown', dict(min_in_service=1, max_batch_size=3, count=6),
     (6, 0, 4)),
    ('scaleup', dict(min_in_service=1, max_batch_size=3, count=12),
     (10, 2, 0)),
    ('adjusted', dict(min_in_service=8, max_batch_size=4, count=6),
     (6, 0, 4)),
    ('adjusted_capacity', dict(min_in_service=8, max_batch_size=4),
     (10, 0, 0)),
    ('huge_batch_size', dict(min_in_service=0, max_batch_size=20),
     (10, 0, 0)),
    ('huge_min_in_service', dict(min_in_service=20, max_batch_size=1),
     (10, 0, 0)),
]


def _members(engine, stack, group='random_group'):
    """The group's members: name -> resource row."""
    child = et.stack_of(engine, et.resources(engine, stack)[group].physical_id)
    return et.resources(engine, child), child


def _params(values):
    return {k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in values.items()}


@pytest.mark.parametrize('case,update,expected', HEAT_EXPECTATIONS,
                         ids=[c[0] for c in HEAT_EXPECTATIONS])
def test_heat_resource_group_update_policy_expectations(
        engine, tmp_path, case, update, expected):
    b = et.bundle(tmp_path, HEAT_GROUP)
    stack = et.run(engine, stacks.create, 'g', b, {})
    before = {r.physical_id for r in _members(engine, stack)[0].values()}
    assert len(before) == 10
    stack = et.run(engine, stacks.update, stack.id, b,
                   _params(dict(update, value='updated')))
    assert et.status(stack) == 'UPDATE_COMPLETE'
    rows = _members(engine, stack)[0]
    after = {r.physical_id for r in rows.values()}
    assert (len(after & before), len(after - before),
            len(before - after)) == expected
    assert {r.attributes['output'] for r in rows.values()} == {'updated'}


# a member that fails its update when its index is in `bad`
MEMBER = HOT + '''
parameters:
  index: {type: string}
  stamp: {type: string}
  bad: {type: comma_delimited_list, default: []}
conditions:
  broken: {contains: [{get_param: index}, {get_param: bad}]}
resources:
  r:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: stamp}
      fail: {if: [broken, true, false]}
outputs:
  stamp: {value: {get_attr: [r, output]}}
  zone:
    value:
      yaql:
        expression: str(int($.data.i) mod 2)
        data: {i: {get_param: index}}
'''

BUDGET = HOT + '''
parameters:
  stamp: {type: string, default: one}
  bad: {type: comma_delimited_list, default: []}
  max_failures: {type: string, default: "0"}
resources:
  group:
    type: OS::Heat::ResourceGroup
    update_policy:
      rolling_update:
        max_batch_size: 2
        max_failures: {get_param: max_failures}
    properties:
      count: 6
      resource_def:
        type: member.yaml
        properties:
          index: "%index%"
          stamp: {get_param: stamp}
          bad: {get_param: bad}
'''


@pytest.fixture
def budget(tmp_path):
    (tmp_path / 'member.yaml').write_text(MEMBER)
    return et.bundle(tmp_path, BUDGET, 'top.yaml')


def _stamps(engine, stack):
    rows, _ = _members(engine, stack, 'group')
    return {n: (r.attributes or {}).get('stamp') for n, r in rows.items()}


def _group_notes(engine, stack):
    return [e.reason for e in et.events(engine, stack.id)
            if e.resource_name == 'group' and e.status == 'IN_PROGRESS']


def test_a_failed_member_within_the_budget_is_reported_not_fatal(
        engine, budget):
    stack = et.run(engine, stacks.create, 'b', budget, {})
    stack = et.run(engine, stacks.update, stack.id, budget,
                   {'stamp': 'two', 'bad': '3', 'max_failures': '1'})
    assert et.status(stack) == 'UPDATE_COMPLETE', (
        stack.status_reason, _group_notes(engine, stack))
    group = et.resources(engine, stack)['group']
    assert group.status_reason == ('rolling update done: 1 of its members '
                                   'failed (3), within max_failures 1')
    rows, _ = _members(engine, stack, 'group')
    assert rows['3'].status == 'FAILED'
    stamps = _stamps(engine, stack)
    assert {n for n, v in stamps.items() if v == 'two'} == \
        {'0', '1', '2', '4', '5'}
    notes = _group_notes(engine, stack)
    assert 'batch 2 of 3: members failed: 3 (1 failed, max_failures 1)' \
        in notes
    assert any(n.startswith('rolling update: batch 3 of 3 (1, 0) started')
               for n in notes)


def test_failures_beyond_the_budget_halt_the_rollout(engine, budget):
    stack = et.run(engine, stacks.create, 'b', budget, {})
    stack = et.run(engine, stacks.update, stack.id, budget,
                   {'stamp': 'two', 'bad': '4,5', 'max_failures': '20%'})
    assert et.status(stack) == 'UPDATE_FAILED'
    group = et.resources(engine, stack)['group']
    assert group.status == 'FAILED'
    # 20% of 6 members is 1
    assert group.status_reason.endswith(
        'rolling update halted at batch 1 of 3: 2 members failed (4, 5), '
        'more than max_failures 1')
    # the batches after it never started
    stamps = _stamps(engine, stack)
    assert [stamps[n] for n in '0123'] == ['one'] * 4
    updated = {e.resource_name for e in et.events(engine, _members(
        engine, stack, 'group')[1].id) if e.action == 'UPDATE'}
    assert updated == {'4', '5'}


def test_a_halted_rollout_rolls_back_its_batches_when_asked(engine,
                                                            budget):
    stack = et.run(engine, stacks.create, 'b', budget, {})
    stack = et.run(engine, stacks.update, stack.id, budget,
                   {'stamp': 'two', 'bad': '3'}, rollback=True)
    assert et.status(stack) == 'ROLLBACK_COMPLETE'
    assert set(_stamps(engine, stack).values()) == {'one'}, (
        _stamps(engine, stack), _group_notes(engine, stack))
    # members 5 and 4 (batch 1) went to "two" and back, the way back in
    # a batch too; 3 failed and was put back; 2 (beside it in batch 2)
    # went and came back, or was stopped when 3 failed and put back
    events = [e for e in et.events(engine, _members(engine, stack,
                                                    'group')[1].id)
              if e.action == 'UPDATE' and e.status == 'COMPLETE']
    counts = {}
    for e in events:
        counts[e.resource_name] = counts.get(e.resource_name, 0) + 1
    assert (counts['5'], counts['4'], counts['3']) == (2, 2, 1)
    assert counts['2'] in (1, 2) and not {'0', '1'} & set(counts)
    notes = _group_notes(engine, stack)
    halted = next(i for i, n in enumerate(notes) if 'members failed' in n)
    assert any(n.startswith('rolling update: batch 1 of') and
               '(5, 4) started' in n for n in notes[halted:])


def test_failure_domains_never_share_a_batch(engine, tmp_path):
    (tmp_path / 'member.yaml').write_text(MEMBER)
    b = et.bundle(tmp_path, BUDGET.replace(
        'max_batch_size: 2', 'max_batch_size: 3\n'
        '        order: lowest_index\n        failure_domain: zone'),
        'top.yaml')
    stack = et.run(engine, stacks.create, 'd', b, {})
    stack = et.run(engine, stacks.update, stack.id, b, {'stamp': 'two'})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    started = [n for n in _group_notes(engine, stack) if 'started' in n]
    # zones alternate 0, 1, 0, 1, ...: three at a time would put two of
    # one zone together, so two go at a time
    # (a batch's start noted twice, once seen under a loaded machine,
    # would be its child update asked again: the plan is what counts)
    assert sorted({s.split(' started')[0] for s in started}) == [
        'rolling update: batch 1 of 3 (0, 1)',
        'rolling update: batch 2 of 3 (2, 3)',
        'rolling update: batch 3 of 3 (4, 5)'], started


def test_cancel_without_rollback_stops_the_nested_stacks_too(engine,
                                                             tmp_path):
    b = et.bundle(tmp_path, HEAT_GROUP.replace(
        'update_replace: {get_param: replace}',
        'update_replace: {get_param: replace}\n'
        '          action_wait_secs: {update: 30}'))
    stack = et.run(engine, stacks.create, 'c', b, {})
    stack_id, trav = stacks.update(engine, stack.id, b,
                                   {'value': 'updated'})
    deadline = time.time() + 60
    while not any('batch 1 of' in e.reason and 'started' in e.reason
                  for e in et.events(engine, stack_id)):
        assert time.time() < deadline, 'the rollout never started'
        time.sleep(0.05)
    stacks.cancel(engine, stack_id, rollback=False)
    with engine.db.read() as s:
        parent = api.stack_record(s, stack_id)
    rows, child = _members(engine, parent)
    assert (parent.action, parent.status) == ('UPDATE', 'FAILED')
    assert (child.action, child.status, child.status_reason) == (
        'UPDATE', 'FAILED', 'Stack UPDATE cancelled')


def test_a_change_in_the_members_file_rolls_in_batches_too(engine,
                                                           tmp_path):
    """Heat batches only a changed resource_def; a change that reaches the
    members through their provider file goes in batches here too."""
    (tmp_path / 'member.yaml').write_text(MEMBER)
    b = et.bundle(tmp_path, BUDGET, 'top.yaml')
    stack = et.run(engine, stacks.create, 'f', b, {})
    (tmp_path / 'member.yaml').write_text(MEMBER.replace(
        'value: {get_param: stamp}',
        'value: {list_join: ["-", [{get_param: stamp}, v2]]}'))
    b = et.bundle(tmp_path, BUDGET, 'top.yaml')
    stack = et.run(engine, stacks.update, stack.id, b, {})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    assert set(_stamps(engine, stack).values()) == {'one-v2'}
    started = [n.split(' started')[0] for n in _group_notes(engine, stack)
               if 'started' in n]
    assert started == ['rolling update: batch 1 of 3 (5, 4)',
                       'rolling update: batch 2 of 3 (3, 2)',
                       'rolling update: batch 3 of 3 (1, 0)']
    # a file change that is the same again rolls nothing
    stack = et.run(engine, stacks.update, stack.id, b, {})
    assert len([n for n in _group_notes(engine, stack)
                if 'started' in n]) == 3


def _in_service_low(events, start):
    """The fewest members in service at any event of the update (a member
    is out from its UPDATE_IN_PROGRESS to its UPDATE_COMPLETE, in from
    its CREATE_COMPLETE until its DELETE_IN_PROGRESS)."""
    serving, low = set(start), len(start)
    for e in events:
        status = '%s_%s' % (e.action, e.status)
        if status in ('UPDATE_IN_PROGRESS', 'DELETE_IN_PROGRESS'):
            serving.discard(e.resource_name)
        elif status in ('UPDATE_COMPLETE', 'CREATE_COMPLETE'):
            serving.add(e.resource_name)
        low = min(low, len(serving))
    return low


def test_a_surge_keeps_the_minimum_with_extra_members(engine, tmp_path):
    b = et.bundle(tmp_path, HEAT_GROUP.replace(
        'max_batch_size: {get_param: max_batch_size}',
        'max_batch_size: {get_param: max_batch_size}\n        surge: true'))
    stack = et.run(engine, stacks.create, 's', b, {})
    rows, child = _members(engine, stack)
    before = {r.physical_id for r in rows.values()}
    since = max(e.id for e in et.events(engine, child.id))
    stack = et.run(engine, stacks.update, stack.id, b, _params(dict(
        value='updated', min_in_service=10, max_batch_size=2)))
    assert et.status(stack) == 'UPDATE_COMPLETE'
    rows, child = _members(engine, stack)
    # Heat's expectation: every member kept, none created or deleted
    assert {r.physical_id for r in rows.values()} == before
    events = [e for e in et.events(engine, child.id) if e.id > since]
    # all ten stayed in service: two extra members ("10", "11") came
    # first, and went at the end
    assert _in_service_low(events, rows) == 10
    extra = sorted((e.resource_name, e.action) for e in events
                   if e.resource_name in ('10', '11') and
                   e.status == 'COMPLETE')
    assert extra == [('10', 'CREATE'), ('10', 'DELETE'), ('11', 'CREATE'),
                     ('11', 'DELETE')]
    assert {r.attributes['output'] for r in rows.values()} == {'updated'}


# Heat's AutoscalingGroupUpdatePolicyTest and InstanceGroupUpdatePolicyTest
# (heat_integrationtests): AWS::EC2::Instance mapped to a template, the
# launch configuration's UserData (its members replaced) or InstanceType
# (updated) changed under a rolling update
AWS_GROUP = '''{
  "AWSTemplateFormatVersion" : "2010-09-09",
  "Parameters" : {"size": {"Type": "String"},
                  "data": {"Type": "String", "Default": "one"},
                  "flavor": {"Type": "String", "Default": "m1.tiny"},
                  "min": {"Type": "String"}, "batch": {"Type": "String"}},
  "Resources": {
    "JobServerGroup": {
      "Type" : "%s",
      "Properties" : {%s,
        "AvailabilityZones" : ["nova"],
        "LaunchConfigurationName" : {"Ref" : "JobServerConfig"}},
      "UpdatePolicy": {"%s": {
        "MinInstancesInService": {"Ref": "min"},
        "MaxBatchSize": {"Ref": "batch"}, "PauseTime": "PT0S"}}},
    "JobServerConfig" : {
      "Type" : "AWS::AutoScaling::LaunchConfiguration",
      "Properties": {"ImageId": "cirros", "InstanceType": {"Ref": "flavor"},
                     "SecurityGroups": ["sg-1"], "UserData": {"Ref": "data"}}}
  }
}'''
ASG = ('AWS::AutoScaling::AutoScalingGroup', '"MinSize": "1", "MaxSize": '
       '"20", "DesiredCapacity": {"Ref": "size"}', 'AutoScalingRollingUpdate')
IG = ('OS::Heat::InstanceGroup', '"Size": {"Ref": "size"}', 'RollingUpdate')

# (group, size, min in service, batch size, what changes) -> members
# (kept, created, deleted), as Heat's tests expect them
AWS_EXPECTATIONS = [
    ('asg_replace', ASG, 10, 1, 3, 'data', (10, 0, 0)),
    ('asg_replace_adjusted', ASG, 10, 8, 4, 'data', (8, 2, 2)),
    ('asg_replace_huge_min', ASG, 10, 20, 1, 'data', (9, 1, 1)),
    ('asg_replace_huge_batch', ASG, 10, 0, 20, 'data', (10, 0, 0)),
    ('asg_update_adjusted', ASG, 10, 8, 4, 'flavor', (8, 2, 2)),
    ('ig_replace_adjusted', IG, 5, 4, 4, 'data', (2, 3, 3)),
    ('ig_replace_huge_min', IG, 5, 20, 2, 'data', (3, 2, 2)),
    ('ig_update_adjusted', IG, 5, 4, 4, 'flavor', (2, 3, 3)),
]


@pytest.mark.parametrize('case,kind,size,least,batch,change,expected',
                         AWS_EXPECTATIONS,
                         ids=[c[0] for c in AWS_EXPECTATIONS])
def test_heat_instance_group_update_policy_expectations(
        engine, tmp_path, case, kind, size, least, batch, change, expected):
    """Heat grows an InstanceGroup or AWS AutoScalingGroup by new members
    where the minimum in service and a batch do not fit, and removes as
    many of the oldest at the end: the same members are kept, created and
    deleted here, each left UPDATE_COMPLETE, each on the new launch
    configuration."""
    from converge import template
    (tmp_path / 'provider.yaml').write_text(INSTANCE)
    (tmp_path / 'top.json').write_text(AWS_GROUP % kind)
    (tmp_path / 'env.yaml').write_text(
        'resource_registry:\n  AWS::EC2::Instance: provider.yaml\n')
    b = template.load_bundle(str(tmp_path / 'top.json'),
                             [str(tmp_path / 'env.yaml')])
    params = _params(dict(size=size, min=least, batch=batch))
    stack = et.run(engine, stacks.create, 'a', b, params)
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    rows, _ = _members(engine, stack, 'JobServerGroup')
    created = {r.created_at: n for n, r in rows.items()}
    oldest = [created[k] for k in sorted(created)]
    before = set(rows)
    new = {'data': dict(data='two'), 'flavor': dict(flavor='m1.small')}
    stack = et.run(engine, stacks.update, stack.id, b,
                   dict(params, **new[change]))
    assert et.status(stack) == 'UPDATE_COMPLETE', stack.status_reason
    rows, child = _members(engine, stack, 'JobServerGroup')
    after = set(rows)
    assert (len(after & before), len(after - before),
            len(before - after)) == expected
    # the oldest went
    assert before - after == set(oldest[:expected[2]])
    assert {r.action + '_' + r.status for r in rows.values()} == \
        {'UPDATE_COMPLETE'}
    field = {'data': 'UserData', 'flavor': 'InstanceType'}[change]
    value = list(new[change].values())[0]
    assert {r.properties[field] for r in rows.values()} == {value}
