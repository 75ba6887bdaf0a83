"""Stack snapshots (Heat's `stack snapshot create|list|show|delete|
restore`).

A snapshot is a traversal of its own, as Heat's convergence makes it:
`create` stores the snapshot IN_PROGRESS (the stack's abandon document:
template, files, environment, parameters) and starts a SNAPSHOT
traversal in the same transaction; each resource's unit runs its
plug-in's ``snapshot`` step (a server: a Nova image of it; a volume: a
Cinder backup; every other type: nothing), waiting without a thread
until the cloud has made it. The traversal's end (engine/traversal.py
calls ``ended``, in the transaction that ends the stack's SNAPSHOT)
writes each resource's data into the document, with what its step
kept there (``snapshot_image_id``, ``backup_id``, Heat's names), and
the snapshot COMPLETE, or FAILED with the stack's reason.

`restore` updates the stack back to the kept template and parameters,
each resource's properties first given what its plug-in's
``restore_properties`` reads from its kept data (a server's image
becomes its snapshot's image: it is rebuilt from it; a volume's
backup_id its backup: it is made again from it); the stack ends
RESTORE_COMPLETE. `delete` asks each plug-in to delete what its step
made (``delete_snapshot``) before the row goes; deleting the stack
deletes its snapshots so (service.stack_delete).
"""

import collections
import copy
import time

import sqlalchemy as sa

from converge import exception
from converge import template
from converge.db import api
from converge.db import models
from converge.engine import abandon
from converge.engine import stacks
from converge.engine import traversal

SNAPSHOTS = models.StackSnapshot.__table__


def _show(row, with_data=True):
    # Heat's snapshot action: CREATE (DELETE while one is deleted)
    out = {'id': row.id, 'name': row.name, 'action': 'CREATE',
           'status': row.status,
           'status_reason': row.status_reason,
           'creation_time': time.strftime('%Y-%m-%dT%H:%M:%SZ',
                                          time.gmtime(row.created_at))}
    if with_data:
        out['data'] = row.data
    return out


def create(engine, ident, name=None, project_id=None):
    """Start snapshotting the stack, which must not be in progress: the
    snapshot (IN_PROGRESS) and its traversal in one transaction. Returns
    the snapshot as shown, with the stack's id and the traversal's (what
    a caller follows)."""
    snapshot_id = api.new_id()
    with engine.db.write() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        if stack.status == 'IN_PROGRESS':
            raise exception.Conflict(
                'Stack %s is %s_IN_PROGRESS: snapshot it once the '
                'operation ends' % (stack.name, stack.action))
        doc = abandon.document(engine, s, stack)
        s.execute(SNAPSHOTS.insert().values(
            id=snapshot_id, stack_id=stack.id, project_id=stack.project_id,
            name=name or '', status='IN_PROGRESS',
            status_reason='Stack SNAPSHOT started', data=doc,
            created_at=time.time()))
        defn = engine.definition(stack.template_id, stack)
        trav = traversal.start(engine, s, stack, stack.template_id,
                               'SNAPSHOT', defn, snapshot=snapshot_id)
        stack_id = stack.id
        # as made (Heat answers IN_PROGRESS): read after the kick, a
        # snapshot of a few logical resources was COMPLETE already
        shown = _show(_get(s, stack_id, snapshot_id))
    traversal.kick(engine, trav)
    return dict(shown, stack_id=stack_id, traversal_id=trav.id)


def ended(session, trav, status, reason):
    """The SNAPSHOT traversal `trav` ended (in the transaction that ends
    it): its snapshot takes each resource's data as the steps left it,
    and the stack's outcome."""
    snapshot_id = (trav.options or {}).get('snapshot')
    if not snapshot_id:
        return
    row = session.execute(sa.select(SNAPSHOTS).where(
        SNAPSHOTS.c.id == snapshot_id)).first()
    if row is None or row.status != 'IN_PROGRESS':
        return   # deleted meanwhile, or ended already
    doc = copy.deepcopy(row.data or {})
    kept = doc.setdefault('resources', {})
    res_t = models.Resource.__table__
    # a core query: the caller's may be a session or a connection
    for res in session.execute(sa.select(
            res_t.c.name, res_t.c.physical_id, res_t.c.data,
            res_t.c.action, res_t.c.status).where(
            res_t.c.stack_id == row.stack_id)):
        entry = kept.get(res.name)
        if entry is not None and res.physical_id == entry.get(
                'resource_id'):
            entry['resource_data'] = dict(res.data or {})
            entry['action'], entry['status'] = res.action, res.status
    doc['action'], doc['status'] = 'SNAPSHOT', status
    session.execute(SNAPSHOTS.update().where(
        SNAPSHOTS.c.id == snapshot_id).values(
        status=status, status_reason=reason, data=doc))


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
    """Delete what the snapshot's steps made (images, backups), then the
    snapshot. Asked again after a crash, the deletes find those gone
    (success) and the row goes."""
    with engine.db.read() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
    with engine.db.connect() as conn:
        row = _get(conn, stack.id, snapshot_id)
    if row.status == 'IN_PROGRESS':
        raise exception.InvalidInput(
            'Snapshot %s is IN_PROGRESS: deleting an in-progress snapshot '
            'is not supported' % snapshot_id)
    _delete_made(engine, stack, row)
    with engine.db.begin() as conn:
        conn.execute(SNAPSHOTS.delete().where(SNAPSHOTS.c.id == snapshot_id))


def delete_all(engine, ident, project_id=None):
    """Every snapshot of the stack and what it made (the stack is being
    deleted, as Heat's delete_all_snapshots). One in progress is ended
    by the delete's traversal, which supersedes its own: what its steps
    made so far is in its rows' data, deleted with it."""
    with engine.db.read() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
    with engine.db.connect() as conn:
        rows = conn.execute(sa.select(SNAPSHOTS).where(
            SNAPSHOTS.c.stack_id == stack.id)).all()
    for row in rows:
        _delete_made(engine, stack, row)
        with engine.db.begin() as conn:
            conn.execute(SNAPSHOTS.delete().where(SNAPSHOTS.c.id == row.id))


_Row = collections.namedtuple('_Row', 'name uuid physical_id data')


def _delete_made(engine, stack, row):
    """Each resource's plug-in deletes what its snapshot step made, as its
    kept data names it (a snapshot still in progress: as the steps' rows
    name it so far)."""
    resources = copy.deepcopy((row.data or {}).get('resources') or {})
    if row.status == 'IN_PROGRESS':
        with engine.db.read() as s:
            for res in api.resources_live(s, stack.id):
                taking = (res.data or {}).get('snapshot') or {}
                if taking.get('of') == row.id and res.name in resources:
                    resources[res.name]['resource_data'] = dict(res.data)
    for name, entry in sorted(resources.items()):
        data = entry.get('resource_data') or {}
        cls = engine.plugin_class(entry.get('type') or '')
        if cls is None or not data:
            continue
        plugin = engine.plugin(cls, _Row(name, entry.get('uuid') or '',
                                         entry.get('resource_id'), data),
                               entry.get('properties') or {}, stack)
        plugin.delete_snapshot(data)


def restore(engine, ident, snapshot_id, project_id=None):
    """Update the stack back to the snapshot's definition, each resource
    restored from its kept data; returns (stack id, traversal id)."""
    stack_id = _stack_id(engine, ident, project_id)
    with engine.db.connect() as conn:
        row = _get(conn, stack_id, snapshot_id)
    if row.status != 'COMPLETE':
        raise exception.InvalidInput(
            'Snapshot %s is %s: restoring an incomplete snapshot is not '
            'supported' % (snapshot_id, row.status))
    doc = row.data
    env = dict(doc.get('environment') or {})
    params = dict(env.pop('parameters', None) or {})
    tmpl = restored_template(engine, doc)
    bundle = template.Bundle(tmpl, doc.get('files'), env,
                             'snapshot %s' % snapshot_id)
    # every resource, against reality: what was restored must be there
    return stacks.update(engine, stack_id, bundle, params,
                         project_id=project_id, converge=True,
                         shown_action='RESTORE')


def restored_template(engine, doc):
    """The snapshot's template, each resource's properties given what its
    plug-in restores from its kept data (Heat's handle_restore): a value
    replaces the template's, None takes the property away."""
    tmpl = copy.deepcopy(doc.get('template') or {})
    kept = doc.get('resources') or {}
    section = 'Resources' if 'Resources' in tmpl else 'resources'
    for name, rdef in (tmpl.get(section) or {}).items():
        entry = kept.get(name)
        if not isinstance(rdef, dict) or not entry:
            continue
        cls = engine.plugin_class(rdef.get('type') or rdef.get('Type') or '')
        restore_properties = getattr(cls, 'restore_properties', None)
        if restore_properties is None:
            continue
        changes = restore_properties(entry.get('resource_data') or {})
        if not changes:
            continue
        key = 'Properties' if 'Properties' in rdef or 'Type' in rdef \
            else 'properties'
        props = dict(rdef.get(key) or {})
        for prop, value in changes.items():
            if value is None:
                props.pop(prop, None)
            else:
                props[prop] = value
        rdef[key] = props
    return tmpl
