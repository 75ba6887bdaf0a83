"""Walking a traversal: finishing nodes, releasing dependents, ending.

Knows nodes and sync points, not resources. Everything here runs inside
the caller's transaction, so a node's result and its propagation commit
together or not at all.
"""

from converge.db import api
from converge.db.models import utcnow
from converge.graph.plan import STACK_NODE

COMPLETE_REASON = 'Stack %s completed successfully'


def finish(session, traversal, stack_id, node, dependents, resource_id=None):
    """Mark `node` done and release its dependents.

    Returns the nodes now ready to run, or None when this node was already
    done or its traversal is gone (superseded): then nothing propagates.
    """
    if not api.sync_mark_done(session, traversal.id, node, resource_id):
        return None
    ready = api.sync_release(session, traversal.id, dependents)
    if STACK_NODE in ready:
        ready.remove(STACK_NODE)
        complete(session, traversal, stack_id)
    return ready


def complete(session, traversal, stack_id):
    action = traversal.action
    status, reason = 'COMPLETE', COMPLETE_REASON % action
    if action == 'CHECK':
        failed = api.check_failures(session, stack_id)
        if failed:
            status = 'FAILED'
            reason = 'Resource CHECK failed: ' + '; '.join(
                '%s: %s' % f for f in failed)
    extra = {}
    if action in ('DELETE',) and status == 'COMPLETE':
        extra = {'deleted_at': utcnow(), 'deleted_marker': stack_id}
    if api.stack_set_status(session, stack_id, traversal.id, action, status,
                            reason, **extra):
        api.traversal_set_state(session, traversal.id,
                                'complete' if status == 'COMPLETE'
                                else 'failed', ['running'],
                                finished_at=utcnow())
        api.sync_purge(session, traversal.id)


def fail(session, traversal, reason):
    """Stop propagating; the stack fails once in-flight work ends."""
    api.traversal_set_state(session, traversal.id, 'failing', ['running'],
                            failure=reason)


def settle(session, traversal, stack_id, mark_stack=True):
    """If a failing traversal has nothing in flight, end it.

    Returns True when this call ended it (the caller may start a rollback,
    and then leaves the stack's status to the rollback: mark_stack=False).
    """
    if api.resources_in_progress(session, stack_id, traversal.id):
        return False
    trav = api.traversal_get(session, traversal.id)
    if not api.traversal_set_state(session, traversal.id, 'failed',
                                   ['failing'], finished_at=utcnow()):
        return False
    if mark_stack:
        api.stack_set_status(session, stack_id, traversal.id,
                             traversal.action, 'FAILED',
                             trav.failure or 'Failed')
    api.sync_purge(session, traversal.id)
    return True
