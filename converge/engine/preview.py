"""What an update would do to each resource, without doing it (Heat's
update preview, `openstack stack update --dry-run`).

Each resource of the new definition is compared with the row that
stands for it now, as the update's decide step would compare them:
its properties resolved against the stack's current rows (a value that
comes from another resource's attribute is read as that resource has it
now; the update may change it), with what was last applied. The answer
is two-way (template and last applied); what reality looks like now is
not observed here.
"""

from converge import exception
from converge.engine import stacks
from converge.engine import views

KINDS = ('added', 'deleted', 'replaced', 'updated', 'unchanged')


def _item(name, rtype, row=None):
    return {'resource_name': name, 'resource_type': rtype,
            'physical_resource_id': (row.physical_id or '') if row else '',
            'resource_status': '%s_%s' % (row.action, row.status)
            if row else 'INIT_COMPLETE'}


def update(engine, ident, bundle=None, params=None, existing=False,
           clear_parameters=(), project_id=None):
    """{kind: [resource items]} for the kinds of KINDS."""
    stack, bundle, params, defn = stacks.planned(
        engine, ident, bundle, params, existing, clear_parameters,
        project_id)
    rows = views.resources(engine, stack)
    data = views.RowData(rows)
    out = {k: [] for k in KINDS}
    for name, rdef in sorted(defn.resources.items()):
        row = rows.get(name)
        if row is None or (row.action == 'INIT' and not row.physical_id):
            out['added'].append(_item(name, rdef.type))
            continue
        out[_kind(engine, stack, defn, data, name, rdef, row)].append(
            _item(name, rdef.type, row))
    for name, row in sorted(rows.items()):
        if name not in defn.resources:
            out['deleted'].append(_item(name, row.type, row))
    return out


def _kind(engine, stack, defn, data, name, rdef, row):
    if row.type != rdef.type:
        return 'replaced'
    try:
        props = defn.resolve_properties(name, data)
    except exception.ConvergeError:
        return 'updated'    # not known before the update runs
    prior = row.properties or {}
    if props == prior:
        # a resource whose last action failed is done again
        return 'unchanged' if row.status == 'COMPLETE' else 'updated'
    plugin = engine.plugin(rdef.plugin, row, props, stack,
                           rdef.update_policy)
    return 'replaced' if plugin.needs_replace(prior) else 'updated'
