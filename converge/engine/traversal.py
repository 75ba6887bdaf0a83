"""A traversal's life: start, supersede, complete, fail, settle, roll back,
and wake a waiting node.

    start ──► running ──► complete
                 │   └──► superseded (a newer traversal took the stack)
                 ▼
              failing ──► failed ──► (a rollback traversal, if enabled)

Starting is one transaction: store the new desired state, take the stack
over from whatever traversal owned it (compare-and-swap on
``current_traversal``), drop that traversal's sync points so its in-flight
work stops propagating, and lay out the new graph's sync points. Only then
are the graph's leaves sent to the workers (`kick`).

A failing traversal propagates nothing more; it ends (`settle`) once no
unit of work is in flight. A resource that is *waiting* (its unit returned
"wait": a server building, a signal awaited) is not in flight — it holds
no thread — so ending the traversal stops its wait and marks it FAILED.
"""

import time

import sqlalchemy as sa
from oslo_log import log as logging

from converge import conf as conf_mod
from converge import exception
from converge import tracing
from converge.db import api
from converge.db import models
from converge.db.models import utcnow
from converge.engine import changes
from converge.engine import rows as rows_mod
from converge.graph import plan as plan_mod

LOG = logging.getLogger(__name__)

#: actions on the resources as they are: no replacement, nothing cleaned up
IN_PLACE = ('CHECK', 'SUSPEND', 'RESUME', 'SNAPSHOT')

IN_PROGRESS_REASON = 'Stack %s started'
COMPLETE_REASON = 'Stack %s completed successfully'


# -- start --------------------------------------------------------------------

#: a traversal of this many resources or more has the database's
#: statistics brought up to date before it is sent (kick)
ANALYZE_MIN_NODES = 500


def start(engine, session, stack, template_id, action, defn, **kwargs):
    """Lay out a traversal in the caller's transaction; return it (with
    ``leaves``, the nodes to send once the transaction commits).

    :param only: walk only the resources of these names (they must not
        depend on the others: a group's members in a rollout's batch);
        the rest are left as they are, their rows as they were
    :param visit: {name: why} an update visits though their definitions
        did not change (a group a scaling signal resizes), with what
        reads them
    :param cause: what started it, kept in its options (``{'scaling':
        {...}}``: a scaling signal, which notifications name as Heat's
        autoscaling)
    :param snapshot: a SNAPSHOT traversal's snapshot id (its end ends
        the snapshot: engine/snapshots.py)
    :param shown_action: the stack's action while it runs and when it
        ends, when not `action` (a restore is an UPDATE of the
        resources, the stack's RESTORE, as Heat's)

    With tracing on, its span (tracing.traversal) is a child of the
    current one, and its traceparent is kept in its options.
    """
    with tracing.traversal(stack.id, action) as trace:
        return _start(engine, session, stack, template_id, action, defn,
                      trace=trace, **kwargs)


def _start(engine, session, stack, template_id, action, defn, trace=None,
           rollback=False, prev_template_id=None, parent=None,
           keep_template=False, converge=False, only=None, visit=None,
           cause=None, snapshot=None, shown_action=None):
    trav_id = api.new_id()
    requires = defn.dependencies() if defn is not None else {}
    rows = api.resources_layout(session, stack.id)
    frontier, change_set = {}, None
    if only is None and action == 'UPDATE' and not converge and \
            defn is not None:
        # an update visits what changed and what that reaches; the rest
        # starts done (engine/changes.py)
        current = rows_mod.current(rows, template_id, names=requires)
        change_set = changes.decide(defn, rows, current, visit)
        only = set(change_set.visit)
        # what a visited resource reads of one that is not: its row, as
        # a node already done (DependencyData reads nodes)
        frontier = {dep: current[dep].id for name in only
                    for dep in requires[name] - only}
        only |= change_set.removed
    if only is not None:
        only = set(only)
        requires = {name: deps & only for name, deps in requires.items()
                    if name in only}
        rows = [r for r in rows if r.name in only]
    selected = {name: row.id for name, row in
                rows_mod.current(rows, template_id, names=requires).items()}
    # rows born in this traversal are what their update nodes act on and
    # cannot have been replaced yet: they need no cleanup node
    cleanup_rows = [] if action in IN_PLACE else list(rows)
    born = [dict(
        uuid=api.new_id(), stack_id=stack.id, name=name,
        type=defn.resources[name].type,
        template_type=defn.resources[name].template_type,
        action='INIT', status='COMPLETE',
        template_id=template_id, atomic_key=0, requires=[], data={})
        for name in requires if name not in selected]
    if born:
        # one batched INSERT ... RETURNING, not an ORM object per resource
        # (at 22,000 resources the objects cost 70 MB and seconds)
        selected.update((name, row_id) for row_id, name in session.execute(
            sa.insert(models.Resource).returning(
                models.Resource.id, models.Resource.name,
                sort_by_parameter_order=True), born))
    plan = plan_mod.make(
        requires,
        [plan_mod.Row(r.id, r.name, tuple(r.requires or ()), r.replaces)
         for r in cleanup_rows],
        selected, reverse=action == 'SUSPEND')

    # each node's inputs left, and whom it tells when done
    roots = plan.roots
    dependents = {key: node.dependents + (
        [plan_mod.STACK_NODE] if key in roots else [])
        for key, node in plan.nodes.items()}
    remaining = {key: node.predecessors for key, node in plan.nodes.items()}
    remaining[plan_mod.STACK_NODE] = len(roots)
    shards = plan_mod.shard_fan_in(dependents)
    for key, counts in shards.items():
        remaining[key] = len(counts)

    superseded = stack.current_traversal
    supersede(session, stack, trav_id)
    shown = shown_action or action
    values = dict(current_traversal=trav_id, action=shown,
                  status='IN_PROGRESS',
                  status_reason=IN_PROGRESS_REASON % shown,
                  updated_at=utcnow())
    if template_id is not None and not keep_template:
        values['template_id'] = template_id
    if prev_template_id is not None:
        values['prev_template_id'] = prev_template_id
    res = session.execute(
        sa.update(models.Stack)
        .where(models.Stack.id == stack.id,
               _null_safe_eq(models.Stack.current_traversal,
                             stack.current_traversal))
        .values(**values))
    if res.rowcount != 1:
        raise exception.Conflict('Stack %s changed while this operation '
                                 'started; try again' % stack.name)
    options = {'rollback': bool(rollback)}
    if change_set is not None:
        # said by its start event (views.stack_events)
        options['change_set'] = change_set.summary(names=20)
    elif converge and action == 'UPDATE' and defn is not None:
        options['change_set'] = 'all %d resources to visit (--converge)' \
            % len(defn.resources)
    if shards:  # its purge has them to delete too
        options['shards'] = True
    if converge:
        # `stack converge`: nested stacks are converged too (their owners
        # read it, resources.nested)
        options['converge'] = True
    if parent:
        options['parent'] = parent
    if cause:
        options['cause'] = cause
    if snapshot:
        options['snapshot'] = snapshot
    if shown_action:
        options['shown_action'] = shown_action
    if getattr(stack, 'parent_id', None):
        # a nested stack's: whom to wake when it ends (traversal.ended)
        options['parent_stack'] = stack.parent_id
    if stack.timeout_mins and action not in ('DELETE', 'ROLLBACK'):
        options['deadline'] = time.time() + stack.timeout_mins * 60
    # resources it walks (a name may have an update node and cleanup
    # nodes): what progress counts
    total = len({plan_mod.resource_name(k) for k in plan.nodes})
    if trace is not None:
        options['trace'] = trace.started(trav_id, total, superseded)
    trav = models.Traversal(id=trav_id, stack_id=stack.id, action=action,
                            template_id=template_id, state='running',
                            options=options, total=total)
    session.add(trav)
    session.flush()
    now = time.time()
    sync_rows = [dict(traversal_id=trav_id, node=key, stack_id=stack.id,
                      resource_id=node.resource_id, remaining=remaining[key],
                      dependents=dependents[key], done=False,
                      updated_at=now)
                 for key, node in plan.nodes.items()]
    sync_rows.append(dict(traversal_id=trav_id, node=plan_mod.STACK_NODE,
                          stack_id=stack.id, resource_id=None,
                          remaining=remaining[plan_mod.STACK_NODE],
                          dependents=[], done=False, updated_at=now))
    # (remaining -1: not walked by this traversal, not counted as its
    # progress)
    sync_rows += [dict(traversal_id=trav_id, node=plan_mod.update_key(name),
                       stack_id=stack.id, resource_id=row_id,
                       remaining=api.NOT_WALKED, dependents=[], done=True,
                       updated_at=now)
                  for name, row_id in frontier.items()]
    session.execute(sa.insert(models.SyncPoint), sync_rows)
    if shards:
        session.execute(sa.insert(models.SyncShard), [
            dict(traversal_id=trav_id, node=key, shard=shard, remaining=n)
            for key, counts in shards.items()
            for shard, n in counts.items()])
    trav.leaves = plan.leaves
    if not plan.nodes:
        complete(session, trav, stack.id)
    return trav


def kick(engine, trav):
    """Send a just-started traversal's leaves (after its transaction).
    Before a large one, the planner's statistics of the tables it filled
    (Database.analyze): its units look up a few of its nodes each."""
    if trav.total >= ANALYZE_MIN_NODES:
        engine.db.analyze('sync_points', 'sync_shards', 'resources')
    engine.client.check_resources(trav.stack_id, trav.id, trav.leaves)


def supersede(session, stack, new_traversal_id):
    """The running traversal loses the stack; its sync points go."""
    old = stack.current_traversal
    if old:
        if stack.action == 'SNAPSHOT' and stack.status == 'IN_PROGRESS':
            # its snapshot will not be finished: it failed
            _snapshot_ended(session, api.traversal_get(session, old),
                            'FAILED', 'Stack SNAPSHOT superseded by '
                            'another operation')
        api.traversal_set_state(session, old, 'superseded',
                                ['running', 'failing'],
                                finished_at=utcnow())
        # its options are not read here: any shards go too
        api.sync_purge(session, old, shards=True)


def cancel(session, stack):
    """Stop a running create/update without rollback: the stack is
    FAILED at once and nothing propagates; running actions finish and
    record. Heat's (stop_traversal): resources whose action is under way
    complete normally, so a resource waiting out its action (a wait that
    holds no thread) goes on to its end: the traversal drains (`_drain`).
    With none, a new traversal id in state ``cancelled`` takes the
    stack."""
    action = stack.action
    reason = 'Stack %s cancelled' % action
    if stack.current_traversal and _drain(session, stack, reason):
        ended(session, stack.id, stack.parent_id)
        return stack.current_traversal
    new_trav = api.new_id()
    if stack.current_traversal:  # nobody will come back to its waits
        api.resources_stop_waiting(session, stack.id,
                                   stack.current_traversal, reason)
    supersede(session, stack, new_trav)
    session.add(models.Traversal(id=new_trav, stack_id=stack.id,
                                 action=action,
                                 template_id=stack.template_id,
                                 state='cancelled'))
    session.execute(sa.update(models.Stack)
                    .where(models.Stack.id == stack.id)
                    .values(current_traversal=new_trav, status='FAILED',
                            status_reason=reason, updated_at=utcnow()))
    ended(session, stack.id, stack.parent_id)
    return new_trav


def _drain(session, stack, reason):
    """Cut the running traversal down to its waiting nodes (resources
    whose action is under way), each now leading only to the stack's
    node: they run on to their end and record it, nothing else runs,
    and the last of them ends the traversal, FAILED for `reason`
    (`complete`; a failure among them fails nothing more). The stack is
    FAILED now. False when nothing waits (nothing to drain)."""
    trav_id = stack.current_traversal
    waiting = api.sync_waiting(session, trav_id)
    if not waiting:
        return False
    api.sync_keep_only(session, trav_id, waiting, plan_mod.STACK_NODE)
    trav = api.traversal_get(session, trav_id)
    session.execute(sa.update(models.Traversal)
                    .where(models.Traversal.id == trav_id)
                    .values(options=dict(trav.options or {},
                                         cancelled=reason)))
    session.execute(sa.update(models.Stack)
                    .where(models.Stack.id == stack.id)
                    .values(status='FAILED', status_reason=reason,
                            updated_at=utcnow()))
    return True


def _drain_nested(engine, session, stack, trav, reason, waiting):
    """A failure while nested stacks are being made (a provider's, a
    group's): as Heat, those in flight run on to their end
    (CREATE_COMPLETE, or their own failure), where converge would stop
    waiting for a child that goes on all the same. The failing traversal
    is drained to their nodes (`_drain`'s way: they lead only to the
    stack's node, the last of them ends it FAILED for `reason`); the
    other waiting resources stop waiting; the stack is FAILED now. None
    when no nested stack is in flight (the traversal ends now); else the
    nodes kept, to be sent again after commit (possibly none): one woken
    while the traversal was failing was sent and not run (Unit.load
    takes only a running traversal's), and nothing else would send it
    before the sweeper's stall timeout."""
    owners = {row.name for row in waiting
              if _owns_stack(engine.plugin_class(row.type))}
    if not owners:
        return None
    nodes = [node for node in api.sync_waiting(session, trav.id)
             if plan_mod.resource_name(node) in owners]
    if not nodes:
        return None
    if not api.traversal_set_state(session, trav.id, 'running',
                                   ['failing']):
        return []
    api.resources_stop_waiting(session, stack.id, trav.id,
                               'Stopped waiting: %s' % reason, waiting,
                               keep={plan_mod.resource_name(node)
                                     for node in nodes})
    api.sync_keep_only(session, trav.id, nodes, plan_mod.STACK_NODE)
    session.execute(sa.update(models.Traversal)
                    .where(models.Traversal.id == trav.id)
                    .values(options=dict(trav.options or {},
                                         failed=reason)))
    api.stack_set_status(session, stack.id, trav.id, trav.action, 'FAILED',
                         reason)
    ended(session, stack.id, _parent(trav))
    return nodes


def _owns_stack(plugin_cls):
    from converge.resources import nested as nested_res
    return plugin_cls is not None and issubclass(plugin_cls,
                                                 nested_res.Nested)


def cancelled(trav):
    """The reason a drained traversal ends FAILED: a cancel's (`_drain`),
    or a failure's while nested stacks were in flight (`_drain_nested`);
    None for one not drained."""
    options = trav.options or {}
    return options.get('cancelled') or options.get('failed')


# -- end ----------------------------------------------------------------------

def stack_event(stack_id):
    """The event of a stack's traversal ending (what the resource owning
    a nested stack waits for)."""
    return 'stack:%s' % stack_id


def ended(session, stack_id, parent_id):
    """The stack's traversal ended (in the caller's transaction): the
    parent's node waiting for it, if it is a nested stack, is due now
    (any engine's timer sends it)."""
    if parent_id:
        api.sync_wake_event(session, parent_id, stack_event(stack_id),
                            time.time())


def _sharded(trav):
    return bool((trav.options or {}).get('shards'))


def _parent(trav):
    return (trav.options or {}).get('parent_stack')


def shown_action(trav):
    """The stack's action while `trav` runs (a restore's RESTORE)."""
    return (trav.options or {}).get('shown_action') or trav.action


def _snapshot_ended(session, trav, status, reason):
    if trav is not None and trav.action == 'SNAPSHOT':
        # here, not at the top: engine/snapshots.py starts traversals
        from converge.engine import snapshots
        snapshots.ended(session, trav, status, reason)


def complete(session, traversal, stack_id):
    """The stack node was reached: every node is done."""
    status, reason, extra = _end_of(session, traversal, stack_id)
    action = shown_action(traversal)
    done = False
    if status == 'COMPLETE':
        # only if still IN_PROGRESS: the unit that got here loaded the
        # traversal before a drain may have marked it (`cancelled`) and
        # failed the stack; then read again (rare: one statement more)
        done = api.stack_set_status(session, stack_id, traversal.id, action,
                                    status, reason, when='IN_PROGRESS',
                                    **extra)
        if not done:
            traversal = api.traversal_get(session, traversal.id)
            if traversal is None:
                return
            status, reason, extra = _end_of(session, traversal, stack_id)
            action = shown_action(traversal)
    if not done:
        done = api.stack_set_status(session, stack_id, traversal.id, action,
                                    status, reason, **extra)
    if done:
        _snapshot_ended(session, traversal, status, reason)
        state = 'complete' if status == 'COMPLETE' else 'failed'
        api.traversal_set_state(session, traversal.id, state, ['running'],
                                finished_at=utcnow())
        if tracing.enabled:
            tracing.traversal_ended(traversal, state, reason)
        api.sync_purge(session, traversal.id, _sharded(traversal))
        ended(session, stack_id, _parent(traversal))


def _end_of(session, traversal, stack_id):
    """How a traversal whose every node is done ends the stack: (status,
    reason, other values of the stack's row)."""
    action = shown_action(traversal)
    status, reason = 'COMPLETE', COMPLETE_REASON % action
    if cancelled(traversal):   # drained: as it was left
        status, reason = 'FAILED', cancelled(traversal)
    elif action == 'CHECK':
        failed = api.check_failures(session, stack_id)
        if failed:
            status = 'FAILED'
            # each failure's reason names its resource (Heat's form:
            # `Error: resources.srv: ...`), one of literal text does not
            reason = 'Resource CHECK failed: ' + '; '.join(
                why if 'resources.%s: ' % name in why
                else '%s: %s' % (name, why) for name, why in failed)
    extra = {}
    if action == 'DELETE' and status == 'COMPLETE':
        extra = {'deleted_at': utcnow(), 'deleted_marker': stack_id}
    return status, reason, extra


def fail(session, traversal, reason):
    """Stop propagating; the stack fails once in-flight work ends."""
    api.traversal_set_state(session, traversal.id, 'failing', ['running'],
                            failure=reason)


def settle(engine, trav, stack):
    """End a failing traversal once nothing is in flight; roll back in the
    same transaction, so nobody sees it FAILED in between. Returns True
    when this call ended it."""
    rollback = (trav.options or {}).get('rollback') and trav.action in (
        'CREATE', 'UPDATE')
    new = drained = None
    with engine.db.write() as s:
        if api.resources_in_flight(s, stack.id, trav.id):
            return False
        current = api.traversal_get(s, trav.id)
        reason = current.failure or 'Failed'
        waiting = api.resources_waiting(s, stack.id, trav.id)
        if not rollback:
            drained = _drain_nested(engine, s, stack, current, reason,
                                    waiting)
        if drained is None:
            if not api.traversal_set_state(s, trav.id, 'failed', ['failing'],
                                           finished_at=utcnow()):
                return False
            if tracing.enabled:
                tracing.traversal_ended(current, 'failed', reason)
            api.resources_stop_waiting(s, stack.id, trav.id,
                                       'Stopped waiting: %s' % reason,
                                       waiting)
            if not rollback:
                api.stack_set_status(s, stack.id, trav.id,
                                     shown_action(current), 'FAILED', reason)
                _snapshot_ended(s, current, 'FAILED', reason)
                ended(s, stack.id, _parent(current))
            api.sync_purge(s, trav.id, _sharded(current))
            if rollback:
                new = start_rollback(engine, s, stack.id, current)
    if drained is not None:   # it ends with the last of them
        if drained:
            engine.client.check_resources(stack.id, trav.id, drained)
        return False
    if new is not None:
        kick(engine, new)
    return True


# -- rollback -----------------------------------------------------------------

def rollback_to_previous(engine, stack_id, trav):
    with engine.db.write() as s:
        new = start_rollback(engine, s, stack_id, trav)
    if new is None:
        with engine.db.read() as s:
            return stack_id, s.get(models.Stack, stack_id).current_traversal
    kick(engine, new)
    return stack_id, new.id


def start_rollback(engine, session, stack_id, trav):
    """Lay out the walk back to the previous template (in the caller's
    transaction). Rolling back a create converges to nothing."""
    stack = session.get(models.Stack, stack_id)
    if trav is not None and stack.current_traversal != trav.id:
        return None  # someone else has moved the stack on
    if (trav is not None and trav.action == 'CREATE') or \
            stack.prev_template_id is None:
        target, defn = None, None
    else:
        target = stack.prev_template_id
        defn = engine.definition(target, stack)
    return start(engine, session, stack, target, 'ROLLBACK', defn,
                 parent=trav.id if trav else None,
                 keep_template=target is None)


# -- waking -------------------------------------------------------------------

def wake(engine, stack_id, event):
    """The awaited `event` happened (a signal, a child stack finishing, an
    operator resuming): send every node of the stack waiting for it now.
    Returns how many were sent."""
    with engine.db.begin() as conn:
        nodes = woken(conn, stack_id, event)
    return send_woken(engine, stack_id, nodes)


def woken(conn, stack_id, event):
    """In the caller's transaction (the one that records what happened):
    the stack's nodes waiting for `event`, no longer waiting. Send them
    with `send_woken` once it commits; should that message be lost, the
    timer sends them after the lease."""
    lease = conf_mod.CONF.worker.stall_timeout
    return api.sync_wake_event(conn, stack_id, event, time.time() + lease)


def resend(engine, stack_ids):
    """Send again, now, the work of the stacks' running traversals that
    nobody may be doing: every node that is ready (its inputs in), not
    done and not waiting on record, and every row a unit claimed whose
    lock nobody holds (its worker died). An operator's `stack converge`
    asks for it; the sweeper does the same on its own only after
    ``stall_timeout`` without progress. Sending again is safe (a done
    node's message is dropped, actions are idempotent). Returns the
    (stack, traversal, node) sent."""
    S, R, T = models.SyncPoint, models.Resource, models.Traversal
    with engine.db.read() as s:
        running = s.execute(
            sa.select(models.Stack.id, models.Stack.current_traversal)
            .join(T, T.id == models.Stack.current_traversal)
            .where(models.Stack.id.in_(stack_ids),
                   T.state == 'running')).all()
        travs = {t for _, t in running}
        if not travs:
            return []
        ready = s.execute(
            sa.select(S.stack_id, S.traversal_id, S.node)
            .where(S.traversal_id.in_(travs), S.remaining == 0,
                   S.done.is_(False), S.node != plan_mod.STACK_NODE,
                   S.wake_at.is_(None), S.wait_event.is_(None))).all()
        claimed = s.execute(
            sa.select(R.stack_id, R.traversal_id, R.name, R.id, R.action)
            .where(R.traversal_id.in_(travs), R.status == 'IN_PROGRESS',
                   R.engine_id.is_not(None))).all()
    sent = {(r.stack_id, r.traversal_id, r.node) for r in ready}
    for row in claimed:
        if engine.locks.idle(row.stack_id, row.name):
            sent.add((row.stack_id, row.traversal_id,
                      plan_mod.node_of(row)))
    engine.client.send(sorted(sent))
    return sorted(sent)


def send_woken(engine, stack_id, nodes):
    for traversal_id, node in nodes:
        engine.client.check_resource(stack_id, traversal_id, node)
    return len(nodes)


def _null_safe_eq(col, value):
    return col.is_(None) if value is None else col == value
