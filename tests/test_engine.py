"""Convergence on the embedded engine: order, concurrency, failure,
rollback, replacement, superseding, cancel, duplicates."""

import threading
import time

import pytest
import sqlalchemy as sa

from converge.db import api
from converge.db import models
from converge.messaging import rpc
from converge.engine import stacks
from converge.workers import reconcile
from tests import enginetools as et


def _test_resource(value='v', wait=0.0, **extra):
    props = {'value': value}
    if wait:
        props['action_wait_secs'] = {'create': wait, 'update': wait,
                                     'delete': 0}
    props.update(extra)
    return props


def _intervals(evs, action='CREATE'):
    start, end = {}, {}
    for e in evs:
        if e.action != action:
            continue
        if e.status == 'IN_PROGRESS':
            start[e.resource_name] = e.timestamp
        elif e.status == 'COMPLETE':
            end[e.resource_name] = e.timestamp
    return start, end


def test_grid_branches_overlap_and_order_is_respected(engine, tmp_path):
    """3 wide, 4 deep: each resource needs two of the layer below."""
    res = {}
    deps = {}
    for layer in range(4):
        for col in range(3):
            name = 'r%d_%d' % (layer, col)
            props = _test_resource(name, wait=0.3)
            if layer:
                below = ['r%d_%d' % (layer - 1, c)
                         for c in (col, (col + 1) % 3)]
                deps[name] = below
                props['value'] = {'list_join': [
                    '+', [{'get_attr': [b, 'output']} for b in below]]}
            res[name] = {'type': 'OS::Heat::TestResource',
                         'properties': props}
    b = et.bundle(tmp_path, et.hot(res))
    stack = et.run(engine, stacks.create, 'grid', b, {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    start, end = _intervals(et.events(engine, stack.id))
    assert len(start) == len(end) == 12
    for name, below in deps.items():
        assert start[name] >= max(end[b] for b in below), name
    for layer in range(4):
        names = ['r%d_%d' % (layer, c) for c in range(3)]
        for a in names:
            for b2 in names:
                if a < b2:
                    assert start[a] < end[b2] and start[b2] < end[a], \
                        'layer %d did not run concurrently' % layer
    rows = et.resources(engine, stack)
    assert rows['r3_0'].attributes['output'] == \
        rows['r2_0'].attributes['output'] + '+' + \
        rows['r2_1'].attributes['output']


def test_outputs_and_attributes_flow_through_get_attr(engine, tmp_path):
    b = et.bundle(tmp_path, et.hot(
        {'a': {'type': 'OS::Heat::Value', 'properties': {'value': 'x'}},
         'b': {'type': 'OS::Heat::Value', 'properties': {
             'value': {'str_replace': {'template': 'got-A',
                                       'params': {'A': {'get_attr': [
                                           'a', 'value']}}}}}}},
        outputs={'out': {'value': {'get_attr': ['b', 'value']}}}))
    stack = et.run(engine, stacks.create, 'flow', b, {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    from converge.engine import views
    assert views.outputs(engine, stack)['out']['value'] == 'got-x'


def _blocking(monkeypatch, step, name, until):
    """Make TestResource `name`'s `step` an action in flight: it holds its
    thread (as a slow cloud call does) until ``until()`` is true."""
    from converge.resources import test_resource
    real = getattr(test_resource.TestResource, step)

    def blocked(self, *args):
        if self.name == name:
            deadline = time.monotonic() + 30
            while not until() and time.monotonic() < deadline:
                time.sleep(0.02)
        return real(self, *args)
    monkeypatch.setattr(test_resource.TestResource, step, blocked)


def test_a_failure_ends_the_stack_when_the_last_unit_in_flight_waits(
        engine, tmp_path, monkeypatch):
    """The traversal fails while `slow` is in flight; `slow` then returns
    a wait (30 s) rather than an end. The failure does not wait for the
    sweeper's stall timeout: the wait, being the last unit in flight,
    settles it (and `slow` stops waiting)."""
    b = et.bundle(tmp_path, et.hot({
        'slow': {'type': 'OS::Heat::TestResource', 'properties': {
            'action_wait_secs': {'create': 30}}},
        'bad': {'type': 'OS::Heat::TestResource',
                'properties': {'fail': True}}}))
    started = time.time()
    stack = _create_failing_while_slow_in_flight(engine, monkeypatch, b)
    assert et.status(stack) == 'CREATE_FAILED'
    assert stack.updated_at.timestamp() - started < 20   # not 30 s, 60 s
    rows = et.resources(engine, stack)
    assert rows['slow'].status == 'FAILED'
    assert rows['slow'].status_reason.startswith('Stopped waiting')


def _traversal_state(engine, trav):
    with engine.db.read() as s:
        return api.traversal_state(s, trav)


def _create_failing_while_slow_in_flight(engine, monkeypatch, b):
    """Create `b`: slow's create is in flight until the traversal is
    failing; bad fails once slow is in flight. The stack as it ends."""
    trav = []
    _blocking(monkeypatch, 'create', 'slow', lambda: trav and
              _traversal_state(engine, trav[0]) == 'failing')
    _blocking(monkeypatch, 'create', 'bad', lambda: trav and any(
        e.resource_name == 'slow' and e.status == 'IN_PROGRESS'
        for e in et.events(engine, trav[1])))
    stack_id, t = stacks.create(engine, 'f', b, {})
    trav.extend([t, stack_id])
    return et.wait(engine, stack_id, t).stack


def test_failure_ends_failed_after_in_flight_work(engine, tmp_path,
                                                  monkeypatch):
    b = et.bundle(tmp_path, et.hot({
        'slow': {'type': 'OS::Heat::TestResource', 'properties': {}},
        'bad': {'type': 'OS::Heat::TestResource',
                'properties': {'fail': True}},
        'after_bad': {'type': 'OS::Heat::None', 'depends_on': 'bad'}}))
    stack = _create_failing_while_slow_in_flight(engine, monkeypatch, b)
    assert et.status(stack) == 'CREATE_FAILED'
    assert 'bad' in stack.status_reason
    rows = et.resources(engine, stack)
    assert (rows['slow'].action, rows['slow'].status) == ('CREATE',
                                                          'COMPLETE')
    assert rows['bad'].status == 'FAILED'
    assert rows['after_bad'].action == 'INIT'
    _, end = _intervals(et.events(engine, stack.id))
    assert stack.updated_at.timestamp() >= end['slow'] - 1  # after slow


def test_rollback_of_a_failed_create_removes_everything(engine, tmp_path):
    b = et.bundle(tmp_path, et.hot({
        'ok': {'type': 'OS::Heat::TestResource', 'properties': {}},
        'bad': {'type': 'OS::Heat::TestResource',
                'properties': {'fail': True}, 'depends_on': 'ok'}}))
    stack = et.run(engine, stacks.create, 'rb', b, {},
                   disable_rollback=False)
    assert et.status(stack) == 'ROLLBACK_COMPLETE'
    assert et.resources(engine, stack) == {}


def test_failed_update_rolls_back_to_previous_values(engine, tmp_path):
    v1 = et.bundle(tmp_path, et.hot({
        'a': {'type': 'OS::Heat::TestResource', 'properties': {'value': 'one'}},
        'b': {'type': 'OS::Heat::TestResource', 'properties': {}}}), 'v1.yaml')
    stack = et.run(engine, stacks.create, 'ru', v1, {})
    v2 = et.bundle(tmp_path, et.hot({
        'a': {'type': 'OS::Heat::TestResource', 'properties': {'value': 'two'}},
        'b': {'type': 'OS::Heat::TestResource', 'properties': {'fail': True},
              'depends_on': 'a'}}), 'v2.yaml')
    stack = et.run(engine, stacks.update, stack.id, v2, {}, rollback=True)
    assert et.status(stack) == 'ROLLBACK_COMPLETE'
    rows = et.resources(engine, stack)
    assert rows['a'].attributes['output'] == 'one'


def _create_then_update(engine, tmp_path, name, tmpl, resource):
    """Create stack `name` from tmpl('1'), update it to tmpl('2'):
    (`resource`'s physical id after the create, the stack after)."""
    stack = et.run(engine, stacks.create, name,
                   et.bundle(tmp_path, tmpl('1'), 'v1.yaml'), {})
    first = et.resources(engine, stack)[resource].physical_id
    return first, et.run(engine, stacks.update, stack.id,
                         et.bundle(tmp_path, tmpl('2'), 'v2.yaml'), {})


def test_replacement_creates_first_and_switches_dependents(engine, tmp_path):
    def tmpl(v):
        return et.hot({
            'a': {'type': 'OS::Heat::TestResource',
                  'properties': {'value': 'a', 'update_replace_value': v}},
            'b': {'type': 'OS::Heat::Value',
                  'properties': {'value': {'get_resource': 'a'}}}})
    old_id, stack = _create_then_update(engine, tmp_path, 'rep', tmpl, 'a')
    assert et.status(stack) == 'UPDATE_COMPLETE'
    rows = et.resources(engine, stack)
    new_id = rows['a'].physical_id
    assert new_id != old_id
    assert rows['b'].attributes['value'] == new_id
    with engine.db.read() as s:
        assert [r.name for r in api.resources_live(s, stack.id)].count('a') == 1
    evs = [(e.resource_name, e.action, e.status, e.physical_id)
           for e in et.events(engine, stack.id)]
    created = evs.index(('a', 'CREATE', 'COMPLETE', new_id))
    switched = evs.index(('b', 'UPDATE', 'COMPLETE', rows['b'].physical_id))
    deleted = evs.index(('a', 'DELETE', 'COMPLETE', old_id))
    assert created < switched < deleted


@pytest.mark.parametrize('change', [
    # replaced by decision: a property that cannot change in place
    {'update_replace_value': '2'},
    # replaced when the update is under way (the plug-in finds it must)
    {'update_replace': True, 'value': 'b'},
])
def test_replacement_is_told_as_heat_tells_it(engine, tmp_path, change):
    """Heat's events for a resource it replaces: its update starts and
    completes with "The Resource NAME requires replacement." (the
    differential test against Heat found converge without them), then
    the new one is created and the old one deleted."""
    first = {'value': 'a', 'update_replace_value': '1'}
    stack = et.run(engine, stacks.create, 'rpl', et.bundle(tmp_path, et.hot(
        {'a': {'type': 'OS::Heat::TestResource', 'properties': first}}),
        'v1.yaml'), {})
    old_id = et.resources(engine, stack)['a'].physical_id
    stack = et.run(engine, stacks.update, stack.id, et.bundle(
        tmp_path, et.hot({'a': {'type': 'OS::Heat::TestResource',
                                'properties': dict(first, **change)}}),
        'v2.yaml'), {})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    new_id = et.resources(engine, stack)['a'].physical_id
    assert new_id != old_id
    evs = [(e.action, e.status, e.physical_id, e.reason)
           for e in et.events(engine, stack.id) if e.resource_name == 'a']
    told = [('UPDATE', 'IN_PROGRESS', old_id, 'state changed'),
            ('UPDATE', 'COMPLETE', old_id,
             'The Resource a requires replacement.')]
    assert [e for e in evs if e[0] == 'UPDATE'] == told, evs
    assert evs.index(told[1]) < evs.index(
        ('CREATE', 'COMPLETE', new_id, 'state changed')) < evs.index(
        ('DELETE', 'COMPLETE', old_id, 'state changed'))


def test_a_type_change_is_not_told_as_a_replacement(engine, tmp_path):
    """Another type is another resource: Heat makes the new one and
    deletes the old one, which is not updated, so no event says it
    "requires replacement" (the differential test found converge saying
    so once replacements were told)."""
    def tmpl(v):
        return et.hot({'a': {'type': ('OS::Heat::TestResource' if v == '1'
                                      else 'OS::Heat::Value'),
                             'properties': {'value': v}}})
    old_id, stack = _create_then_update(engine, tmp_path, 'typ', tmpl, 'a')
    assert et.status(stack) == 'UPDATE_COMPLETE'
    evs = [(e.action, e.status, e.physical_id)
           for e in et.events(engine, stack.id) if e.resource_name == 'a']
    assert not [e for e in evs if e[0] == 'UPDATE'], evs
    assert ('DELETE', 'COMPLETE', old_id) in evs


def test_none_is_not_updated_when_its_properties_change(engine, tmp_path):
    """OS::Heat::None stands in for anything and does nothing: Heat
    never updates it (no events, CREATE_COMPLETE kept) whatever its
    properties become; the differential test against Heat found converge
    updating it in place."""
    def tmpl(v):
        return et.hot({'n': {'type': 'OS::Heat::None',
                             'properties': {'anything': v}},
                       'v': {'type': 'OS::Heat::Value',
                             'properties': {'value': v}}})
    before, stack = _create_then_update(engine, tmp_path, 'non', tmpl, 'n')
    assert et.status(stack) == 'UPDATE_COMPLETE'
    rows = et.resources(engine, stack)
    assert (rows['n'].action, rows['n'].status) == ('CREATE', 'COMPLETE')
    assert rows['n'].physical_id == before
    assert (rows['v'].action, rows['v'].status) == ('UPDATE', 'COMPLETE')
    assert [(e.action, e.status) for e in et.events(engine, stack.id)
            if e.resource_name == 'n'] == [('CREATE', 'IN_PROGRESS'),
                                           ('CREATE', 'COMPLETE')]


def test_update_superseding_a_running_create(engine, tmp_path):
    slow = et.hot({'a': {'type': 'OS::Heat::TestResource',
                         'properties': _test_resource('one', wait=1.0)},
                   'b': {'type': 'OS::Heat::TestResource', 'depends_on': 'a',
                         'properties': _test_resource('b1')}})
    stack_id, trav = stacks.create(engine, 'sup',
                                   et.bundle(tmp_path, slow, 'v1.yaml'), {})
    fast = et.hot({'a': {'type': 'OS::Heat::TestResource',
                         'properties': {'value': 'two'}},
                   'b': {'type': 'OS::Heat::TestResource', 'depends_on': 'a',
                         'properties': {'value': 'b2'}}})
    _, trav2 = stacks.update(engine, stack_id,
                             et.bundle(tmp_path, fast, 'v2.yaml'), {})
    first = et.wait(engine, stack_id, trav)
    assert first.superseded_by is not None
    stack = et.wait(engine, stack_id, trav2).stack
    assert et.status(stack) == 'UPDATE_COMPLETE'
    rows = et.resources(engine, stack)
    assert rows['a'].attributes['output'] == 'two'
    assert rows['b'].attributes['output'] == 'b2'
    with engine.db.read() as s:
        assert api.traversal_get(s, trav).state == 'superseded'


def test_cancel_without_rollback_lets_running_action_finish(engine, tmp_path,
                                                            monkeypatch):
    v1 = et.hot({'a': {'type': 'OS::Heat::TestResource',
                       'properties': {'value': 'a1'}},
                 'b': {'type': 'OS::Heat::TestResource', 'depends_on': 'a',
                       'properties': {'value': 'b1'}}})
    stack = et.run(engine, stacks.create, 'cn',
                   et.bundle(tmp_path, v1, 'v1.yaml'), {})
    v2 = et.hot({'a': {'type': 'OS::Heat::TestResource',
                       'properties': {'value': 'a2'}},
                 'b': {'type': 'OS::Heat::TestResource', 'depends_on': 'a',
                       'properties': {'value': 'b2'}}})
    cancelled = threading.Event()
    _blocking(monkeypatch, 'update', 'a', cancelled.is_set)
    _, trav = stacks.update(engine, stack.id,
                            et.bundle(tmp_path, v2, 'v2.yaml'), {})

    def a_updating():
        return any(e.resource_name == 'a' and e.status == 'IN_PROGRESS'
                   and e.action == 'UPDATE'
                   for e in et.events(engine, stack.id))
    deadline = time.monotonic() + 10
    while not a_updating():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    stacks.cancel(engine, stack.id, rollback=False)
    cancelled.set()
    engine.idle.wait(10)
    with engine.db.read() as s:
        stack = api.stack_get(s, stack.id)
    assert et.status(stack) == 'UPDATE_FAILED'
    assert 'cancelled' in stack.status_reason
    rows = et.resources(engine, stack)
    assert '%s_%s' % (rows['a'].action, rows['a'].status) == 'UPDATE_COMPLETE'
    assert rows['a'].attributes['output'] == 'a2'
    assert rows['b'].attributes['output'] == 'b1'  # never updated


def test_duplicate_message_does_nothing(engine, tmp_path):
    b = et.bundle(tmp_path, et.hot({'a': {'type': 'OS::Heat::None'}}))
    stack_id, trav = stacks.create(engine, 'dup', b, {})
    # keep the traversal's sync points by reading before completion ends
    stack = et.wait(engine, stack_id, trav).stack
    before = len(et.events(engine, stack.id))
    reconcile.check_resource(engine, stack.id, trav, 'u:a')
    assert len(et.events(engine, stack.id)) == before


def test_lost_compare_and_swap_stops_without_writing(engine, tmp_path):
    b = et.bundle(tmp_path, et.hot({'a': {'type': 'OS::Heat::None'}}))
    stack = et.run(engine, stacks.create, 'race', b, {})
    row = et.resources(engine, stack)['a']
    with engine.db.begin() as c:
        assert api.resource_cas(c, row.id, row.atomic_key + 5,
                                status='FAILED') is None
    with engine.db.connect() as c:
        again = api.resource_get(c, row.id)
    assert again.status == 'COMPLETE' and again.atomic_key == row.atomic_key


def test_delete_removes_dependents_first(engine, tmp_path):
    b = et.bundle(tmp_path, et.hot({
        'base': {'type': 'OS::Heat::TestResource', 'properties': {}},
        'mid': {'type': 'OS::Heat::TestResource', 'depends_on': 'base',
                'properties': {}},
        'top': {'type': 'OS::Heat::TestResource', 'depends_on': 'mid',
                'properties': {}}}))
    stack = et.run(engine, stacks.create, 'del', b, {})
    stack = et.run(engine, stacks.delete, stack.id)
    assert et.status(stack) == 'DELETE_COMPLETE'
    order = [e.resource_name for e in et.events(engine, stack.id)
             if e.action == 'DELETE' and e.status == 'COMPLETE']
    assert order == ['top', 'mid', 'base']
    with engine.db.read() as s:
        assert api.resources_live(s, stack.id) == []
        with pytest.raises(Exception):
            api.stack_get(s, 'del')


def test_check_reports_unhealthy_resources(engine, tmp_path):
    b = et.bundle(tmp_path, et.hot({
        'srv': {'type': 'OS::Nova::Server',
                'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}}}))
    stack = et.run(engine, stacks.create, 'chk', b, {})
    server = et.resources(engine, stack)['srv'].physical_id
    engine.clients.compute.stop_server(server)
    stack = et.run(engine, stacks.check, stack.id)
    assert et.status(stack) == 'CHECK_FAILED'
    # the failure's reason in Heat's form, naming its resource once
    assert stack.status_reason.startswith(
        'Resource CHECK failed: Error: resources.srv: drifted: '), \
        stack.status_reason
    stack = et.run(engine, stacks.converge, stack.id)
    assert et.status(stack) == 'UPDATE_COMPLETE'
    assert engine.clients.compute.get_server(server)['status'] == 'ACTIVE'


def test_a_failed_check_stops_what_depends_on_it(engine, tmp_path):
    """Heat's TemplateResourceCheckTest.test_check_fail: a stack whose
    create failed is checked; what depends on the resource whose check
    fails (and on that) is not checked and keeps its state; the stack
    ends CHECK_FAILED."""
    b = et.bundle(tmp_path, et.hot({
        'check_succeed': {'type': 'OS::Heat::TestResource'},
        # after check_succeed, so that the failed create made it first
        'check_failed': {'type': 'OS::Heat::TestResource',
                         'depends_on': 'check_succeed',
                         'properties': {'fail': True}},
        'check_deps_failed': {'type': 'OS::Heat::TestResource',
                              'depends_on': 'check_failed'},
        'check_deps_deps_failed': {'type': 'OS::Heat::TestResource',
                                   'depends_on': 'check_deps_failed'}}))
    stack = et.run(engine, stacks.create, 'cf', b, {})
    assert et.status(stack) == 'CREATE_FAILED'
    stack = et.run(engine, stacks.check, stack.id)
    assert et.status(stack) == 'CHECK_FAILED'
    rows = et.resources(engine, stack)
    assert {n: '%s_%s' % (r.action, r.status) for n, r in rows.items()} == {
        'check_succeed': 'CHECK_COMPLETE', 'check_failed': 'CHECK_FAILED',
        'check_deps_failed': 'INIT_COMPLETE',
        'check_deps_deps_failed': 'INIT_COMPLETE'}


def test_a_manual_rollback_after_a_failed_replacement_keeps_the_original(
        engine, tmp_path):
    """Heat's test_stack_update_replace_manual_rollback: an update that
    replaces a resource fails creating the replacement (rollback off);
    updating back to the first template keeps the original resource,
    which was good, and the failed replacement goes."""
    def tmpl(value, fail=False):
        return et.hot({'test1': {'type': 'OS::Heat::TestResource',
                                 'properties': {'update_replace_value': value,
                                                'fail': fail}}})
    first = et.bundle(tmp_path, tmpl('1'), 'one.yaml')
    stack = et.run(engine, stacks.create, 'mr', first, {})
    original = et.resources(engine, stack)['test1'].physical_id
    stack = et.run(engine, stacks.update, stack.id,
                   et.bundle(tmp_path, tmpl('2', True), 'two.yaml'), {},
                   rollback=False)
    assert et.status(stack) == 'UPDATE_FAILED'
    stack = et.run(engine, stacks.update, stack.id, first, {})
    assert et.status(stack) == 'UPDATE_COMPLETE', stack.status_reason
    assert et.resources(engine, stack)['test1'].physical_id == original
    with engine.db.read() as s:
        assert len(api.resources_live(s, stack.id)) == 1


def test_a_deprecated_type_renamed_keeps_the_resource(engine, tmp_path):
    """Heat's ReplaceDeprecatedResourceTest: OS::Heat::SoftwareDeployments
    changed to OS::Heat::SoftwareDeploymentGroup (its substitute) is the
    same resource, updated in place: its physical id stays, its type is
    the new one. Another type is still another resource."""
    def tmpl(dep_type, other='OS::Heat::None'):
        return et.hot({
            'config': {'type': 'OS::Heat::SoftwareConfig',
                       'properties': {'config': 'xxxx'}},
            'server': {'type': 'OS::Nova::Server', 'properties': {
                'image': 'cirros', 'flavor': 'm1.tiny',
                'user_data_format': 'SOFTWARE_CONFIG'}},
            'dep': {'type': dep_type, 'properties': {
                'config': {'get_resource': 'config'},
                'servers': {'0': {'get_resource': 'server'}},
                'signal_transport': 'NO_SIGNAL'}},
            'other': {'type': other}})
    stack = et.run(engine, stacks.create, 'dd', et.bundle(
        tmp_path, tmpl('OS::Heat::SoftwareDeployments'), 'a.yaml'), {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    before = et.resources(engine, stack)
    stack = et.run(engine, stacks.update, stack.id, et.bundle(
        tmp_path, tmpl('OS::Heat::SoftwareDeploymentGroup',
                       'OS::Heat::RandomString'), 'b.yaml'), {})
    assert et.status(stack) == 'UPDATE_COMPLETE', stack.status_reason
    after = et.resources(engine, stack)
    assert (after['dep'].type, after['dep'].physical_id) == (
        'OS::Heat::SoftwareDeploymentGroup', before['dep'].physical_id)
    assert after['other'].physical_id != before['other'].physical_id


def test_cancel_with_rollback_returns_to_the_previous_template(engine,
                                                               tmp_path):
    v1 = et.hot({'a': {'type': 'OS::Heat::TestResource',
                       'properties': {'value': 'a1'}}})
    stack = et.run(engine, stacks.create, 'cr',
                   et.bundle(tmp_path, v1, 'v1.yaml'), {})
    v2 = et.hot({'a': {'type': 'OS::Heat::TestResource',
                       'properties': _test_resource('a2', wait=0.5)},
                 'b': {'type': 'OS::Heat::TestResource', 'depends_on': 'a',
                       'properties': {'value': 'b2'}}})
    _, trav = stacks.update(engine, stack.id,
                            et.bundle(tmp_path, v2, 'v2.yaml'), {})
    _, rb = stacks.cancel(engine, stack.id, rollback=True)
    stack = et.wait(engine, stack.id, rb).stack
    assert et.status(stack) == 'ROLLBACK_COMPLETE'
    rows = et.resources(engine, stack)
    assert set(rows) == {'a'}
    assert rows['a'].attributes['output'] == 'a1'


def test_delete_while_creating_leaves_nothing(engine, tmp_path):
    b = et.bundle(tmp_path, et.hot({
        's%d' % i: {'type': 'OS::Nova::Server',
                    'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}}
        for i in range(4)}))
    engine.clients.compute.set_fault('create', latency=0.3)
    stack_id, trav = stacks.create(engine, 'dc', b, {})
    _, dtrav = stacks.delete(engine, stack_id)
    stack = et.wait(engine, stack_id, dtrav).stack
    assert et.status(stack) == 'DELETE_COMPLETE'
    engine.idle.wait(10)
    assert engine.clients.compute.list_servers() == []


def test_update_existing_keeps_template_and_parameters(engine, tmp_path):
    doc = et.hot({'a': {'type': 'OS::Heat::Value',
                        'properties': {'value': {'list_join': [
                            '-', [{'get_param': 'x'}, {'get_param': 'y'}]]}}}},
                 parameters={'x': {'type': 'string'},
                             'y': {'type': 'string', 'default': 'dy'}})
    stack = et.run(engine, stacks.create, 'ex', et.bundle(tmp_path, doc),
                   {'x': 'one'})
    stack = et.run(engine, stacks.update, stack.id, None, {'y': 'two'},
                   existing=True)
    assert et.status(stack) == 'UPDATE_COMPLETE'
    assert et.resources(engine, stack)['a'].attributes['value'] == 'one-two'


def test_stack_timeout_fails_the_stack(engine, tmp_path):
    b = et.bundle(tmp_path, et.hot({
        'a': {'type': 'OS::Heat::TestResource', 'properties': {}},
        'b': {'type': 'OS::Heat::TestResource', 'depends_on': 'a',
              'properties': {}}}))
    stack_id, trav = stacks.create(engine, 'to', b, {})
    with engine.db.write() as s:
        t = s.get(models.Traversal, trav)
        t.options = dict(t.options, deadline=1.0)  # long past
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'CREATE_FAILED'
    assert 'Timed out' in stack.status_reason


def test_progress_line_on_a_terminal(engine, tmp_path):
    import io
    from converge.cmd import progress
    b = et.bundle(tmp_path, et.hot({'a': {'type': 'OS::Heat::None'},
                                    'b': {'type': 'OS::Heat::None'}}))
    stack_id, trav = stacks.create(engine, 'tty', b, {})
    out = io.StringIO()
    et.follow(engine, stack_id, trav, out=out, tty=True)
    text = out.getvalue()
    assert '\r' in text and 'done' in text and 'failed' in text


class _DropsConnections:
    """engine.db whose reads, after the first `ok`, fail `drops` times as a
    server that dropped the connection makes them fail (only the reads of
    the thread that made it: the test's follower, not the pool's timers,
    which would otherwise take the drops first now and then)."""

    def __init__(self, db, drops, invalidated=True, ok=1):
        self._db, self.drops, self.invalidated = db, drops, invalidated
        self.ok = ok
        self._thread = threading.get_ident()

    def __getattr__(self, name):
        return getattr(self._db, name)

    def read(self):
        if threading.get_ident() != self._thread:
            return self._db.read()
        if self.ok:
            self.ok -= 1
        elif self.drops:
            self.drops -= 1
            raise sa.exc.OperationalError(
                'SELECT', {}, Exception('server closed the connection'),
                connection_invalidated=self.invalidated)
        return self._db.read()


def test_following_survives_dropped_connections(engine, tmp_path,
                                                monkeypatch):
    from converge.cmd import progress
    from converge.engine import service
    b = et.bundle(tmp_path, et.hot({'a': {'type': 'OS::Heat::None'}}))
    stack_id, trav = stacks.create(engine, 'drop', b, {})
    monkeypatch.setattr(progress, 'POLL', 0.001)
    monkeypatch.setattr(service, 'RETRY_PAUSE', 0.001)
    monkeypatch.setattr(engine, 'db', _DropsConnections(engine.db, 2))
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'CREATE_COMPLETE'
    assert engine.db.drops == 0


def test_following_gives_up_on_other_database_errors(engine, tmp_path,
                                                     monkeypatch):
    from converge.cmd import progress
    from converge.engine import service
    b = et.bundle(tmp_path, et.hot({'a': {'type': 'OS::Heat::None'}}))
    stack_id, trav = stacks.create(engine, 'err', b, {})
    et.wait(engine, stack_id, trav)
    monkeypatch.setattr(progress, 'POLL', 0.001)
    monkeypatch.setattr(service, 'RETRY_PAUSE', 0.001)
    monkeypatch.setattr(engine, 'db', _DropsConnections(
        engine.db, 1, invalidated=False))
    with pytest.raises(sa.exc.OperationalError):
        et.wait(engine, stack_id, trav)
    # and a server that keeps dropping us is an error too, not a hang
    monkeypatch.setattr(engine, 'db', _DropsConnections(
        engine.db._db, service.DROPPED_RETRIES + 1))
    with pytest.raises(sa.exc.OperationalError):
        et.wait(engine, stack_id, trav)


def _statements_per_node(engine, tmp_path, n):
    """Walk an n-resource stack synchronously, counting SQL per unit."""
    import collections
    queue = collections.deque()

    class Client(rpc.Client):
        def check_resource(self, stack_id, t, node, attempt=0):
            queue.append((stack_id, t, node))

    engine.close()  # no timer or sweeper statements in the count
    engine._client = Client()
    res = {'r%d' % i: {'type': 'OS::Heat::TestResource',
                       'properties': {'value': {'get_attr': [
                           'r%d' % (i - 3), 'output']}} if i >= 3 else {}}
           for i in range(n)}
    b = et.bundle(tmp_path, et.hot(res), 's%d.yaml' % n)
    stacks.create(engine, 's%d' % n, b, {})
    before = engine.db.counter.statements
    units = 0
    while queue:
        reconcile.check_resource(engine, *queue.popleft())
        units += 1
    assert units == n
    return (engine.db.counter.statements - before) / units


def test_statements_per_check_resource_stay_flat(engine, tmp_path):
    small = _statements_per_node(engine, tmp_path, 12)
    big = _statements_per_node(engine, tmp_path, 240)
    assert small == big, (small, big)
    print("statements per check_resource: %.2f" % small)


class _Dropping(rpc.Client):
    """A message client that loses every message (a broker that failed)."""

    def check_resource(self, *args, **kwargs):
        pass


def test_sweeper_resends_lost_messages(engine, tmp_path):
    from converge.workers import sweeper
    b = et.bundle(tmp_path, et.hot({'a': {'type': 'OS::Heat::None'},
                                    'b': {'type': 'OS::Heat::None',
                                          'depends_on': 'a'}}))
    real = engine.client
    engine._client = _Dropping()
    stack_id, trav = stacks.create(engine, 'lost', b, {})
    engine._client = real
    assert sweeper.sweep(engine, {engine.engine_id}, stall_timeout=60) == []
    sent = sweeper.sweep(engine, {engine.engine_id}, stall_timeout=0,
                         now=time.time() + 1)
    assert sent == [(stack_id, trav, 'u:a')]
    assert et.status(et.wait(engine, stack_id, trav).stack) == \
        'CREATE_COMPLETE'


def _two_queued(engine, tmp_path, name):
    """A stack of two independent nodes whose messages were never
    delivered; (its start, stack id, traversal id)."""
    b = et.bundle(tmp_path, et.hot({'a': {'type': 'OS::Heat::None'},
                                    'b': {'type': 'OS::Heat::None'}}))
    real = engine.client
    engine._client = _Dropping()
    t0 = time.time()
    stack_id, trav = stacks.create(engine, name, b, {})
    engine._client = real
    return t0, stack_id, trav


def _b_sent_again_only_once_nothing_moves(engine, stack_id, trav, t0):
    """'a' moved at t0 + 15: 'b' (queued since t0) is left alone 5 s
    later, and sent again once 10 s pass with nothing moving."""
    from converge.workers import sweeper
    members = {engine.engine_id}
    assert sweeper.sweep(engine, members, stall_timeout=10,
                         now=t0 + 20) == []
    assert sweeper.sweep(engine, members, stall_timeout=10,
                         now=t0 + 30) == [(stack_id, trav, 'u:b')]


def test_sweeper_leaves_queued_nodes_of_a_moving_traversal(engine, tmp_path):
    """Ready nodes waiting behind others in the queue are not lost: while
    their traversal still finishes nodes, they are not sent again."""
    t0, stack_id, trav = _two_queued(engine, tmp_path, 'queued')
    with engine.db.write() as s:  # 'a' finished 15 s later
        s.execute(sa.update(models.SyncPoint).where(
            models.SyncPoint.traversal_id == trav,
            models.SyncPoint.node == 'u:a').values(done=True,
                                                   updated_at=t0 + 15))
    _b_sent_again_only_once_nothing_moves(engine, stack_id, trav, t0)


def test_sweeper_leaves_queued_nodes_while_units_end_in_waits(
        engine, tmp_path):
    """Units that end in a wait (9,000 deployments' creates, each waiting
    for its signal) move the queue as much as units that finish: the
    nodes queued behind them are not sent again, however long no node
    finishes. Once nothing moves, they are."""
    t0, stack_id, trav = _two_queued(engine, tmp_path, 'waiting')
    with engine.db.begin() as conn:  # 'a' ran 15 s later, and waits
        assert api.sync_wait(conn, trav, 'u:a', None, 'signal:a')
        conn.execute(sa.update(models.SyncPoint).where(
            models.SyncPoint.traversal_id == trav,
            models.SyncPoint.node == 'u:a').values(updated_at=t0 + 15))
    _b_sent_again_only_once_nothing_moves(engine, stack_id, trav, t0)


def test_sweeper_ends_a_failing_traversal_with_nothing_in_flight(
        engine, tmp_path):
    """A failed unit leaves its traversal failing for the units still in
    flight to end; if the last of them read the state just before the
    failure committed, nobody ends it. The sweeper does, once the traversal
    has been quiet for stall_timeout, and the stack is not left
    IN_PROGRESS."""
    from converge.workers import sweeper
    from converge.engine import traversal
    b = et.bundle(tmp_path, et.hot({'a': {'type': 'OS::Heat::None'},
                                    'b': {'type': 'OS::Heat::None',
                                          'depends_on': 'a'}}))
    real = engine.client
    engine._client = _Dropping()
    t0 = time.time()
    stack_id, trav_id = stacks.create(engine, 'stuck', b, {})
    engine._client = real
    with engine.db.write() as s:
        traversal.fail(s, s.get(models.Traversal, trav_id),
                    'Resource CREATE failed: boom')
    members = {engine.engine_id}
    assert sweeper.sweep(engine, members, stall_timeout=60,
                         now=t0 + 30) == []
    with engine.db.read() as s:
        assert s.get(models.Stack, stack_id).status == 'IN_PROGRESS'
    assert sweeper.sweep(engine, members, stall_timeout=60,
                         now=t0 + 90) == []
    with engine.db.read() as s:
        stack = s.get(models.Stack, stack_id)
        assert et.status(stack) == 'CREATE_FAILED'
        assert 'boom' in stack.status_reason
        assert s.get(models.Traversal, trav_id).state == 'failed'


def test_sweeper_redispatches_a_dead_workers_resource(engine, tmp_path):
    from converge.workers import sweeper
    b = et.bundle(tmp_path, et.hot({'srv': {
        'type': 'OS::Nova::Server',
        'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}}}))
    real = engine.client
    engine._client = _Dropping()
    stack_id, trav = stacks.create(engine, 'dead', b, {})
    engine._client = real
    with engine.db.read() as s:
        row = [r for r in api.resources_live(s, stack_id)][0]
    with engine.db.begin() as c:  # a worker took it, then died
        api.resource_cas(c, row.id, row.atomic_key, status='IN_PROGRESS',
                         action='CREATE', engine_id='dead-worker',
                         traversal_id=trav)
    # still a member: nothing to do; gone from the group: sent again
    assert sweeper.sweep(engine, {'dead-worker'}, stall_timeout=60) == []
    assert sweeper.sweep(engine, {engine.engine_id}, stall_timeout=60) == \
        [(stack_id, trav, 'u:srv')]
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'CREATE_COMPLETE'
    assert len(engine.clients.compute.list_servers()) == 1


def test_converge_settles_a_row_left_in_progress(engine, tmp_path):
    b = et.bundle(tmp_path, et.hot({'a': {'type': 'OS::Heat::TestResource',
                                          'properties': {}}}))
    stack = et.run(engine, stacks.create, 'ip', b, {})
    row = et.resources(engine, stack)['a']
    with engine.db.begin() as c:  # a worker died mid-update, nothing changed
        api.resource_cas(c, row.id, row.atomic_key, action='UPDATE',
                         status='IN_PROGRESS', engine_id='gone')
    stack = et.run(engine, stacks.converge, stack.id)
    assert et.status(stack) == 'UPDATE_COMPLETE'
    row = et.resources(engine, stack)['a']
    assert (row.action, row.status) == ('UPDATE', 'COMPLETE')


def test_drift_scan_reports_what_changed_outside(engine, tmp_path):
    from converge.engine import drift
    b = et.bundle(tmp_path, et.hot({
        'up': {'type': 'OS::Nova::Server',
               'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}},
        'down': {'type': 'OS::Nova::Server',
                 'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}},
        'gone': {'type': 'OS::Nova::Server',
                 'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}}}))
    stack = et.run(engine, stacks.create, 'drift', b, {})
    rows = et.resources(engine, stack)
    assert drift.scan(engine, stack) == []
    engine.clients.compute.stop_server(rows['down'].physical_id)
    engine.clients.compute.delete_server(rows['gone'].physical_id)
    found = {d.name: d.detail for d in drift.scan(engine, stack)}
    assert set(found) == {'down', 'gone'}
    assert found['gone'] == 'gone' and 'status' in found['down']


def test_definition_cache_is_bounded_by_resources(engine):
    """A process keeps parsed templates up to a number of resources, not of
    versions; the one just parsed is kept whatever its size."""
    from converge import conf
    from types import SimpleNamespace as NS

    def defn(n):
        return NS(resources=dict.fromkeys(range(n)))

    stack = NS(id='s')
    conf.CONF.set_override('definition_cache_resources', 100)
    try:
        engine.remember('t1', stack, defn(40))
        engine.remember('t2', stack, defn(40))
        assert engine.definition('t1', stack) is not None  # t1 used last
        engine.remember('t3', stack, defn(40))  # 120 > 100: t2 goes
        assert set(k for k, _ in engine.definitions._defs) == {'t1', 't3'}
        engine.remember('big', stack, defn(500))
        assert [k for k, _ in engine.definitions._defs] == ['big']
    finally:
        conf.CONF.clear_override('definition_cache_resources')


def test_definition_is_parsed_once_when_threads_miss_together(engine):
    """Every worker thread misses the cache at the start of a traversal;
    one parses, the others wait and share its result."""
    from types import SimpleNamespace as NS
    threads = 6
    start = threading.Barrier(threads)
    inside = threading.Barrier(threads)  # only passes if all parse at once
    calls = []

    def parse(template_id, stack):
        calls.append(template_id)
        try:
            inside.wait(timeout=0.5)
        except threading.BrokenBarrierError:
            pass
        return NS(resources={})

    engine.definitions._parse = parse
    got = []

    def use():
        start.wait()
        got.append(engine.definition('t', NS(id='s')))

    pool = [threading.Thread(target=use) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert calls == ['t']
    assert len(got) == threads and all(d is got[0] for d in got)


def test_a_node_with_many_inputs_starts_after_all_of_them_once(
        engine, tmp_path):
    """More inputs than graph/plan.py's FAN_IN are counted in shards: the
    node still starts once, after the last of them; the stack (whose own
    node gathers as many) still ends when everything has, on create and
    on delete."""
    from converge.graph import plan
    n = plan.FAN_IN + 8
    res = {'i%d' % i: {'type': 'OS::Heat::TestResource',
                       'properties': _test_resource(
                           'v%d' % i, wait=0.3 if i == 5 else 0.0)}
           for i in range(n)}
    res.update({'l%d' % i: {'type': 'OS::Heat::None'} for i in range(n)})
    res['join'] = {'type': 'OS::Heat::Value', 'properties': {
        'value': {'list_join': [',', [{'get_attr': ['i%d' % i, 'output']}
                                      for i in range(n)]]}}}
    stack = et.run(engine, stacks.create, 'fan', et.bundle(
        tmp_path, et.hot(res)), {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    evs = et.events(engine, stack.id)
    start, end = _intervals(evs)
    assert start['join'] >= max(end['i%d' % i] for i in range(n))
    assert [e.status for e in evs if e.resource_name == 'join'] == [
        'IN_PROGRESS', 'COMPLETE']
    assert et.resources(engine, stack)['join'].attributes['value'] == \
        ','.join('v%d' % i for i in range(n))
    stack = et.run(engine, stacks.delete, stack.id)
    assert et.status(stack) == 'DELETE_COMPLETE'
    with engine.db.read() as s:
        assert s.execute(sa.select(sa.func.count()).select_from(
            models.SyncShard)).scalar() == 0


def test_a_fan_out_is_sent_in_at_most_fanout_messages_in_order():
    """Many nodes made ready together go in at most `[worker]
    fanout_messages` messages of at least `fanout_min_nodes`, in order
    and each exactly once; a few go together, one alone; in process, a
    message to each idle worker thread first."""
    from converge import conf
    from converge import listeners

    class Broker:
        def __init__(self):
            self.messages = []

        def cast(self, ctxt, method, **kw):
            self.messages.append((method, kw.get('nodes') or [kw['node']]))

    client = rpc.WorkerClient.__new__(rpc.WorkerClient)
    client.listeners, client._exchange = listeners.Listeners(), None
    client._idle = None
    client._client = broker = Broker()
    conf.CONF.set_override('fanout_messages', 4, group='worker')
    conf.CONF.set_override('fanout_min_nodes', 1, group='worker')
    try:
        client.check_resources('s', 't', ['n%d' % i for i in range(10)])
        in_four = [('check_resources', ['n0', 'n1', 'n2']),
                   ('check_resources', ['n3', 'n4', 'n5']),
                   ('check_resources', ['n6', 'n7']),
                   ('check_resources', ['n8', 'n9'])]
        assert broker.messages == in_four
        broker.messages.clear()
        client.send([('s', 't', 'a'), ('s', 'u', 'b'), ('s', 't', 'c')])
        assert broker.messages == [('check_resource', ['a']),
                                   ('check_resource', ['c']),
                                   ('check_resource', ['b'])]
        # at least 3 a message: 10 in 3, a few together, one alone
        conf.CONF.set_override('fanout_min_nodes', 3, group='worker')
        broker.messages.clear()
        client.check_resources('s', 't', ['n%d' % i for i in range(10)])
        assert broker.messages == [
            ('check_resources', ['n0', 'n1', 'n2', 'n3']),
            ('check_resources', ['n4', 'n5', 'n6']),
            ('check_resources', ['n7', 'n8', 'n9'])]
        broker.messages.clear()
        client.send([('s', 't', 'a'), ('s', 'u', 'b'), ('s', 't', 'c')])
        assert broker.messages == [('check_resources', ['a', 'c']),
                                   ('check_resource', ['b'])]
        # in process, with 4 threads idle: 10 in 4 (not 3), and 2 one a
        # message, each to a thread of its own
        client._idle = lambda: 4
        broker.messages.clear()
        client.check_resources('s', 't', ['n%d' % i for i in range(10)])
        assert broker.messages == in_four
        broker.messages.clear()
        client.check_resources('s', 't', ['a', 'b'])
        assert broker.messages == [('check_resource', ['a']),
                                   ('check_resource', ['b'])]
    finally:
        conf.CONF.clear_override('fanout_min_nodes', group='worker')
        conf.CONF.clear_override('fanout_messages', group='worker')
