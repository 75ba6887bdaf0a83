"""What commands show: stacks, resources, outputs, graphs (read-only)."""

import datetime
import time
import uuid

import sqlalchemy as sa

from converge import lazy
from converge import exception
from converge.db import api
from converge.db import models
from converge.engine import policies
from converge.engine import rows as rows_mod
from converge.graph import dot as dot_mod
from converge.resources import base

# imported at first use (converge/lazy.py): a read-only CLI command,
# a process of its own, builds an engine and uses none of these (issue 41)
nested_res = lazy.module('converge.resources.nested')
scaling = lazy.module('converge.engine.scaling')
transport_metadata = lazy.module('converge.transports.metadata')


def parameters_shown(defn):
    """A stack's parameters as Heat's API gives them (stack show, stack
    preview): every one as text (Parameter.text: a number as written, a
    list joined by commas, JSON as JSON text), a hidden one masked."""
    hidden = getattr(defn, 'hidden_parameters', set())
    schemas = getattr(defn, 'schemas', {})
    return {k: ('******' if k in hidden else
                schemas[k].text(v) if k in schemas else v)
            for k, v in defn.parameters.items()}


def is_uuid(text):
    """Whether `text` is written as a UUID (a stack's id, not a name)."""
    try:
        return str(uuid.UUID(str(text))) == str(text).lower()
    except ValueError:
        return False


def _when(ts):
    return time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(ts)) + \
        '.%06dZ' % int(round((ts % 1) * 1e6) % 1000000)


def event(data):
    """An event dict with its `event_time` (ISO 8601, microseconds)."""
    data['event_time'] = _when(data['timestamp'])
    return data


def stack_events(traversals, stack_id, stack_name, events):
    """Heat's events of the stack itself (resource_name: the stack's
    name, physical id: its id), read from its traversals: one when each
    started and one when each ended. They are not stored as events: a
    traversal's row already says when it started and how it ended. Each
    has a fixed uuid (a client's marker), and an end never sorts before
    the events of its own traversal."""
    last = {}
    for e in events:
        if e.get('traversal_id'):
            last[e['traversal_id']] = max(last.get(e['traversal_id'], 0),
                                          e['timestamp'])
    out = []
    for t in traversals:
        begun = _epoch(t.created_at)
        ends = {'complete': ('COMPLETE', 'Stack %s completed successfully'
                             % t.action),
                'failed': ('FAILED', t.failure or 'Stack %s failed'
                           % t.action),
                'cancelled': ('FAILED', t.failure or 'Stack %s cancelled'
                              % t.action)}
        # Heat's text exactly: heatclient's `stack hook poll` looks for
        # it; an update's change set follows in an event of its own
        marks = [(begun, -1, 'IN_PROGRESS', 'Stack %s started' % t.action,
                  'IN_PROGRESS')]
        if (t.options or {}).get('change_set'):
            marks.append((begun, 0, 'IN_PROGRESS', 'Stack %s change set: %s'
                          % (t.action, t.options['change_set']), 'CHANGES'))
        if t.state in ends and t.finished_at is not None:
            end = max(_epoch(t.finished_at), last.get(t.id, 0))
            marks.append((end, 1 << 62) + ends[t.state] + (ends[t.state][0],))
        for ts, order, status, reason, key in marks:
            out.append(event({
                'id': order, 'traversal_id': t.id,
                'uuid': str(uuid.uuid5(uuid.NAMESPACE_URL,
                                       '%s/%s' % (t.id, key))),
                'resource_name': stack_name,
                'resource_type': 'OS::Heat::Stack',
                'physical_resource_id': stack_id, 'action': t.action,
                'status': status,
                'resource_status': '%s_%s' % (t.action, status),
                'resource_status_reason': reason, 'timestamp': ts,
                'stack_name': stack_name, 'stack_id': stack_id}))
    return out


def _epoch(dt):
    return dt.replace(tzinfo=datetime.timezone.utc).timestamp()


def iso(dt):
    return dt.strftime('%Y-%m-%dT%H:%M:%SZ') if dt else None


def iso_ts(ts):
    """Epoch seconds as iso() shows them (None: None)."""
    return None if ts is None else time.strftime('%Y-%m-%dT%H:%M:%SZ',
                                                 time.gmtime(ts))


def current_rows(rows, template_id):
    """name -> the row that stands for that resource now."""
    return rows_mod.current(rows, template_id)


class RowData:
    """Resolution data (get_resource/get_attr) from stored rows."""

    def __init__(self, rows):
        self._rows = rows

    def reference_id(self, name):
        row = self._rows.get(name)
        if row is None:
            return name
        return row.reference_id or row.physical_id or name

    def attributes(self, name):
        row = self._rows.get(name)
        if row is None or row.action in ('INIT', 'DELETE'):
            return None
        return row.attributes

    def attribute_error(self, name, attribute):
        return nested_res.attribute_error(self._rows.get(name), attribute)


def _definition(engine, stack):
    if stack.template_id is None:
        return None
    return engine.definition(stack.template_id, stack)


def outputs(engine, stack):
    defn = _definition(engine, stack)
    if defn is None or stack.deleted_at is not None:
        return {}
    with engine.db.read() as s:
        rows = current_rows(api.resources_live(s, stack.id),
                            stack.template_id)
    return defn.resolve_outputs(RowData(rows))


def stack(engine, st, with_outputs=True):
    """Heat's stack show: the stack, its parameters and outputs."""
    defn = None
    try:
        defn = _definition(engine, st)
    except exception.ConvergeError:
        pass
    data = {
        'id': st.id,
        'stack_name': st.name,
        'description': defn.description if defn else '',
        'creation_time': iso(st.created_at),
        'updated_time': iso(st.updated_at),
        'deletion_time': iso(st.deleted_at),
        'stack_status': '%s_%s' % (st.action, st.status),
        'stack_status_reason': st.status_reason,
        'disable_rollback': st.disable_rollback,
        'timeout_mins': st.timeout_mins,
        'tags': st.tags or None,
        'project': st.project_id,
        'parent': st.parent_id,
    }
    if defn is not None:
        data['parameters'] = parameters_shown(defn)
    with engine.db.read() as s:
        pol = policies.policy(s, st.id)
    if pol is not None:
        # converge's own: shown only where a stack has one
        data['converge_policy'] = '%s every %g s (next due %s)' % (
            pol['mode'], pol['interval'], iso_ts(pol['next_at']))
    if st.status == 'IN_PROGRESS':
        data['rollouts'] = rollouts(engine, st)
    if with_outputs and defn is not None and st.deleted_at is None:
        data['outputs'] = [
            dict(output_key=k, output_value=v.get('value'),
                 description=v.get('description', ''),
                 **({'output_error': v['error']} if 'error' in v else {}))
            for k, v in sorted(outputs(engine, st).items())]
    return data


def rollouts(engine, st, detail=False):
    """The groups rolling out in the stack and its nested stacks: where
    each is (batch n of m, its members, what is left, what failed, or
    what it waits for). With `detail` (a live view's), its plan as kept
    too: the batches' sizes and the current one's members, the phase
    (running, checking: its health gate, pause, canary), the failure
    budget, and whether its policy checks each batch (health_check)."""
    R, S = models.Resource, models.Stack
    out = []
    with engine.db.read() as s:
        ids = api.stack_tree(s, st.id)
        rows = s.execute(
            sa.select(S.id, S.name, S.project_id, S.template_id, R.name,
                      R.status_reason, R.data)
            .join(S, S.id == R.stack_id)
            .where(R.stack_id.in_(ids), R.status == 'IN_PROGRESS')).all()
    for stack_id, stack_name, project, template_id, name, reason, data \
            in rows:
        plan = (data or {}).get('rollout')
        if not isinstance(plan, dict) or 'batches' not in plan:
            continue
        batches = plan['batches']
        found = {'stack': stack_name, 'resource': name,
                 'batch': min(plan.get('done', 0) + 1, len(batches)),
                 'batches': len(batches),
                 'failed': list(plan.get('failed') or ()),
                 'progress': reason}
        if detail:
            now = min(plan.get('done', 0), max(len(batches) - 1, 0))
            found.update(
                stack_id=stack_id,
                kind='batch create' if plan.get('create')
                else 'rolling update',
                phase=plan.get('phase'), budget=plan.get('budget', 0),
                sizes=[len(b) for b in batches],
                current=list(batches[now]) if batches else [],
                health_check=_health_check(
                    engine, api.Record(id=stack_id, name=stack_name,
                                       project_id=project),
                    template_id, name))
        out.append(found)
    return sorted(out, key=lambda r: (r['stack'], r['resource']))


def _health_check(engine, st, template_id, name):
    """Whether the group's update policy checks each batch's members
    (its health gate)."""
    try:
        defn = engine.definition(template_id, st) if template_id else None
    except exception.ConvergeError:
        return False
    rdef = defn.resources.get(name) if defn is not None else None
    return any(isinstance(v, dict) and bool(v.get('health_check'))
               for v in (getattr(rdef, 'update_policy', None) or {}
                         ).values())


def resources(engine, st):
    with engine.db.read() as s:
        rows = api.resources_live(s, st.id)
    return current_rows(rows, st.template_id)


def resources_needed(engine, st):
    """The current rows ({name: row}) and, for each name, the resources
    that need it (Heat's required_by, from its rows' needed_by): what
    each row recorded it was converged with (the rows it read), so a
    listing parses no template."""
    with engine.db.read() as s:
        live = api.resources_live(s, st.id)
    names = {r.id: r.name for r in live}
    current = current_rows(live, st.template_id)
    needed = {}
    for name, row in current.items():
        for row_id in row.requires or ():
            dep = names.get(row_id)
            if dep is not None and dep != name:
                needed.setdefault(dep, set()).add(name)
    return current, {n: sorted(v) for n, v in needed.items()}


def nested(engine, st, row):
    """A resource's nested stack, as its plug-in knows it: (stack id,
    stack name, member rows) or None when it has no members (only a
    deployment group has them until nested stacks come)."""
    cls = engine.plugin_class(row.type)
    if cls is None or row.physical_id is None or \
            cls.members is base.Resource.members:
        return None
    plugin = engine.plugin(cls, row, row.properties or {}, st)
    found = plugin.members()
    if found is None:
        return None
    return plugin.nested_stack_id(), plugin.nested_stack_name(), found


def child_stack(engine, st, row):
    """The live nested stack `row`'s resource owns (a provider template,
    OS::Heat::Stack, a group), as a record; None when it owns none."""
    cls = engine.plugin_class(row.type)
    if cls is None or not row.physical_id or \
            not issubclass(cls, nested_res.Nested):
        return None
    with engine.db.read() as s:
        child = api.stack_record(s, row.physical_id)
    if child is None or child.deleted_at is not None or \
            child.parent_id != st.id:
        return None
    return child


def _desired(engine, st, defn, name, rows):
    """The resource's properties as its template resolves them now (a
    value from another resource's attribute as that resource has it);
    None when they cannot be known before the next traversal."""
    if defn is None or name not in defn.resources:
        return None
    try:
        return defn.resolve_properties(name, RowData(rows))
    except exception.ConvergeError:
        return None


def resource_detail(engine, st, name):
    rows = resources(engine, st)
    row = rows.get(name)
    if row is None:
        raise exception.ResourceNotFound(st.name, name)
    required_by = []
    requires = []
    defn = _definition(engine, st)
    if defn is not None:
        deps = defn.dependencies()
        required_by = sorted(n for n, d in deps.items() if name in d)
        requires = sorted(deps.get(name, ()))
    data = {
        'resource_name': row.name,
        'logical_resource_id': row.name,
        'physical_resource_id': row.physical_id or '',
        'resource_type': api.shown_type(row),
        'resource_status': '%s_%s' % (row.action, row.status),
        'resource_status_reason': row.status_reason,
        'creation_time': iso(row.created_at),
        'updated_time': iso(row.updated_at or row.created_at),
        'required_by': required_by,
        'requires': requires,
        'attributes': row.attributes or {},
        'properties': row.properties or {},
        # three ways: what the template asks for now, what was last
        # applied, what was last seen (and when), and how that differed
        'desired_properties': _desired(engine, st, defn, name, rows),
        'applied_properties': row.properties or {},
        'observed': row.observed,
        'observed_time': iso_ts(row.observed_at) if row.observed_at
        else None,
        'drift': row.drift,
        'description': (defn.resources[name].description
                        if defn and name in defn.resources else ''),
    }
    if st.parent_resource:
        # Heat's: a nested stack's resource names its stack's owner
        data['parent_resource'] = st.parent_resource
    found = nested(engine, st, row)
    if found is not None:
        # its members' state and outputs (Heat: its nested stack's)
        data['nested_stack_id'], data['nested_stack_name'], members = found
        data['members'] = {
            m['resource_name']: {
                'resource_status': '%s_%s' % (m['action'], m['status']),
                'resource_status_reason': m['status_reason'],
                'physical_resource_id': m['physical_resource_id'],
                'attributes': m['attributes']}
            for m in members}
    return data


def resource_details(engine, st):
    """What a listing with detail adds to each current resource (its
    properties, attributes, description, required_by), from one read of
    the rows and one graph: shown one by one, each read every row."""
    rows = resources(engine, st)
    defn = _definition(engine, st)
    required_by = {}
    for name, deps in (defn.dependencies() if defn else {}).items():
        for dep in deps:
            required_by.setdefault(dep, []).append(name)
    return {name: {
        'attributes': row.attributes or {},
        'properties': row.properties or {},
        'description': (defn.resources[name].description
                        if defn and name in defn.resources else ''),
        'required_by': sorted(required_by.get(name, ()))}
        for name, row in rows.items()}


def resource_metadata(engine, st, name):
    """The resource's metadata as its template resolves it now. Only the
    rows it reads are loaded (its own and those it requires): a server's
    os-collect-config asks for this every polling interval, and reading
    every row of a stack of thousands at each request made the polls of
    N servers cost N x the stack's size (issue 40)."""
    defn = _definition(engine, st)
    wanted = {name}
    if defn is not None and name in defn.resources:
        wanted |= defn.dependencies().get(name, frozenset())
    with engine.db.read() as s:
        rows = current_rows(api.resources_named(s, st.id, wanted),
                            st.template_id)
    if name not in rows:
        raise exception.ResourceNotFound(st.name, name)
    if defn is None or name not in defn.resources:
        return {}
    try:
        meta = defn.resolve_metadata(name, RowData(rows))
    except exception.ConvergeError:
        meta = {}
    row = rows[name]
    scaling_now = scaling.in_progress(engine, st, row)
    if scaling_now is not None:
        meta = dict(meta, scaling_in_progress=scaling_now)
    # a SOFTWARE_CONFIG server's: its deployments and os-collect-config
    # section, as Heat writes them (converge/transports/metadata.py)
    return transport_metadata.server_metadata(
        engine, meta, row.properties, row.physical_id, st.name, name)


def dot(engine, st):
    defn = _definition(engine, st)
    requires = defn.dependencies() if defn else {}
    rows = resources(engine, st)
    types = {n: d.template_type for n, d in defn.resources.items()} if defn else {}
    states = {n: '%s_%s' % (r.action, r.status) for n, r in rows.items()}
    return dot_mod.render(st.name, requires, types, states)
