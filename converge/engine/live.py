"""What a live view of a stack reads (converge-api's dashboard,
docs/dashboard.md): the stack's tree at a glance, its events by id
across the tree, and one stack's graph laid out.

- The tree: the stack and its live nested stacks (a provider's,
  OS::Heat::Stack's, a group's), and the resource each name of each
  stands for now, in a read of the few columns a glance needs (no
  properties, attributes or plug-in data: those are sealed, and a
  group of 1,000 members would unseal them all).
- Events: those of every stack of the tree above an event id, in id
  order: what the event stream sends (converge/following.py reads them
  exactly once).
- A layout: converge/graph/svg.py's layers, a wide layer cut into rows,
  the boxes smaller for a stack of many resources.

A resource that owns a nested stack of the tree names it (`nested`),
which is how a view folds it and opens it.
"""

import math
import re

import sqlalchemy as sa

from converge.db import api
from converge.db import models
from converge.engine import rows as rows_mod
from converge.graph import svg

S, R, E = models.Stack, models.Resource, models.Event

#: ids in one IN (...): SQLite's limit on bound values is far above it
CHUNK = 500
#: a stack of more resources than this is laid out in small boxes
COMPACT = 40
#: svg.layout's sizes for a plain stack and for a compact one: the boxes
#: (width, height), the gaps between them (x, between layers), between
#: the rows of one layer cut, and the widest row in resources (a compact
#: one's: as many as make a layer of all of them about 1.3 times as wide
#: as it is high)
SIZES = {False: dict(box=(150, 46), gap=(24, 56), wrap_gap=24, columns=5),
         True: dict(box=(64, 24), gap=(6, 40), wrap_gap=6, columns=None)}


def _chunks(ids):
    ids = list(ids)
    for i in range(0, len(ids), CHUNK):
        yield ids[i:i + CHUNK]


def tree(session, root_id):
    """The stack `root_id` and its live nested stacks at any depth,
    parents first: Records of id, name, parent_id, parent_resource,
    action, status, status_reason, template_id, current_traversal,
    project_id, updated_at."""
    cols = (S.id, S.name, S.parent_id, S.parent_resource, S.action,
            S.status, S.status_reason, S.template_id, S.current_traversal,
            S.project_id, S.updated_at, S.created_at)
    found = [api.Record(**r._mapping) for r in session.execute(
        sa.select(*cols).where(S.id == root_id))]
    level = [s.id for s in found]
    while level:
        nxt = []
        for part in _chunks(level):
            nxt += [api.Record(**r._mapping) for r in session.execute(
                sa.select(*cols).where(S.parent_id.in_(part),
                                       S.deleted_at.is_(None))
                .order_by(S.created_at))]
        found += nxt
        level = [s.id for s in nxt]
    return found


def resources(session, stacks):
    """The resource each name of each of `stacks` (tree's Records)
    stands for now, as rows for a glance: stack_id, resource_name,
    resource_type, resource_status (and its action and status),
    resource_status_reason, physical_resource_id, drift, updated_time
    and `nested`: the id of the stack of `stacks` it owns, or None."""
    cols = (R.id, R.stack_id, R.name, R.type, R.template_type, R.action,
            R.status, R.status_reason, R.physical_id, R.drift,
            R.template_id, R.replaced_by, R.updated_at, R.created_at)
    rows = {}
    for part in _chunks(s.id for s in stacks):
        for r in session.execute(sa.select(*cols).where(
                R.stack_id.in_(part)).order_by(R.id)):
            rows.setdefault(r.stack_id, []).append(r)
    owned = {(s.parent_id, s.id) for s in stacks if s.parent_id}
    out = []
    for st in stacks:
        current = rows_mod.current(rows.get(st.id, ()), st.template_id)
        for name in sorted(current, key=natural):
            r = current[name]
            out.append({
                'stack_id': st.id, 'resource_name': name,
                'resource_type': api.shown_type(r),
                'resource_action': r.action, 'status': r.status,
                'resource_status': '%s_%s' % (r.action, r.status),
                'resource_status_reason': r.status_reason or '',
                'physical_resource_id': r.physical_id or '',
                'drift': r.drift,
                'updated_time': _iso(r.updated_at or r.created_at),
                'nested': r.physical_id if (st.id, r.physical_id) in owned
                else None})
    return out


def names(session, stack_id):
    """The names the stack's resource rows have (every version)."""
    return set(session.scalars(sa.select(R.name).where(
        R.stack_id == stack_id).distinct()))


def _iso(dt):
    return dt.strftime('%Y-%m-%dT%H:%M:%SZ') if dt else None


def natural(name):
    """A sort key that puts "2" before "10" (a group's members)."""
    return [(0, int(p), '') if p.isdigit() else (1, 0, p)
            for p in re.split(r'(\d+)', name) if p]


def events(session, stack_ids, after_id=0, ids=None, last=None,
           first=None):
    """The events of `stack_ids` above `after_id` (among `ids` if
    given) in id order; with `last`, only the last that many, with
    `first` the first."""
    found = []
    for part in _chunks(stack_ids):
        q = sa.select(E).where(E.stack_id.in_(part), E.id > after_id)
        if ids is not None:
            q = q.where(E.id.in_(list(ids)))
        if last:
            q = q.order_by(E.id.desc()).limit(last)
        elif first:
            q = q.order_by(E.id).limit(first)
        found += session.scalars(q).all()
    found.sort(key=lambda e: e.id)
    return found[-last:] if last else found[:first] if first else found


def event_ids(session, stack_ids, after_id):
    """Ids of the events of `stack_ids` above `after_id`."""
    found = []
    for part in _chunks(stack_ids):
        found += session.scalars(sa.select(E.id).where(
            E.stack_id.in_(part), E.id > after_id))
    return sorted(found)


def last_event_id(session, stack_ids):
    """The highest event id of `stack_ids` (0: none yet)."""
    return max([session.scalar(sa.select(sa.func.max(E.id)).where(
        E.stack_id.in_(part))) or 0 for part in _chunks(stack_ids)],
        default=0)


def layout(requires, names):
    """The graph of resources `names` (`requires`: name -> the names it
    needs) laid out for a view: {'width', 'height', 'box': [w, h],
    'compact', 'nodes': [{'name', 'x', 'y'}], 'edges': [[from, to]]}
    (from a resource to what it needs)."""
    names = set(names) | set(requires)
    deps = {n: set(requires.get(n, ())) & names for n in names}
    compact = len(names) > COMPACT
    sizes = dict(SIZES[compact])
    if sizes['columns'] is None:
        sizes['columns'] = max(12, math.ceil(math.sqrt(len(names) * 0.6)))
    where, width, height = svg.layout(deps, top=0, key=natural, **sizes)
    return {'width': width, 'height': height, 'box': list(sizes['box']),
            'compact': compact,
            'nodes': [{'name': n, 'x': x, 'y': y}
                      for n, (x, y) in sorted(where.items())],
            'edges': sorted([n, d] for n in deps for d in deps[n])}
