"""Stack snapshots (Heat's `stack snapshot create|list|show|delete|
restore`).

A snapshot keeps the stack's abandon document: its template, files,
environment and parameters, and each resource's physical id and data.
The simulated cloud cannot copy a server's disk, so no resource keeps
more than that: restoring is an update of the stack back to the kept
definition. Resources added since are deleted, resources changed since
go back to their kept properties, and one deleted since is made anew
(not from an image of its old disk). docs/api.md says so.
"""

import time
import uuid

import sqlalchemy as sa

from converge import exception
from converge import template
from converge.db import api
from converge.db import models
from converge.engine import abandon
from converge.engine import stacks

SNAPSHOTS = models.StackSnapshot.__table__


def _show(row, with_data=True):
    out = {'id': row.id, 'name': row.name, 'status': row.status,
           'status_reason': row.status_reason,
           'creation_time': time.strftime('%Y-%m-%dT%H:%M:%SZ',
                                          time.gmtime(row.created_at))}
    if with_data:
        out['data'] = row.data
    return out


def create(engine, ident, name=None, project_id=None):
    """Keep the stack as it is now; the stack must not be in progress."""
    doc = abandon.export(engine, ident, project_id=project_id)
    if doc['status'] == 'IN_PROGRESS':
        raise exception.Conflict('Stack %s is %s_IN_PROGRESS: snapshot it '
                                 'once the operation ends'
                                 % (doc['name'], doc['action']))
    row = dict(id=str(uuid.uuid4()), stack_id=doc['id'],
               project_id=doc['project_id'], name=name or '',
               status='COMPLETE', status_reason='Stack SNAPSHOT completed '
               'successfully', data=doc, created_at=time.time())
    with engine.db.begin() as conn:
        conn.execute(SNAPSHOTS.insert().values(**row))
    with engine.db.connect() as conn:
        return _show(_get(conn, doc['id'], row['id']))


def _stack_id(engine, ident, project_id):
    with engine.db.read() as s:
        return api.stack_get(s, ident, project_id=project_id).id


def _get(conn, stack_id, snapshot_id):
    row = conn.execute(sa.select(SNAPSHOTS).where(
        SNAPSHOTS.c.id == snapshot_id,
        SNAPSHOTS.c.stack_id == stack_id)).first()
    if row is None:
        raise exception.NotFound('Snapshot %s not found' % snapshot_id)
    return row


def listing(engine, ident, project_id=None):
    stack_id = _stack_id(engine, ident, project_id)
    with engine.db.connect() as conn:
        return [_show(r, with_data=False) for r in conn.execute(
            sa.select(SNAPSHOTS).where(SNAPSHOTS.c.stack_id == stack_id)
            .order_by(SNAPSHOTS.c.created_at))]


def show(engine, ident, snapshot_id, project_id=None):
    stack_id = _stack_id(engine, ident, project_id)
    with engine.db.connect() as conn:
        return _show(_get(conn, stack_id, snapshot_id))


def delete(engine, ident, snapshot_id, project_id=None):
    stack_id = _stack_id(engine, ident, project_id)
    with engine.db.begin() as conn:
        _get(conn, stack_id, snapshot_id)
        conn.execute(SNAPSHOTS.delete().where(SNAPSHOTS.c.id == snapshot_id))


def restore(engine, ident, snapshot_id, project_id=None):
    """Update the stack back to the snapshot's definition; returns
    (stack id, traversal id)."""
    stack_id = _stack_id(engine, ident, project_id)
    with engine.db.connect() as conn:
        doc = _get(conn, stack_id, snapshot_id).data
    env = dict(doc.get('environment') or {})
    params = dict(env.pop('parameters', None) or {})
    bundle = template.Bundle(doc.get('template') or {}, doc.get('files'),
                             env, 'snapshot %s' % snapshot_id)
    # every resource, against reality: what was restored must be there
    return stacks.update(engine, stack_id, bundle, params,
                         project_id=project_id, converge=True)
