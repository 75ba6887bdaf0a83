"""A batch's resource locks on Redis, taken and let go in one round trip
each (coordination/redislocks.py), exclude and are excluded by tooz's own
locks, are kept alive by tooz's heartbeat, and are gone once released."""

import uuid

import pytest

from converge.coordination import locks as locks_mod
from converge.coordination import redislocks
from tests.distributed import require

pytestmark = pytest.mark.distributed

URL = 'redis://127.0.0.1:6379?timeout=5'


@pytest.fixture
def two():
    require('redis')
    a = locks_mod.Locks(URL, 'a-' + uuid.uuid4().hex[:8])
    b = locks_mod.Locks(URL, 'b-' + uuid.uuid4().hex[:8])
    yield a, b
    a.stop()
    b.stop()


def test_a_batch_takes_only_what_nobody_holds_and_lets_it_go(two):
    a, b = two
    stack = uuid.uuid4().hex
    alone = b.try_resource(stack, 'web1')          # tooz's own acquire
    assert redislocks.usable(a._coord, alone)      # the pipelined path
    taken = a.try_resources(stack, ['web0', 'web1', 'web2'])
    assert sorted(taken) == ['web0', 'web2']
    # held, as tooz holds a lock: the other member cannot take them, and
    # the coordinator's heartbeat extends them
    assert b.try_resources(stack, ['web0', 'web2']) == {}
    assert all(lock.acquired and lock.is_still_owner()
               for lock in taken.values())
    # tooz's heartbeat renews them (with the token this module set)
    assert all(lock.heartbeat() for lock in taken.values())
    a.release_resources(list(taken.values()))
    assert not any(lock.acquired for lock in taken.values())
    # gone from Redis: the other member takes them at once
    again = b.try_resources(stack, ['web0', 'web2'])
    assert sorted(again) == ['web0', 'web2']
    b.release_resources(list(again.values()))
    b.release_resource(alone)
    assert sorted(a.try_resources(stack, ['web1'])) == ['web1']


def test_a_lock_taken_in_a_batch_is_released_by_tooz_too(two):
    a, b = two
    stack = uuid.uuid4().hex
    (lock,) = a.try_resources(stack, ['db']).values()
    assert lock.release()                           # tooz's own release
    assert not lock.acquired
    assert b.try_resource(stack, 'db') is not None
