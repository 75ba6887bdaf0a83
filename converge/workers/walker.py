"""Walking a traversal: finishing a node and releasing its dependents.

Knows nodes and sync points, not resources. Runs inside the caller's
transaction, so a node's result and its propagation commit together or not
at all. (Starting, failing and ending a traversal: engine/traversal.py.)
"""

from converge.db import api
from converge.engine import traversal as traversal_mod
from converge.graph import plan
from converge.graph.plan import STACK_NODE


def finish(session, traversal, stack_id, node, resource_id=None):
    """Mark `node` done and release its dependents (as the node has them
    now: a drained traversal changed them since the unit loaded it).

    Returns the nodes now ready to run, or None when this node was already
    done or its traversal is gone (superseded): then nothing propagates.
    """
    dependents = api.sync_mark_done(session, traversal.id, node, resource_id)
    if dependents is None:
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


def release_together(session, traversal, stack_id, dependents_of):
    """release() for several ended nodes ({key: their dependents}):
    {key: the nodes now ready}. In the one order every caller shares:
    first the count shards, node by node, each node's in one statement
    that locks them in order; then each node, in order. (A shard's last
    input counts its node down at once when alone: two batches, each
    holding a shard and the node the other had just counted, waited for
    each other until PostgreSQL broke the deadlock a second later.)"""
    plain = {key: [] for key in dependents_of}
    shards, last = [], {}   # shard keys; each one's last ended node
    for key, deps in dependents_of.items():
        for dep in deps or ():
            if plan.is_shard(dep):
                shards.append(dep)
                last[dep] = key
            else:
                plain[key].append(dep)
    if shards:
        for dep in api.sync_release_shards(session, traversal.id, shards):
            plain[last[dep]].append(plan.split_shard(dep)[0])
    ready = {key: [] for key in dependents_of}
    for node, key in sorted((node, key) for key, nodes in plain.items()
                            for node in nodes):
        ready[key] += release(session, traversal, stack_id, [node])
    return ready
