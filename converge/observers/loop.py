"""Continuous convergence: stacks keep matching their templates when
reality moves, with no operator.

A stack's policy (`stack create|update --converge-policy`, or the
environment's ``converge`` section) is ``off``, ``observe`` (report drift:
recorded, evented) or ``repair`` (also converge it). Every live engine
looks every `[observer] tick` for stacks whose pass is due; one takes each
under the stack's observer lock (the coordination backend's, which dies
with its holder) and runs it if the pass is still due, so a stack is
observed by one engine at a time, on any host, and a pass survives the
death of the engine that took it: it stays due, and the next engine to
look takes it (a 300 s lease in the database had left a stack whose
observer was killed mid-pass unobserved for five minutes).

A pass observes the stack tree (engine/drift.py: one call per
driver). A software deployment with a CHECK config is observed by running
it: when nothing else drifted, the pass starts a `stack check` and the
pass after its end reads what it found. In repair mode, drift starts a
`stack converge`, unless:

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
from converge.engine import drift as drift_mod

LOG = logging.getLogger(__name__)

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
            refreshes = drivers_facts.take_refreshes(conn, now)
    for stack_id, keys, since in refreshes:
        try:
            done[stack_id] = _refresh(engine, stack_id, keys, since)
        except Exception:
            LOG.exception('refreshing stack %s after its facts changed '
                          'failed', stack_id)
            done[stack_id] = ('', 'error')
    for stack_id, next_at in _due(engine,
                                  float('inf') if everything else now):
        lock = engine.locks.try_lock('observe-' + stack_id)
        if lock is None:
            continue   # another engine observes it now
        try:
            if not _still_due(engine, stack_id, next_at):
                continue   # another engine passed it since we looked
            done[stack_id] = run_pass(engine, stack_id)
        except Exception:
            LOG.exception('observing stack %s failed; trying again next '
                          'interval', stack_id)
            done[stack_id] = ('', 'error')
            try:
                _put_off(engine, stack_id, now)
            except Exception:
                # the database is away too: the pass stays due, and the
                # next tick tries it (and the other stacks due) again
                LOG.warning('could not put off the pass of stack %s',
                            stack_id, exc_info=True)
        finally:
            lock.release()
    return done


def settle(engine, done, poll=0.2):
    """Block until the traversals the passes in `done` started have
    ended; a stack whose pass ran its CHECK configs is passed over again
    once they ran (and may be repaired). `done` is updated."""
    wait_for_repairs(engine, done, poll)
    checked = [sid for sid, (_n, outcome) in done.items()
               if outcome == 'checking']
    for stack_id in checked:
        done[stack_id] = run_pass(engine, stack_id)
    if checked:
        wait_for_repairs(engine, done, poll)


def wait_for_repairs(engine, done, poll=0.2):
    """Block until the traversals `done` started have ended."""
    waiting = {sid for sid, (_n, outcome) in done.items()
               if outcome in ('repairing', 'refreshing', 'checking')}
    while waiting:
        with engine.db.read() as s:
            busy = set(s.scalars(sa.select(models.Stack.id).where(
                models.Stack.id.in_(waiting),
                models.Stack.status == 'IN_PROGRESS')))
        waiting = busy
        if waiting:
            time.sleep(poll)


def _due(engine, due_by, limit=50):
    P = models.ConvergePolicy
    with engine.db.read() as s:
        return s.execute(sa.select(P.stack_id, P.next_at).where(
            P.next_at <= due_by).order_by(P.next_at).limit(limit)).all()


def _still_due(engine, stack_id, next_at):
    """Under the stack's observer lock: nobody passed it since `next_at`
    was read (a pass moves it on before it lets the lock go)."""
    P = models.ConvergePolicy
    with engine.db.read() as s:
        return s.scalar(sa.select(P.next_at).where(
            P.stack_id == stack_id)) == next_at


def _put_off(engine, stack_id, now):
    """A pass that raised is tried again after the stack's interval, not
    at the next tick."""
    P = models.ConvergePolicy
    with engine.db.write() as s:
        s.execute(sa.update(P).where(P.stack_id == stack_id).values(
            next_at=now + P.interval))


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
    # the traversal the last pass started is the stack's: a check of its
    # CHECK configs, or a repair
    ours = pol.repair_traversal is not None and \
        stack.current_traversal == pol.repair_traversal
    checked = ours and stack.action == 'CHECK'
    if stack.status == 'IN_PROGRESS':
        if checked:   # read what it finds as soon as it ends
            _schedule(engine, pol, now, CONF.tick, pol.failures)
            return stack.name, 'checking'
        # an operator's traversal (or a repair) runs: it wins
        _schedule(engine, pol, now, pol.interval, pol.failures)
        return stack.name, 'repairing' if ours else 'busy'
    checks = []
    found = drift_mod.scan(engine, stack, checks=checks)
    failures = pol.failures
    if pol.repair_traversal is not None and not checked:
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
    # drift that only a check saw is looked at again by a check (it may
    # have been put right by hand), unless repair mode repairs it now
    check_only = {(d.stack_name, d.name) for d in found} <= set(checks)
    if checks and not checked and check_only and not (
            found and pol.mode == 'repair'):
        # what only its CHECK configs can see: run them (a stack check)
        with engine.db.write() as s:
            _event(s, stack, 'CHECKING', 'running the CHECK configs of %s'
                   % ', '.join(sorted(n for _st, n in checks)))
        _stack_id, trav_id = stacks.check(engine, stack.id,
                                          project_id=stack.project_id)
        _schedule(engine, pol, now, CONF.tick, failures, repair=trav_id)
        return stack.name, 'checking'
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


def _refresh(engine, stack_id, keys, since):
    """The stack's facts changed: update it (nested stacks too), so that
    what reads them is resolved again; then clear the mark (an engine
    that dies in between leaves it: the stack is refreshed again, which
    runs nothing twice)."""
    with engine.db.read() as s:
        stack = s.get(models.Stack, stack_id)
    if stack is None or stack.deleted_at is not None:
        return '', 'gone'
    with engine.db.write() as s:
        _event(s, stack, 'FACTS_CHANGED', 'facts changed: %s; updating what '
               'reads them' % ', '.join(keys))
    stacks.converge(engine, stack.id, project_id=stack.project_id)
    with engine.db.begin() as conn:
        drivers_facts.done_refresh(conn, stack_id, since)
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
