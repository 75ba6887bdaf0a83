"""Walking a traversal: finishing a node and releasing its dependents.

Knows nodes and sync points, not resources. Runs inside the caller's
transaction, so a node's result and its propagation commit together or not
at all. (Starting, failing and ending a traversal: engine/traversal.py.)
"""

from converge.db import api
from converge.engine import traversal as traversal_mod
from converge.graph.plan import STACK_NODE


def finish(session, traversal, stack_id, node, dependents, resource_id=None):
    """Mark `node` done and release its dependents.

    Returns the nodes now ready to run, or None when this node was already
    done or its traversal is gone (superseded): then nothing propagates.
    """
    if not api.sync_mark_done(session, traversal.id, node, resource_id):
        return None
    return release(session, traversal, stack_id, dependents)


def release(session, traversal, stack_id, dependents):
    """Count a finished input for each of `dependents`: the nodes now
    ready to run (the traversal completed if the stack's own is)."""
    ready = api.sync_release(session, traversal.id, dependents)
    if STACK_NODE in ready:
        ready.remove(STACK_NODE)
        traversal_mod.complete(session, traversal, stack_id)
    return ready
