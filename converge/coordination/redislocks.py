"""Several of tooz's Redis locks taken, or let go, in one round trip.

A message of a fan-out carries several nodes, and each takes its
resource's lock before it runs (workers/reconcile.py). tooz takes a lock
with one command (SET NX PX) and lets it go with one script, each a round
trip: at the start and the end of a ramp of 2,000 servers, a fifth of a
worker's Python time. Here the same commands go through one pipeline, and
each lock is left exactly as tooz's own acquire or release leaves it (the
token on its redis-py lock, and its place among the coordinator's
acquired locks, which its heartbeat extends), so tooz's release,
heartbeat and ownership checks work on it unchanged.

That needs tooz's and redis-py's internals: where they are not as
expected (another driver, another version), `usable` is False and the
caller takes each lock alone.
"""

import uuid

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def usable(coord, lock):
    """Whether `lock` (from `coord`, a tooz coordinator) can be taken
    here."""
    inner = getattr(lock, '_lock', None)
    return (hasattr(coord, '_acquired_locks') and
            hasattr(lock, '_exclusive_access') and
            hasattr(inner, 'local') and hasattr(inner, 'lua_release') and
            hasattr(inner, 'timeout') and hasattr(inner, 'redis') and
            hasattr(inner.redis, 'pipeline'))


def acquire_many(coord, locks):
    """Take each of `locks` that nobody holds, without waiting; returns
    those taken."""
    if not locks:
        return []
    pipe = locks[0]._lock.redis.pipeline(transaction=False)
    tokens = []
    for lock in locks:
        inner = lock._lock
        token = uuid.uuid1().hex.encode()
        tokens.append(token)
        pipe.set(inner.name, token, nx=True,
                 px=int(inner.timeout * 1000) if inner.timeout else None)
    taken = []
    for lock, token, ok in zip(locks, tokens, pipe.execute()):
        if not ok:
            continue
        lock._lock.local.token = token
        with lock._exclusive_access:
            coord._acquired_locks.add(lock)
        taken.append(lock)
    return taken


def release_many(coord, locks):
    """Let go of `locks` (taken by acquire_many or tooz's acquire). One
    that expired meanwhile is logged, as tooz does."""
    held = []
    for lock in locks:
        with lock._exclusive_access:
            coord._acquired_locks.discard(lock)
            token, lock._lock.local.token = lock._lock.local.token, None
        if token is not None:
            held.append((lock, token))
    if not held:
        return
    pipe = held[0][0]._lock.redis.pipeline(transaction=False)
    for lock, token in held:
        lock._lock.lua_release(keys=[lock._lock.name], args=[token],
                               client=pipe)
    for (lock, _), released in zip(held, pipe.execute()):
        if not released:
            LOG.error('Unable to release lock %r: no longer owned', lock)
