"""Finding work that nobody is doing, and sending it again.

Four ways work gets stranded, all covered here:

- a worker died holding a resource (its row is IN_PROGRESS under an
  engine id that has left the tooz group, its heartbeats expired);
- a live worker dropped a unit it could not finish (the database was away
  for longer than its retries, or it gave up): the row is IN_PROGRESS
  under a member of the group, nobody holds its lock, it is not waiting,
  and it has not changed for ``stall_timeout``;
- a message was lost (a broker restart, a worker killed after taking the
  message but before claiming the row): a node is ready (all inputs in)
  but not done, nothing has touched it for ``stall_timeout``, and its
  traversal as a whole has moved no node on in that time: finished none,
  and recorded no node's wait. (A ready node of a traversal whose units
  still end is waiting in the queue behind them: 20,000 leaves cast at
  once wait longer than any timeout, and so do the signals' wakes behind
  9,000 deployments' creates that each end in a wait; sending them all
  again would only double the queue. A unit that ends in a wait ran, so
  the queue moves. The price: while some node of the traversal keeps
  re-checking, say a server polled as it builds, a lost message of the
  same traversal is sent again only once those checks stop.)
- a failing traversal that nobody ended: the unit that failed saw another
  still in flight, and that one checked the traversal's state just before
  the failure committed.

Sending a node again is always safe: a done node's message is dropped,
the action is idempotent, and the fencing counter stops a slow original.
Still, work somebody is doing is never taken for stranded: a unit of work
holds its resource's lock from start to end, so a row whose lock is held
is left alone, whoever the row names (a worker that was paused past the
heartbeat timeout is out of the group until its next beat rejoins it),
and so is a row written after the sweep read it (that worker, back,
finished its unit and let the lock go before its next beat).
"""

import datetime
import time

import sqlalchemy as sa
from oslo_log import log as logging

from converge.db import api
from converge.db import models
from converge.engine import traversal as traversal_mod
from converge.graph import plan

LOG = logging.getLogger(__name__)


node_of = plan.node_of


def sweep(engine, members, stall_timeout, now=None):
    """One pass. Returns the (traversal, node) pairs sent again."""
    now = now or time.time()
    sent = []
    with engine.db.read() as s:
        orphans = s.execute(
            sa.select(models.Resource, models.Traversal)
            .join(models.Stack, models.Stack.id == models.Resource.stack_id)
            .join(models.Traversal,
                  models.Traversal.id == models.Resource.traversal_id)
            .where(models.Resource.status == 'IN_PROGRESS',
                   # a waiting row belongs to no engine: the timer
                   # resumes it
                   models.Resource.engine_id.is_not(None),
                   models.Stack.current_traversal == models.Traversal.id,
                   models.Traversal.state.in_(['running', 'failing']))
        ).all()
        stalled = s.execute(
            sa.select(models.SyncPoint.stack_id,
                      models.SyncPoint.traversal_id, models.SyncPoint.node,
                      models.SyncPoint.resource_id)
            .join(models.Traversal,
                  models.Traversal.id == models.SyncPoint.traversal_id)
            .where(models.SyncPoint.remaining == 0,
                   models.SyncPoint.done.is_(False),
                   models.SyncPoint.node != 'stack',
                   models.SyncPoint.updated_at < now - stall_timeout,
                   # a waiting node is the timer's (or its event's)
                   models.SyncPoint.wake_at.is_(None),
                   models.SyncPoint.wait_event.is_(None),
                   models.Traversal.state == 'running')).all()
        stalled = _without_progress(s, stalled, now - stall_timeout)
        quiet_since = datetime.datetime.fromtimestamp(
            now - stall_timeout, datetime.timezone.utc).replace(tzinfo=None)
        idle = [(row, trav) for row, trav in orphans
                if row.engine_id in members and row.updated_at is not None
                and row.updated_at < quiet_since]
        left = _not_left_alone(s, idle, now - stall_timeout)
        unsettled = _failing_and_quiet(s, now - stall_timeout)
    for trav, stack in unsettled:
        LOG.warning('ending traversal %s: failing, nothing in flight for '
                    '%.0f s', trav.id, stall_timeout)
        traversal_mod.settle(engine, trav, stack)
    busy = set()
    free = []
    for row, trav in orphans:
        busy.add(row.id)
        if row.engine_id in members:
            if row.id not in left:
                continue
            why = ('nobody has worked on it for %.0f s (worker %s is '
                   'alive)' % (stall_timeout, row.engine_id))
        else:
            why = 'worker %s is gone' % row.engine_id
        if not engine.locks.idle(row.stack_id, row.name):
            continue  # a unit of work holds it: somebody is on it
        free.append((row, trav, why))
    for row, trav, why in _unchanged(engine, free):
        if trav.state == 'failing':
            _abandon(engine, row, trav, why)
            continue
        LOG.warning('re-dispatching %s of traversal %s: %s',
                    node_of(row), trav.id, why)
        sent.append((row.stack_id, trav.id, node_of(row)))
    for stack_id, trav_id, node, resource_id in stalled:
        if resource_id in busy or (stack_id, trav_id, node) in sent:
            continue
        LOG.warning('re-dispatching %s of traversal %s: no progress for '
                    '%.0f s', node, trav_id, stall_timeout)
        sent.append((stack_id, trav_id, node))
    if sent:
        with engine.db.write() as s:
            for _, trav_id, node in sent:
                s.execute(sa.update(models.SyncPoint)
                          .where(models.SyncPoint.traversal_id == trav_id,
                                 models.SyncPoint.node == node)
                          .values(updated_at=now))
        engine.client.send(sent)
    return sent


def _unchanged(engine, free):
    """Those of `free` (row, traversal, why) whose row is still as the
    sweep read it, now that its lock was seen free. A unit holds the lock
    until its record has committed, so a row written since was being
    worked on: a worker paused past its heartbeat, back and finishing
    its unit between the sweep's read and its look at the lock (its lock
    free, its row written, its membership not yet renewed)."""
    if not free:
        return []
    with engine.db.read() as s:
        keys = dict(s.execute(
            sa.select(models.Resource.id, models.Resource.atomic_key)
            .where(models.Resource.id.in_([row.id for row, _, _ in free])))
            .all())
    return [(row, trav, why) for row, trav, why in free
            if keys.get(row.id) == row.atomic_key]


def _without_progress(s, candidates, since):
    """The candidates whose traversal moved no node on after `since`: no
    node finished and none recorded a wait (a unit that ends either way
    ran, so the queue the candidates wait in moves)."""
    moving = _touched(s, {c.traversal_id for c in candidates}, since,
                      moved_only=True)
    return [c for c in candidates if c.traversal_id not in moving]


def _not_left_alone(s, idle, since):
    """Ids of the rows of `idle` (IN_PROGRESS under a live worker, not
    written since `since`) whose node nobody touched since then either (a
    re-dispatch touches it) and that do not wait on record (a timer or an
    event resumes those, unless the timer is overdue by as much)."""
    if not idle:
        return set()
    S = models.SyncPoint
    wanted = {(trav.id, node_of(row)): row.id for row, trav in idle}
    found = s.execute(
        sa.select(S.traversal_id, S.node, S.updated_at, S.wake_at,
                  S.wait_event)
        .where(S.traversal_id.in_({t for t, _ in wanted}),
               S.node.in_({n for _, n in wanted}))).all()
    out = set()
    for sp in found:
        row_id = wanted.get((sp.traversal_id, sp.node))
        if row_id is None or (sp.updated_at or 0) >= since:
            continue
        if sp.wake_at is not None and sp.wake_at >= since:
            continue
        if sp.wake_at is None and sp.wait_event is not None:
            continue
        out.add(row_id)
    return out


def _failing_and_quiet(s, since):
    """(traversal, stack) of the stacks' current traversals that are
    failing with no resource in progress and no sync point touched after
    `since`. A failing traversal is ended by the unit that sees nothing
    left in flight; a unit that read the state just before the failure
    committed does not see it, so this is the backstop."""
    found = s.execute(
        sa.select(models.Traversal, models.Stack)
        .join(models.Stack,
              models.Stack.current_traversal == models.Traversal.id)
        .where(models.Traversal.state == 'failing')).all()
    touched = _touched(s, {t.id for t, _ in found}, since)
    return [(t, st) for t, st in found if t.id not in touched and
            not api.resources_in_flight(s, st.id, t.id)]


def _touched(s, traversal_ids, since, moved_only=False):
    """Those of the traversals with a sync point updated after `since`
    (with moved_only: finished, or its wait recorded, not merely released
    or sent again; one that waited and that a sweep sent again counts,
    which puts off the next sweep's look at that traversal by one
    stall_timeout)."""
    if not traversal_ids:
        return set()
    S = models.SyncPoint
    q = sa.select(S.traversal_id).where(S.traversal_id.in_(traversal_ids),
                                        S.updated_at >= since)
    if moved_only:
        q = q.where(sa.or_(S.done.is_(True), S.wake_at.is_not(None),
                           S.wait_event.is_not(None)))
    return set(s.scalars(q.group_by(S.traversal_id)))


def _abandon(engine, row, trav, why):
    """A failing traversal waits for in-flight work; work nobody is doing
    will never end, so mark it failed and let the traversal settle."""
    reason = 'abandoned: %s' % why
    LOG.warning('marking %s of traversal %s FAILED: %s', node_of(row),
                trav.id, why)
    with engine.db.write() as s:
        if api.resource_cas(s, row.id, row.atomic_key, status='FAILED',
                            status_reason=reason, engine_id=None) is None:
            return
        api.event_add(s, row.stack_id, trav.id, row.name,
                      api.shown_type(row), row.physical_id, row.action,
                      'FAILED', reason)
    with engine.db.read() as s:
        stack = s.get(models.Stack, row.stack_id)
    traversal_mod.settle(engine, trav, stack)
