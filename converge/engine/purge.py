"""`converge-manage purge_deleted`: forget deleted stacks for good, as
Heat's `heat-manage purge_deleted` does.

A deleted stack stays in the database (`stack list --show-deleted`, its
events) until purged. Purging removes every row converge keeps of the
stacks deleted longer than the given age ago, of every project or of
one, their nested stacks with them: the stack row, its template
versions, resources, events, traversals and whatever else names it.
Live stacks are never touched. Each batch of stacks is one transaction.
"""

import datetime

import sqlalchemy as sa

from converge import exception
from converge.db import models

#: seconds in one unit of each granularity Heat's command takes
GRANULARITY = {'days': 86400, 'hours': 3600, 'minutes': 60, 'seconds': 1}

#: every table whose rows name a stack (stack_id), besides the stacks'
_BY_STACK = (models.SyncPoint, models.Resource, models.Traversal,
             models.Event, models.SoftwareDeployment,
             models.AgentCredential, models.WaitConditionSignal,
             models.ScalingSignal, models.DeploymentAction,
             models.StackSnapshot, models.ConvergePolicy, models.Fact,
             models.FactRefresh)


def _count(value, name):
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise exception.InvalidInput('%s should be an integer' % name)
    if value < 0:
        raise exception.InvalidInput('%s should be a positive integer'
                                     % name)
    return value


def purge_deleted(db, age=90, granularity='days', project_id=None,
                  batch_size=20, now=None):
    """Remove the stacks (of `project_id`, else of every project) deleted
    more than `age` `granularity` ago, `batch_size` top-level stacks a
    transaction; returns how many stacks (nested ones counted) went."""
    age = _count(age, 'age')
    batch_size = _count(batch_size, 'batch_size') or 1
    if granularity not in GRANULARITY:
        raise exception.InvalidInput(
            'granularity should be days, hours, minutes, or seconds')
    now = now or models.utcnow()
    cutoff = now - datetime.timedelta(seconds=age * GRANULARITY[granularity])
    S = models.Stack
    q = sa.select(S.id).where(S.deleted_at.is_not(None),
                              S.deleted_at < cutoff, S.parent_id.is_(None))
    if project_id:
        q = q.where(S.project_id == project_id)
    purged = 0
    while True:
        with db.write() as s:
            top = list(s.scalars(q.order_by(S.deleted_at).limit(batch_size)))
            if not top:
                return purged
            ids = _with_nested(s, top)
            _delete(s, ids)
        purged += len(ids)


def _with_nested(session, ids):
    """`ids` and the deleted stacks nested in them, at any depth."""
    S = models.Stack
    found, level = list(ids), list(ids)
    while level:
        level = list(session.scalars(sa.select(S.id).where(
            S.parent_id.in_(level), S.deleted_at.is_not(None))))
        found += level
    return found


def _delete(session, ids):
    S, T = models.Stack, models.Traversal
    session.execute(sa.delete(S).where(S.id.in_(ids)))
    session.execute(sa.delete(models.SyncShard).where(
        models.SyncShard.traversal_id.in_(
            sa.select(T.id).where(T.stack_id.in_(ids)))))
    for model in _BY_STACK:
        session.execute(sa.delete(model).where(model.stack_id.in_(ids)))
    session.execute(sa.delete(models.Template).where(
        models.Template.stack_id.in_(ids)))
