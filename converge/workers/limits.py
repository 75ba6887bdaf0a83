"""Limits that hold across the deployment, not per process.

`[DEFAULT] max_resources_in_progress_per_stack`: at most that many of a
stack's resources are being acted on at once (claimed IN_PROGRESS, a
server building included), whichever workers on whichever hosts run them.
The count is kept as leases in the engine database (db/api.py
`lease_take`), taken in the same transaction as the claim and given back
in the one that records the result; a lease expires by itself
(`[worker] slot_lease`) should its holder's row never be recorded.

A unit that finds no free slot does not hold its thread: it WAITs for the
event ``slot:<stack>`` — the unit that frees a slot wakes the one that has
waited longest — with a timer as the fallback.
"""

import time

from converge import conf as conf_mod
from converge.db import api
from converge.resources import base

REASON = 'waiting for a free slot (max_resources_in_progress_per_stack %d)'
#: seconds before a unit waiting for a slot looks again by itself
RECHECK = 5.0


def stack_cap():
    """The cap on a stack's resources in progress (0: none)."""
    return conf_mod.CONF.max_resources_in_progress_per_stack


def _key(stack_id):
    return 'stack-in-progress:%s' % stack_id


def _event(stack_id):
    return 'slot:%s' % stack_id


def take_stack_slot(conn, stack_id, row_id):
    """True when the row may be acted on now (a slot taken, or no cap)."""
    cap = stack_cap()
    if not cap:
        return True
    return api.lease_take(conn, _key(stack_id), str(row_id), cap,
                          conf_mod.CONF.worker.slot_lease)


def stack_slot_wait(stack_id):
    return base.Wait(after=RECHECK, event=_event(stack_id),
                     reason=REASON % stack_cap())


def release_stack_slot(conn, stack_id, row_id):
    """Give the row's slot back; returns the (traversal, node) woken to
    take it, to be sent after commit."""
    if not stack_cap() or not api.lease_release(
            conn, _key(stack_id), str(row_id)):
        return []
    lease = conf_mod.CONF.worker.stall_timeout
    return api.sync_wake_event(conn, stack_id, _event(stack_id),
                               time.time() + lease, limit=1)
