"""Queries and conditional writes. Callers own the transaction (session).

Every write to a resource row is a compare-and-swap on ``atomic_key``;
every write to a stack row that belongs to a traversal is a
compare-and-swap on ``current_traversal``.
"""

import time
import uuid as uuid_mod

import sqlalchemy as sa

from converge import exception
from converge.db import models
from converge.db.models import utcnow


def new_id():
    return str(uuid_mod.uuid4())


# -- stacks -------------------------------------------------------------------

def stack_get(session, ident, include_deleted=False):
    """By id or by name (live stacks; the newest deleted one if asked)."""
    q = sa.select(models.Stack).where(
        sa.or_(models.Stack.id == ident, models.Stack.name == ident))
    if not include_deleted:
        q = q.where(models.Stack.deleted_at.is_(None))
    rows = session.scalars(q.order_by(models.Stack.deleted_at.is_(None).desc(),
                                      models.Stack.created_at.desc())).all()
    if not rows:
        raise exception.StackNotFound(ident)
    return rows[0]


def stack_list(session):
    return session.scalars(sa.select(models.Stack)
                           .where(models.Stack.deleted_at.is_(None))
                           .order_by(models.Stack.created_at)).all()


def stack_set_status(session, stack_id, traversal_id, action, status, reason,
                     **extra):
    """CAS on the traversal: False when another traversal owns the stack."""
    values = dict(action=action, status=status, status_reason=reason,
                  updated_at=utcnow(), **extra)
    res = session.execute(
        sa.update(models.Stack)
        .where(models.Stack.id == stack_id,
               models.Stack.current_traversal == traversal_id)
        .values(**values))
    return res.rowcount == 1


# -- templates ----------------------------------------------------------------

def template_create(session, stack_id, bundle, parameters):
    tmpl = models.Template(stack_id=stack_id, bundle=bundle,
                           parameters=parameters or {})
    session.add(tmpl)
    session.flush()
    return tmpl.id


def template_get(session, template_id):
    return session.get(models.Template, template_id)


# -- resources ----------------------------------------------------------------

def resources_live(session, stack_id):
    """Every resource row of the stack (all versions)."""
    return session.scalars(sa.select(models.Resource)
                           .where(models.Resource.stack_id == stack_id)
                           .order_by(models.Resource.id)).all()


def resource_get(session, resource_id):
    return session.get(models.Resource, resource_id)


def resource_cas(session, row_id, atomic_key, traversal_running=None,
                 **values):
    """Write a resource row if nobody else has since `atomic_key`.

    With traversal_running, also only while that traversal is running.
    Returns the new key, or None when the write lost.
    """
    values['atomic_key'] = atomic_key + 1
    values['updated_at'] = utcnow()
    cond = [models.Resource.id == row_id,
            models.Resource.atomic_key == atomic_key]
    if traversal_running:
        cond.append(sa.exists().where(
            models.Traversal.id == traversal_running,
            models.Traversal.state == 'running'))
    res = session.execute(sa.update(models.Resource).where(*cond)
                          .values(**values))
    return atomic_key + 1 if res.rowcount == 1 else None


def resource_delete_row(session, row_id, atomic_key):
    res = session.execute(sa.delete(models.Resource).where(
        models.Resource.id == row_id,
        models.Resource.atomic_key == atomic_key))
    return res.rowcount == 1


def resources_in_progress(session, stack_id, traversal_id):
    return session.scalar(
        sa.select(sa.func.count()).select_from(models.Resource).where(
            models.Resource.stack_id == stack_id,
            models.Resource.traversal_id == traversal_id,
            models.Resource.status == 'IN_PROGRESS'))


# -- events -------------------------------------------------------------------

def event_add(session, stack_id, traversal_id, name, rtype, physical_id,
              action, status, reason='', timestamp=None):
    session.add(models.Event(
        uuid=new_id(), stack_id=stack_id, traversal_id=traversal_id,
        resource_name=name, resource_type=rtype or '',
        physical_id=physical_id, action=action, status=status,
        reason=reason or '', timestamp=timestamp or time.time()))


def events_list(session, stack_id, after_id=0, resource_name=None,
                limit=None):
    q = (sa.select(models.Event)
         .where(models.Event.stack_id == stack_id, models.Event.id > after_id)
         .order_by(models.Event.id))
    if resource_name:
        q = q.where(models.Event.resource_name == resource_name)
    if limit:
        q = q.limit(limit)
    return session.scalars(q).all()


# -- traversals and sync points -----------------------------------------------

def traversal_get(session, traversal_id):
    return session.get(models.Traversal, traversal_id)


def traversal_set_state(session, traversal_id, new_state, from_states,
                        **values):
    """CAS on the traversal's state; True when this call moved it."""
    res = session.execute(
        sa.update(models.Traversal)
        .where(models.Traversal.id == traversal_id,
               models.Traversal.state.in_(from_states))
        .values(state=new_state, **values))
    return res.rowcount == 1


def sync_load(session, traversal_id, node):
    """The node, its traversal and its stack in one round trip."""
    row = session.execute(
        sa.select(models.SyncPoint, models.Traversal, models.Stack)
        .join(models.Traversal,
              models.Traversal.id == models.SyncPoint.traversal_id)
        .join(models.Stack, models.Stack.id == models.Traversal.stack_id)
        .where(models.SyncPoint.traversal_id == traversal_id,
               models.SyncPoint.node == node)).first()
    return row


def sync_nodes(session, traversal_id, nodes):
    if not nodes:
        return []
    return session.scalars(sa.select(models.SyncPoint).where(
        models.SyncPoint.traversal_id == traversal_id,
        models.SyncPoint.node.in_(list(nodes)))).all()


def sync_mark_done(session, traversal_id, node, resource_id=None):
    """Mark the node done; False if it was already (or the traversal is gone)."""
    values = {'done': True, 'updated_at': time.time()}
    if resource_id is not None:
        values['resource_id'] = resource_id
    res = session.execute(
        sa.update(models.SyncPoint)
        .where(models.SyncPoint.traversal_id == traversal_id,
               models.SyncPoint.node == node,
               models.SyncPoint.done.is_(False))
        .values(**values))
    return res.rowcount == 1


def sync_set_resource(session, traversal_id, node, resource_id):
    session.execute(
        sa.update(models.SyncPoint)
        .where(models.SyncPoint.traversal_id == traversal_id,
               models.SyncPoint.node == node)
        .values(resource_id=resource_id))


def sync_release(session, traversal_id, dependents):
    """Count one more finished input for each dependent.

    Returns the dependents that now have all their inputs. Row locks (or
    SQLite's single writer) make exactly one caller see each reach zero.
    """
    if not dependents:
        return []
    session.execute(
        sa.update(models.SyncPoint)
        .where(models.SyncPoint.traversal_id == traversal_id,
               models.SyncPoint.node.in_(dependents))
        .values(remaining=models.SyncPoint.remaining - 1,
                updated_at=time.time()))
    return list(session.scalars(
        sa.select(models.SyncPoint.node)
        .where(models.SyncPoint.traversal_id == traversal_id,
               models.SyncPoint.node.in_(dependents),
               models.SyncPoint.remaining == 0)))


def sync_progress(session, traversal_id):
    """(done, total) nodes of a traversal, without the stack node."""
    rows = session.execute(
        sa.select(models.SyncPoint.done, sa.func.count())
        .where(models.SyncPoint.traversal_id == traversal_id,
               models.SyncPoint.node != 'stack')
        .group_by(models.SyncPoint.done)).all()
    counts = {bool(d): n for d, n in rows}
    return counts.get(True, 0), counts.get(True, 0) + counts.get(False, 0)


def sync_purge(session, traversal_id):
    session.execute(sa.delete(models.SyncPoint).where(
        models.SyncPoint.traversal_id == traversal_id))


# -- software configs ---------------------------------------------------------

def software_config_create(session, config_id, name, group, config):
    if session.get(models.SoftwareConfig, config_id) is None:
        session.add(models.SoftwareConfig(id=config_id, name=name or '',
                                          group=group or '', config=config))


def software_config_get(session, config_id):
    return session.get(models.SoftwareConfig, config_id)


def software_config_delete(session, config_id):
    session.execute(sa.delete(models.SoftwareConfig).where(
        models.SoftwareConfig.id == config_id))


def check_failures(session, stack_id):
    return [(r.name, r.status_reason) for r in session.scalars(
        sa.select(models.Resource).where(
            models.Resource.stack_id == stack_id,
            models.Resource.action == 'CHECK',
            models.Resource.status == 'FAILED').order_by(models.Resource.name))]


def dependency_rows(session, traversal_id, names):
    """name -> the row each named update node of the traversal settled on."""
    nodes = ['u:' + n for n in names]
    rows = session.execute(
        sa.select(models.Resource)
        .join(models.SyncPoint,
              models.SyncPoint.resource_id == models.Resource.id)
        .where(models.SyncPoint.traversal_id == traversal_id,
               models.SyncPoint.node.in_(nodes))).scalars().all()
    return {r.name: r for r in rows}


def resource_replacement(session, old, rtype, template_id):
    """Insert the row of a replacement and point the old row at it."""
    new = models.Resource(uuid=new_id(), stack_id=old.stack_id,
                          name=old.name, type=rtype, action='INIT',
                          status='COMPLETE', replaces=old.id,
                          template_id=template_id, atomic_key=0,
                          requires=[], data={})
    session.add(new)
    session.flush()
    if resource_cas(session, old.id, old.atomic_key,
                    replaced_by=new.id) is None:
        return None
    old.atomic_key += 1
    return new
