"""Stack operations. Each one that changes desired state starts a traversal.

Starting a traversal is one transaction: store the new desired state,
take the stack over from whatever traversal owned it (compare-and-swap on
``current_traversal``), drop that traversal's sync points so its in-flight
work stops propagating, and lay out the new graph's sync points. Only then
are the graph's leaves sent to the workers.
"""

import re
import time

import sqlalchemy as sa
from oslo_log import log as logging

from converge import exception
from converge import template
from converge.db import api
from converge.db import models
from converge.graph import dependencies
from converge.graph import plan as plan_mod

LOG = logging.getLogger(__name__)

IN_PROGRESS_REASON = 'Stack %s started'

# Heat's rule (heat/engine/stack.py): a letter, then letters, digits, "_",
# "-" or "."; 255 characters at most (the column's width)
STACK_NAME = re.compile(r'[a-zA-Z][a-zA-Z0-9_.-]{0,254}')


def check_name(name):
    """Refuse a stack name Heat would refuse."""
    if not isinstance(name, str) or not STACK_NAME.fullmatch(name):
        raise exception.InvalidInput(
            'Invalid stack name %r: it must start with a letter, contain '
            'only letters, digits and "_-.", and be at most 255 characters'
            % (name,))


def check_timeout(timeout):
    """A stack timeout is a positive number of minutes (or none)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int) or \
            timeout <= 0:
        raise exception.InvalidInput(
            'Invalid timeout %r: it must be a positive whole number of '
            'minutes' % (timeout,))
    return timeout


def validate(bundle, params, stack_name='stack', stack_id='',
             validate_values=True, project_id=None):
    from converge.engine.context import limits
    defn = template.StackDefinition(bundle, params, stack_name=stack_name,
                                    stack_id=stack_id,
                                    project_id=project_id or engine_project(),
                                    validate_values=validate_values,
                                    limits=limits())
    try:
        dependencies.build(defn.dependencies())
    except exception.InvalidTemplate as exc:
        raise exc.locate(bundle.template_path, bundle.line_of(exc.path))
    return defn


def create(engine, name, bundle, params, disable_rollback=True,
           timeout=None, tags=None, project_id=None):
    """Store a new stack of `project_id` (default: the configured project)
    and start creating it; returns (stack id, traversal id)."""
    check_name(name)
    check_timeout(timeout)
    project_id = project_id or engine_project()
    stack_id = api.new_id()
    defn = validate(bundle, params, stack_name=name, stack_id=stack_id,
                    project_id=project_id)
    try:
        with engine.db.write() as s:
            if api.stack_name_taken(s, project_id, name):
                raise exception.Conflict('Stack %s already exists' % name)
            s.add(models.Stack(id=stack_id, name=name, action='CREATE',
                               status='IN_PROGRESS', status_reason='',
                               disable_rollback=disable_rollback,
                               timeout_mins=timeout, tags=tags or [],
                               project_id=project_id))
            s.flush()
            template_id = api.template_create(s, stack_id, bundle.to_dict(),
                                              params)
            stack = s.get(models.Stack, stack_id)
            engine.remember(template_id, stack, defn)
            trav = _start(engine, s, stack, template_id, 'CREATE', defn,
                          rollback=not disable_rollback)
    except sa.exc.IntegrityError:
        # two creates of one name raced past the check: the unique
        # constraint (project, name, live) let one of them in
        raise exception.Conflict('Stack %s already exists' % name)
    kick(engine, trav)
    return stack_id, trav.id


def update(engine, ident, bundle=None, params=None, existing=False,
           rollback=None, clear_parameters=(), timeout=None, tags=None,
           project_id=None):
    check_timeout(timeout)
    with engine.db.read() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        old = api.template_get(s, stack.template_id)
        old_bundle, old_params = old.bundle, dict(old.parameters)
    if existing:
        merged = dict(old_params)
        for key in clear_parameters:
            merged.pop(key, None)
        merged.update(params or {})
        params = merged
        if bundle is None:
            bundle = template.Bundle.from_dict(old_bundle)
        else:
            # --existing keeps the old environment under the new one
            bundle = bundle.merged_over(template.Bundle.from_dict(old_bundle))
    elif bundle is None:
        raise exception.InvalidInput('Need a template to update with '
                                     '(-t), or --existing')
    defn = validate(bundle, params or {}, stack_name=stack.name,
                    stack_id=stack.id, project_id=stack.project_id)
    if rollback is None:
        rollback = not stack.disable_rollback
    with engine.db.write() as s:
        stack = api.stack_get(s, stack.id, project_id=project_id)
        template_id = api.template_create(s, stack.id, bundle.to_dict(),
                                          params or {})
        stack.disable_rollback = not rollback
        if timeout is not None:
            stack.timeout_mins = timeout
        if tags is not None:
            stack.tags = list(tags)
        engine.remember(template_id, stack, defn)
        trav = _start(engine, s, stack, template_id, 'UPDATE', defn,
                      rollback=rollback, prev_template_id=stack.template_id)
    kick(engine, trav)
    return stack.id, trav.id


def delete(engine, ident, project_id=None):
    with engine.db.write() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        trav = _start(engine, s, stack, stack.template_id, 'DELETE', None)
    kick(engine, trav)
    return stack.id, trav.id


def check(engine, ident, project_id=None):
    return _again(engine, ident, 'CHECK', project_id)


def converge(engine, ident, project_id=None):
    """Walk the graph again against reality, resuming an unfinished action."""
    with engine.db.read() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
    action = stack.action
    if stack.status == 'COMPLETE' or action in ('CHECK', 'INIT'):
        action = 'UPDATE'
    if action == 'DELETE':
        return delete(engine, stack.id, project_id)
    return _again(engine, stack.id, action, project_id)


def _again(engine, ident, action, project_id=None):
    with engine.db.write() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        defn = engine.definition(stack.template_id, stack)
        trav = _start(engine, s, stack, stack.template_id, action, defn,
                      rollback=False)
    kick(engine, trav)
    return stack.id, trav.id


def cancel(engine, ident, rollback=True, project_id=None):
    """Stop a running create/update.

    With rollback: walk back to the previous template. Without: stop
    propagation, let running actions finish, end <ACTION>_FAILED.
    """
    with engine.db.write() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        if stack.status != 'IN_PROGRESS' or stack.action not in (
                'CREATE', 'UPDATE'):
            raise exception.Conflict(
                'Stack %s is %s_%s: only a stack being created or updated '
                'can be cancelled' % (stack.name, stack.action, stack.status))
        old = api.traversal_get(s, stack.current_traversal)
        if not rollback:
            new_trav = api.new_id()
            action = stack.action
            _supersede(s, stack, new_trav)
            s.add(models.Traversal(id=new_trav, stack_id=stack.id,
                                   action=action,
                                   template_id=stack.template_id,
                                   state='cancelled'))
            s.execute(sa.update(models.Stack)
                      .where(models.Stack.id == stack.id)
                      .values(current_traversal=new_trav, status='FAILED',
                              status_reason='Stack %s cancelled' % action,
                              updated_at=models.utcnow()))
            return stack.id, new_trav
    return rollback_to_previous(engine, stack.id, old)


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
    return _start(engine, session, stack, target, 'ROLLBACK', defn,
                  parent=trav.id if trav else None,
                  keep_template=target is None)


# -- the traversal ------------------------------------------------------------

def _supersede(session, stack, new_traversal_id):
    """The running traversal loses the stack; its sync points go."""
    old = stack.current_traversal
    if old:
        api.traversal_set_state(session, old, 'superseded',
                                ['running', 'failing'],
                                finished_at=models.utcnow())
        api.sync_purge(session, old)


def _start(engine, session, stack, template_id, action, defn, rollback=False,
           prev_template_id=None, parent=None, keep_template=False):
    """Lay out a traversal in the caller's transaction; return it."""
    trav_id = api.new_id()
    requires = defn.dependencies() if defn is not None else {}
    rows = api.resources_layout(session, stack.id)
    selected = _select_rows(rows, requires, template_id)
    # rows born in this traversal are what their update nodes act on and
    # cannot have been replaced yet: they need no cleanup node
    cleanup_rows = [] if action == 'CHECK' else list(rows)
    born = [dict(
        uuid=api.new_id(), stack_id=stack.id, name=name,
        type=defn.resources[name].type, action='INIT', status='COMPLETE',
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
        selected)

    _supersede(session, stack, trav_id)
    values = dict(current_traversal=trav_id, action=action,
                  status='IN_PROGRESS',
                  status_reason=IN_PROGRESS_REASON % action,
                  updated_at=models.utcnow())
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
    if parent:
        options['parent'] = parent
    if stack.timeout_mins and action not in ('DELETE', 'ROLLBACK'):
        options['deadline'] = time.time() + stack.timeout_mins * 60
    trav = models.Traversal(id=trav_id, stack_id=stack.id, action=action,
                            template_id=template_id, state='running',
                            options=options, total=len(plan.nodes))
    session.add(trav)
    session.flush()
    roots = plan.roots
    now = time.time()
    sync_rows = [dict(traversal_id=trav_id, node=key, stack_id=stack.id,
                      resource_id=node.resource_id,
                      remaining=node.predecessors,
                      dependents=node.dependents + (
                          [plan_mod.STACK_NODE] if key in roots else []),
                      done=False, updated_at=now)
                 for key, node in plan.nodes.items()]
    sync_rows.append(dict(traversal_id=trav_id, node=plan_mod.STACK_NODE,
                          stack_id=stack.id, resource_id=None,
                          remaining=len(roots), dependents=[], done=False,
                          updated_at=now))
    session.execute(sa.insert(models.SyncPoint), sync_rows)
    trav.leaves = plan.leaves
    if not plan.nodes:
        from converge.workers import walker
        walker.complete(session, trav, stack.id)
    return trav


def kick(engine, trav):
    for node in trav.leaves:
        engine.client.check_resource(trav.stack_id, trav.id, node)


def _null_safe_eq(col, value):
    return col.is_(None) if value is None else col == value


def _select_rows(rows, requires, template_id):
    """Which existing row each desired resource starts from.

    The row already made for this template version wins (rollback re-uses
    the original; a resumed traversal re-uses its own replacement), then
    a row not replaced, then the newest.
    """
    best = {}
    for row in rows:
        if row.name not in requires:
            continue
        score = (row.template_id == template_id, row.replaced_by is None,
                 row.status != 'FAILED', row.id)
        if row.name not in best or score > best[row.name][0]:
            best[row.name] = (score, row.id)
    return {name: v[1] for name, v in best.items()}


def engine_project():
    from converge import conf
    return conf.CONF.project_id
