"""OS::Heat::RandomString."""

import string

import pytest

from converge import exception
from converge.resources import random_string as rs
from tests.resource_fakes import again, make


def V(props, path=()):
    return rs.RandomString.validate_properties(props, path=path)


def test_defaults():
    assert V({}) == {'length': 32}


def test_length_range():
    for bad in (0, 513, 'abc'):
        with pytest.raises(exception.InvalidTemplate) as e:
            V({'length': bad}, path=['resources', 'r', 'properties'])
        assert e.value.path == ['resources', 'r', 'properties', 'length']


def test_class_defaults_and_bad_class():
    out = V({'character_classes': [{}]})
    assert out['character_classes'] == [{'class': 'lettersdigits',
                                         'min': 1}]
    with pytest.raises(exception.InvalidTemplate) as e:
        V({'character_classes': [{'class': 'emoji'}]})
    assert e.value.path == ['character_classes', 0, 'class']


def test_sequence_requires_sequence_key():
    with pytest.raises(exception.InvalidTemplate) as e:
        V({'character_sequences': [{'min': 2}]})
    assert e.value.path == ['character_sequences', 0, 'sequence']


def test_deprecated_sequence_conflicts_with_classes():
    with pytest.raises(exception.InvalidTemplate) as e:
        V({'sequence': 'digits', 'character_classes': [{'class': 'letters'}]})
    assert e.value.path == ['sequence']


def test_minimums_cannot_exceed_length():
    with pytest.raises(exception.InvalidTemplate) as e:
        V({'length': 4, 'character_classes': [{'class': 'digits', 'min': 3}],
           'character_sequences': [{'sequence': '!@', 'min': 2}]})
    assert e.value.path == ['length']


def test_default_value_is_32_lettersdigits():
    r = make(rs.RandomString)
    r.create()
    value = r.data['value']
    assert len(value) == 32
    assert set(value) <= set(string.ascii_letters + string.digits)


def test_length_and_classes():
    for _ in range(20):
        r = make(rs.RandomString, props={
            'length': 12,
            'character_classes': [{'class': 'digits', 'min': 4},
                                  {'class': 'lowercase', 'min': 2}],
            'character_sequences': [{'sequence': '!#', 'min': 3}]})
        r.create()
        v = r.data['value']
        assert len(v) == 12
        assert sum(c in string.digits for c in v) >= 4
        assert sum(c in string.ascii_lowercase for c in v) >= 2
        assert sum(c in '!#' for c in v) >= 3
        assert set(v) <= set(string.digits + string.ascii_lowercase + '!#')


def test_deprecated_sequence():
    r = make(rs.RandomString, props={'length': 50, 'sequence': 'octdigits'})
    r.create()
    assert len(r.data['value']) == 50
    assert set(r.data['value']) <= set(string.octdigits)


def test_hexdigits_uppercase():
    r = make(rs.RandomString, props={
        'length': 64, 'character_classes': [{'class': 'hexdigits'}]})
    r.create()
    assert set(r.data['value']) <= set(string.digits + 'ABCDEF')


def test_value_attribute_and_reference():
    r = make(rs.RandomString, 'pw', {'length': 8})
    assert r.reference_id() == 'pw'
    r.create()
    v = r.data['value']
    assert r.get_attributes({}) == {'value': v}
    assert r.reference_id() == v
    assert r.observe() == {}
    assert rs.RandomString.logical is True


def test_create_again_keeps_value():
    r = make(rs.RandomString)
    r.create()
    v = r.data['value']
    r2 = again(r)
    r2.create()
    assert r2.data['value'] == v


def test_every_change_replaces():
    r = make(rs.RandomString, props={'length': 8})
    r.create()
    for change in ({'length': 9}, {'length': 8, 'salt': 'x'},
                   {'length': 8, 'character_classes': [{'class': 'digits'}]}):
        assert again(r, change).needs_replace(r.properties) is True
    assert again(r, {'length': 8}).needs_replace(r.properties) is False


def test_update_in_place_keeps_value():
    r = make(rs.RandomString, props={'length': 8})
    r.create()
    v = r.data['value']
    r2 = again(r)
    r2.update(r.properties, {})
    assert r2.data['value'] == v
