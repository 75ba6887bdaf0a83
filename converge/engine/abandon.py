"""`stack abandon` and `stack adopt`: hand a stack's resources out of
converge as a document, and take them back from one, touching nothing in
the cloud either way.

The document is Heat's abandon format (heat/engine/stack.py
prepare_abandon): the stack's id, name, action, status, template, files,
environment (its ``parameters`` holding every parameter the stack was
given), project_id, stack_user_project_id, tags and ``resources``: name ->
{name, resource_id, type, action, status, metadata, resource_data}.
converge adds to each resource its ``uuid``: what a server's agent
credential, a deployment group's member deployments and other derived ids
are made from, so the adopted resource is the same one, not a look-alike;
and its ``properties``, those last applied, so an adopt whose template
asks for others updates (or replaces) what it took over (Heat ignores
keys it does not know; a file without them gets new uuids, and the
template's properties are taken as applied, as Heat does).
``resource_data`` is the plug-in's private data: a deployment's book of
the runs it applied (so adopting re-runs nothing), a random string's value.
A resource owning a nested stack (a provider template's, a group's,
OS::Heat::Stack) carries that stack's own document in its entry, as
Heat's does: its ``template``, ``environment`` and ``resources`` at any
depth; the nested stacks are abandoned with their owner. Adopting such an
entry takes no ``resource_id`` over (a nested stack is no object of the
cloud): the child is made as a create makes it, from the template its
owner gives, and the resources its entry records are adopted into it.
``template_base_url`` (converge's) is what the template's relative file
names are keys of the files under.

Abandon is one transaction: read, hand the document to the caller (who
writes it out before anything is removed), delete the stack's rows. A
process killed before the commit leaves the stack as it was.

Adopt lays the recorded resources out as rows that exist already (their
physical id and data set, never created) and starts an ADOPT traversal:
each such row is observed and recorded ADOPT_COMPLETE, or fails when the
cloud no longer has it (workers/reconcile.py). Resources of the template
the file does not record are created (what the adopting user asked for
by giving that template).
"""

import sqlalchemy as sa

from converge import conf as conf_mod
from converge import exception
from converge import template
from converge.db import api
from converge.db import models
from converge.engine import ownership
from converge.engine import stacks
from converge.engine import traversal
from converge.engine import views
from converge.resources import nested as nested_res

#: the plug-in data key under which an adopt hands a resource owning a
#: nested stack what the file records of that stack's own resources
#: (resources/nested.py adopts its child from it)
ADOPTING = nested_res.ADOPTING

#: tables of things outside the stack's own rows that name the stack: a
#: deployment's signal and a wait condition's wake that stack's units, so
#: an adopt under a new id takes them along
_BOUND = (models.SoftwareDeployment.__table__,
          models.AgentCredential.__table__,
          models.WaitConditionSignal.__table__,
          models.DeploymentAction.__table__)


def _enabled(option, verb):
    if not getattr(conf_mod.CONF, option):
        raise exception.InvalidInput(
            'Stack %s is disabled by the operator ([DEFAULT] %s)'
            % (verb, option))


# -- abandon ------------------------------------------------------------------

def abandon(engine, ident, project_id=None, save=None):
    """Forget the stack, leaving every resource as it is; returns the
    document. `save(document)` is called before the stack's rows go (in
    the same transaction): if it raises, nothing is removed."""
    _enabled('enable_stack_abandon', 'abandon')
    with engine.db.write() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        tree = api.stack_tree(s, stack.id)
        for sid in tree:
            _check_idle(s, s.get(models.Stack, sid))
        doc = document(engine, s, stack)
        if save is not None:
            save(doc)
        # its nested stacks go with it (Heat abandons them too): their
        # resources are in the document, under their owner's entry
        _delete_rows(s, stack, tree[1:])
    return doc


def export(engine, ident, project_id=None):
    """The stack's abandon document, the stack left as it is (Heat's
    stack export)."""
    with engine.db.read() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        return document(engine, s, stack)


def _check_idle(session, stack):
    """A stack being worked on cannot be written down: what its units are
    doing would be half in the document."""
    if stack.status == 'IN_PROGRESS':
        raise exception.Conflict(
            'Stack %s is %s_IN_PROGRESS: it can be abandoned once the '
            'operation ends (`converge stack converge %s` finishes one '
            'whose command was killed)' % (stack.name, stack.action,
                                           stack.name))
    busy = session.scalars(sa.select(models.Resource.name).where(
        models.Resource.stack_id == stack.id,
        models.Resource.status == 'IN_PROGRESS',
        models.Resource.engine_id.is_not(None))).all()
    if busy:
        raise exception.Conflict(
            'Stack %s: resource(s) %s are being acted on; abandon it once '
            'they end' % (stack.name, ', '.join(sorted(busy))))


def document(engine, session, stack):
    """The stack as Heat's abandon format (see the module's doc)."""
    tmpl = api.template_get(session, stack.template_id)
    bundle = dict(tmpl.bundle or {})
    env = dict(bundle.get('environment') or {})
    env['parameters'] = dict(env.get('parameters') or {},
                             **(tmpl.parameters or {}))
    rows = views.current_rows(api.resources_live(session, stack.id),
                              stack.template_id)
    defn = engine.definition(stack.template_id, stack)
    data = views.RowData(rows)
    resources, left = {}, []
    for name, row in sorted(rows.items()):
        if row.physical_id is None:
            continue  # never created: nothing to take back
        if name not in defn.resources:
            # removed from the template, its delete not done: an adopt of
            # this template could not hold it
            left.append({'name': name, 'resource_id': row.physical_id,
                         'type': api.shown_type(row)})
            continue
        entry = resources[name] = {
            'name': name, 'resource_id': row.physical_id,
            'type': api.shown_type(row), 'action': row.action,
            'status': row.status,
            'metadata': _metadata(defn, name, data),
            'resource_data': dict(row.data or {}), 'uuid': row.uuid,
            'properties': row.properties}
        if issubclass(defn.resources[name].plugin or object,
                      nested_res.Nested):
            _add_child(engine, session, stack, row.physical_id, entry)
    # replaced versions whose delete has not happened yet hold real things
    # too; Heat's format has no place for them, so they are listed apart
    current_ids = {r.id for r in rows.values()}
    for row in api.resources_live(session, stack.id):
        if row.id not in current_ids and row.physical_id is not None:
            left.append({'name': row.name, 'resource_id': row.physical_id,
                         'type': api.shown_type(row)})
    doc = {
        'id': stack.id, 'name': stack.name,
        'action': stack.action, 'status': stack.status,
        'template': bundle.get('template') or {},
        'files': bundle.get('files') or {},
        'environment': env,
        'project_id': stack.project_id,
        'stack_user_project_id': None,
        'tags': list(stack.tags or []),
        'disable_rollback': stack.disable_rollback,
        'timeout_mins': stack.timeout_mins,
        'resources': resources,
    }
    if bundle.get('base_url'):
        # what the template's relative file names (a provider's type)
        # are keys of the files under (converge's own key)
        doc['template_base_url'] = bundle['base_url']
    if left:
        doc['not_adoptable'] = left
    return doc


def _add_child(engine, session, stack, child_id, entry):
    """A resource owning a nested stack carries that stack's own document
    (its template, its resources, at any depth), as Heat's abandon
    writes it: an adopt takes the child's resources from it. The
    resource's own keys stay as they are."""
    child = session.get(models.Stack, child_id)
    if child is None or child.deleted_at is not None or \
            child.parent_id != stack.id:
        return
    for key, value in document(engine, session, child).items():
        entry.setdefault(key, value)


def _metadata(defn, name, data):
    try:
        return defn.resolve_metadata(name, data)
    except exception.ConvergeError:
        return {}


def _delete_rows(session, stack, nested=()):
    """Everything converge holds of the stack and of its `nested` stacks,
    in the caller's transaction; the stack row first, as a
    compare-and-swap on its traversal (an operation that started since
    it was read wins)."""
    res = session.execute(sa.delete(models.Stack).where(
        models.Stack.id == stack.id,
        traversal._null_safe_eq(models.Stack.current_traversal,
                                stack.current_traversal)))
    if res.rowcount != 1:
        raise exception.Conflict('Stack %s changed while it was being '
                                 'abandoned; try again' % stack.name)
    ids = [stack.id] + list(nested)
    if nested:
        session.execute(sa.delete(models.Stack).where(
            models.Stack.id.in_(list(nested))))
    for model, column in ((models.SyncPoint, 'stack_id'),
                          (models.Resource, 'stack_id'),
                          (models.Traversal, 'stack_id'),
                          (models.Template, 'stack_id'),
                          (models.Event, 'stack_id')):
        session.execute(sa.delete(model).where(
            getattr(model, column).in_(ids)))


# -- adopt --------------------------------------------------------------------

def adopt(engine, name, data, params=None, timeout=None, project_id=None,
          source='<adopt data>', cloud=None, files=None):
    """Store a stack from an abandon document and start adopting its
    resources; returns (stack id, traversal id). `source` names the
    document in errors; `files` are those the client sent with it (a
    provider template the document's template names), over the
    document's own."""
    _enabled('enable_stack_adopt', 'adopt')
    stacks.check_name(name)
    stacks.check_timeout(timeout)
    project_id = project_id or stacks.engine_project()
    doc = _checked(data, source)
    env = dict(doc['environment'])
    merged = dict(env.pop('parameters', None) or {})
    merged.update(params or {})
    env['parameters'] = {}
    bundle = template.Bundle(doc['template'],
                             dict(doc['files'], **(files or {})), env,
                             template_path=source,
                             base_url=doc['template_base_url'])
    old_id = doc['id']
    with engine.db.read() as s:
        stack_id = _stack_id(s, old_id, project_id)
    try:
        defn = stacks.validate(bundle, merged, stack_name=name,
                               stack_id=stack_id, project_id=project_id)
    except exception.InvalidTemplate as exc:
        if exc.filename is None:
            exc.prefixed('template')
        raise exc.locate(source)
    recorded = _recorded(doc['resources'], defn, source)
    taken = _taken(recorded, defn)
    # what the file names must be the project's own, asked with its own
    # credentials, before anything is stored (engine/ownership.py)
    ownership.check(engine, stack_id, name, project_id, cloud, taken,
                    source=source)
    if stack_id != old_id:
        # not the abandoned stack (a deleted one holds its id): what the
        # old uuids derive (agent credentials, member deployments) may
        # have been deleted or revoked with it, so nothing is reused
        for entry in recorded.values():
            entry['uuid'] = None
    if timeout is None:
        timeout = doc['timeout_mins']
    fields = dict(id=stack_id, name=name,
                  disable_rollback=doc['disable_rollback'],
                  timeout_mins=timeout, tags=doc['tags'],
                  project_id=project_id, cloud=cloud)
    trav = _store(engine, fields, bundle, merged, defn, recorded, taken,
                  source, rebind=old_id if old_id != stack_id else None)
    traversal.kick(engine, trav)
    return stack_id, trav.id


def adopt_child(engine, parent, resource_name, stack_id, name, bundle,
                params, timeout, depth, adopting):
    """The nested stack of `parent`'s resource `resource_name`, made from
    `bundle` and `params` as a create would make it, its resources taken
    over from `adopting` (what an adopt file records under that
    resource: its ``resources``) as `adopt` takes a stack's: (stack id,
    traversal id). As Heat's, the child's template is the one its owner
    gives now, not the one the file recorded. Ownership is asked as for
    the stack's own: a project adopts only what it owns."""
    stacks.check_depth(depth)
    source = '%s.%s' % (parent.name, resource_name)
    resources = adopting.get('resources') if isinstance(adopting, dict) \
        else None
    if not isinstance(resources, dict):
        resources = {}
    defn = stacks.validate(bundle, params, stack_name=name,
                           stack_id=stack_id, project_id=parent.project_id,
                           depth=depth)
    recorded = _recorded(resources, defn, source)
    taken = _taken(recorded, defn)
    with engine.db.read() as s:
        above = api.stack_record(s, parent.id)
    cloud = getattr(above, 'cloud', None)
    ownership.check(engine, stack_id, name, parent.project_id, cloud, taken,
                    source=source)
    fields = dict(id=stack_id, name=name, disable_rollback=True,
                  timeout_mins=timeout, tags=[],
                  project_id=parent.project_id, cloud=cloud,
                  parent_id=parent.id, parent_resource=resource_name,
                  nested_depth=depth)
    trav = _store(engine, fields, bundle, params, defn, recorded, taken,
                  source)
    traversal.kick(engine, trav)
    return stack_id, trav.id


def _taken(recorded, defn):
    """{name: (plug-in, type, physical id, data)} of the recorded
    resources that name something real (a nested stack's owner names
    none: its child is made anew from what the file records in it)."""
    return {n: (defn.resources[n].plugin, defn.resources[n].type,
                r['resource_id'], r['resource_data'])
            for n, r in recorded.items() if r['resource_id'] is not None}


def _store(engine, fields, bundle, params, defn, recorded, taken, source,
           rebind=None):
    """The adopting stack's row (`fields`), its template and the rows of
    what it takes over, in one transaction; its ADOPT traversal started
    (not kicked)."""
    stack_id, name = fields['id'], fields['name']
    project_id = fields['project_id']
    try:
        with engine.db.write() as s:
            if api.stack_name_taken(s, project_id, name):
                raise exception.Conflict('Stack %s already exists' % name)
            if not fields.get('parent_id'):
                stacks.check_stack_count(s, project_id)
            _check_uuids(s, recorded)
            ownership.check_unheld(s, taken, project_id, source)
            s.add(models.Stack(action='ADOPT', status='IN_PROGRESS',
                               status_reason='', **fields))
            s.flush()
            template_id = api.template_create(s, stack_id, bundle.to_dict(),
                                              params)
            if recorded:
                s.execute(sa.insert(models.Resource), [dict(
                    uuid=r['uuid'] or api.new_id(), stack_id=stack_id,
                    name=n, type=defn.resources[n].type,
                    template_type=defn.resources[n].template_type,
                    action='INIT',
                    status='COMPLETE', physical_id=r['resource_id'],
                    template_id=template_id, atomic_key=0, requires=[],
                    data=r['resource_data'], properties=r['properties'])
                    for n, r in recorded.items()])
            if rebind:
                _rebind(s, rebind, stack_id)
            stack = s.get(models.Stack, stack_id)
            engine.remember(template_id, stack, defn)
            return traversal.start(engine, s, stack, template_id, 'ADOPT',
                                   defn, rollback=False)
    except sa.exc.IntegrityError:
        # another adopt or create of this name, id or resource got there
        # first (the unique constraints let one in)
        raise exception.Conflict(
            'Stack %s (or a resource the adopt file records) was made by '
            'another operation meanwhile' % name)


def _stack_id(session, old_id, project_id):
    """The abandoned stack's id, so what names it (deployments' signals,
    a deployment's deploy_stack_id input) still does; a new one when a
    deleted stack holds it."""
    if not old_id:
        return api.new_id()
    found = session.get(models.Stack, old_id)
    if found is None:
        return old_id
    if found.deleted_at is None:
        raise exception.Conflict(
            'The adopt file\'s stack %s is still managed here (stack %s): '
            'it was not abandoned, or was adopted already' % (
                old_id, found.name if found.project_id == project_id
                else old_id))
    return api.new_id()


def _check_uuids(session, recorded):
    uuids = {r['uuid']: n for n, r in recorded.items() if r['uuid']}
    if not uuids:
        return
    taken = session.execute(sa.select(
        models.Resource.uuid, models.Resource.stack_id).where(
        models.Resource.uuid.in_(list(uuids)))).first()
    if taken is not None:
        raise exception.Conflict(
            'Resource %s of the adopt file belongs to stack %s already: '
            'it was adopted before' % (uuids[taken.uuid], taken.stack_id))


def _rebind(session, old_id, new_id):
    """Deployments, agent credentials and signals of the abandoned stack
    now belong to the adopting one (its units are the ones to wake)."""
    for table in _BOUND:
        session.execute(sa.update(table).where(
            table.c.stack_id == old_id).values(stack_id=new_id))


# -- checking the document ----------------------------------------------------

def _bad(source, path, message):
    return exception.InvalidTemplate(message, path=path, filename=source)


def _checked(data, source):
    """The document's parts, each checked for its shape; errors name the
    file and the key."""
    if not isinstance(data, dict):
        raise _bad(source, [], 'an adopt file is a JSON object (what '
                   '`stack abandon` writes)')
    tmpl = data.get('template')
    if not tmpl:
        raise _bad(source, ['template'], 'the adopt file has no template')
    if not isinstance(tmpl, dict):
        raise _bad(source, ['template'], 'the template must be a mapping')
    out = {'template': tmpl}
    for key, kind, default in (('files', dict, {}),
                               ('environment', dict, {}),
                               ('resources', dict, {}),
                               ('tags', list, [])):
        value = data.get(key)
        if value is None:
            value = default
        if not isinstance(value, kind):
            raise _bad(source, [key], 'must be a %s' % (
                'mapping' if kind is dict else 'list'))
        out[key] = value
    params = out['environment'].get('parameters')
    if params is not None and not isinstance(params, dict):
        raise _bad(source, ['environment', 'parameters'],
                   'must be a mapping')
    stack_id = data.get('id')
    if stack_id is not None and (not isinstance(stack_id, str) or
                                 not 0 < len(stack_id) <= 36):
        raise _bad(source, ['id'], 'must be a stack id (a string of at '
                   'most 36 characters)')
    out['id'] = stack_id
    base_url = data.get('template_base_url')
    if base_url is not None and not isinstance(base_url, str):
        raise _bad(source, ['template_base_url'], 'must be a string')
    out['template_base_url'] = base_url
    timeout = data.get('timeout_mins')
    try:
        out['timeout_mins'] = stacks.check_timeout(timeout)
    except exception.InvalidInput as exc:
        raise _bad(source, ['timeout_mins'], str(exc))
    out['disable_rollback'] = bool(data.get('disable_rollback', True))
    return out


def _recorded(resources, defn, source):
    """name -> {resource_id, resource_data, uuid} of the resources to
    adopt. An entry without a resource_id was never created: the adopt
    creates it, as any resource the file does not record."""
    out = {}
    for name, entry in sorted(resources.items()):
        path = ['resources', name]
        if not isinstance(entry, dict):
            raise _bad(source, path, 'must be a mapping')
        if name not in defn.resources:
            raise _bad(source, path, 'the template has no resource %s'
                       % name)
        rd = defn.resources[name]
        # as the template names it (what abandon writes, as Heat), or the
        # plug-in's (what an abandon before 0013 wrote)
        if entry.get('type') not in (None, rd.template_type, rd.type):
            raise _bad(source, path + ['type'], 'is %s, the template\'s %s '
                       'is %s' % (entry['type'], name, rd.template_type))
        uuid = entry.get('uuid')
        if uuid is not None and (not isinstance(uuid, str) or
                                 not 0 < len(uuid) <= 36):
            raise _bad(source, path + ['uuid'], 'must be a string of at '
                       'most 36 characters')
        if issubclass(rd.plugin or object, nested_res.Nested):
            # a nested stack is no object of the cloud: its resource_id
            # names nothing to take over (Heat's handle_adopt makes the
            # child anew); what the file records inside it is adopted
            # into that child (resources/nested.py)
            inner = entry.get('resources')
            if inner is None:
                inner = {}
            if not isinstance(inner, dict):
                raise _bad(source, path + ['resources'], 'must be a mapping')
            out[name] = {'resource_id': None, 'uuid': uuid,
                         'properties': None,
                         'resource_data': {ADOPTING: {'resources': inner}}}
            continue
        physical_id = entry.get('resource_id')
        if physical_id is None:
            continue
        if not isinstance(physical_id, str) or not physical_id or \
                len(physical_id) > 255:
            raise _bad(source, path + ['resource_id'],
                       'must be a physical resource id (a string)')
        rdata = entry.get('resource_data')
        if rdata is None:
            rdata = {}
        if not isinstance(rdata, dict):
            raise _bad(source, path + ['resource_data'], 'must be a mapping')
        props = entry.get('properties')
        if props is not None and not isinstance(props, dict):
            raise _bad(source, path + ['properties'], 'must be a mapping')
        out[name] = {'resource_id': physical_id, 'resource_data': rdata,
                     'uuid': uuid, 'properties': props}
    return out
