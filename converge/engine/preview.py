"""What a create would lay out (Heat's stack preview), and what an update
would do to each resource, without doing it (Heat's update preview,
`openstack stack update --dry-run`).

Each resource of the new definition is compared with the row that
stands for it now, as the update's decide step would compare them:
its properties resolved against the stack's current rows (a value that
comes from another resource's attribute is read as that resource has it
now; the update may change it), with what was last applied. The answer
is two-way (template and last applied); what reality looks like now is
not observed here.
"""

from converge import exception
from converge import template
from converge.db import api
from converge.engine import changes
from converge.engine import rows as rows_mod
from converge.engine import stacks
from converge.engine import views

KINDS = ('added', 'deleted', 'replaced', 'updated', 'unchanged')


def parameters(defn):
    """The previewed stack's parameters as Heat previews them: as stack
    show gives them, every one as text (`10`, not 10), hidden ones
    masked."""
    return views.parameters_shown(defn)


def create(defn, project_id, depth=0, parent=None):
    """Heat's stack preview of the definition `defn` (nothing stored):
    each resource as a create would start it (INIT_COMPLETE, no physical
    id), with its properties as known before anything is made (defaults
    filled in, what another resource gives null) and its attributes'
    names; a resource that makes a nested stack whose template is known
    (a provider, OS::Heat::Stack, a group) is the list of that stack's
    own, as Heat lists it, each saying its `parent_resource`."""
    required_by = {}
    for name, deps in defn.dependencies().items():
        for dep in deps:
            required_by.setdefault(dep, []).append(name)
    nested = {name: (child, params) for name, child, params in
              stacks.nested_children(defn)}
    out = []
    for name, rdef in sorted(defn.resources.items()):
        if name in nested:
            child, params = nested[name]
            inner = stacks.validate(
                child, params, stack_name='%s-%s' % (defn.stack_name, name),
                validate_values=False, project_id=project_id,
                depth=depth + 1)
            out.append(create(inner, project_id, depth + 1, name))
            continue
        out.append(_previewed(defn, name, rdef, project_id, parent,
                              sorted(required_by.get(name, ()))))
    return out


def _previewed(defn, name, rdef, project_id, parent, required_by):
    stack = {'stack_name': defn.stack_name, 'stack_id': 'None',
             'tenant': project_id, 'path': ''}
    try:
        props = defn.resolve_properties(name, None)
    except exception.ConvergeError:
        props = {}
    item = {'resource_name': name, 'logical_resource_id': name,
            'resource_type': rdef.template_type,
            'resource_action': 'INIT', 'resource_status': 'COMPLETE',
            'resource_status_reason': '', 'physical_resource_id': '',
            'description': rdef.description or '',
            'creation_time': None, 'updated_time': None,
            'stack_name': defn.stack_name,
            'stack_identity': stack,
            'resource_identity': dict(stack, path='/resources/%s' % name),
            'required_by': required_by,
            'requires': sorted(defn.dependencies().get(name, ())),
            'properties': _known(props),
            'attributes': dict.fromkeys(sorted(
                rdef.plugin.attributes_schema) if rdef.plugin else ()),
            'metadata': {}}
    if parent is not None:
        item['parent_resource'] = parent
    return item


def _known(value):
    """A value known before anything is made, with what is not (another
    resource's attribute or id) as null."""
    if isinstance(value, dict):
        return {k: _known(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_known(v) for v in value]
    return None if template.is_unknown(value) else value


def _item(name, rtype, row=None):
    return {'resource_name': name, 'resource_type': rtype,
            'physical_resource_id': (row.physical_id or '') if row else '',
            'resource_status': '%s_%s' % (row.action, row.status)
            if row else 'INIT_COMPLETE'}


def update(engine, ident, bundle=None, params=None, existing=False,
           clear_parameters=(), project_id=None, show_nested=False):
    """{kind: [resource items]} for the kinds of KINDS, three ways: the
    new template against what was last applied, and what was applied
    against what is really there (observed now, and recorded): a
    resource the template keeps but whose real thing drifted is updated
    (created, if gone). Each item says the `action` (create, update,
    replace, delete or none) and why (`reason`), and whether the update
    visits it (`visit`: its change set, engine/changes.py) and why
    (`visit_reason`). A drifted resource the change set leaves out is
    repaired by `--converge`, not by a plain update.

    With `show_nested`, as Heat's: a resource that owns a nested stack
    is listed as updated (Heat updates nested stacks always) and the
    nested stack's resources follow, compared likewise, each with its
    `parent_resource`; those of a nested stack that is replaced or
    deleted are listed as deleted."""
    from converge.engine import drift as drift_mod
    stack, bundle, params, defn = stacks.planned(
        engine, ident, bundle, params, existing, clear_parameters,
        project_id)
    drifted = {(d.stack_name, d.name): d
               for d in drift_mod.scan(engine, stack)}
    out = {k: [] for k in KINDS}
    _compare(engine, stack, defn, drifted, out, show_nested, project_id)
    return out


def _compare(engine, stack, defn, drifted, out, show_nested, project_id,
             parent=None, depth=0):
    rows = views.resources(engine, stack)
    data = views.RowData(rows)
    with engine.db.connect() as conn:
        layout = api.resources_layout(conn, stack.id)
    # which resources the update visits (its change set), and why
    visit = changes.decide(defn, layout, rows_mod.current(
        layout, stack.template_id)).visit
    nested = dict((name, (child, params)) for name, child, params in
                  stacks.nested_children(defn)) if show_nested else {}

    def add(kind, item):
        if parent is not None:
            item['parent_resource'] = parent
        out[kind].append(item)

    for name, rdef in sorted(defn.resources.items()):
        row = rows.get(name)
        if row is None or (row.action == 'INIT' and not row.physical_id):
            add('added', dict(_item(name, rdef.template_type),
                              action='create',
                              reason='in the template, not applied',
                              visit=True, visit_reason='added'))
            continue
        kind, reason = _kind(engine, stack, defn, data, name, rdef, row)
        d = drifted.get((stack.name, name))
        if kind == 'unchanged' and d is not None:
            kind, reason = 'updated', 'observed: %s' % d.detail
        child = views.child_stack(engine, stack, row) if show_nested \
            else None
        if child is not None and kind == 'unchanged' and name in nested:
            kind, reason = 'updated', 'its nested stack is updated with ' \
                'it (what changes there is listed with parent_resource)'
        action = {'replaced': 'replace', 'unchanged': 'none'}.get(
            kind, 'update')
        if d is not None and d.kind == 'gone' and kind == 'updated':
            action = 'create'
        add(kind, dict(_item(name, rdef.template_type, row), action=action,
                       reason=reason, visit=name in visit,
                       visit_reason=visit.get(name, '')))
        if child is None:
            continue
        if kind != 'replaced' and name in nested:
            bundle, params = nested[name]
            inner = stacks.validate(
                bundle, params, stack_name=child.name, stack_id=child.id,
                validate_values=False, project_id=project_id,
                depth=depth + 1)
            _compare(engine, child, inner, drifted, out, show_nested,
                     project_id, name, depth + 1)
        else:
            _gone(engine, child, out, name)
    for name, row in sorted(rows.items()):
        if name not in defn.resources:
            add('deleted', dict(
                _item(name, api.shown_type(row), row), action='delete',
                reason='applied, not in the template', visit=True,
                visit_reason='removed'))
            child = views.child_stack(engine, stack, row) if show_nested \
                else None
            if child is not None:
                _gone(engine, child, out, name)


def _gone(engine, stack, out, parent):
    """The resources of a nested stack its owner's update removes, and of
    the stacks nested in it, as deleted."""
    for name, row in sorted(views.resources(engine, stack).items()):
        out['deleted'].append(dict(
            _item(name, api.shown_type(row), row), action='delete',
            reason='its nested stack goes with %s' % parent, visit=True,
            visit_reason='removed', parent_resource=parent))
        child = views.child_stack(engine, stack, row)
        if child is not None:
            _gone(engine, child, out, name)


def _kind(engine, stack, defn, data, name, rdef, row):
    """(kind, why): the template against what was last applied."""
    if row.type != rdef.type:
        return 'replaced', 'template: type %s, not %s' % (rdef.type,
                                                          row.type)
    try:
        props = defn.resolve_properties(name, data)
    except exception.ConvergeError:
        # not known before the update runs
        return 'updated', 'template: its properties are known only then'
    prior = row.properties or {}
    if props == prior:
        # a resource whose last action failed is done again
        if row.status == 'COMPLETE':
            return 'unchanged', ''
        return 'updated', 'its last action ended %s_%s' % (
            row.action, row.status)
    changed = sorted(k for k in set(props) | set(prior)
                     if props.get(k) != prior.get(k))
    plugin = engine.plugin(rdef.plugin, row, props, stack,
                           rdef.update_policy)
    if not plugin.needs_update(prior) and row.status == 'COMPLETE':
        return 'unchanged', ''      # OS::Heat::None: no change is one
    if plugin.needs_replace(prior):
        return 'replaced', 'template: %s changed, not in place' % ', '.join(
            changed)
    return 'updated', 'template: %s changed' % ', '.join(changed)


#: what `stack converge` does about a kind of drift
_REPAIR = {'gone': 'create', 'changed': 'update', 'unobservable': 'update'}


def converge(engine, stack):
    """What `stack converge` would repair, without repairing: each resource
    of the stack and its nested stacks whose real thing drifted (observed
    now, one list call per driver, and recorded), whose last action did
    not complete, or whose inputs come from a resource to be recreated (a
    deployment of a recreated server runs again). A list of items with
    the action (create, update, re-run) and why, in dependency order of
    each stack, parents' first."""
    from converge.engine import drift as drift_mod
    found = drift_mod.scan(engine, stack)
    drifted = {(d.stack_name, d.name): d for d in found}
    out = []
    for st in drift_mod.tree(engine, stack):
        rows = views.resources(engine, st)
        defn = engine.definition(st.template_id, st)
        recreated = set()
        for name in _in_order(defn):
            rdef, row = defn.resources[name], rows.get(name)
            why = None
            d = drifted.get((st.name, name))
            if row is None or row.action == 'INIT':
                continue
            if d is not None:
                action, why = _REPAIR[d.kind], d.detail
                if action == 'update' and rdef.plugin.reruns:
                    action = 're-run'   # its config runs again
            elif row.status != 'COMPLETE' and row.action not in (
                    'DELETE', 'CHECK'):  # a failed check: what drifted
                action = 'create' if row.action == 'CREATE' else 'update'
                why = 'its last action ended %s_%s' % (row.action,
                                                       row.status)
            else:
                inputs = sorted(recreated & set(rdef.requires))
                if not inputs:
                    continue
                action = 're-run' if rdef.plugin.reruns else 'update'
                why = 'its input %s is recreated' % ', '.join(inputs)
            if action == 'create':
                recreated.add(name)
            out.append(dict(_item(name, rdef.template_type, row),
                            stack_name=st.name,
                            action=action, reason=why))
    return out


def _in_order(defn):
    """The definition's resources, each after what it requires (ties by
    name)."""
    import networkx as nx

    from converge.graph import dependencies
    return nx.lexicographical_topological_sort(dependencies.build(
        {name: rdef.requires for name, rdef in defn.resources.items()}))
