"""Heat's hooks (breakpoints): a resource named in the environment's
``resource_registry`` pauses before it is created, updated or deleted
until somebody clears the hook.

    resource_registry:
      resources:
        my_server: {hooks: pre-create}          # one name
        "web_*": {hooks: [pre-create, pre-update]}   # a glob (fnmatch)
        nested_res:                             # a nested stack's
          child_res: {hooks: pre-delete}        # resource, by path

The pause is an ordinary wait of the unit (workers/reconcile.py): the
resource's row keeps its state and notes the hook it reached in its data
(``MARK``: the hook, the traversal, whether it was cleared), an event
says "CREATE paused until Hook pre-create is cleared" (Heat's text, what
`openstack stack hook poll` looks for), and the node waits in the
database for the event `event_for(name, hook)`: no thread is held and a
killed engine loses nothing. Clearing it (`clear`: Heat's signal
``{"unset_hook": "pre-create"}``) marks the row cleared, writes "Hook
pre-create is cleared" and wakes the node, in one transaction; the unit
then runs again and goes on. A hook is reached once per traversal: a
later traversal pauses again.

As Heat: pre-create only in a stack CREATE, pre-update in an UPDATE (of
a resource that changes or is replaced), pre-delete in a DELETE. After
its action, post-create (in a CREATE) and post-update (in an UPDATE)
pause a resource recorded COMPLETE: its node waits the same way instead
of being marked done, so what depends on it waits
(reconcile.Unit._held). post-delete is accepted (Heat's type) and not
paused at: the deleted row is gone with its node.
"""

import sqlalchemy as sa

from converge import exception
from converge.breakpoints import HOOK_TYPES, cleared_reason
from converge.db import api
from converge.db import models
from converge.engine import traversal
from converge.graph import plan as plan_mod

#: the row data key noting a hook reached (Heat keeps it in resource data)
MARK = 'converge:hook'

#: seconds between looks at a pending hook (a safety net: the clear wakes
#: the node at once)
RECHECK = 60.0


class InvalidHook(exception.InvalidInput):
    """Heat's InvalidBreakPointHook: a 400."""


def event_for(name, hook):
    """The event a node paused at a hook waits for."""
    return 'hook:%s:%s' % (hook, name)


def mark(data):
    found = (data or {}).get(MARK)
    return found if isinstance(found, dict) else None


def pending(data, hook=None):
    """The hook the row's data says is reached and not cleared."""
    m = mark(data)
    if m is None or m.get('cleared'):
        return None
    if hook is not None and m.get('hook') != hook:
        return None
    return m.get('hook')


def reached(data, hook, traversal_id):
    """The row's data with `hook` reached in this traversal."""
    out = dict(data or {})
    out[MARK] = {'hook': hook, 'traversal': traversal_id, 'cleared': False}
    return out


def cleared_in(data, hook, traversal_id):
    """Whether `hook` was reached and cleared in this traversal."""
    m = mark(data)
    return m is not None and m.get('hook') == hook and \
        m.get('traversal') == traversal_id and bool(m.get('cleared'))


def reached_in(data, hook, traversal_id):
    m = mark(data)
    return m is not None and m.get('hook') == hook and \
        m.get('traversal') == traversal_id


def without_mark(data):
    if MARK not in (data or {}):
        return data
    out = dict(data)
    del out[MARK]
    return out


_DATA_LOCKED = sa.select(api.RESOURCES.c.data).where(
    api.RESOURCES.c.id == sa.bindparam('b_id')).with_for_update()


def still_pending(conn, row_id, hook):
    """In the transaction recording a node's wait at `hook`: whether it
    is still pending. The row is locked, so a clearing either committed
    before (seen here) or finds the wait recorded and wakes it."""
    row = conn.execute(_DATA_LOCKED, {'b_id': row_id}).first()
    return row is not None and pending(row.data, hook) is not None


def paused(engine, stack_id):
    """Whether the stack (with the stacks nested in it) is held by its
    hooks alone: at least one node waits for a hook, and every other
    node that could run waits for a hook or for a nested stack. Nothing
    goes on until a hook is cleared."""
    S, T = models.SyncPoint, models.Traversal
    with engine.db.read() as s:
        ids = api.stack_tree(s, stack_id)
        waits = s.execute(
            sa.select(S.wait_event)
            .join(models.Stack, models.Stack.current_traversal ==
                  S.traversal_id)
            .join(T, T.id == S.traversal_id)
            .where(models.Stack.id.in_(ids), T.state == 'running',
                   S.remaining == 0, S.done.is_(False),
                   S.node != plan_mod.STACK_NODE)).scalars().all()
    events = [w or '' for w in waits]
    return any(e.startswith('hook:') for e in events) and all(
        e.startswith(('hook:', 'stack:')) for e in events)


def clear(engine, stack_ident, name, hook, project_id=None):
    """Clear the hook `hook` the resource `name` of a stack is paused at
    (Heat's signal {"unset_hook": hook}), and wake it. Returns what
    became of it, as a signal's record: {status, reason, stack_id,
    traversal_id}.

    :raises InvalidHook: not a hook type, or no such hook pending there
    :raises exception.NotFound: no such stack or resource
    """
    if not isinstance(hook, str) or hook not in HOOK_TYPES:
        raise InvalidHook('Invalid hook type "%s" for resource %s: '
                          'acceptable hook types are: %s'
                          % (hook, name, ', '.join(HOOK_TYPES)))
    with engine.db.write() as s:
        stack = api.stack_get(s, stack_ident, project_id=project_id)
        rows = [r for r in api.resources_live(s, stack.id) if r.name == name]
        if not rows:
            raise exception.ResourceNotFound(stack.name, name)
        row = next((r for r in rows if pending(r.data, hook)), None)
        if row is None:
            raise InvalidHook('The "%s" hook is not defined on resource %s '
                              'of stack %s' % (hook, name, stack.name))
        conn = s.connection()
        data = dict(row.data)
        data[MARK] = dict(data[MARK], cleared=True)
        if api.resource_cas(conn, row.id, row.atomic_key, data=data) is None:
            raise exception.Conflict('Resource %s of stack %s changed while '
                                     'its hook was cleared; try again'
                                     % (name, stack.name))
        api.event_add(conn, stack.id, data[MARK].get('traversal'), name,
                      api.shown_type(row), row.physical_id, row.action, row.status,
                      cleared_reason(hook))
        nodes = traversal.woken(conn, stack.id, event_for(name, hook))
        woken_in = stack.id
        # what goes on now is the root stack's traversal (a nested
        # stack's ends inside it): the one a caller follows
        while stack.parent_id:
            stack = s.get(models.Stack, stack.parent_id)
        root_id, trav_id = stack.id, stack.current_traversal
    traversal.send_woken(engine, woken_in, nodes)
    return {'status': 'CLEARED', 'reason': cleared_reason(hook),
            'stack_id': root_id, 'traversal_id': trav_id, 'capacity': None}
