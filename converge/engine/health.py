"""An operator marking a resource unhealthy (Heat's `openstack stack
resource mark unhealthy`): the resource goes CHECK_FAILED with the
operator's reason, and the next update or `stack converge` does its
action again (decide: a FAILED row is never taken as done). Marking it
healthy again undoes only a mark (a CHECK_FAILED), nothing else.

The write is a compare-and-swap under the resource's lock, so it never
lands in the middle of a unit of work on the resource.
"""

from converge import exception
from converge.db import api
from converge.engine import views

DEFAULT_REASON = 'Marked unhealthy by the operator'


def mark(engine, ident, name, unhealthy=True, reason='', project_id=None):
    """Returns the resource's new status (CHECK_FAILED or CHECK_COMPLETE),
    or its unchanged one."""
    with engine.db.read() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
    if stack.status == 'IN_PROGRESS':
        raise exception.Conflict(
            'Stack %s is %s_IN_PROGRESS: mark its resources once the '
            'operation ends' % (stack.name, stack.action))
    row = views.resources(engine, stack).get(name)
    if row is None:
        raise exception.ResourceNotFound(stack.name, name)
    with engine.locks.resource(stack.id, name, engine.lock_wait):
        with engine.db.begin() as conn:
            fresh = api.resource_get(conn, row.id)
            if fresh is None:
                raise exception.ResourceNotFound(stack.name, name)
            if fresh.status == 'IN_PROGRESS':
                raise exception.Conflict('Resource %s is %s_IN_PROGRESS'
                                         % (name, fresh.action))
            if unhealthy:
                status, why = 'FAILED', reason or DEFAULT_REASON
            elif fresh.action == 'CHECK' and fresh.status == 'FAILED':
                status, why = 'COMPLETE', reason or \
                    'Marked healthy by the operator'
            else:
                return '%s_%s' % (fresh.action, fresh.status)
            if api.resource_cas(conn, fresh.id, fresh.atomic_key,
                                action='CHECK', status=status,
                                status_reason=why) is None:
                raise exception.Conflict('Resource %s changed meanwhile; '
                                         'try again' % name)
            api.event_add(conn, stack.id, None, name, api.shown_type(fresh),
                          fresh.physical_id, 'CHECK', status, why)
    return 'CHECK_%s' % status
