"""What the engine is doing now: one snapshot, for `converge top`.

A snapshot is read in one read transaction, in a handful of statements
whatever the number of stacks, and each touches only what is running:

1. the running traversals (a stack's current one, running or failing)
   in the scope, with their stacks;
2. their sync points, counted per traversal in one GROUP BY: nodes done
   and in all, done within the last `window` seconds (a done node's
   `updated_at` is when it was marked done: nothing writes it after), ready
   (all inputs in, neither done nor waiting: queued or running), waiting,
   and waits due within `due_within` seconds or already late;
3. the first waits to come due, by the `wake_at` index;
4. the rows in flight (IN_PROGRESS under an engine: a unit holds the
   claim) of those stacks, by the `(stack_id, name)` index: each engine's
   load, and the units running longest;
5. the last `LATEST_EVENTS` events, by primary key: the resource actions that
   ended within `window` seconds and how long each took (its IN_PROGRESS
   event to its end; an action the engine does in one unit writes both
   together), the slowest first;

and, across projects only, the engines in the coordination group (their
heartbeats not expired), so that an idle engine is shown too: who runs
the deployment is the operator's to see, not a project's. A project
sees the engines that hold its own units.

Sync points exist only while a traversal runs (they go when it ends), so
the count stays proportional to the work in flight, not to the history.
"""

import datetime
import time

import sqlalchemy as sa

from converge.db import api
from converge.db import models
from converge.graph import plan

STACKS = models.Stack.__table__
TRAVERSALS = models.Traversal.__table__
SYNC = models.SyncPoint.__table__
RESOURCES = models.Resource.__table__
EVENTS = models.Event.__table__

#: how many of the latest events (all stacks') are looked at for the
#: slowest recent actions: a few seconds of a busy engine's, read by
#: primary key
LATEST_EVENTS = 4000
#: rows of each list a snapshot carries
SHOWN = 10
#: the traversal states that still have work in flight
RUNNING = ('running', 'failing')


def _ended(status):
    return status in ('COMPLETE', 'FAILED')


def snapshot(engine, project_id=None, window=10.0, due_within=30.0,
             group=None, now=None):
    """What runs now in `project_id`'s stacks (None: every project's),
    as plain data (docs/cli.md, "converge top"). `group` is the
    coordination group whose members are listed (every project's only)."""
    now = time.time() if now is None else now
    with engine.db.read() as s:
        travs = _traversals(s, project_id)
        ids = [t['id'] for t in travs]
        counts = _counts(s, ids, now, window, due_within) if ids else {}
        waits = _waits(s, ids, now, due_within) if ids else []
        flying = _in_flight(s, {t['stack_id'] for t in travs}, ids) \
            if ids else []
        slowest = _slowest(s, set(ids), now, window) if ids else []
    names = {t['stack_id']: t['stack_name'] for t in travs}
    total_rate = 0.0
    for t in travs:
        c = counts.get(t['id'], {})
        t.update(done=c.get('done', 0), total=c.get('total', 0),
                 ready=c.get('ready', 0), waiting=c.get('waiting', 0),
                 due=c.get('due', 0), late=c.get('late', 0))
        # a traversal younger than the window ran only that long
        span = max(min(window, now - t['started']), 1e-3)
        t['rate'] = c.get('recent', 0) / span
        total_rate += t['rate']
    for w in waits:
        w['stack_name'] = names.get(w['stack_id'], w['stack_id'])
    engines = {}
    for f in flying:
        f['stack_name'] = names.get(f['stack_id'], f['stack_id'])
        engines[f['engine']] = engines.get(f['engine'], 0) + 1
    live = None
    if project_id is None and group is not None:
        live = engine.locks.members(group)
    for s_ in slowest:
        s_['stack_name'] = names.get(s_['stack_id'], s_['stack_id'])
    return {
        'time': now,
        'project': project_id,
        'window': window,
        'due_within': due_within,
        'rate': total_rate,
        'traversals': _as_tree(travs),
        'waits': waits,
        'waits_due': sum(t['due'] for t in travs),
        'waits_late': sum(t['late'] for t in travs),
        'waiting': sum(t['waiting'] for t in travs),
        'engines': _engines(engines, live),
        'in_flight': sorted(flying, key=lambda f: -f['seconds'])[:SHOWN],
        'slowest': slowest[:SHOWN],
    }


def _traversals(s, project_id):
    query = sa.select(
        TRAVERSALS.c.id, TRAVERSALS.c.action, TRAVERSALS.c.state,
        TRAVERSALS.c.created_at, STACKS.c.id.label('stack_id'),
        STACKS.c.name, STACKS.c.parent_id, STACKS.c.project_id).join(
        STACKS, STACKS.c.current_traversal == TRAVERSALS.c.id).where(
        TRAVERSALS.c.state.in_(RUNNING), STACKS.c.deleted_at.is_(None))
    if project_id is not None:
        query = query.where(STACKS.c.project_id == project_id)
    out = []
    for r in s.execute(query.order_by(TRAVERSALS.c.created_at)):
        # naive UTC (models.utcnow): epoch seconds, as the rest
        started = r.created_at.replace(
            tzinfo=datetime.timezone.utc).timestamp()
        out.append({'id': r.id, 'stack_id': r.stack_id,
                    'stack_name': r.name, 'parent_id': r.parent_id,
                    'project': r.project_id, 'action': r.action,
                    'state': r.state, 'started': started})
    return out


def _counts(s, ids, now, window, due_within):
    walked = sa.and_(SYNC.c.node != 'stack',
                     SYNC.c.remaining != api.NOT_WALKED)
    waiting = sa.and_(SYNC.c.done.is_(False), sa.or_(
        SYNC.c.wake_at.is_not(None), SYNC.c.wait_event.is_not(None)))

    def count(cond):
        return sa.func.sum(sa.case((cond, 1), else_=0))

    query = sa.select(
        SYNC.c.traversal_id,
        count(walked).label('total'),
        count(sa.and_(walked, SYNC.c.done.is_(True))).label('done'),
        count(sa.and_(walked, SYNC.c.done.is_(True),
                      SYNC.c.updated_at >= now - window)).label('recent'),
        count(sa.and_(walked, SYNC.c.done.is_(False), SYNC.c.remaining == 0,
                      SYNC.c.wake_at.is_(None),
                      SYNC.c.wait_event.is_(None))).label('ready'),
        count(waiting).label('waiting'),
        count(sa.and_(SYNC.c.done.is_(False),
                      SYNC.c.wake_at <= now + due_within)).label('due'),
        count(sa.and_(SYNC.c.done.is_(False),
                      SYNC.c.wake_at < now)).label('late'),
    ).where(SYNC.c.traversal_id.in_(ids)).group_by(SYNC.c.traversal_id)
    return {r.traversal_id: {k: int(v or 0) for k, v in r._mapping.items()
                             if k != 'traversal_id'}
            for r in s.execute(query)}


def _waits(s, ids, now, due_within):
    """The first waits to come due (a late one first)."""
    rows = s.execute(
        sa.select(SYNC.c.stack_id, SYNC.c.traversal_id, SYNC.c.node,
                  SYNC.c.wake_at, SYNC.c.wait_event)
        .where(SYNC.c.wake_at <= now + due_within, SYNC.c.done.is_(False),
               SYNC.c.traversal_id.in_(ids))
        .order_by(SYNC.c.wake_at).limit(SHOWN))
    return [{'stack_id': r.stack_id, 'traversal_id': r.traversal_id,
             'resource': plan.resource_name(r.node), 'node': r.node,
             'in': r.wake_at - now, 'event': r.wait_event} for r in rows]


def _in_flight(s, stack_ids, ids):
    """Rows a unit of work holds now: IN_PROGRESS under an engine (a
    waiting row is under none), with how long since its claim."""
    now = models.utcnow()
    rows = s.execute(
        sa.select(RESOURCES.c.stack_id, RESOURCES.c.name,
                  RESOURCES.c.action, RESOURCES.c.engine_id,
                  RESOURCES.c.updated_at)
        .where(RESOURCES.c.stack_id.in_(sorted(stack_ids)),
               RESOURCES.c.status == 'IN_PROGRESS',
               RESOURCES.c.engine_id.is_not(None),
               RESOURCES.c.traversal_id.in_(ids)))
    return [{'stack_id': r.stack_id, 'resource': r.name,
             'action': r.action, 'engine': r.engine_id,
             'seconds': (now - r.updated_at).total_seconds()
             if r.updated_at is not None else 0.0} for r in rows]


def _slowest(s, ids, now, window):
    """Resource actions of these traversals that ended within `window`
    seconds, longest first: from the latest events, each end paired
    with its action's IN_PROGRESS event when that is among them."""
    top = s.scalar(sa.select(sa.func.max(EVENTS.c.id)))
    if top is None:
        return []
    rows = s.execute(
        sa.select(EVENTS.c.stack_id, EVENTS.c.traversal_id,
                  EVENTS.c.resource_name, EVENTS.c.action,
                  EVENTS.c.status, EVENTS.c.timestamp)
        .where(EVENTS.c.id > top - LATEST_EVENTS).order_by(EVENTS.c.id))
    began = {}
    out = []
    for r in rows:
        if r.traversal_id not in ids:
            continue
        key = (r.traversal_id, r.resource_name, r.action)
        if r.status == 'IN_PROGRESS':
            began.setdefault(key, r.timestamp)
        elif _ended(r.status):
            start = began.pop(key, None)
            if start is not None and r.timestamp >= now - window:
                out.append({'stack_id': r.stack_id,
                            'resource': r.resource_name,
                            'action': r.action, 'status': r.status,
                            'seconds': r.timestamp - start,
                            'ago': now - r.timestamp})
    out.sort(key=lambda e: -e['seconds'])
    return out


def _engines(counts, live):
    """Each engine with its units in flight: those holding units, and
    (across projects) every live one; `live` None when not known."""
    names = set(counts) | set(live or ())
    return sorted(({'id': e, 'in_flight': counts.get(e, 0),
                    'live': None if live is None else e in live}
                   for e in names), key=lambda e: (-e['in_flight'], e['id']))


def _as_tree(travs):
    """Traversals in order of their start, a nested stack's under its
    parent's (with its depth), as a tree view shows them."""
    by_stack = {t['stack_id']: t for t in travs}
    children = {}
    roots = []
    for t in travs:
        parent = t['parent_id']
        if parent in by_stack and parent != t['stack_id']:
            children.setdefault(parent, []).append(t)
        else:
            roots.append(t)
    out = []

    def walk(t, depth):
        t['depth'] = depth
        out.append(t)
        for c in children.get(t['stack_id'], ()):
            walk(c, depth + 1)
    for t in roots:
        walk(t, 0)
    return out
