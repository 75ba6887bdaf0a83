"""OS::Heat::SoftwareConfig."""

import uuid

import pytest

from converge import exception
from converge.resources import software_config as sc
from tests.resource_fakes import FakeClients, again, make

SC = sc.SoftwareConfig


def test_defaults_and_nested_defaults():
    out = SC.validate_properties({
        'config': 'echo hi',
        'inputs': [{'name': 'foo'}],
        'outputs': [{'name': 'result'}]})
    assert out['group'] == 'Heat::Ungrouped'
    assert out['inputs'] == [{'name': 'foo', 'type': 'String',
                              'replace_on_change': False}]
    assert out['outputs'] == [{'name': 'result', 'type': 'String',
                               'error_output': False}]


def test_bad_values_have_paths():
    cases = [({'inputs': [{'description': 'no name'}]},
              ['inputs', 0, 'name']),
             ({'inputs': [{'name': 'a', 'type': 'Integer'}]},
              ['inputs', 0, 'type']),
             ({'outputs': [{'name': 'a'}, {'name': 'b', 'error_output': 'x'}]},
              ['outputs', 1, 'error_output']),
             ({'options': 'nope'}, ['options']),
             ({'config': {'a': 1}}, ['config'])]
    for props, path in cases:
        with pytest.raises(exception.InvalidTemplate) as e:
            SC.validate_properties(props, path=['resources', 'c',
                                                'properties'])
        assert e.value.path == ['resources', 'c', 'properties'] + path


def test_nothing_update_allowed():
    assert not any(s.update_allowed for s in SC.properties_schema.values())
    assert SC.logical is True


def test_create_stores_config_idempotently():
    clients = FakeClients()
    c = make(SC, 'cfg', {'config': 'echo hi', 'group': 'script',
                         'options': {'o': 1},
                         'inputs': [{'name': 'x', 'default': 3}]},
             clients=clients)
    assert c.observe() is None
    c.create()
    uuid.UUID(c.physical_id)
    row = clients.configs.get(c.physical_id)
    assert row['config'] == 'echo hi' and row['group'] == 'script'
    assert row['options'] == {'o': 1}
    assert row['inputs'][0]['name'] == 'x'
    assert row['name'].startswith('mystack-cfg-')
    # again after a crash (physical_id not persisted): same id, one row
    c2 = again(c)
    c2.physical_id = None
    c2.create()
    assert c2.physical_id == c.physical_id
    assert list(clients.configs.rows) == [c.physical_id]
    assert c.observe()['config'] == 'echo hi'
    assert c.get_attributes(c.observe()) == {'config': 'echo hi'}
    assert c.reference_id() == c.physical_id


def test_config_id_differs_per_resource_version():
    clients = FakeClients()
    a = make(SC, 'cfg', {'config': 'a'}, clients=clients)
    b = make(SC, 'cfg', {'config': 'b'}, clients=clients)
    a.create()
    b.create()
    assert a.physical_id != b.physical_id
    assert len(clients.configs.rows) == 2


def test_any_change_replaces():
    clients = FakeClients()
    c = make(SC, 'cfg', {'config': 'a'}, clients=clients)
    c.create()
    for change in ({'config': 'b'}, {'config': 'a', 'group': 'script'},
                   {'config': 'a', 'options': {'x': 1}},
                   {'config': 'a', 'inputs': [{'name': 'i'}]},
                   {'config': 'a', 'outputs': [{'name': 'o'}]}):
        c2 = again(c, change)
        assert c2.needs_replace(c.properties) is True
        with pytest.raises(exception.UpdateReplace):
            c2.update(c.properties, c.observe())
    assert again(c).needs_replace(c.properties) is False


def test_delete_and_missing_row():
    clients = FakeClients()
    c = make(SC, 'cfg', {'config': 'a'}, clients=clients)
    c.create()
    c.check(c.observe())
    c.delete()
    assert clients.configs.rows == {}
    assert c.observe() is None
    with pytest.raises(exception.ResourceFailure):
        c.check(c.observe())
    c.delete()  # absent is fine
    # a row lost under an unchanged resource is stored again by update
    c.update(c.properties, None)
    assert clients.configs.get(c.physical_id)['config'] == 'a'


def test_delete_without_physical_id_removes_derived_row():
    clients = FakeClients()
    c = make(SC, 'cfg', {'config': 'a'}, clients=clients)
    c.create()
    c2 = again(c)
    c2.physical_id = None
    c2.delete()
    assert clients.configs.rows == {}
