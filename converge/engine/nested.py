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

import sqlalchemy as sa

from converge import lazy
from converge.db import api
from converge.db import models
from converge.engine import children
from converge.engine import definitions
from converge.engine import rows as rows_mod

# imported at first use (converge/lazy.py): a read-only CLI command,
# a process of its own, builds an engine and uses none of these (issue 41)
template = lazy.module('converge.template')
abandon = lazy.module('converge.engine.abandon')
changes = lazy.module('converge.engine.changes')
stacks = lazy.module('converge.engine.stacks')
traversal = lazy.module('converge.engine.traversal')
views = lazy.module('converge.engine.views')

_STACKS = models.Stack.__table__
_RUNNING = sa.select(_STACKS.c.status, _STACKS.c.current_traversal,
                     _STACKS.c.deleted_at).where(
    _STACKS.c.id == sa.bindparam('b_id')).with_for_update()


def tree(engine, stack_id):
    """The ids of a stack and of every stack nested in it, at any
    depth."""
    with engine.db.read() as s:
        return api.stack_tree(s, stack_id)


def _timeout(parent, child):
    """A nested stack's timeout: its own (OS::Heat::Stack's `timeout`),
    else its parent's, as Heat gives a provider's or a group's stack the
    parent's timeout_mins."""
    return child.get('timeout') or getattr(parent, 'timeout_mins', None)


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
        return children.child_bundle(defn.bundle, parent.name,
                                     resource_name, child), \
            dict(child.get('params') or {})

    def parameters(self, parent):
        """The values of `parent`'s parameters (Heat's LoadBalancer and
        DBInstance pass a few of them, by name, to their child)."""
        defn = self.engine.definition(parent.template_id, parent)
        return {k: v for k, v in defn.parameters.items()
                if k not in defn.hidden_parameters and
                isinstance(v, (str, int, float, list))}

    def digest(self, parent, resource_name, child):
        """The digest of what the child `child` describes is made of
        (resources/nested.py compares it with the one applied)."""
        bundle, params = self._bundle(parent, resource_name, child)
        return children.digest(bundle, params)

    def surroundings(self, parent, resource_name, child):
        """The digest of the environment and files the child's
        resources read (resources/group.py compares it with the one its
        members last had)."""
        bundle, _ = self._bundle(parent, resource_name, child)
        return children.surroundings(bundle)

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
        cbundle = children.child_bundle(bundle, parent.name,
                                        resource_name, child)
        defn = template.StackDefinition(
            cbundle, dict(child.get('params') or {}), stack_name=st.name,
            stack_id=st.id, project_id=st.project_id,
            limits=definitions.limits())
        current = rows_mod.current(rows, None, names=defn.resources)
        found = changes.decide(defn, rows, current)
        return bool(found.visit or found.removed)

    def create(self, parent, resource_name, key, child, adopt=None):
        """The child of `parent`'s resource, created and its traversal
        started unless it exists already: (child id, traversal id). With
        `adopt` (what a `stack adopt` file records inside the resource),
        the child takes those resources over instead of creating them."""
        new_id = children.child_id(key)
        with self.engine.db.read() as s:
            found = api.stack_record(s, new_id)
            prow = api.stack_record(s, parent.id)
        if found is not None:
            return new_id, found.current_traversal
        bundle, params = self._bundle(parent, resource_name, child)
        depth = (prow.nested_depth or 0) + 1 if prow is not None else 1
        if adopt is not None:
            return abandon.adopt_child(
                self.engine, parent, resource_name, new_id,
                children.child_name(parent.name, resource_name, new_id),
                bundle, params, _timeout(parent, child), depth, adopt)
        return stacks.create(
            self.engine,
            children.child_name(parent.name, resource_name, new_id),
            bundle, params, timeout=_timeout(parent, child),
            project_id=parent.project_id, stack_id=new_id,
            parent=(parent.id, resource_name, depth))

    def update(self, stack_id, parent, resource_name, child, only=None,
               converge=False):
        """Converge the child to what the resource now says (only the
        resources named in `only`, if given; with `converge`, against
        reality); the id of the traversal doing it."""
        bundle, params = self._bundle(parent, resource_name, child)
        return stacks.update(self.engine, stack_id, bundle, params,
                             rollback=False,
                             timeout=_timeout(parent, child), only=only,
                             converge=converge)[1]

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
            # FAILED while the traversal still runs: drained to the
            # nested stacks that were in flight (traversal._drain_nested)
            draining = st is not None and st.status == 'FAILED' and \
                api.traversal_state(s, st.current_traversal) == 'running'
        if st is None:
            return None
        return {'id': st.id, 'name': st.name, 'action': st.action,
                'status': st.status, 'reason': st.status_reason,
                'traversal': st.current_traversal,
                'deleted': st.deleted_at is not None,
                'draining': draining,
                'project_id': st.project_id}

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

    @staticmethod
    def draining(conn, stack_id, traversal_id):
        """As `running`, for a child that failed while its nested stacks
        in flight run on: whether its traversal `traversal_id` still
        runs (the stack row locked first, as traversal.complete takes
        it)."""
        row = conn.execute(_RUNNING, {'b_id': stack_id}).first()
        return (row is not None and row.deleted_at is None and
                row.current_traversal == traversal_id and
                api.traversal_state(conn, traversal_id) == 'running')

    def _stack(self, stack_id):
        with self.engine.db.read() as s:
            st = api.stack_record(s, stack_id)
        return st if st is not None and st.deleted_at is None else None

    def outputs(self, stack_id, errors=None):
        """The child's outputs, name -> value (one that could not be
        resolved is None, and why in `errors`, a dict, if given)."""
        st = self._stack(stack_id)
        if st is None:
            return {}
        found = views.outputs(self.engine, st)
        if errors is not None:
            errors.update((k, v['reason']) for k, v in found.items()
                          if 'reason' in v)
        return {k: v.get('value') for k, v in found.items()}

    def members(self, stack_id):
        """The child's resources, as a resource's members are listed."""
        st = self._stack(stack_id)
        if st is None:
            return None
        out = []
        for name, row in sorted(views.resources(self.engine, st).items()):
            out.append({'resource_name': name,
                        'resource_type': api.shown_type(row),
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
