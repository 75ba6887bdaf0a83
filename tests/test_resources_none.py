"""OS::Heat::None."""

import uuid

from converge.resources import none
from tests.resource_fakes import again, make


def test_accepts_any_properties():
    values = none.NoneResource.validate_properties(
        {'anything': 1, 'nested': {'x': [1, 2]}})
    assert values == {'anything': 1, 'nested': {'x': [1, 2]}}


def test_create_sets_stable_uuid_physical_id():
    r = make(none.NoneResource, props={'a': 1})
    assert r.observe() is None
    r.create()
    uuid.UUID(r.physical_id)
    first = r.physical_id
    assert r.observe() == {}
    # create again (after a crash): the same id
    r2 = again(r)
    r2.physical_id = None
    r2.create()
    assert r2.physical_id == first
    assert none.NoneResource.logical is True


def test_never_replaced_and_update_is_noop():
    r = make(none.NoneResource, props={'a': 1})
    r.create()
    r2 = again(r, {'a': 2, 'b': 3})
    assert r2.needs_replace({'a': 1}) is False
    r2.update({'a': 1}, {})
    assert r2.physical_id == r.physical_id
    assert r2.drift({}) == set()


def test_attributes_are_none():
    r = make(none.NoneResource)
    r.create()
    attrs = r.get_attributes({})
    assert attrs.get('whatever') is None
    assert r.get_attribute('whatever') is None
    assert r.reference_id() == r.physical_id


def test_delete_and_check():
    r = make(none.NoneResource)
    r.create()
    r.check(r.observe())
    r.delete()


def test_short_id_and_physical_name():
    u = str(uuid.uuid4())
    sid = none.short_id(u)
    assert len(sid) == 12 and sid == sid.lower()
    assert none.short_id(u) == sid
    r = make(none.NoneResource, name='thing', uuid_=u)
    assert none.physical_resource_name(r) == 'mystack-thing-%s' % sid
    long = make(none.NoneResource, name='x' * 80, uuid_=u)
    name = none.physical_resource_name(long, 53)
    assert len(name) == 53 and name.endswith(sid) and name.startswith('my-')
