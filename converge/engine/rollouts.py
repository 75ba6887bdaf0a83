"""An operator moving a rollout on: `converge stack update --resume NAME`.

A group's rolling update with a canary waits, after the canary batch, for
the operator (resources/group.py: its plan's phase is "canary", its unit
waits on the group's resume event and holds no thread). Resuming writes
the plan's next phase into the group's resource row, under the
resource's lock (so no unit of work is running it meanwhile, and none
records a wait after this write), in one transaction that also makes the
waiting node due; the node is then sent. Should this process die after
the commit, the node is due on record and any engine's timer sends it.
"""

import sqlalchemy as sa

from converge import exception
from converge.db import api
from converge.db import models
from converge.engine import nested
from converge.engine import traversal
from converge.resources import group


def resume(engine, ident, project_id=None):
    """Resume every rollout of the stack (and of its nested stacks) that
    waits for the operator. Returns (stack id, its traversal id)."""
    with engine.db.read() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
    resumed = 0
    for stack_id in nested.tree(engine, stack.id):
        with engine.db.read() as s:
            rows = s.execute(sa.select(
                models.Resource.id, models.Resource.name,
                models.Resource.data).where(
                models.Resource.stack_id == stack_id,
                models.Resource.status == 'IN_PROGRESS')).all()
        for row in rows:
            if _waiting(row) and _resume_row(engine, stack_id, row):
                resumed += 1
    if not resumed:
        raise exception.Conflict(
            'Stack %s has no rolling update waiting to be resumed'
            % stack.name)
    return stack.id, stack.current_traversal


def _waiting(row):
    plan = (row.data or {}).get(group.ROLLOUT)
    return isinstance(plan, dict) and plan.get('phase') == 'canary'


def _resume_row(engine, stack_id, row):
    with engine.locks.resource(stack_id, row.name, engine.lock_wait):
        with engine.db.begin() as conn:
            fresh = api.resource_get(conn, row.id)
            if fresh is None or not _waiting(fresh):
                return False
            data = dict(fresh.data)
            plan = dict(data[group.ROLLOUT], phase='start')
            data[group.ROLLOUT] = plan
            if api.resource_cas(conn, fresh.id, fresh.atomic_key,
                                data=data) is None:
                return False
            api.event_add(conn, stack_id, fresh.traversal_id, fresh.name,
                          api.shown_type(fresh), fresh.physical_id, fresh.action,
                          'IN_PROGRESS', 'resumed by the operator after '
                          'batch %d of %d' % (plan['done'],
                                              len(plan['batches'])))
            nodes = traversal.woken(conn, stack_id,
                                    group.resume_event(fresh.uuid))
    traversal.send_woken(engine, stack_id, nodes)
    return True
