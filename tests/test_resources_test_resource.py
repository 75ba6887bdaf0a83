"""OS::Heat::TestResource."""

import time

import pytest

from converge import exception
from converge.resources import base
from converge.resources import test_resource as tr
from tests.resource_fakes import FakeClients, again, make

TR = tr.TestResource


def test_schema_defaults():
    out = TR.validate_properties({})
    assert out == {'value': 'test_string', 'update_replace': False,
                   'fail': False, 'client_name': '', 'entity_name': '',
                   'wait_secs': 0, 'attr_wait_secs': 0,
                   'constraint_prop_secs': 0}


def test_schema_rejects_bad_values():
    cases = [({'fail': 'perhaps'}, ['fail']),
             ({'wait_secs': 'long'}, ['wait_secs']),
             ({'action_wait_secs': {'create': 'x'}},
              ['action_wait_secs', 'create']),
             ({'action_wait_secs': {'rebuild': 1}},
              ['action_wait_secs', 'rebuild']),
             ({'nope': 1}, ['nope'])]
    for props, path in cases:
        with pytest.raises(exception.InvalidTemplate) as e:
            TR.validate_properties(props, path=['resources', 't',
                                                'properties'])
        assert e.value.path == ['resources', 't', 'properties'] + path


def test_update_allowed_flags():
    schema = TR.properties_schema
    assert not schema['update_replace_value'].update_allowed
    for name in ('value', 'update_replace', 'fail', 'wait_secs',
                 'action_wait_secs', 'attr_wait_secs', 'client_name',
                 'entity_name', 'constraint_prop_secs'):
        assert schema[name].update_allowed, name
    assert TR.logical is False


def test_create_stores_value():
    t = make(TR, 't', {'value': 'hello'})
    assert t.observe() is None
    t.create()
    assert t.physical_id.startswith('mystack-t-')
    assert t.observe() == {}
    assert t.get_attributes({}) == {'output': 'hello'}
    assert t.reference_id() == t.physical_id


def test_create_fail():
    t = make(TR, 'bad', {'fail': True})
    with pytest.raises(exception.ResourceFailure) as e:
        t.create()
    assert str(e.value) == 'Test Resource failed bad'
    assert t.physical_id is None and t.observe() is None


def test_update_in_place():
    t = make(TR, 't', {'value': 'a'})
    t.create()
    t2 = again(t, {'value': 'b'})
    assert t2.needs_replace(t.properties) is False
    t2.update(t.properties, {})
    assert t2.get_attributes({}) == {'output': 'b'}
    assert t2.physical_id == t.physical_id


def test_update_fail():
    t = make(TR, 't', {'value': 'a'})
    t.create()
    t2 = again(t, {'value': 'b', 'fail': True})
    assert t2.needs_replace(t.properties) is False
    with pytest.raises(exception.ResourceFailure) as e:
        t2.update(t.properties, {})
    assert 'Test Resource failed t' in str(e.value)
    assert t2.data['value'] == 'a'  # not stored on failure
    # fail without a value change fails too
    t3 = again(t, {'value': 'a', 'fail': True})
    with pytest.raises(exception.ResourceFailure):
        t3.update(t.properties, {})


def test_delete_never_fails():
    t = make(TR, 't', {'fail': True})
    t.delete()


def test_update_replace():
    t = make(TR, 't', {'value': 'a'})
    t.create()
    # turning update_replace on (with or without a value change) replaces
    t2 = again(t, {'value': 'b', 'update_replace': True})
    assert t2.needs_replace(t.properties) is True
    with pytest.raises(exception.UpdateReplace):
        t2.update(t.properties, {})
    # with update_replace already on, a value change replaces
    t3 = again(t2)
    t4 = again(t3, {'value': 'c', 'update_replace': True})
    assert t4.needs_replace(t3.properties) is True
    # ... but other changes don't
    t5 = again(t3, {'value': 'b', 'update_replace': True, 'wait_secs': 0.01})
    assert t5.needs_replace(t3.properties) is False


def test_update_replace_value_always_replaces():
    t = make(TR, 't', {'update_replace_value': 'x'})
    t.create()
    t2 = again(t, {'update_replace_value': 'y'})
    assert t2.needs_replace(t.properties) is True


def _time_up(t):
    t.data['waiting']['until'] = time.time() - 1


def test_waits_are_returned_not_slept():
    """A step that takes time returns a Wait (the engine comes back); run
    again once the time is up, it is done."""
    t = make(TR, 't', {'wait_secs': 20,
                       'action_wait_secs': {'delete': 10}})
    assert t._wait_secs('create') == 20
    assert t._wait_secs('delete') == 10
    wait = t.create()
    assert isinstance(wait, base.Wait) and 19 < wait.after <= 20
    again_ = t.create()  # too early: still waiting, not started anew
    assert isinstance(again_, base.Wait) and again_.after <= wait.after
    _time_up(t)
    assert t.create() is None
    assert isinstance(t.delete(), base.Wait)
    _time_up(t)
    assert t.delete() is None
    assert t.get_attributes({})['output'] == 'test_string'


def test_a_wait_started_under_other_properties_starts_again():
    t = make(TR, 't', {'wait_secs': -1})
    assert isinstance(t.create(), base.Wait)  # forever
    t2 = again(t, {'wait_secs': 0})
    assert t2.create() is None
    assert 'waiting' not in t2.data


def test_action_wait_secs_for_update():
    t = make(TR, 't', {'value': 'a'})
    t.create()
    t2 = again(t, {'value': 'b', 'action_wait_secs': {'update': 5}})
    assert isinstance(t2.update(t.properties, {}), base.Wait)
    assert isinstance(t2.update(t.properties, {}), base.Wait)
    _time_up(t2)
    assert t2.update(t.properties, {}) is None
    assert t2.get_attributes({}) == {'output': 'b'}


def test_attr_wait_secs():
    t = make(TR, 't', {'attr_wait_secs': 0.01})
    t.create()
    assert t.get_attributes({}) == {'output': 'test_string'}


def test_polls_client_entity_while_waiting():
    clients = FakeClients()
    t = make(TR, 't', {'value': 'srv-1', 'client_name': 'compute',
                       'entity_name': 'servers', 'wait_secs': 0.01},
             clients=clients)
    assert isinstance(t.create(), base.Wait)
    t.create()  # polling a missing server is only simulated effort
    assert clients.compute.ops('get')
