"""OS::Heat::Value."""

import pytest

from converge import exception
from converge.resources import properties as p
from converge.resources import value
from tests.resource_fakes import again, make


def V(props):
    return value.Value.validate_properties(props)


def test_value_required():
    with pytest.raises(exception.InvalidTemplate) as e:
        V({})
    assert e.value.path == ['value']


def test_any_value_without_type():
    assert V({'value': {'a': [1]}}) == {'value': {'a': [1]}}
    assert V({'value': [1, 'x']})['value'] == [1, 'x']


def test_type_allowed_values():
    with pytest.raises(exception.InvalidTemplate) as e:
        V({'value': 1, 'type': 'map'})
    assert e.value.path == ['type']


@pytest.mark.parametrize('vtype,given,expected', [
    ('string', 42, '42'),
    ('string', 'abc', 'abc'),
    ('number', '42', 42),
    ('number', '4.5', 4.5),
    ('boolean', 'yes', True),
    ('boolean', 'false', False),
    ('comma_delimited_list', 'a,b, c', ['a', 'b', 'c']),
    ('comma_delimited_list', ['a', 'b'], ['a', 'b']),
    ('json', {'k': 1}, {'k': 1}),
    ('json', '{"k": [1, 2]}', {'k': [1, 2]}),
])
def test_coercion_by_type(vtype, given, expected):
    assert V({'value': given, 'type': vtype})['value'] == expected


@pytest.mark.parametrize('vtype,given', [
    ('number', 'abc'),
    ('boolean', 'maybe'),
    ('string', {'a': 1}),
    ('json', 'not json'),
    ('json', [1, 2]),
    ('comma_delimited_list', {'a': 1}),
])
def test_bad_values_rejected_with_path(vtype, given):
    with pytest.raises(exception.InvalidTemplate) as e:
        value.Value.validate_properties({'value': given, 'type': vtype},
                                        path=['resources', 'v',
                                              'properties'])
    assert e.value.path == ['resources', 'v', 'properties', 'value']


def test_unknown_value_passes():
    out = V({'value': p.UNKNOWN, 'type': 'number'})
    assert out['value'] is p.UNKNOWN


def test_lifecycle_and_attribute():
    v = make(value.Value, 'v', {'value': '3', 'type': 'number'})
    assert v.observe() is None
    v.create()
    assert v.physical_id and v.observe() == {}
    assert v.get_attributes({}) == {'value': 3}
    assert value.Value.logical is True
    v2 = again(v, {'value': 'x'})
    assert v2.needs_replace(v.properties) is False
    v2.update(v.properties, {})
    assert v2.get_attributes({}) == {'value': 'x'}
    assert v2.physical_id == v.physical_id
    v2.check({})
    v2.delete()
