"""Liveness: work nobody is doing is found and resumed, and work somebody
is doing is never taken for stranded (sweeper.py, locks.py, the unit's
retry)."""

import os
import signal
import threading
import time

import pytest
import sqlalchemy as sa

from converge.db import api
from converge.db import models
from converge.messaging import rpc
from converge.engine import stacks
from converge.workers import sweeper
from tests import enginetools as et


class _Dropping(rpc.Client):
    """A message client that loses every message."""

    def check_resource(self, *args, **kwargs):
        pass


def _one_server_claimed(engine, tmp_path, by, trav_state=None):
    """A one-server stack whose row a worker `by` claimed and then left
    IN_PROGRESS (it died, or dropped the unit); the message is lost."""
    b = et.bundle(tmp_path, et.hot({'srv': {
        'type': 'OS::Nova::Server',
        'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}}}))
    real = engine.client
    engine._client = _Dropping()
    stack_id, trav = stacks.create(engine, 'claimed', b, {})
    engine._client = real
    with engine.db.read() as s:
        row = list(api.resources_live(s, stack_id))[0]
    with engine.db.begin() as c:
        api.resource_cas(c, row.id, row.atomic_key, status='IN_PROGRESS',
                         action='CREATE', engine_id=by, traversal_id=trav)
    return stack_id, trav


class _Holder:
    """Another worker holding a resource's lock (a unit of work running)."""

    def __init__(self, engine, stack_id, name):
        self.taken, self.done = threading.Event(), threading.Event()
        self.t = threading.Thread(target=self._hold,
                                  args=(engine, stack_id, name))
        self.t.start()
        assert self.taken.wait(10)

    def _hold(self, engine, stack_id, name):
        with engine.locks.resource(stack_id, name, wait=False):
            self.taken.set()
            self.done.wait(30)

    def release(self):
        self.done.set()
        self.t.join()


def test_a_row_whose_lock_is_held_is_not_taken_for_a_dead_workers(
        engine, tmp_path):
    """The row names a worker that left the group (paused past the
    heartbeat timeout, say), but a unit of work holds the resource's
    lock: somebody is on it, so nothing is sent again until the lock is
    free."""
    stack_id, trav = _one_server_claimed(engine, tmp_path, 'paused-worker')
    holder = _Holder(engine, stack_id, 'srv')
    try:
        assert sweeper.sweep(engine, {engine.engine_id}, 60) == []
    finally:
        holder.release()
    assert sweeper.sweep(engine, {engine.engine_id}, 60) == \
        [(stack_id, trav, 'u:srv')]
    assert et.status(et.wait(engine, stack_id, trav).stack) == \
        'CREATE_COMPLETE'


def test_a_unit_that_ends_as_the_sweep_looks_is_not_sent_again(
        engine, tmp_path, monkeypatch):
    """A worker paused past the heartbeat timeout comes back and finishes
    its unit between the sweep's read of the rows and its look at the
    lock: the lock is free by then, and the worker not yet back in the
    group, but its row is written. Nothing is sent again."""
    stack_id, trav = _one_server_claimed(engine, tmp_path, 'was-paused')
    idle = engine.locks.idle

    def finishes_first(stack, name):
        # the unit records its row, then lets its lock go
        with engine.db.read() as s:
            row = list(api.resources_live(s, stack_id))[0]
        with engine.db.begin() as c:
            api.resource_cas(c, row.id, row.atomic_key, status='COMPLETE',
                             engine_id=None)
        return idle(stack, name)
    monkeypatch.setattr(engine.locks, 'idle', finishes_first)
    assert sweeper.sweep(engine, {engine.engine_id}, 60) == []


def test_a_live_workers_dropped_unit_is_resumed(engine, tmp_path):
    """A live worker claimed the row and then dropped the unit (the
    database was away longer than it retried): once nobody has worked on
    it for stall_timeout and its lock is free, it is sent again, and the
    stack completes with one server."""
    stack_id, trav = _one_server_claimed(engine, tmp_path, engine.engine_id)
    members = {engine.engine_id}
    now = time.time()
    # not yet quiet for stall_timeout: left alone
    assert sweeper.sweep(engine, members, 60, now=now + 30) == []
    # quiet, but somebody holds the lock: left alone
    holder = _Holder(engine, stack_id, 'srv')
    try:
        assert sweeper.sweep(engine, members, 60, now=now + 90) == []
    finally:
        holder.release()
    assert sweeper.sweep(engine, members, 60, now=now + 90) == \
        [(stack_id, trav, 'u:srv')]
    assert et.status(et.wait(engine, stack_id, trav).stack) == \
        'CREATE_COMPLETE'
    assert len(engine.clients.compute.list_servers()) == 1


def test_a_resent_or_waiting_node_is_not_sent_again_at_once(engine,
                                                             tmp_path):
    """A node sent again is left for stall_timeout before the next try;
    a node waiting on record is its timer's, not the sweeper's."""
    stack_id, trav = _one_server_claimed(engine, tmp_path, engine.engine_id)
    real = engine.client
    engine._client = _Dropping()
    members = {engine.engine_id}
    now = time.time()
    try:
        assert sweeper.sweep(engine, members, 60, now=now + 90) == \
            [(stack_id, trav, 'u:srv')]
        assert sweeper.sweep(engine, members, 60, now=now + 91) == []
        with engine.db.write() as s:
            s.execute(sa.update(models.SyncPoint).where(
                models.SyncPoint.traversal_id == trav,
                models.SyncPoint.node == 'u:srv').values(
                    wake_at=now + 300))
        assert sweeper.sweep(engine, members, 60, now=now + 200) == []
    finally:
        engine._client = real


def test_a_failing_traversal_does_not_wait_for_a_dropped_unit(engine,
                                                             tmp_path):
    """In a failing traversal, a live worker's row that nobody works on
    is marked FAILED once quiet for stall_timeout, so the stack settles
    (it would stay IN_PROGRESS for good)."""
    from converge.engine import traversal
    stack_id, trav = _one_server_claimed(engine, tmp_path, engine.engine_id)
    with engine.db.write() as s:
        traversal.fail(s, s.get(models.Traversal, trav), 'boom')
    members = {engine.engine_id}
    now = time.time()
    assert sweeper.sweep(engine, members, 60, now=now + 30) == []
    with engine.db.read() as s:
        assert s.get(models.Stack, stack_id).status == 'IN_PROGRESS'
    sweeper.sweep(engine, members, 60, now=now + 90)
    with engine.db.read() as s:
        assert et.status(s.get(models.Stack, stack_id)) == 'CREATE_FAILED'
        row = list(api.resources_live(s, stack_id))[0]
        assert row.status == 'FAILED'
        assert 'nobody has worked on it' in row.status_reason


def test_a_unit_is_retried_past_any_fixed_budget(engine, monkeypatch):
    """A unit that keeps hitting a database error is sent again however
    many times it failed (an outage outlasts any fixed budget), at most
    [worker] retry_max_delay apart."""
    from converge.workers import pool
    from converge.workers import reconcile
    timers = []

    class Timer:
        def __init__(self, delay, fn, args):
            timers.append((delay, args))
            self.daemon = False

        def start(self):
            pass

    def down(*args):
        raise sa.exc.OperationalError('SELECT 1', {}, Exception('gone'))

    monkeypatch.setattr(reconcile, 'check_resource', down)
    monkeypatch.setattr(pool.threading, 'Timer', Timer)
    ep = pool.Endpoint(engine)
    for attempt in (0, 3, 5, 40, 1000):
        ep.check_resource({}, 'stack', 'trav', 'u:a', attempt=attempt)
    assert [d for d, _ in timers] == [1, 8, 30.0, 30.0, 30.0]
    assert [a[-1] for _, a in timers] == [1, 4, 6, 41, 1001]


# -- distributed: a paused worker rejoins --------------------------------

@pytest.mark.distributed
@pytest.mark.xdist_group('services')
def test_a_worker_paused_past_the_heartbeat_timeout_rejoins(tmp_path):
    """SIGSTOP a worker for longer than the coordination timeout: the
    other worker's sweeps take it out of the group; once resumed, it is
    back in the group within a heartbeat, and says so."""
    from tests.distributed import Deployment, require, wait_for
    require('postgresql', 'rabbitmq', 'redis')
    d = Deployment(tmp_path, coordination_timeout=1)
    try:
        d.start_worker()
        d.start_worker()
        ids = [d.engine_id(0), d.engine_id(1)]
        probe = d.coordinator()
        try:
            wait_for(lambda: set(ids) <= d.members(probe), timeout=30)
            paused = d.workers[0][0]
            os.killpg(paused.pid, signal.SIGSTOP)
            try:
                # worker 1 sweeps every second and lists the group
                wait_for(lambda: ids[0] not in d.members(probe), timeout=30)
            finally:
                os.killpg(paused.pid, signal.SIGCONT)
            wait_for(lambda: ids[0] in d.members(probe), timeout=10)
        finally:
            probe.stop()
        log = open(d.workers[0][1]).read()
        assert 'rejoined' in log
    finally:
        d.close()
