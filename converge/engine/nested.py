"""Nested stacks: what a resource that owns one asks of the engine
(plug-ins reach it as ``self.clients.stacks``; resources/nested.py).

A child is an ordinary stack row with a parent: its own template version
and traversals, its resources converging on the same workers as its
parent's (no engine of its own, no thread waiting for it). Its template
comes from the owning resource; its files and environment from the
parent's template version, as Heat passes them down: every file of the
parent, its resource_registry (with the entries kept for this resource
under ``resources: {name: ...}`` applied to the child's own resources) and
its parameter_defaults. When a child's traversal ends, the parent's node
waiting for it is made due at once (traversal.ended).
"""

import datetime
import hashlib
import json
import uuid

import sqlalchemy as sa

from converge import exception
from converge import template
from converge.db import api
from converge.db import models
from converge.engine import changes
from converge.engine import definitions
from converge.engine import rows as rows_mod
from converge.engine import stacks
from converge.engine import traversal
from converge.engine import views
from converge.template import providers

#: child stack ids are derived from the owning resource's uuid, so a
#: create asked again (a unit that died after asking) finds its child
_NAMESPACE = uuid.UUID('0b7c2a52-53f6-4bd1-a6c3-2f1b1d0b6a11')

_STACKS = models.Stack.__table__
_RUNNING = sa.select(_STACKS.c.status, _STACKS.c.current_traversal,
                     _STACKS.c.deleted_at).where(
    _STACKS.c.id == sa.bindparam('b_id')).with_for_update()


def child_id(key):
    return str(uuid.uuid5(_NAMESPACE, key))


def child_name(parent_name, resource_name, stack_id):
    """Heat's name for a nested stack: parent-resource-shortid (the
    parent's part cut so that it fits the column)."""
    tail = '-%s-%s' % (resource_name, stack_id.replace('-', '')[:12])
    return parent_name[:max(1, 255 - len(tail))] + tail


def child_environment(env, resource_name):
    """The environment a child inherits: the registry (the entries kept
    for `resource_name` under ``resources`` become the child's own
    per-resource entries) and the parameter defaults; not the parent's
    parameters (the child's are the resource's properties)."""
    registry = {k: v for k, v in (env.get('resource_registry') or {}).items()
                if k != 'resources'}
    mine = ((env.get('resource_registry') or {}).get('resources') or {}).get(
        resource_name)
    if isinstance(mine, dict):
        inner = {k: v for k, v in mine.items() if isinstance(v, dict)}
        if inner:
            registry['resources'] = inner
    out = {'resource_registry': registry,
           'parameter_defaults': dict(env.get('parameter_defaults') or {})}
    for key in ('parameter_merge_strategies', 'event_sinks'):
        if env.get(key):
            out[key] = env[key]
    return out


def child_bundle(pbundle, parent_name, resource_name, child):
    """The Bundle of the child stack `child` describes ({template: a map
    or text, path: a provider's files-map key, facade}), built from the
    parent's Bundle `pbundle`."""
    tmpl = child['template']
    path = child.get('path') or '%s.%s' % (parent_name, resource_name)
    if path.startswith('file://'):   # named as the user knows it
        path = template.url_path(path)
    text = pbundle.files.get(child['path']) if child.get('path') else None
    if isinstance(tmpl, str):
        text = tmpl
        tmpl = template.parse_text(tmpl, path)
    if not isinstance(tmpl, dict):
        raise exception.InvalidTemplate(
            'The nested stack\'s template is not a YAML mapping',
            filename=path)
    env = child_environment(pbundle.environment, resource_name)
    # a provider's references are relative to its own file; an inline
    # template's to the parent's
    base = child['path'] if '://' in (child.get('path') or '') \
        else pbundle.base_url
    return template.Bundle(tmpl, pbundle.files, env, path, text,
                           facade=child.get('facade'), base_url=base)


def _refs(tmpl):
    """The get_file targets and template-file types a template names."""
    found = []
    template.walk_get_file(tmpl, [], found)
    template.walk_types(tmpl.get('resources'), [], found)
    return [name for name, _ in found]


def files_read(bundle):
    """The files-map keys a child stack reads: its get_file targets and
    provider templates, theirs in turn, and the registry's templates."""
    registry = bundle.environment.get('resource_registry') or {}
    todo = [(bundle.template, bundle.base_url)]
    todo += [(None, v) for v in _registry_values(registry)
             if template.is_provider(v)]
    seen = set()
    while todo:
        tmpl, base = todo.pop()
        if tmpl is None:   # a registry entry: a key already
            refs, base = [base], None
        else:
            refs = _refs(tmpl)
        for ref in refs:
            key = ref if ref in bundle.files or not base \
                else template.join_url(base, ref)
            if key in seen or key not in bundle.files:
                continue
            seen.add(key)
            if template.is_provider(key):
                try:
                    parsed = providers.provider_class(
                        key, bundle.files, ()).provider_template
                except exception.InvalidTemplate:
                    continue   # the child's own validation says so
                todo.append((parsed, key))
    return sorted(seen)


def _registry_values(registry):
    for key, value in registry.items():
        if isinstance(value, str):
            yield value
        elif key == 'resources' and isinstance(value, dict):
            for sub in value.values():
                if isinstance(sub, dict):
                    yield from (v for v in sub.values()
                                if isinstance(v, str))


def digest(bundle, params):
    """What a child is made of, digested: a change to any of it (its
    template, parameters, environment, the owner's facade, a file it
    reads) updates the child; nothing else does."""
    files = {k: bundle.files[k] for k in files_read(bundle)}
    return hashlib.sha256(json.dumps(
        [bundle.template, params, bundle.environment, bundle.facade, files],
        sort_keys=True, default=str).encode()).hexdigest()


def surroundings(bundle):
    """What the child's resources read beside their own definitions,
    digested: the environment and the files (a provider template, a
    get_file target). A group updates every member when it changes, in
    batches as its policy says."""
    files = {k: bundle.files[k] for k in files_read(bundle)}
    return hashlib.sha256(json.dumps(
        [bundle.environment, files], sort_keys=True,
        default=str).encode()).hexdigest()


def tree(engine, stack_id):
    """The ids of a stack and of every stack nested in it, at any
    depth."""
    with engine.db.read() as s:
        return api.stack_tree(s, stack_id)


def _stamp(when):
    return when.replace(tzinfo=datetime.timezone.utc).timestamp() \
        if when else None


class NestedStacks:
    def __init__(self, engine):
        self.engine = engine

    @staticmethod
    def event(stack_id):
        """The event a resource waiting for this child waits on."""
        return traversal.stack_event(stack_id)

    def _bundle(self, parent, resource_name, child):
        defn = self.engine.definition(parent.template_id, parent)
        return child_bundle(defn.bundle, parent.name, resource_name, child), \
            dict(child.get('params') or {})

    def digest(self, parent, resource_name, child):
        """The digest of what the child `child` describes is made of
        (resources/nested.py compares it with the one applied)."""
        bundle, params = self._bundle(parent, resource_name, child)
        return digest(bundle, params)

    def surroundings(self, parent, resource_name, child):
        """The digest of the environment and files the child's
        resources read (resources/group.py compares it with the one its
        members last had)."""
        bundle, _ = self._bundle(parent, resource_name, child)
        return surroundings(bundle)

    def quiet_members(self, parent, resource_name, child, stack_id, names):
        """Of the members `names` of the child `child` (the stack
        `stack_id`, a group's), those owning a nested stack that an update
        to what the member now says would not visit at all (its change
        set, engine/changes.py, is empty): a parameter map every member
        is given whole, of which three members read an entry that
        changed. A rollout leaves them out of its batches."""
        with self.engine.db.read() as s:
            st = api.stack_record(s, stack_id) if stack_id else None
            rows = api.resources_live(s, stack_id) if st else []
        if st is None:
            return set()
        bundle, params = self._bundle(parent, resource_name, child)
        defn = template.StackDefinition(
            bundle, params, stack_name=st.name, stack_id=st.id,
            project_id=st.project_id, limits=definitions.limits())
        current = rows_mod.current(rows, None, names=set(names))
        quiet = set()
        for name in names:
            rdef, row = defn.resources.get(name), current.get(name)
            if rdef is None or row is None or not row.physical_id or \
                    not rdef.plugin.built_from_files:
                continue
            member = self.engine.plugin(
                rdef.plugin, row, defn.known_properties(name), st,
                rdef.update_policy, metadata=defn.resolve_metadata(name, None))
            member.deletion_policy = rdef.deletion_policy
            if not self._visits(defn.bundle, st, name, member._desired(),
                                row.physical_id):
                quiet.add(name)
        return quiet

    def _visits(self, bundle, parent, resource_name, child, stack_id):
        """Whether updating the child stack `stack_id` to `child` would
        visit anything (its change set is not empty)."""
        with self.engine.db.read() as s:
            st = api.stack_record(s, stack_id)
            rows = api.resources_layout(s, stack_id) if st else []
        if st is None or st.status != 'COMPLETE':
            return True
        cbundle = child_bundle(bundle, parent.name, resource_name, child)
        defn = template.StackDefinition(
            cbundle, dict(child.get('params') or {}), stack_name=st.name,
            stack_id=st.id, project_id=st.project_id,
            limits=definitions.limits())
        current = rows_mod.current(rows, None, names=defn.resources)
        found = changes.decide(defn, rows, current)
        return bool(found.visit or found.removed)

    def create(self, parent, resource_name, key, child):
        """The child of `parent`'s resource, created and its traversal
        started unless it exists already: (child id, traversal id)."""
        new_id = child_id(key)
        with self.engine.db.read() as s:
            found = api.stack_record(s, new_id)
            prow = api.stack_record(s, parent.id)
        if found is not None:
            return new_id, found.current_traversal
        bundle, params = self._bundle(parent, resource_name, child)
        depth = (prow.nested_depth or 0) + 1 if prow is not None else 1
        return stacks.create(
            self.engine, child_name(parent.name, resource_name, new_id),
            bundle, params, timeout=child.get('timeout'),
            project_id=parent.project_id, stack_id=new_id,
            parent=(parent.id, resource_name, depth))

    def update(self, stack_id, parent, resource_name, child, only=None):
        """Converge the child to what the resource now says (only the
        resources named in `only`, if given); the id of the traversal
        doing it."""
        bundle, params = self._bundle(parent, resource_name, child)
        return stacks.update(self.engine, stack_id, bundle, params,
                             rollback=False, timeout=child.get('timeout'),
                             only=only)[1]

    def delete(self, stack_id):
        return stacks.delete(self.engine, stack_id)[1]

    def converge(self, stack_id):
        """`stack converge` reaching the child: walk it again against
        reality (its own nested stacks in turn); the traversal's id."""
        return stacks.converge(self.engine, stack_id)[1]

    def resend(self, stack_id):
        """`stack converge` reaching a child whose traversal is still
        running: send again what a dead worker left of it (and of its
        own children), now rather than after the sweeper's stall
        timeout. How many nodes were sent."""
        return len(traversal.resend(self.engine,
                                    tree(self.engine, stack_id)))

    def again(self, stack_id, action, only=None):
        """Check, suspend or resume the child (a check of only the
        resources named in `only`, if given): its traversal's id."""
        if action == 'CHECK':
            return stacks.check(self.engine, stack_id, only=only)[1]
        walk = {'SUSPEND': stacks.suspend, 'RESUME': stacks.resume}[action]
        return walk(self.engine, stack_id)[1]

    def status(self, stack_id):
        """The child's state as the owning resource reads it, or None."""
        with self.engine.db.read() as s:
            st = api.stack_record(s, stack_id)
        if st is None:
            return None
        return {'id': st.id, 'name': st.name, 'action': st.action,
                'status': st.status, 'reason': st.status_reason,
                'traversal': st.current_traversal,
                'deleted': st.deleted_at is not None}

    @staticmethod
    def running(conn, stack_id, traversal_id):
        """In the transaction recording a wait for the child: whether its
        traversal `traversal_id` still runs. The row is locked, so the
        traversal's end either committed before (seen here) or finds the
        wait recorded (and wakes it)."""
        row = conn.execute(_RUNNING, {'b_id': stack_id}).first()
        return (row is not None and row.deleted_at is None and
                row.current_traversal == traversal_id and
                row.status == 'IN_PROGRESS')

    def _stack(self, stack_id):
        with self.engine.db.read() as s:
            st = api.stack_record(s, stack_id)
        return st if st is not None and st.deleted_at is None else None

    def outputs(self, stack_id):
        """The child's outputs, name -> value (one that could not be
        resolved is None)."""
        st = self._stack(stack_id)
        if st is None:
            return {}
        return {k: v.get('value')
                for k, v in views.outputs(self.engine, st).items()}

    def members(self, stack_id):
        """The child's resources, as a resource's members are listed."""
        st = self._stack(stack_id)
        if st is None:
            return None
        out = []
        for name, row in sorted(views.resources(self.engine, st).items()):
            out.append({'resource_name': name, 'resource_type': row.type,
                        'physical_resource_id': row.physical_id or '',
                        'reference_id': (row.reference_id or
                                         row.physical_id or name),
                        'action': row.action, 'status': row.status,
                        'status_reason': row.status_reason,
                        'created_at': _stamp(row.created_at),
                        'updated_at': _stamp(row.updated_at or
                                             row.created_at),
                        'attributes': row.attributes or {}})
        return out
