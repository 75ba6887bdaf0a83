"""Updates that cost what they change: an update visits the resources whose
definition changed, what reads them and what is ordered between them, and
nothing else; the full walk is one flag away (`--converge`)."""

from converge.db import api
from converge.engine import stacks
from tests import enginetools as et


def _chain(n, params=None, extra=None):
    """v0 <- v1 <- ... : each value reads the one before it; `tail` reads
    nothing and is read by nothing; v0 reads the parameter `p`."""
    res = {'v0': {'type': 'OS::Heat::Value',
                  'properties': {'value': {'get_param': 'p'}}}}
    for i in range(1, n):
        res['v%d' % i] = {'type': 'OS::Heat::Value', 'properties': {
            'value': {'list_join': ['-', [{'get_attr': ['v%d' % (i - 1),
                                                        'value']}, 'x']]}}}
    res['tail'] = {'type': 'OS::Heat::Value',
                   'properties': {'value': {'get_param': 'q'}}}
    res.update(extra or {})
    return et.hot(res, parameters={'p': {'type': 'string', 'default': 'a'},
                                   'q': {'type': 'string', 'default': 'b'}},
                  outputs={'last': {'value': {'get_attr': [
                      'v%d' % (n - 1), 'value']}},
                      'tail': {'value': {'get_attr': ['tail', 'value']}}})


def _visited(engine, stack_id):
    """Names of the rows the stack's last traversal wrote, and what the
    event after its start ("Stack UPDATE started", Heat's text) said
    after "Stack UPDATE change set: "."""
    from converge.engine import request, service
    with engine.db.read() as s:
        stack = api.stack_get(s, stack_id)
        rows = api.resources_live(s, stack_id)
    trav = stack.current_traversal
    [start, said] = [e['resource_status_reason'] for e in service.Service(
        engine).event_list(request.make(), stack_id,
                           query={})   # Heat's, with the stack's
        if e.get('traversal_id') == trav and
        e['resource_type'] == 'OS::Heat::Stack' and
        e['resource_status'] == 'UPDATE_IN_PROGRESS']
    assert start == 'Stack UPDATE started', start
    assert said.startswith('Stack UPDATE change set: '), said
    return ({r.name for r in rows if r.traversal_id == trav},
            said[len('Stack UPDATE change set: '):])


def _outputs(engine, stack_id):
    from converge.engine import request, service
    out = service.Service(engine).output_list(request.make(), stack_id)
    return {key: o.get('value') for key, o in out.items()}


def test_a_parameter_visits_what_reads_it_and_nothing_else(engine,
                                                           tmp_path):
    b = et.bundle(tmp_path, _chain(6))
    stack = et.run(engine, stacks.create, 'c', b, {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    # nothing changed: nothing visited
    stack = et.run(engine, stacks.update, stack.id, b, {})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    assert _visited(engine, stack.id) == (
        set(), '0 of 7 resources to visit')
    # q reaches tail only
    stack = et.run(engine, stacks.update, stack.id, b, {'q': 'B'})
    assert _visited(engine, stack.id) == (
        {'tail'}, '1 of 7 resources to visit (1 changed); changed: tail')
    assert _outputs(engine, stack.id) == {'last': 'a-x-x-x-x-x',
                                          'tail': 'B'}
    # p reaches v0, and through get_attr every v after it
    stack = et.run(engine, stacks.update, stack.id, b, {'q': 'B', 'p': 'z'})
    visited, summary = _visited(engine, stack.id)
    assert visited == {'v%d' % i for i in range(6)}
    assert summary == '6 of 7 resources to visit (1 changed, 5 reading ' \
        'what is visited); changed: v0; reading what is visited: v1, v2, ' \
        'v3, v4, v5'
    assert _outputs(engine, stack.id) == {'last': 'z-x-x-x-x-x',
                                          'tail': 'B'}
    # --converge visits everything
    stack = et.run(engine, stacks.update, stack.id, b, {'q': 'B', 'p': 'z'},
                   converge=True)
    assert _visited(engine, stack.id) == (
        {'v%d' % i for i in range(6)} | {'tail'},
        'all 7 resources to visit (--converge)')


def test_a_parameter_beside_an_attribute_is_seen(engine, tmp_path):
    """A value made of another resource's attribute and a parameter (not
    known before the update runs) changes with the parameter; so does
    a branch an `if` takes on a condition."""
    doc = et.hot({
        'base': {'type': 'OS::Heat::Value', 'properties': {'value': 'b'}},
        'mix': {'type': 'OS::Heat::Value', 'properties': {'value': {
            'str_replace': {'template': 'A-B', 'params': {
                'A': {'get_attr': ['base', 'value']},
                'B': {'get_param': 'q'}}}}}},
        'branch': {'type': 'OS::Heat::Value', 'properties': {'value': {
            'if': ['on', {'get_attr': ['base', 'value']}, 'off']}}}},
        parameters={'q': {'type': 'string', 'default': 'q'},
                    'flag': {'type': 'boolean', 'default': False}})
    doc['conditions'] = {'on': {'get_param': 'flag'}}
    b = et.bundle(tmp_path, doc)
    stack = et.run(engine, stacks.create, 'm', b, {})
    stack = et.run(engine, stacks.update, stack.id, b, {'q': 'Q'})
    assert _visited(engine, stack.id)[0] == {'mix'}
    assert et.resources(engine, stack)['mix'].attributes['value'] == 'b-Q'
    stack = et.run(engine, stacks.update, stack.id, b, {'q': 'Q',
                                                        'flag': True})
    assert _visited(engine, stack.id)[0] == {'branch'}
    assert et.resources(engine, stack)['branch'].attributes['value'] == 'b'


def test_order_through_an_unchanged_resource_holds(engine, tmp_path):
    """a -> mid -> b by depends_on only: a and b change, mid does not;
    mid is visited so that b still waits for a."""
    def doc(value):
        return et.hot({
            'a': {'type': 'OS::Heat::TestResource',
                  'properties': {'value': value,
                                 'action_wait_secs': {'update': 0.3}}},
            'mid': {'type': 'OS::Heat::None', 'depends_on': ['a']},
            'b': {'type': 'OS::Heat::Value', 'depends_on': ['mid'],
                  'properties': {'value': value}},
            'other': {'type': 'OS::Heat::None'}})
    stack = et.run(engine, stacks.create, 'o', et.bundle(tmp_path,
                                                         doc('1')), {})
    stack = et.run(engine, stacks.update, stack.id,
                   et.bundle(tmp_path, doc('2'), 'u.yaml'), {})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    visited, summary = _visited(engine, stack.id)
    assert visited == {'a', 'mid', 'b'}
    assert summary == '3 of 4 resources to visit (2 changed, 1 ordered ' \
        'between visited ones); changed: a, b; ordered between visited ' \
        'ones: mid'
    marks = {(e.resource_name, e.status): e.timestamp
             for e in et.events(engine, stack.id) if e.action == 'UPDATE'}
    # b started after a had ended (a takes 0.3 s)
    assert marks['a', 'COMPLETE'] <= marks['b', 'IN_PROGRESS']


def test_a_failed_update_again_visits_the_failed_and_the_skipped(engine,
                                                                 tmp_path):
    """An update that failed half-way, run again with the same template,
    converges what failed and what it never reached, and nothing else."""
    def doc(fail, value):
        res = {'first': {'type': 'OS::Heat::TestResource',
                         'properties': {'value': value, 'fail': fail}},
               'after': {'type': 'OS::Heat::Value', 'properties': {
                   'value': {'get_attr': ['first', 'output']}}},
               'done': {'type': 'OS::Heat::Value',
                        'properties': {'value': value}},
               'same': {'type': 'OS::Heat::Value',
                        'properties': {'value': 'kept'}}}
        return et.hot(res)
    stack = et.run(engine, stacks.create, 'f', et.bundle(
        tmp_path, doc(False, 'one')), {})
    bad = et.bundle(tmp_path, doc(True, 'two'), 'bad.yaml')
    stack = et.run(engine, stacks.update, stack.id, bad, {},
                   rollback=False)
    assert et.status(stack) == 'UPDATE_FAILED'
    # `done` was updated, `first` failed, `after` never reached
    good = et.bundle(tmp_path, doc(False, 'two'), 'good.yaml')
    stack = et.run(engine, stacks.update, stack.id, good, {})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    visited, summary = _visited(engine, stack.id)
    assert visited == {'first', 'after'}, summary
    rows = et.resources(engine, stack)
    assert rows['after'].attributes['value'] == 'two'
    assert rows['same'].traversal_id != stack.current_traversal


GROUP_NODE = '''heat_template_version: 2021-04-16
parameters:
  index: {type: string}
  overrides: {type: json, default: {}}
resources:
  setting:
    type: OS::Heat::Value
    properties:
      value: {get_param: [overrides, {get_param: index}]}
  use:
    type: OS::Heat::Value
    properties:
      value: {get_attr: [setting, value]}
'''


def _group(count, policy=None):
    member = {'type': 'node.yaml',
              'properties': {'index': '%index%',
                             'overrides': {'get_param': 'overrides'}}}
    group = {'type': 'OS::Heat::ResourceGroup',
             'properties': {'count': {'get_param': 'count'},
                            'resource_def': member}}
    if policy:
        group['update_policy'] = {'rolling_update': policy}
    return et.hot({'nodes': group}, parameters={
        'count': {'type': 'number', 'default': count},
        'overrides': {'type': 'json', 'default': {}}})


def _children(engine, stack_id):
    """[{stack name: names its last traversal wrote}] of the stacks
    nested under `stack_id`, one map per level down."""
    from converge.db import models
    import sqlalchemy as sa
    levels, parents = [], [stack_id]
    while parents:
        level = {}
        with engine.db.read() as s:
            kids = s.scalars(sa.select(models.Stack).where(
                models.Stack.parent_id.in_(parents))).all()
            for kid in kids:
                level[kid.name] = {
                    r.name for r in api.resources_live(s, kid.id)
                    if r.traversal_id == kid.current_traversal}
        if level:
            levels.append(level)
        parents = [kid.id for kid in kids]
    return levels


def test_a_change_reaching_three_members_visits_those_three(engine,
                                                            tmp_path):
    (tmp_path / 'node.yaml').write_text(GROUP_NODE)
    b = et.bundle(tmp_path, _group(10))
    stack = et.run(engine, stacks.create, 'g', b, {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    # three members more: the group's stack visits those three
    stack = et.run(engine, stacks.update, stack.id, b, {'count': 13})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    [members] = _children(engine, stack.id)[0].values()
    assert members == {'10', '11', '12'}, members
    # settings for three of them: every member's stack is told (it
    # reads the map), but inside only those three visit anything
    stack = et.run(engine, stacks.update, stack.id, b, {
        'count': 13, 'overrides': {'2': 'x', '5': 'y', '7': 'z'}})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    group, nodes = _children(engine, stack.id)
    assert len(group) == 1 and len(nodes) == 13
    inner = {name: v for name, v in nodes.items() if v}
    assert sorted(inner.values(), key=sorted) == [{'setting', 'use'}] * 3
    rows = {}
    for name in inner:
        with engine.db.read() as s:
            st = api.stack_get(s, name)
        rows.update({name: et.resources(engine, st)['use'].attributes[
            'value']})
    assert sorted(rows.values()) == ['x', 'y', 'z']


def test_a_rollout_batches_only_the_members_that_change(engine, tmp_path):
    """Every member is given the whole map; a rollout batches only the
    two whose own stacks read an entry that changed (the others would
    visit nothing: they take the new map after the last batch)."""
    (tmp_path / 'node.yaml').write_text(GROUP_NODE)
    b = et.bundle(tmp_path, _group(6, {'max_batch_size': 1}))
    stack = et.run(engine, stacks.create, 'r', b, {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    stack = et.run(engine, stacks.update, stack.id, b,
                   {'overrides': {'1': 'x', '4': 'y'}})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    started = [e.reason.split(' started')[0]
               for e in et.events(engine, stack.id)
               if e.resource_name == 'nodes' and e.status == 'IN_PROGRESS'
               and 'started' in e.reason]
    assert started == ['rolling update: batch 1 of 2 (4)',
                       'rolling update: batch 2 of 2 (1)']
    group, nodes = _children(engine, stack.id)
    assert len(nodes) == 6
    values = {}
    for name in nodes:
        with engine.db.read() as s:
            st = api.stack_get(s, name)
        values[st.name] = et.resources(engine, st)['use'].attributes['value']
    assert sorted(v for v in values.values() if v) == ['x', 'y']


def test_another_type_is_another_resource(engine, tmp_path):
    """A resource whose type changes is replaced, as Heat does: the old
    one (a server) is deleted by its own type, not kept under the new."""
    def doc(rtype, props):
        return et.hot({'web': {'type': rtype, 'properties': props}})
    stack = et.run(engine, stacks.create, 't', et.bundle(tmp_path, doc(
        'OS::Nova::Server', {'image': 'cirros', 'flavor': 'm1.tiny'})), {})
    server = et.resources(engine, stack)['web'].physical_id
    stack = et.run(engine, stacks.update, stack.id, et.bundle(
        tmp_path, doc('OS::Heat::Value', {'value': 'v'}), 'v.yaml'), {})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    web = et.resources(engine, stack)['web']
    assert (web.type, web.attributes['value']) == ('OS::Heat::Value', 'v')
    assert web.physical_id != server
    assert server not in {s['id'] for s in
                          engine.clients.compute.list_servers()}


def test_one_step_after_what_is_visited(engine, tmp_path):
    """What is ordered right after a visited resource is visited (it
    records what it now requires); what comes after that is not."""
    def doc(value):
        return et.hot({
            'a': {'type': 'OS::Heat::Value', 'properties': {'value': value}},
            'b': {'type': 'OS::Heat::None', 'depends_on': ['a']},
            'c': {'type': 'OS::Heat::None', 'depends_on': ['b']},
            'd': {'type': 'OS::Heat::None', 'depends_on': ['c']}})
    stack = et.run(engine, stacks.create, 's', et.bundle(tmp_path,
                                                         doc('1')), {})
    stack = et.run(engine, stacks.update, stack.id,
                   et.bundle(tmp_path, doc('2'), 'u.yaml'), {})
    assert _visited(engine, stack.id) == (
        {'a', 'b'}, '2 of 4 resources to visit (1 changed, 1 ordered after '
        'visited ones); changed: a; ordered after visited ones: b')


def test_a_policy_read_from_a_parameter_is_part_of_the_definition(
        engine, tmp_path):
    doc = et.hot({'kept': {
        'type': 'OS::Heat::Value', 'properties': {'value': 'v'},
        'deletion_policy': {'get_param': 'policy'}}},
        parameters={'policy': {'type': 'string', 'default': 'Delete'}})
    b = et.bundle(tmp_path, doc)
    stack = et.run(engine, stacks.create, 'p', b, {})
    stack = et.run(engine, stacks.update, stack.id, b, {'policy': 'Retain'})
    assert _visited(engine, stack.id)[0] == {'kept'}


def test_a_policy_holds_for_a_resource_removed_versions_later(engine,
                                                              tmp_path):
    """A resource an update left alone keeps the template version it was
    converged with; when a later update removes it, its DeletionPolicy of
    then holds (Retain: the server stays in the cloud), read from its row
    rather than from that old version."""
    def doc(value, keep=True):
        res = {'v': {'type': 'OS::Heat::Value',
                     'properties': {'value': value}}}
        if keep:
            res['kept'] = {'type': 'OS::Nova::Server',
                           'deletion_policy': 'Retain',
                           'properties': {'image': 'cirros',
                                          'flavor': 'm1.tiny'}}
        return et.hot(res)
    stack = et.run(engine, stacks.create, 'r', et.bundle(tmp_path,
                                                         doc('1')), {})
    server = et.resources(engine, stack)['kept'].physical_id
    stack = et.run(engine, stacks.update, stack.id,
                   et.bundle(tmp_path, doc('2'), 'u.yaml'), {})
    assert _visited(engine, stack.id)[0] == {'v'}
    stack = et.run(engine, stacks.update, stack.id,
                   et.bundle(tmp_path, doc('3', keep=False), 'w.yaml'), {})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    assert 'kept' not in et.resources(engine, stack)
    assert server in {s['id'] for s in engine.clients.compute.list_servers()}
