"""Continuous convergence: stacks keep matching their templates when
reality moves, with no operator.

A stack's policy (`stack create|update --converge-policy`, or the
environment's ``converge`` section) is ``off``, ``observe`` (report drift:
recorded, evented) or ``repair`` (also converge it). Every live engine
looks every `[observer] tick` for stacks whose pass is due; one takes each
(the due time moves on in one compare-and-swap), so a stack is observed
by one engine at a time, on any host, and a pass survives the death of
the engine that took it (it is due again after the interval).

A pass observes the stack tree (observers/drift.py: one call per
driver). In repair mode, drift starts a `stack converge`, unless:

- the stack is in progress: an operator's update (or a repair still
  running) wins; the next pass looks again;
- `[observer] max_repairs` repairs run already, across the deployment;
- the last repair failed: the next waits twice as long per failure in a
  row (up to `[observer] backoff_max`), and a stack event says so, so a
  stack that cannot be repaired neither loops hot nor starves others.
"""

import time

from oslo_log import log as logging
import sqlalchemy as sa

from converge import conf as conf_mod
from converge.db import api
from converge.db import models
from converge.drivers import facts as drivers_facts
from converge.engine import policies
from converge.engine import stacks
from converge.observers import drift as drift_mod

LOG = logging.getLogger(__name__)

#: how long a taken pass is the taker's before another engine may take it
#: (the taker died mid-pass)
LEASE = 300.0


def run_due(engine, now=None, everything=False):
    """Take the stacks whose pass is due (`everything`: every stack with a
    policy) and run each pass. Returns {stack id: (stack name, what the
    pass did)}."""
    now = now or time.time()
    done = {}
    # stacks whose facts changed (their fact store's readers run again);
    # a read first: on SQLite a write transaction each tick would queue
    # for the one writer
    refreshes = []
    with engine.db.connect() as conn:
        marked = drivers_facts.any_refresh(conn)
    if marked:
        with engine.db.begin() as conn:
            refreshes = drivers_facts.take_refreshes(conn)
    for stack_id, keys in refreshes:
        try:
            done[stack_id] = _refresh(engine, stack_id, keys)
        except Exception:
            LOG.exception('refreshing stack %s after its facts changed '
                          'failed', stack_id)
            done[stack_id] = ('', 'error')
    for stack_id in _take_due(engine, float('inf') if everything else now,
                              now):
        try:
            done[stack_id] = run_pass(engine, stack_id)
        except Exception:
            LOG.exception('observing stack %s failed; trying again next '
                          'interval', stack_id)
            done[stack_id] = ('', 'error')
    return done


def wait_for_repairs(engine, done, poll=0.2):
    """Block until the repairs `done` started have ended."""
    waiting = {sid for sid, (_n, outcome) in done.items()
               if outcome in ('repairing', 'refreshing')}
    while waiting:
        with engine.db.read() as s:
            busy = set(s.scalars(sa.select(models.Stack.id).where(
                models.Stack.id.in_(waiting),
                models.Stack.status == 'IN_PROGRESS')))
        waiting = busy
        if waiting:
            time.sleep(poll)


def _take_due(engine, due_by, now, limit=50):
    P = models.ConvergePolicy
    with engine.db.read() as s:
        due = s.execute(sa.select(P.stack_id, P.next_at).where(
            P.next_at <= due_by).order_by(P.next_at).limit(limit)).all()
    taken = []
    for stack_id, next_at in due:
        with engine.db.write() as s:
            res = s.execute(sa.update(P).where(
                P.stack_id == stack_id, P.next_at == next_at).values(
                next_at=now + LEASE))
            if res.rowcount == 1:
                taken.append(stack_id)
    return taken


def run_pass(engine, stack_id):
    """One pass over a stack: observe; in repair mode, repair what drifted
    (or say why not). Schedules the next pass. Returns (the stack's name,
    what it did: gone, busy, repairing, in-sync, drifted, backing-off or
    capped)."""
    CONF = conf_mod.CONF.observer
    with engine.db.read() as s:
        row = s.get(models.ConvergePolicy, stack_id)
        stack = s.get(models.Stack, stack_id)
        if row is None:
            return '', 'gone'
        pol = _Policy(row)
    if stack is None or stack.deleted_at is not None:
        with engine.db.write() as s:
            policies.set_policy(s, stack_id, 'off')
        return '', 'gone'
    now = time.time()
    if stack.status == 'IN_PROGRESS':
        # an operator's traversal (or a repair) runs: it wins
        _schedule(engine, pol, now, pol.interval, pol.failures)
        return stack.name, ('repairing' if stack.current_traversal ==
                            pol.repair_traversal else 'busy')
    found = drift_mod.scan(engine, stack)
    failures = pol.failures
    if pol.repair_traversal is not None:
        if stack.current_traversal == pol.repair_traversal and \
                stack.status == 'FAILED':
            # the last repair failed: wait twice as long per failure in a
            # row before the next, and say so
            failures += 1
            delay = min(pol.interval * 2 ** failures, CONF.backoff_max)
            _schedule(engine, pol, now, delay, failures, repair=None,
                      event=('REPAIR_FAILED', 'repair failed %d time%s in '
                             'a row; the next in %.0f s' % (
                                 failures, '' if failures == 1 else 's',
                                 delay)), stack=stack)
            return stack.name, 'backing-off'
        # it completed, or an operator's traversal came since: start over
        failures = 0
    if not found or pol.mode != 'repair':
        _schedule(engine, pol, now, pol.interval, failures, repair=None)
        return stack.name, 'drifted' if found else 'in-sync'
    if _repairs_running(engine) >= CONF.max_repairs:
        _schedule(engine, pol, now, pol.interval, failures)
        return stack.name, 'capped'
    # said before it starts: a listener hears why the update comes
    with engine.db.write() as s:
        _event(s, stack, 'REPAIRING', 'repairing %d drifted resources: %s' % (
            len(found), ', '.join(sorted(
                '%s (%s)' % (d.name, d.kind) for d in found))))
    _stack_id, trav_id = stacks.converge(engine, stack.id,
                                         project_id=stack.project_id)
    _schedule(engine, pol, now, pol.interval, failures, repair=trav_id)
    return stack.name, 'repairing'


def _refresh(engine, stack_id, keys):
    """The stack's facts changed: update it (nested stacks too), so that
    what reads them is resolved again."""
    with engine.db.read() as s:
        stack = s.get(models.Stack, stack_id)
    if stack is None or stack.deleted_at is not None:
        return '', 'gone'
    with engine.db.write() as s:
        _event(s, stack, 'FACTS_CHANGED', 'facts changed: %s; updating what '
               'reads them' % ', '.join(keys))
    stacks.converge(engine, stack.id, project_id=stack.project_id)
    return stack.name, 'refreshing'


class _Policy:
    """A policy row's values, read in one transaction and used after."""

    def __init__(self, row):
        self.stack_id, self.mode = row.stack_id, row.mode
        self.interval, self.jitter = row.interval, row.jitter
        self.failures = row.failures
        self.repair_traversal = row.repair_traversal


_KEEP = object()


def _schedule(engine, pol, now, delay, failures, repair=_KEEP, event=None,
              stack=None):
    """The next pass `delay` seconds on (with jitter); the stack's event
    (status, reason) in the same transaction."""
    values = {'next_at': policies.next_due(now, delay, pol.jitter),
              'failures': failures}
    if repair is not _KEEP:
        values['repair_traversal'] = repair
    with engine.db.write() as s:
        s.execute(sa.update(models.ConvergePolicy).where(
            models.ConvergePolicy.stack_id == pol.stack_id).values(**values))
        if event is not None:
            _event(s, stack, *event)


def _event(session, stack, status, reason):
    """An event of the stack itself (OBSERVE_<status>)."""
    session.execute(sa.insert(models.Event).values(api.event(
        stack.id, None, stack.name, 'OS::Heat::Stack', stack.id, 'OBSERVE',
        status, reason)))


def _repairs_running(engine):
    P, S = models.ConvergePolicy, models.Stack
    with engine.db.read() as s:
        return s.scalar(sa.select(sa.func.count()).select_from(P).join(
            S, S.id == P.stack_id).where(
            S.current_traversal == P.repair_traversal,
            S.status == 'IN_PROGRESS'))
