"""Queries and conditional writes. Callers own the transaction (session).

Every write to a resource row is a compare-and-swap on ``atomic_key``;
every write to a stack row that belongs to a traversal is a
compare-and-swap on ``current_traversal``.
"""

import collections
import functools
import time
import types
import uuid as uuid_mod

import sqlalchemy as sa

from converge import exception
from converge.db import models
from converge.db import prepared
from converge.db.models import utcnow
from converge.graph import plan as plan_mod

# The unit-of-work path runs its statements thousands of times a second:
# those are built once here, with bind parameters, so SQLAlchemy neither
# rebuilds them nor recomputes their cache keys; they return plain
# records, not ORM objects (loading instances costs more than the query).
STACKS = models.Stack.__table__
RESOURCES = models.Resource.__table__
TRAVERSALS = models.Traversal.__table__
SYNC = models.SyncPoint.__table__
EVENTS = models.Event.__table__
bp = sa.bindparam


class Record(types.SimpleNamespace):
    """One row as attributes (mutable: callers track their fencing key)."""


def _record(row):
    return None if row is None else Record(**row._mapping)


def _columns(table, prefix, skip=()):
    return [c.label(prefix + c.name) for c in table.c if c.name not in skip]


def _split(row, prefixes):
    """Labelled columns of several tables -> one Record per prefix."""
    parts = {p: {} for p in prefixes}
    for key, value in row._mapping.items():
        prefix, _, name = key.partition('__')
        parts[prefix][name] = value
    return tuple(Record(**parts[p]) for p in prefixes)


def new_id():
    return str(uuid_mod.uuid4())


# -- stacks -------------------------------------------------------------------

def stack_get(session, ident, include_deleted=False, project_id=None):
    """By id or by name (live stacks; the newest deleted one if asked).

    With `project_id`, only that project's stacks: a stack of another
    project is not found, exactly as one that does not exist.
    """
    q = sa.select(models.Stack).where(
        sa.or_(models.Stack.id == ident, models.Stack.name == ident))
    if project_id is not None:
        q = q.where(models.Stack.project_id == project_id)
    if not include_deleted:
        q = q.where(models.Stack.deleted_at.is_(None))
    rows = session.scalars(q.order_by(models.Stack.deleted_at.is_(None).desc(),
                                      models.Stack.created_at.desc())).all()
    if not rows:
        raise exception.StackNotFound(ident)
    return rows[0]


def stack_count(session, project_id):
    """The project's live top-level stacks."""
    return session.scalar(sa.select(sa.func.count()).select_from(
        STACKS).where(STACKS.c.project_id == project_id,
                      STACKS.c.parent_id.is_(None),
                      STACKS.c.deleted_at.is_(None)))


def stack_name_taken(session, project_id, name):
    """Whether the project has a live stack of that name."""
    return session.scalar(sa.select(STACKS.c.id).where(
        STACKS.c.project_id == project_id, STACKS.c.name == name,
        STACKS.c.deleted_at.is_(None))) is not None


_STACK_ROW = sa.select(*[c for c in STACKS.c if c.name != 'outputs']).where(
    STACKS.c.id == bp('b_id'))


def stack_tree(session, stack_id):
    """The ids of a stack and of every live stack nested in it, at any
    depth, parents first."""
    found, level = [stack_id], [stack_id]
    while level:
        level = list(session.scalars(sa.select(models.Stack.id).where(
            models.Stack.parent_id.in_(level),
            models.Stack.deleted_at.is_(None))))
        found += level
    return found


def stack_record(conn, stack_id):
    """One stack's columns (not the stored outputs) as a Record, or None."""
    return _record(conn.execute(_STACK_ROW, {'b_id': stack_id}).first())


_STACK_STATUS = sa.select(STACKS.c.action, STACKS.c.status,
                          STACKS.c.current_traversal).where(
    STACKS.c.id == bp('b_id'))


def stack_status(conn, stack_id):
    """action, status, current_traversal of one stack (one cheap query,
    for callers that wait)."""
    return _record(conn.execute(_STACK_STATUS, {'b_id': stack_id}).first())


def stack_list(session, project_id=None, show_nested=False,
               show_deleted=False):
    q = sa.select(models.Stack)
    if not show_deleted:
        q = q.where(models.Stack.deleted_at.is_(None))
    if not show_nested:
        q = q.where(models.Stack.parent_id.is_(None))
    if project_id is not None:
        q = q.where(models.Stack.project_id == project_id)
    return session.scalars(q.order_by(models.Stack.created_at)).all()


def stack_set_status(session, stack_id, traversal_id, action, status, reason,
                     when=None, **extra):
    """CAS on the traversal (and on the stack's status being `when`, if
    given): False when another traversal owns the stack."""
    values = dict(action=action, status=status, status_reason=reason,
                  updated_at=utcnow(), **extra)
    where = [STACKS.c.id == stack_id,
             STACKS.c.current_traversal == traversal_id]
    if when is not None:
        where.append(STACKS.c.status == when)
    res = session.execute(sa.update(STACKS).where(*where).values(**values))
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


def resources_named(session, stack_id, names):
    """The resource rows (all versions) of the stack named one of
    `names`: what resolving one resource's values reads, without the
    properties and attributes of every other row of the stack."""
    return session.scalars(sa.select(models.Resource)
                           .where(models.Resource.stack_id == stack_id,
                                  models.Resource.name.in_(sorted(names)))
                           .order_by(models.Resource.id)).all()


_LAYOUT = sa.select(
    RESOURCES.c.id, RESOURCES.c.name, RESOURCES.c.requires,
    RESOURCES.c.replaces, RESOURCES.c.replaced_by, RESOURCES.c.template_id,
    RESOURCES.c.status, RESOURCES.c.action,
    RESOURCES.c.applied_digest, RESOURCES.c.drift).where(
    RESOURCES.c.stack_id == bp('b_stack')).order_by(RESOURCES.c.id)


def resources_layout(conn, stack_id):
    """What laying out a traversal reads of every row of the stack: not the
    properties and attributes (at 22,000 rows those weigh 100 MB)."""
    return [_record(r) for r in conn.execute(_LAYOUT, {'b_stack': stack_id})]


_RESOURCE_GET = sa.select(RESOURCES).where(RESOURCES.c.id == bp('b_id'))


def resource_get(conn, resource_id):
    return _record(conn.execute(_RESOURCE_GET,
                                {'b_id': resource_id}).first())


_CAS = {}


def _cas_statement(columns, traversal_running):
    """UPDATE resources SET <columns> WHERE id and atomic_key match, built
    once per set of columns."""
    key = (columns, traversal_running)
    stmt = _CAS.get(key)
    if stmt is None:
        cond = [RESOURCES.c.id == bp('b_id'),
                RESOURCES.c.atomic_key == bp('b_key')]
        if traversal_running:
            cond.append(sa.exists().where(
                TRAVERSALS.c.id == bp('b_trav'),
                TRAVERSALS.c.state == 'running'))
        stmt = _CAS[key] = prepared.Statement(
            sa.update(RESOURCES).where(*cond).values(
                {c: bp('v_' + c, type_=RESOURCES.c[c].type)
                 for c in columns}), typed=True)
    return stmt


def resource_cas(conn, row_id, atomic_key, traversal_running=None,
                 **values):
    """Write a resource row if nobody else has since `atomic_key`.

    With traversal_running, also only while that traversal is running.
    Returns the new key, or None when the write lost.
    """
    values['atomic_key'] = atomic_key + 1
    values['updated_at'] = utcnow()
    params = {'v_' + k: v for k, v in values.items()}
    params.update(b_id=row_id, b_key=atomic_key, b_trav=traversal_running)
    stmt = _cas_statement(tuple(sorted(values)), bool(traversal_running))
    res = stmt.run(conn, params)
    return atomic_key + 1 if res.rowcount == 1 else None


@functools.lru_cache(maxsize=64)
def _cas_few(columns, count):
    """resource_cas of `count` rows setting `columns` (each its own
    values) in one UPDATE: WHERE each id with its key, SET each column by
    a CASE on the id; RETURNING the ids written."""
    ids = [bp('i%d' % i) for i in range(count)]

    def each(name, prefix, column):
        return sa.case(*[(RESOURCES.c.id == ids[i], bp(
            '%s%d' % (prefix, i), type_=column.type))
            for i in range(count)], else_=column)
    values = {c: each(c, 'v%d_' % n, RESOURCES.c[c])
              for n, c in enumerate(columns)}
    values.update(atomic_key=RESOURCES.c.atomic_key + 1,
                  updated_at=bp('b_now', type_=RESOURCES.c.updated_at.type))
    return prepared.Statement(sa.update(RESOURCES).where(
        RESOURCES.c.id.in_(ids),
        RESOURCES.c.atomic_key == each('atomic_key', 'k',
                                       RESOURCES.c.atomic_key)
    ).values(values).returning(RESOURCES.c.id), typed=True)


def resource_cas_many(conn, writes):
    """resource_cas of several rows, each `(row id, atomic_key,
    values)` (the same columns in each): the ids of the rows written, in
    one statement where the database returns what it updated (a
    message's units that wait or end: a statement each was most of a
    batch's statements)."""
    columns = tuple(sorted(writes[0][2])) if writes else ()
    if conn.dialect.update_returning and 1 < len(writes) <= _MANY_MAX:
        params = {'b_now': utcnow()}
        for i, (row_id, key, values) in enumerate(writes):
            params['i%d' % i], params['k%d' % i] = row_id, key
            for n, c in enumerate(columns):
                params['v%d_%d' % (n, i)] = values[c]
        size = _padded(params, len(writes), 'i%d', 'k%d', *[
            'v%d_%%d' % n for n in range(len(columns))])
        return {row[0] for row in _cas_few(columns, size).run(conn, params)}
    return {row_id for row_id, key, values in writes
            if resource_cas(conn, row_id, key, **values) is not None}


_OBSERVED = sa.update(RESOURCES).where(
    RESOURCES.c.id == bp('b_id'), RESOURCES.c.atomic_key == bp('b_key')
).values(observed=bp('b_observed', type_=RESOURCES.c.observed.type),
         observed_at=bp('b_at'), drift=bp('b_drift'))


def resources_observed(conn, seen):
    """Record what an observer saw, in one statement (executemany):
    `seen` is a list of (row id, the atomic_key it was read with,
    observed state, drift or None). The key is not moved on (a unit of
    work in flight keeps its claim); a row written since it was read is
    left as its writer left it, being newer."""
    now = time.time()
    conn.execute(_OBSERVED, [
        {'b_id': row_id, 'b_key': key, 'b_observed': observed, 'b_at': now,
         'b_drift': drift} for row_id, key, observed, drift in seen])


_RESOURCE_DELETE = sa.delete(RESOURCES).where(
    RESOURCES.c.id == bp('b_id'), RESOURCES.c.atomic_key == bp('b_key'))


def resource_delete_row(conn, row_id, atomic_key):
    res = conn.execute(_RESOURCE_DELETE, {'b_id': row_id, 'b_key': atomic_key})
    return res.rowcount == 1


def resources_in_flight(session, stack_id, traversal_id):
    """Rows of the traversal a unit of work is acting on (IN_PROGRESS under
    an engine). A waiting row is IN_PROGRESS under no engine: it holds no
    thread, so it is not in flight."""
    return session.scalar(
        sa.select(sa.func.count()).select_from(RESOURCES).where(
            RESOURCES.c.stack_id == stack_id,
            RESOURCES.c.traversal_id == traversal_id,
            RESOURCES.c.status == 'IN_PROGRESS',
            RESOURCES.c.engine_id.is_not(None)))


def shown_type(row):
    """A resource row's type as users are shown it: as its template names
    it (Heat's `resource_type`), else the plug-in's."""
    return getattr(row, 'template_type', None) or row.type


def resources_waiting(conn, stack_id, traversal_id):
    """The traversal's rows waiting out their action (IN_PROGRESS under
    no engine)."""
    return conn.execute(sa.select(
        RESOURCES.c.id, RESOURCES.c.atomic_key, RESOURCES.c.name,
        RESOURCES.c.type, RESOURCES.c.template_type, RESOURCES.c.physical_id,
        RESOURCES.c.action).where(
        RESOURCES.c.stack_id == stack_id,
        RESOURCES.c.traversal_id == traversal_id,
        RESOURCES.c.status == 'IN_PROGRESS',
        RESOURCES.c.engine_id.is_(None))).all()


def resources_stop_waiting(conn, stack_id, traversal_id, reason,
                           waiting=None, keep=()):
    """Mark the traversal's waiting rows FAILED (with an event each): the
    traversal ended, so nobody will come back to them. `waiting`: those
    rows, when the caller has read them (resources_waiting); `keep`: the
    names of those that go on waiting."""
    if waiting is None:
        waiting = resources_waiting(conn, stack_id, traversal_id)
    events = []
    for row in waiting:
        if row.name in keep:
            continue
        if resource_cas(conn, row.id, row.atomic_key, status='FAILED',
                        status_reason=reason) is not None:
            events.append(event(stack_id, traversal_id, row.name,
                                shown_type(row), row.physical_id,
                                row.action, 'FAILED',
                                reason))
    if events:
        events_add(conn, *events)
    return len(events)


def resource_replacement(conn, old, rtype, template_id, template_type=None):
    """Insert the row of a replacement and point the old row at it."""
    res = conn.execute(sa.insert(RESOURCES).values(
        uuid=new_id(), stack_id=old.stack_id, name=old.name, type=rtype,
        template_type=template_type,
        action='INIT', status='COMPLETE', replaces=old.id,
        template_id=template_id, atomic_key=0, requires=[], data={}))
    new = resource_get(conn, res.inserted_primary_key[0])
    if resource_cas(conn, old.id, old.atomic_key,
                    replaced_by=new.id) is None:
        return None
    old.atomic_key += 1
    return new


_DEPENDENCY_ROWS = (
    sa.select(RESOURCES)
    .join(SYNC, SYNC.c.resource_id == RESOURCES.c.id)
    .where(SYNC.c.traversal_id == bp('b_trav'),
           SYNC.c.node.in_(bp('b_nodes', expanding=True))))


def dependency_rows(conn, traversal_id, nodes):
    """name -> the row each of these update nodes settled on."""
    rows = conn.execute(_DEPENDENCY_ROWS, {'b_trav': traversal_id,
                                           'b_nodes': list(nodes)})
    return {r.name: r for r in rows}


def check_failures(conn, stack_id):
    return [tuple(r) for r in conn.execute(
        sa.select(RESOURCES.c.name, RESOURCES.c.status_reason).where(
            RESOURCES.c.stack_id == stack_id,
            RESOURCES.c.action == 'CHECK',
            RESOURCES.c.status == 'FAILED').order_by(RESOURCES.c.name))]


# -- events -------------------------------------------------------------------

_EVENT_ADD = prepared.Statement(sa.insert(EVENTS), typed=True)


def event(stack_id, traversal_id, name, rtype, physical_id, action, status,
          reason='', timestamp=None):
    """One event row, to be written with events_add."""
    return dict(uuid=new_id(), stack_id=stack_id, traversal_id=traversal_id,
                resource_name=name, resource_type=rtype or '',
                physical_id=physical_id, action=action, status=status,
                reason=reason or '', timestamp=timestamp or time.time())


def events_add(conn, *events):
    """Write events in one statement (executemany)."""
    _EVENT_ADD.run(conn, list(events))


def event_add(conn, *args, **kwargs):
    events_add(conn, event(*args, **kwargs))


def events_list(session, stack_id, after_id=0, resource_name=None,
                limit=None, traversal_ids=None, ids=None):
    q = (sa.select(models.Event)
         .where(models.Event.stack_id == stack_id, models.Event.id > after_id)
         .order_by(models.Event.id))
    if resource_name:
        q = q.where(models.Event.resource_name == resource_name)
    if traversal_ids is not None:
        q = q.where(models.Event.traversal_id.in_(list(traversal_ids)))
    if ids is not None:
        q = q.where(models.Event.id.in_(list(ids)))
    if limit:
        q = q.limit(limit)
    return session.scalars(q).all()


def event_ids(session, stack_id, after_id, traversal_ids):
    """Ids of the stack's events after `after_id` of these traversals
    (what a follower re-reads to find events that committed late)."""
    return list(session.scalars(
        sa.select(EVENTS.c.id).where(
            EVENTS.c.stack_id == stack_id, EVENTS.c.id > after_id,
            EVENTS.c.traversal_id.in_(list(traversal_ids)))))


# -- traversals and sync points -----------------------------------------------

_TRAVERSAL_GET = sa.select(TRAVERSALS).where(TRAVERSALS.c.id == bp('b_id'))


def traversals_of(session, stack_id):
    """Every traversal of the stack, oldest first."""
    return session.scalars(
        sa.select(models.Traversal)
        .where(models.Traversal.stack_id == stack_id)
        .order_by(models.Traversal.created_at)).all()


def traversal_get(conn, traversal_id):
    return _record(conn.execute(_TRAVERSAL_GET,
                                {'b_id': traversal_id}).first())


_TRAVERSAL_STATE = prepared.Statement(sa.select(TRAVERSALS.c.state).where(
    TRAVERSALS.c.id == bp('b_id')), typed=True)


def traversal_state(conn, traversal_id):
    """The traversal's state, or None when it is gone."""
    return _TRAVERSAL_STATE.run(conn, {'b_id': traversal_id}).scalar()


def traversal_set_state(session, traversal_id, new_state, from_states,
                        **values):
    """CAS on the traversal's state; True when this call moved it."""
    res = session.execute(
        sa.update(TRAVERSALS)
        .where(TRAVERSALS.c.id == traversal_id,
               TRAVERSALS.c.state.in_(from_states))
        .values(state=new_state, **values))
    return res.rowcount == 1


# what a unit of work reads after taking its lock, in one round trip: its
# node, traversal and stack (without the outputs, which may be large), the
# row the node acts on, and which row the same name's update node settled
# on (a cleanup node deletes its row unless it is that one)
_CURRENT = SYNC.alias('current')
_UNIT_LOAD = (
    sa.select(*_columns(SYNC, 'sp__'), *_columns(TRAVERSALS, 'trav__'),
              *_columns(STACKS, 'stack__', skip=('outputs',)),
              *_columns(RESOURCES, 'row__'),
              _CURRENT.c.resource_id.label('cur__resource_id'))
    .select_from(
        SYNC.join(TRAVERSALS, TRAVERSALS.c.id == SYNC.c.traversal_id)
        .join(STACKS, STACKS.c.id == TRAVERSALS.c.stack_id)
        .outerjoin(RESOURCES, RESOURCES.c.id == SYNC.c.resource_id)
        .outerjoin(_CURRENT, sa.and_(
            _CURRENT.c.traversal_id == SYNC.c.traversal_id,
            _CURRENT.c.node == sa.literal('u:') + RESOURCES.c.name))))
_UNIT_LOAD_RUN = prepared.Statement(_UNIT_LOAD.where(
    SYNC.c.traversal_id == bp('b_trav'), SYNC.c.node == bp('b_node')),
    typed=True)
# several nodes (a batch: reconcile.check_resources), each row with its node
_UNIT_LOAD_MANY = _UNIT_LOAD.add_columns(
    SYNC.c.node.label('key__node')).where(
    SYNC.c.traversal_id == bp('b_trav'),
    SYNC.c.node.in_(bp('b_nodes', expanding=True)))


def unit_load(conn, traversal_id, node):
    """(sync point, traversal, stack, row or None, current row id), or None
    when the node is gone (its traversal ended or was superseded)."""
    found = _UNIT_LOAD_RUN.run(conn, {'b_trav': traversal_id,
                                      'b_node': node}).first()
    if found is None:
        return None
    sp, trav, stack, row, cur = _split(found, ('sp', 'trav', 'stack', 'row',
                                               'cur'))
    return (sp, trav, stack, row if row.id is not None else None,
            cur.resource_id)


@functools.lru_cache(maxsize=8)
def _unit_load_few(count):
    return prepared.Statement(_UNIT_LOAD.add_columns(
        SYNC.c.node.label('key__node')).where(
        SYNC.c.traversal_id == bp('b_trav'),
        SYNC.c.node.in_([bp('n%d' % i) for i in range(count)])), typed=True)


def unit_load_many(conn, traversal_id, nodes):
    """unit_load of several nodes of one traversal, in one read: {node:
    what unit_load returns} for the nodes found."""
    if not nodes:
        return {}
    nodes = list(nodes)
    if len(nodes) <= _MANY_MAX:
        # a message's nodes (a few): on the driver's cursor (prepared.py;
        # through SQLAlchemy, with its IN rendered and its wide row's
        # result set up on every call, an eighth of the time a worker
        # held the interpreter at the end of a ramp of 2,000 builds)
        params = {'b_trav': traversal_id}
        for i, node in enumerate(nodes):
            params['n%d' % i] = node
        size = _padded(params, len(nodes), 'n%d')
        rows = _unit_load_few(size).run(conn, params).all()
    else:
        rows = conn.execute(_UNIT_LOAD_MANY, {'b_trav': traversal_id,
                                              'b_nodes': nodes})
    out = {}
    for found in rows:
        sp, trav, stack, row, cur, key = _split(
            found, ('sp', 'trav', 'stack', 'row', 'cur', 'key'))
        out[key.node] = (sp, trav, stack, row if row.id is not None
                         else None, cur.resource_id)
    return out


_SYNC_NODES = sa.select(SYNC).where(
    SYNC.c.traversal_id == bp('b_trav'),
    SYNC.c.node.in_(bp('b_nodes', expanding=True)))


def sync_nodes(conn, traversal_id, nodes):
    if not nodes:
        return []
    return conn.execute(_SYNC_NODES, {'b_trav': traversal_id,
                                      'b_nodes': list(nodes)}).all()


def _mark_done(with_resource, returning):
    values = {'done': True, 'updated_at': bp('b_now')}
    if with_resource:
        values['resource_id'] = bp('b_rid')
    stmt = sa.update(SYNC).where(
        SYNC.c.traversal_id == bp('b_trav'), SYNC.c.node == bp('b_node'),
        SYNC.c.done.is_(False)).values(values)
    return stmt.returning(SYNC.c.dependents) if returning else stmt


_MARK_DONE = {(k, r): prepared.Statement(_mark_done(k, r), typed=True)
              for k in (False, True) for r in (False, True)}
_DEPENDENTS = prepared.Statement(sa.select(SYNC.c.dependents).where(
    SYNC.c.traversal_id == bp('b_trav'), SYNC.c.node == bp('b_node')),
    typed=True)


def sync_mark_done(conn, traversal_id, node, resource_id=None):
    """Mark the node done: the dependents it has now, or None if it was
    done already (or the traversal is gone). Read with the mark, not
    when the unit loaded its node: a traversal drained meanwhile
    (engine/traversal.py _drain) leads its waiting nodes to the stack's
    node alone, their other dependents gone."""
    dialect = conn.get_bind().dialect if isinstance(conn, sa.orm.Session) \
        else conn.dialect
    returning = dialect.update_returning   # not MariaDB
    params = {'b_trav': traversal_id, 'b_node': node, 'b_now': time.time(),
              'b_rid': resource_id}
    res = _MARK_DONE[resource_id is not None, returning].run(conn, params)
    if returning:
        row = res.first()
        return None if row is None else list(row[0] or ())
    if res.rowcount != 1:
        return None
    return list(_DEPENDENTS.run(conn, params).scalar() or ())


#: nodes marked done, or shards counted, by one statement prepared for
#: their number (more: one statement each)
_MANY_MAX = 32


def _padded(params, count, *names):
    """The number of rows a statement of the `_few` kind is run for when
    `count` rows are given: the next power of two, up to _MANY_MAX (so at
    most five statements of a kind, not one per count), `params` padded
    with NULLs (each name a pattern, e.g. 'n%d') that match no row. One
    per count, a worker compiled up to 31 of each kind and set of
    columns, 1.4-5.8 ms each (about 100 ms for one), most of them while
    its first traversal ran: at the end of a ramp of 2,000 builds, where
    the units' batches took new sizes, a quarter of the units' time under
    a CPU profiler (docs/performance.md, seventh session)."""
    size = 1 << (count - 1).bit_length()
    for i in range(count, size):
        for name in names:
            params[name % i] = None
    return size


@functools.lru_cache(maxsize=_MANY_MAX)
def _mark_done_few(count):
    nodes = [bp('n%d' % i) for i in range(count)]
    rid = sa.case(*[(SYNC.c.node == nodes[i], sa.func.coalesce(
        bp('r%d' % i, type_=SYNC.c.resource_id.type), SYNC.c.resource_id))
        for i in range(count)], else_=SYNC.c.resource_id)
    return prepared.Statement(sa.update(SYNC).where(
        SYNC.c.traversal_id == bp('b_trav'), SYNC.c.node.in_(nodes),
        SYNC.c.done.is_(False)).values(
        done=True, updated_at=bp('b_now'), resource_id=rid).returning(
        SYNC.c.node, SYNC.c.dependents), typed=True)


def sync_mark_done_many(conn, traversal_id, items):
    """sync_mark_done of several nodes ([(node, resource id or None)],
    each node once): {node marked now: its dependents now}, in one
    statement where the database returns what it updated (a message's
    units that ended together; one statement each was a fifth of their
    statements)."""
    if conn.dialect.update_returning and 1 < len(items) <= _MANY_MAX:
        params = {'b_trav': traversal_id, 'b_now': time.time()}
        for i, (node, resource_id) in enumerate(items):
            params['n%d' % i], params['r%d' % i] = node, resource_id
        size = _padded(params, len(items), 'n%d', 'r%d')
        return {row[0]: list(row[1] or ())
                for row in _mark_done_few(size).run(conn, params)}
    marked = {}
    for node, resource_id in items:
        dependents = sync_mark_done(conn, traversal_id, node, resource_id)
        if dependents is not None:
            marked[node] = dependents
    return marked


_SYNC_SET_RESOURCE = sa.update(SYNC).where(
    SYNC.c.traversal_id == bp('b_trav'), SYNC.c.node == bp('b_node')).values(
    resource_id=bp('b_rid'))


def sync_set_resource(conn, traversal_id, node, resource_id):
    conn.execute(_SYNC_SET_RESOURCE, {'b_trav': traversal_id, 'b_node': node,
                                      'b_rid': resource_id})


_RELEASE = sa.update(SYNC).where(
    SYNC.c.traversal_id == bp('b_trav'),
    SYNC.c.node.in_(bp('b_nodes', expanding=True))).values(
    remaining=SYNC.c.remaining - 1, updated_at=bp('b_now'))
_RELEASE_RETURNING = _RELEASE.returning(SYNC.c.node, SYNC.c.remaining)
_RELEASED = sa.select(SYNC.c.node).where(
    SYNC.c.traversal_id == bp('b_trav'),
    SYNC.c.node.in_(bp('b_nodes', expanding=True)), SYNC.c.remaining == 0)


#: dependents released by a statement prepared for their count
_RELEASE_FEW = 8


@functools.lru_cache(maxsize=_RELEASE_FEW)
def _release_few(count):
    return prepared.Statement(sa.update(SYNC).where(
        SYNC.c.traversal_id == bp('b_trav'),
        SYNC.c.node.in_([bp('n%d' % i) for i in range(count)])).values(
        remaining=SYNC.c.remaining - 1, updated_at=bp('b_now')).returning(
        SYNC.c.node, SYNC.c.remaining), typed=True)


SHARDS = models.SyncShard.__table__
_SHARD_WHERE = (SHARDS.c.traversal_id == bp('b_trav'),
                SHARDS.c.node == bp('b_node'), SHARDS.c.shard == bp('b_shard'))
_SHARD_RELEASE = sa.update(SHARDS).where(*_SHARD_WHERE).values(
    remaining=SHARDS.c.remaining - 1)
_SHARD_RELEASE_RETURNING = prepared.Statement(
    _SHARD_RELEASE.returning(SHARDS.c.remaining), typed=True)
_SHARD_LEFT = sa.select(SHARDS.c.remaining).where(*_SHARD_WHERE)


def _release_shards(conn, traversal_id, dependents):
    """Count down the shards named among `dependents` (graph/plan.py
    shard_fan_in); returns the other dependents, with the node of each
    shard that reached zero."""
    plain = []
    for key in dependents:
        if not plan_mod.is_shard(key):
            plain.append(key)
            continue
        node = sync_release_shard(conn, traversal_id, key)
        if node is not None:
            plain.append(node)
    return plain


def sync_release_shard(conn, traversal_id, key):
    """Count down one shard (a shard key, graph/plan.py): its node if
    that was the shard's last input (the node is then counted down
    once, by the caller), else None."""
    node, shard = plan_mod.split_shard(key)
    params = {'b_trav': traversal_id, 'b_node': node, 'b_shard': shard}
    if conn.dialect.update_returning:
        left = _SHARD_RELEASE_RETURNING.run(conn, params).scalar_one()
    else:  # MariaDB: read it back under the row lock the update took
        conn.execute(_SHARD_RELEASE, params)
        left = conn.execute(_SHARD_LEFT, params).scalar_one()
    return node if left == 0 else None


@functools.lru_cache(maxsize=_MANY_MAX)
def _shards_release_few(count):
    shards = [bp('s%d' % i) for i in range(count)]
    by = sa.case(*[(SHARDS.c.shard == shards[i], bp('c%d' % i))
                   for i in range(count)], else_=0)
    # locked in their order first (the order every batch locks them in),
    # whatever order the update itself visits them in
    locked = sa.select(SHARDS.c.shard).where(
        SHARDS.c.traversal_id == bp('b_trav'), SHARDS.c.node == bp('b_node'),
        SHARDS.c.shard.in_(shards)).order_by(
        SHARDS.c.shard).with_for_update()
    return prepared.Statement(sa.update(SHARDS).where(
        SHARDS.c.traversal_id == bp('b_trav'), SHARDS.c.node == bp('b_node'),
        SHARDS.c.shard.in_(locked.scalar_subquery())).values(
        remaining=SHARDS.c.remaining - by).returning(
        SHARDS.c.shard, SHARDS.c.remaining), typed=True)


def sync_release_shards(conn, traversal_id, keys):
    """Count down the shards `keys` name (shard keys, graph/plan.py; a
    key given k times counts its shard down k times): the keys whose
    shard reached zero (its node is then counted down once, by the
    caller). Where the database returns what it updated, one statement
    per counted node, locking its shards in their order (as every batch
    does: walker.release_together); else one per key."""
    if not conn.dialect.update_returning:   # MariaDB
        return {key for key in keys
                if sync_release_shard(conn, traversal_id, key) is not None}
    by_node = {}
    for key in keys:
        node, shard = plan_mod.split_shard(key)
        counts = by_node.setdefault(node, collections.Counter())
        counts[shard] += 1
    zero = set()
    for node in sorted(by_node):
        counts = sorted(by_node[node].items())
        for start in range(0, len(counts), _MANY_MAX):
            part = counts[start:start + _MANY_MAX]
            params = {'b_trav': traversal_id, 'b_node': node}
            for i, (shard, count) in enumerate(part):
                params['s%d' % i], params['c%d' % i] = shard, count
            size = _padded(params, len(part), 's%d', 'c%d')
            zero.update(plan_mod.shard_key(shard, node) for shard, left in
                        _shards_release_few(size).run(conn, params)
                        if left == 0)
    return zero


def sync_release(conn, traversal_id, dependents):
    """Count one more finished input for each dependent.

    Returns the dependents that now have all their inputs. Row locks (or
    SQLite's single writer) make exactly one caller see each reach zero:
    in the RETURNING of its own update where the database has one, else
    in a read after it.
    """
    if any(plan_mod.is_shard(key) for key in dependents):
        dependents = _release_shards(conn, traversal_id, dependents)
    if not dependents:
        return []
    if conn.dialect.update_returning and len(dependents) <= _RELEASE_FEW:
        # PostgreSQL, SQLite; a node has few dependents (a chain one, a
        # leaf of a wide stack the stack's own node): one statement per
        # count, prepared
        params = {'n%d' % i: node for i, node in enumerate(dependents)}
        params.update(b_trav=traversal_id, b_now=time.time())
        return [node for node, remaining in
                _release_few(len(dependents)).run(conn, params)
                if remaining == 0]
    params = {'b_trav': traversal_id, 'b_nodes': list(dependents),
              'b_now': time.time()}
    if conn.dialect.update_returning:  # PostgreSQL, SQLite; not MariaDB
        return [node for node, remaining in
                conn.execute(_RELEASE_RETURNING, params) if remaining == 0]
    conn.execute(_RELEASE, params)
    return list(conn.scalars(_RELEASED, params))


_WAIT = prepared.Statement(sa.update(SYNC).where(
    SYNC.c.traversal_id == bp('b_trav'), SYNC.c.node == bp('b_node'),
    SYNC.c.done.is_(False)).values(
    wake_at=bp('b_wake'), wait_event=bp('b_event'), updated_at=bp('b_now')),
    typed=True)


@functools.lru_cache(maxsize=_MANY_MAX)
def _wait_few(count):
    nodes = [bp('n%d' % i) for i in range(count)]

    def each(column, prefix):
        return sa.case(*[(SYNC.c.node == nodes[i], bp(
            '%s%d' % (prefix, i), type_=column.type)) for i in range(count)],
            else_=column)
    return prepared.Statement(sa.update(SYNC).where(
        SYNC.c.traversal_id == bp('b_trav'), SYNC.c.node.in_(nodes),
        SYNC.c.done.is_(False)).values(
        wake_at=each(SYNC.c.wake_at, 'w'),
        wait_event=each(SYNC.c.wait_event, 'e'),
        updated_at=bp('b_now')).returning(SYNC.c.node), typed=True)


def sync_wait_many(conn, traversal_id, waits):
    """sync_wait of several nodes ([(node, wake_at, event)], each node
    once): the nodes recorded as waiting, in one statement where the
    database returns what it updated (a message's units that wait: each
    alone was half the statements of a ramp of creates)."""
    if conn.dialect.update_returning and 1 < len(waits) <= _MANY_MAX:
        params = {'b_trav': traversal_id, 'b_now': time.time()}
        for i, (node, wake_at, event) in enumerate(waits):
            params['n%d' % i] = node
            params['w%d' % i], params['e%d' % i] = wake_at, event
        size = _padded(params, len(waits), 'n%d', 'w%d', 'e%d')
        return {row[0] for row in _wait_few(size).run(conn, params)}
    return {node for node, wake_at, event in waits
            if sync_wait(conn, traversal_id, node, wake_at, event)}


def sync_wait(conn, traversal_id, node, wake_at, event):
    """Record that the node waits: until `wake_at` (epoch seconds), or for
    `event`. False when the node is gone or done."""
    res = _WAIT.run(conn, {'b_trav': traversal_id, 'b_node': node,
                           'b_wake': wake_at, 'b_event': event,
                           'b_now': time.time()})
    return res.rowcount == 1


_DUE = (
    sa.select(SYNC.c.stack_id, SYNC.c.traversal_id, SYNC.c.node,
              SYNC.c.wake_at)
    .join(TRAVERSALS, TRAVERSALS.c.id == SYNC.c.traversal_id)
    .where(SYNC.c.wake_at <= bp('b_now'), SYNC.c.done.is_(False),
           TRAVERSALS.c.state == 'running')
    .order_by(SYNC.c.wake_at).limit(bp('b_limit')))
_TAKE_DUE = prepared.Statement(sa.update(SYNC).where(
    SYNC.c.traversal_id == bp('b_trav'), SYNC.c.node == bp('b_node'),
    SYNC.c.wake_at == bp('b_old')).values(wake_at=bp('b_new')), typed=True)


_ANY_DUE = sa.select(SYNC.c.node).where(
    SYNC.c.wake_at <= bp('b_now'), SYNC.c.done.is_(False)).limit(1)


_PENDING = sa.select(SYNC.c.node).join(
    TRAVERSALS, TRAVERSALS.c.id == SYNC.c.traversal_id).where(
    TRAVERSALS.c.state == 'running', SYNC.c.done.is_(False),
    SYNC.c.remaining == 0, SYNC.c.wake_at.is_(None),
    SYNC.c.wait_event.is_(None)).limit(bp('b_limit'))


def sync_pending(conn, limit):
    """How many nodes of running traversals are ready to run, or
    running, anywhere (neither done, nor waiting, nor waiting for their
    inputs), counted up to `limit`."""
    return len(conn.execute(_PENDING, {'b_limit': limit}).all())


def sync_any_due(conn, now):
    return conn.execute(_ANY_DUE, {'b_now': now}).first() is not None


def sync_take_due(conn, now, lease, limit=1000, due_by=None):
    """Waiting nodes whose time has come (by `due_by`, default `now`),
    taken by this engine: each one's wake_at moves `lease` seconds on
    (compare-and-swap, so of several engines' timers one sends it; if its
    message is lost, the timer sends it again after the lease). Returns
    (stack_id, traversal_id, node)."""
    taken = []
    due_by = now if due_by is None else due_by
    for row in conn.execute(_DUE, {'b_now': due_by,
                                   'b_limit': limit}).all():
        res = _TAKE_DUE.run(conn, {
            'b_trav': row.traversal_id, 'b_node': row.node,
            'b_old': row.wake_at, 'b_new': now + lease})
        if res.rowcount == 1:
            taken.append((row.stack_id, row.traversal_id, row.node))
    return taken


def sync_take_many(conn, traversal_id, waits, new_wake_at):
    """sync_take of several waiting nodes of one traversal ((node,
    wake_at) pairs), in one statement where the database returns what an
    update changed: the nodes taken."""
    if not conn.dialect.update_returning or len(waits) == 1:  # MariaDB
        return [node for node, wake_at in waits
                if sync_take(conn, traversal_id, node, wake_at,
                             new_wake_at)]
    waits = list(waits)
    if len(waits) > _MANY_MAX:
        return [node for start in range(0, len(waits), _MANY_MAX)
                for node in sync_take_many(conn, traversal_id,
                                           waits[start:start + _MANY_MAX],
                                           new_wake_at)]
    params = {'b_trav': traversal_id, 'b_new': new_wake_at}
    for i, (node, wake_at) in enumerate(waits):
        params['n%d' % i], params['w%d' % i] = node, wake_at
    size = _padded(params, len(waits), 'n%d', 'w%d')
    return [row[0] for row in _take_few(size).run(conn, params).all()]


@functools.lru_cache(maxsize=8)
def _take_few(count):
    # rows another transaction holds are left (SKIP LOCKED): a unit
    # recording this node's next wait or its end, or another engine's
    # timer taking it; either way not this take's. Waiting for them, the
    # rows this take had locked in its own order met a batch's records
    # locking theirs in another: a deadlock, found after a second
    pairs = [sa.tuple_(bp('n%d' % i),
                       bp('w%d' % i, type_=SYNC.c.wake_at.type))
             for i in range(count)]
    free = sa.select(SYNC.c.node).where(
        SYNC.c.traversal_id == bp('b_trav'),
        sa.tuple_(SYNC.c.node, SYNC.c.wake_at).in_(pairs)
    ).with_for_update(skip_locked=True)
    return prepared.Statement(sa.update(SYNC).where(
        SYNC.c.traversal_id == bp('b_trav'),
        SYNC.c.node.in_(free.scalar_subquery())).values(
        wake_at=bp('b_new', type_=SYNC.c.wake_at.type)).returning(
        SYNC.c.node), typed=True)


def sync_take(conn, traversal_id, node, wake_at, new_wake_at):
    """Take one waiting node whose wait was recorded until `wake_at`
    (compare-and-swap: False when another engine took it, or it was
    woken, or it waits for something else now)."""
    return _TAKE_DUE.run(conn, {
        'b_trav': traversal_id, 'b_node': node, 'b_old': wake_at,
        'b_new': new_wake_at}).rowcount == 1


# FOR UPDATE: a locking read sees the latest committed waits (InnoDB's
# plain reads keep the transaction's first snapshot); SQLite renders none
_WAITING_FOR = sa.select(SYNC.c.traversal_id, SYNC.c.node).where(
    SYNC.c.stack_id == bp('b_stack'), SYNC.c.wait_event == bp('b_event'),
    SYNC.c.done.is_(False)).with_for_update()
# the longest waiting first
_WAITING_LONGEST = _WAITING_FOR.order_by(SYNC.c.updated_at).limit(
    bp('b_limit'))
_WOKEN = sa.update(SYNC).where(
    SYNC.c.traversal_id == bp('b_trav'), SYNC.c.node == bp('b_node')).values(
    wake_at=bp('b_wake'), wait_event=None)


def sync_wake_event(conn, stack_id, event, wake_at, limit=None):
    """The nodes of the stack waiting for `event`: no longer waiting for it
    (the caller sends them now; should that message be lost, the timer
    sends them at `wake_at`). Returns (traversal_id, node) of each."""
    params = {'b_stack': stack_id, 'b_event': event, 'b_limit': limit}
    found = [tuple(r) for r in conn.execute(
        _WAITING_LONGEST if limit else _WAITING_FOR, params)]
    for trav_id, node in found:
        conn.execute(_WOKEN, {'b_trav': trav_id, 'b_node': node,
                              'b_wake': wake_at})
    return found


#: the `remaining` of a node laid out done, only for what the nodes that
#: are walked read of it (an update's change set leaves it out)
NOT_WALKED = -1


def sync_nodes_done(session, traversal_id):
    """(node key, done) of every node a traversal walks but the stack
    node."""
    return [tuple(r) for r in session.execute(
        sa.select(SYNC.c.node, SYNC.c.done)
        .where(SYNC.c.traversal_id == traversal_id, SYNC.c.node != 'stack',
               SYNC.c.remaining != NOT_WALKED))]


def resource_status_counts(session, stack_id, traversal_id):
    """status -> number of the stack's rows last touched by the traversal."""
    return dict(session.execute(
        sa.select(RESOURCES.c.status, sa.func.count())
        .where(RESOURCES.c.stack_id == stack_id,
               RESOURCES.c.traversal_id == traversal_id)
        .group_by(RESOURCES.c.status)).all())


def sync_check_failed(conn, traversal_id, nodes):
    """In a check: whether any of `nodes` is done having failed its check
    in this traversal, or having been skipped (done with no row)."""
    return conn.execute(sa.select(SYNC.c.node).select_from(
        SYNC.outerjoin(RESOURCES, RESOURCES.c.id == SYNC.c.resource_id))
        .where(SYNC.c.traversal_id == traversal_id,
               SYNC.c.node.in_(list(nodes)), SYNC.c.done.is_(True),
               sa.or_(SYNC.c.resource_id.is_(None), sa.and_(
                   RESOURCES.c.traversal_id == traversal_id,
                   RESOURCES.c.action == 'CHECK',
                   RESOURCES.c.status == 'FAILED'))).limit(1)
    ).first() is not None


def sync_waiting(conn, traversal_id):
    """The traversal's nodes waiting (for a time or an event), not
    done."""
    return list(conn.scalars(sa.select(SYNC.c.node).where(
        SYNC.c.traversal_id == traversal_id, SYNC.c.done.is_(False),
        sa.or_(SYNC.c.wake_at.is_not(None),
               SYNC.c.wait_event.is_not(None)))))


def sync_keep_only(conn, traversal_id, nodes, stack_node):
    """Delete the traversal's nodes but `nodes` and `stack_node` (and its
    shards); `nodes` then lead to `stack_node` alone, which awaits
    them."""
    conn.execute(sa.delete(SHARDS).where(
        SHARDS.c.traversal_id == traversal_id))
    keep = list(nodes) + [stack_node]
    conn.execute(sa.delete(SYNC).where(SYNC.c.traversal_id == traversal_id,
                                       SYNC.c.node.not_in(keep)))
    conn.execute(sa.update(SYNC).where(
        SYNC.c.traversal_id == traversal_id, SYNC.c.node.in_(list(nodes)))
        .values(dependents=[stack_node]))
    conn.execute(sa.update(SYNC).where(
        SYNC.c.traversal_id == traversal_id, SYNC.c.node == stack_node)
        .values(remaining=len(nodes), dependents=[]))


def sync_purge(session, traversal_id, shards):
    """A traversal's nodes, once it ended; and its shards, if it had."""
    if shards:
        session.execute(sa.delete(SHARDS).where(
            SHARDS.c.traversal_id == traversal_id))
    session.execute(sa.delete(SYNC).where(SYNC.c.traversal_id == traversal_id))


# -- leases: counted slots of a limit, across every engine --------------------

LEASE_KEYS = models.LeaseKey.__table__
LEASES = models.Lease.__table__
_LEASE_BUMP = sa.update(LEASE_KEYS).where(
    LEASE_KEYS.c.key == bp('b_key')).values(gen=LEASE_KEYS.c.gen + 1)
_LEASE_MINE = sa.update(LEASES).where(
    LEASES.c.key == bp('b_key'), LEASES.c.holder == bp('b_holder')).values(
    expires_at=bp('b_exp'))
_LEASE_EXPIRED = sa.delete(LEASES).where(
    LEASES.c.key == bp('b_key'), LEASES.c.expires_at < bp('b_now'))
_LEASE_COUNT = sa.select(sa.func.count()).select_from(LEASES).where(
    LEASES.c.key == bp('b_key'))
_LEASE_RELEASE = sa.delete(LEASES).where(
    LEASES.c.key == bp('b_key'), LEASES.c.holder == bp('b_holder'))


def lease_take(conn, key, holder, cap, ttl, now=None):
    """Take (or renew) one of `cap` slots of `key` for `holder` until
    now + ttl, in the caller's transaction. False when all are held.

    Takers of one key are serialised by writing its lease_keys row first
    (a row lock on PostgreSQL and MariaDB; SQLite has one writer), so the
    count read after it is exact.
    """
    now = now or time.time()
    params = {'b_key': key, 'b_holder': holder, 'b_now': now,
              'b_exp': now + ttl}
    if conn.execute(_LEASE_BUMP, params).rowcount == 0:
        try:
            with conn.begin_nested():
                conn.execute(sa.insert(LEASE_KEYS).values(key=key, gen=1))
        except sa.exc.IntegrityError:  # another taker made it first
            conn.execute(_LEASE_BUMP, params)
    if conn.execute(_LEASE_MINE, params).rowcount == 1:
        return True
    conn.execute(_LEASE_EXPIRED, params)
    if conn.scalar(_LEASE_COUNT, params) >= cap:
        return False
    conn.execute(sa.insert(LEASES).values(key=key, holder=holder,
                                          expires_at=now + ttl))
    return True


def lease_release(conn, key, holder):
    """Give the slot back; True when `holder` held one."""
    return conn.execute(_LEASE_RELEASE, {'b_key': key,
                                         'b_holder': holder}).rowcount == 1


def lease_count(conn, key, now=None):
    """Slots of `key` held now."""
    return conn.scalar(sa.select(sa.func.count()).select_from(LEASES).where(
        LEASES.c.key == key, LEASES.c.expires_at >= (now or time.time())))


# -- software configs ---------------------------------------------------------

def software_config_create(session, config_id, name, group, config,
                           project_id=None):
    if session.get(models.SoftwareConfig, config_id) is None:
        session.add(models.SoftwareConfig(id=config_id, name=name or '',
                                          group=group or '', config=config,
                                          project_id=project_id))


def software_configs_list(session, project_id):
    return session.scalars(
        sa.select(models.SoftwareConfig)
        .where(models.SoftwareConfig.project_id == project_id)
        .order_by(models.SoftwareConfig.created_at,
                  models.SoftwareConfig.id)).all()


def software_config_get(session, config_id):
    return session.get(models.SoftwareConfig, config_id)


def software_config_delete(session, config_id):
    session.execute(sa.delete(models.SoftwareConfig).where(
        models.SoftwareConfig.id == config_id))
