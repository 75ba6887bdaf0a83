"""The service layer: every operation a user can ask for, on behalf of a
request context.

The CLI (converge/cmd/) calls only this, never the database; a REST API
will call the same methods. Each takes the request context first; every
stack it reads or writes belongs to the context's project (an id or name
of another project's stack is "not found", exactly as a missing one). It
returns plain data (dicts, lists, records) and raises
converge.exception errors.

Reads survive a dropped database connection (a restart, a failover, an
operator's pg_terminate_backend): the pool reconnects and the read runs
again. Writes are not repeated: a write whose connection dropped rolled
back, and saying so is safer than guessing whether it committed.
"""

import contextlib
import datetime
import functools
import time

from sqlalchemy import exc as sa_exc

from converge import breakpoints
from converge import conf
from converge import exception
from converge import lazy
from converge import masking
from converge.db import api
from converge.engine import request

# imported at first use: each serves a few operations, and a read-only
# command (a process of its own, issue 41) uses none of most of them
# (converge/lazy.py)
trusts = lazy.module('converge.drivers.trusts')
abandon = lazy.module('converge.engine.abandon')
activity = lazy.module('converge.engine.activity')
alarms = lazy.module('converge.engine.alarms')
availability = lazy.module('converge.engine.availability')
catalog = lazy.module('converge.engine.catalog')
exposure = lazy.module('converge.engine.exposure')
group_stack = lazy.module('converge.engine.group_stack')
health = lazy.module('converge.engine.health')
hooks = lazy.module('converge.engine.hooks')
listing = lazy.module('converge.engine.listing')
live = lazy.module('converge.engine.live')
preview = lazy.module('converge.engine.preview')
rollouts = lazy.module('converge.engine.rollouts')
scaling = lazy.module('converge.engine.scaling')
secrecy = lazy.module('converge.engine.secrecy')
snapshots = lazy.module('converge.engine.snapshots')
software = lazy.module('converge.engine.software')
standalone = lazy.module('converge.engine.standalone')
stacks = lazy.module('converge.engine.stacks')
views = lazy.module('converge.engine.views')
plan_mod = lazy.module('converge.graph.plan')
stack_user = lazy.module('converge.transports.stack_user')

#: dropped connections in a row a read survives
DROPPED_RETRIES = 5
#: seconds before the first retry of a read (doubling, at most 2 s)
RETRY_PAUSE = 0.1


def _read(method):
    """Run a read again when the server dropped the connection under it."""
    @functools.wraps(method)
    def wrapper(self, ctx, *args, **kwargs):
        dropped = 0
        while True:
            try:
                return method(self, ctx, *args, **kwargs)
            except sa_exc.DBAPIError as exc:
                if not exc.connection_invalidated or \
                        dropped >= DROPPED_RETRIES:
                    raise
                time.sleep(min(RETRY_PAUSE * 2 ** dropped, 2.0))
                dropped += 1
    return wrapper


def _event(ev):
    return views.event({
        'id': ev.id,
        'uuid': ev.uuid,
        'traversal_id': ev.traversal_id,
        'resource_name': ev.resource_name,
        'resource_type': ev.resource_type,
        'physical_resource_id': ev.physical_id or '',
        'action': ev.action,
        'status': ev.status,
        'resource_status': '%s_%s' % (ev.action, ev.status),
        'resource_status_reason': ev.reason,
        'timestamp': ev.timestamp,
    })


#: the longest window and look-ahead of a snapshot of the engine's
#: activity, in seconds (engine_activity)
ACTIVITY_MAX = 3600.0


def _seconds(value, name, most):
    """`value` as a number of seconds above 0 and at most `most`."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        value = None
    if value is None or not 0 < value <= most:
        raise exception.InvalidInput('%s: a number of seconds above 0 and '
                                     'at most %d' % (name, most))
    return value


#: resource_list's filter keys -> its rows' keys
_RESOURCE_KEYS = {'name': 'resource_name', 'status': 'resource_status',
                  'type': 'resource_type', 'action': 'resource_action',
                  'id': 'physical_resource_id'}


class Service:
    """The operations of one engine process (its database, messaging,
    caches), each on behalf of a request context."""

    def __init__(self, engine):
        self.engine = engine

    # -- helpers ------------------------------------------------------------
    def _scope(self, ctx, ident):
        """The project of the stack `ident` names for this request: the
        caller's own; for an admin (the policy's context_is_admin) naming
        another project's stack by its id, that stack's project, as
        Heat lets an admin show and act on any project's stack by id.
        Anyone else finds another project's stack nowhere."""
        project = request.project_of(ctx)
        if not getattr(ctx, 'is_admin', False) or not isinstance(ident, str):
            return project
        with self.engine.db.read() as s:
            st = api.stack_record(s, ident)
        return st.project_id if st is not None else project

    def _stack(self, ctx, ident, include_deleted=False):
        with self.engine.db.read() as s:
            return api.stack_get(s, ident, include_deleted=include_deleted,
                                 project_id=self._scope(ctx, ident))

    def _stack_or_group(self, ctx, ident, include_deleted=False):
        """The stack `ident` names, else the nested stack of a deployment
        group it names (a group_stack.GroupStack: Heat's API shows one
        by the group's physical id); StackNotFound when neither is the
        project's."""
        try:
            return self._stack(ctx, ident, include_deleted=include_deleted)
        except exception.StackNotFound:
            found = group_stack.find(self.engine, request.project_of(ctx),
                                     ident)
            if found is None:
                raise
            return found

    def _status(self, ctx, stack_id):
        project = self._scope(ctx, stack_id)
        with self.engine.db.read() as s:
            st = api.stack_record(s, stack_id)
        if st is None or st.project_id != project:
            raise exception.StackNotFound(stack_id)
        return st

    def _mask(self, ctx, stack_id):
        """The Mask of what `ctx` may not see of the stack: its hidden
        values, and its credentials unless ctx may have them. Every
        answer about a stack passes through one before it leaves."""
        return secrecy.stack_mask(
            self.engine, stack_id,
            credentials=not getattr(ctx, 'credentials', True))

    def _masked(self, ctx, stack_id, data):
        return self._mask(ctx, stack_id)(data)

    @contextlib.contextmanager
    def _quoting(self, ctx, bundle, params, ident=None):
        """An error of a template given with parameters (a property's
        validation error names the value it refused) quotes none of
        their hidden values, nor the stack's (`ident`) own."""
        try:
            yield
        except exception.ConvergeError as exc:
            mask = masking.Mask(secrecy.bundle_values(bundle, params))
            if ident is not None:
                try:
                    st = self._stack(ctx, ident)
                except exception.ConvergeError:
                    st = None
                if st is not None:
                    mask.add(self._mask(ctx, st.id).secrets())
            raise mask.error(exc)

    def _started(self, stack_id, traversal_id):
        return {'id': stack_id, 'traversal_id': traversal_id}

    # -- templates ----------------------------------------------------------
    def template_validate(self, ctx, bundle, params, show_nested=False):
        """The template's parameters and description, the environment it
        was read with, and (`show_nested`) its nested stacks' parameters:
        Heat's validate_template answer; nothing is stored."""
        project = request.project_of(ctx)
        with self._quoting(ctx, bundle, params):
            # Heat's validate reads no property of a nested stack's
            # resources (a create does)
            defn = stacks.validate(bundle, params, validate_values=False,
                                   project_id=project,
                                   nested_properties=False)
            info = defn.validate_info()
            nested = stacks.nested_parameters(
                defn, project, nested_properties=False) \
                if show_nested else None
        if nested:
            info['NestedParameters'] = nested
        shown = stacks.environment_shown(defn, params)
        mask = masking.Mask(secrecy.bundle_values(bundle, params))
        info['Environment'] = mask(shown) if mask else shown
        return info

    def resource_types(self, ctx, name=None, with_description=False):
        """The types the caller may use (engine/exposure.py) and the
        request's cloud can serve (engine/availability.py)."""
        found = catalog.resource_types(
            name, with_description, availability.checker(self.engine, ctx))
        return [t for t in found if exposure.allowed(
            ctx, t['resource_type'] if with_description else t)]

    def resource_type_show(self, ctx, type_name):
        exposure.check_type(ctx, type_name)
        return catalog.resource_type(type_name)

    def resource_type_template(self, ctx, type_name):
        exposure.check_type(ctx, type_name)
        return catalog.resource_type_template(type_name)

    def template_versions(self, ctx):
        return catalog.template_versions()

    def template_functions(self, ctx, version, with_condition_func=False):
        return catalog.template_functions(version, with_condition_func)

    def stack_preview_update(self, ctx, ident, bundle=None, params=None,
                             existing=False, clear_parameters=(),
                             show_nested=False):
        """What an update would do to each resource: {added, deleted,
        replaced, updated, unchanged}, with `show_nested` nested stacks'
        resources too; nothing is stored."""
        exposure.check_bundle(ctx, bundle)
        with self._quoting(ctx, bundle, params, ident):
            found = preview.update(self.engine, ident, bundle, params,
                                   existing, clear_parameters,
                                   project_id=self._scope(ctx, ident),
                                   show_nested=show_nested)
            st = self._stack(ctx, ident)
            return masking.Mask(secrecy.bundle_values(bundle, params)).add(
                self._mask(ctx, st.id).secrets())(found)

    def stack_preview(self, ctx, name, bundle, params):
        """What creating the stack would lay out (--dry-run); nothing is
        stored."""
        stacks.check_name(name)
        exposure.check_bundle(ctx, bundle)
        with self._quoting(ctx, bundle, params):
            defn = stacks.validate(bundle, params, stack_name=name,
                                   project_id=request.project_of(ctx))
            # Heat's preview: nested stacks' resources too, as lists
            tree = preview.create(defn, request.project_of(ctx))
        mask = masking.Mask(secrecy.bundle_values(bundle, params))
        deps = defn.dependencies()
        return {'stack_name': name, 'resources': len(defn.resources),
                'description': defn.description,
                'preview': mask(tree) if mask else tree,
                'parameters': preview.parameters(defn),
                'resource_list': [
                    {'resource_name': r, 'resource_type': rd.template_type,
                     'requires': sorted(deps.get(r, ())),
                     'required_by': sorted(n for n, d in deps.items()
                                           if r in d)}
                    for r, rd in sorted(defn.resources.items())]}

    # -- starting traversals ------------------------------------------------
    # each returns {'id': stack id, 'traversal_id': the traversal started}
    def stack_create(self, ctx, name, bundle, params, disable_rollback=True,
                     timeout=None, tags=None, converge_policy=None):
        exposure.check_bundle(ctx, bundle)
        with self._quoting(ctx, bundle, params), self._cloud(ctx) as cloud:
            return self._started(*stacks.create(
                self.engine, name, bundle, params,
                disable_rollback=disable_rollback, timeout=timeout,
                tags=tags, project_id=request.project_of(ctx),
                converge_policy=converge_policy, cloud=cloud))

    @contextlib.contextmanager
    def _cloud(self, ctx):
        """The cloud a stack `ctx` creates lives in: the one the request
        names, a Keystone trust of the requesting user's ([cloud]
        use_trusts; deleted again when the stack is not stored), or
        [cloud] name (None: the simulated cloud)."""
        if not trusts.wanted(ctx):
            yield getattr(ctx, 'cloud', None) or conf.CONF.cloud.name
            return
        trust_id = trusts.create(ctx)
        try:
            yield trusts.cloud_of(trust_id)
        except BaseException:
            trusts.forget(trust_id)
            raise

    def stack_update(self, ctx, ident, bundle=None, params=None,
                     existing=False, rollback=None, clear_parameters=(),
                     timeout=None, tags=None, converge=False,
                     converge_policy=None):
        if tags is None and bundle is not None and not existing:
            # a template in full: the stack's tags are what it gives, none
            # when it gives none (Heat's PUT); --existing keeps them
            tags = []
        exposure.check_bundle(ctx, bundle)
        with self._quoting(ctx, bundle, params, ident):
            return self._started(*stacks.update(
                self.engine, ident, bundle, params, existing=existing,
                rollback=rollback, clear_parameters=clear_parameters,
                timeout=timeout, tags=tags,
                project_id=self._scope(ctx, ident), converge=converge,
                converge_policy=converge_policy))

    def stack_resume_rollout(self, ctx, ident):
        """Move on the rollouts of the stack waiting for the operator
        (after a canary batch)."""
        return self._started(*rollouts.resume(
            self.engine, ident, project_id=self._scope(ctx, ident)))

    def stack_delete(self, ctx, ident):
        project = self._scope(ctx, ident)
        # its snapshots' images and backups first, as Heat's
        snapshots.delete_all(self.engine, ident, project_id=project)
        return self._started(*stacks.delete(
            self.engine, ident, project_id=project))

    def stack_check(self, ctx, ident):
        return self._started(*stacks.check(
            self.engine, ident, project_id=self._scope(ctx, ident)))

    def stack_suspend(self, ctx, ident):
        return self._started(*stacks.suspend(
            self.engine, ident, project_id=self._scope(ctx, ident)))

    def stack_resume(self, ctx, ident):
        return self._started(*stacks.resume(
            self.engine, ident, project_id=self._scope(ctx, ident)))

    def stack_converge(self, ctx, ident):
        return self._started(*stacks.converge(
            self.engine, ident, project_id=self._scope(ctx, ident)))

    def stack_cancel(self, ctx, ident, rollback=True):
        return self._started(*stacks.cancel(
            self.engine, ident, rollback=rollback,
            project_id=self._scope(ctx, ident)))

    def stack_adopt(self, ctx, name, data, params=None, timeout=None,
                    source='<adopt data>', files=None):
        """Take back the resources of an abandon document (`data`, as
        `stack_abandon` returns it) without creating them. `files`: those
        the client sent along (the provider templates its template
        names)."""
        if isinstance(data, dict):
            exposure.check(ctx, data.get('template'), dict(
                data.get('files') or {}, **(files or {})),
                data.get('environment'))
        with self._quoting(ctx, data, params), self._cloud(ctx) as cloud:
            return self._started(*abandon.adopt(
                self.engine, name, data, params, timeout=timeout,
                project_id=request.project_of(ctx), source=source,
                cloud=cloud, files=files))

    def stack_abandon(self, ctx, ident, save=None):
        """Forget the stack, its resources left as they are; returns its
        abandon document. `save(document)` runs before anything is
        removed: when it raises, the stack stays."""
        return abandon.abandon(self.engine, ident,
                               project_id=self._scope(ctx, ident), save=save)

    @_read
    def stack_export(self, ctx, ident):
        """The stack's abandon document; the stack stays."""
        return abandon.export(self.engine, ident,
                              project_id=self._scope(ctx, ident))

    # -- snapshots ------------------------------------------------------------
    def stack_snapshot(self, ctx, ident, name=None):
        """Start a snapshot (engine/snapshots.py): the snapshot as Heat
        shows it, IN_PROGRESS, with the stack's id and the traversal's
        (``stack_id``, ``traversal_id``: what a caller follows)."""
        return snapshots.create(self.engine, ident, name,
                                project_id=self._scope(ctx, ident))

    @_read
    def stack_snapshot_list(self, ctx, ident):
        return self._masked(ctx, self._stack(ctx, ident).id,
                            snapshots.listing(
                                self.engine, ident,
                                project_id=self._scope(ctx, ident)))

    @_read
    def stack_snapshot_show(self, ctx, ident, snapshot_id):
        # a snapshot keeps its stack's abandon document: restoring
        # reads it from the database, never from this answer
        return self._masked(ctx, self._stack(ctx, ident).id,
                            snapshots.show(
                                self.engine, ident, snapshot_id,
                                project_id=self._scope(ctx, ident)))

    def stack_snapshot_delete(self, ctx, ident, snapshot_id):
        snapshots.delete(self.engine, ident, snapshot_id,
                         project_id=self._scope(ctx, ident))

    def stack_snapshot_restore(self, ctx, ident, snapshot_id):
        return self._started(*snapshots.restore(
            self.engine, ident, snapshot_id,
            project_id=self._scope(ctx, ident)))

    # -- stacks -------------------------------------------------------------
    @_read
    def stack_list(self, ctx, show_nested=False, all_projects=False,
                   show_deleted=False, show_hidden=False, **query):
        """The project's live stacks; nested stacks only when asked (each
        with its parent's id), deleted ones too when asked (Heat's
        show_deleted). `all_projects` (an admin's global_tenant) lists
        every project's. `query` is Heat's: filters (name, status,
        action, id: a value or a list of them), tags, tags_any, not_tags,
        not_tags_any, sort_keys, sort_dir, limit, marker (the last id of
        the page before). A stack with a tag of [DEFAULT]
        hidden_stack_tags is left out unless `show_hidden`."""
        project = None if all_projects else request.project_of(ctx)
        hidden = set() if show_hidden else set(conf.CONF.hidden_stack_tags)
        with self.engine.db.read() as s:
            rows = api.stack_list(s, project_id=project,
                                  show_nested=show_nested,
                                  show_deleted=show_deleted)
            found = [{'id': st.id, 'stack_name': st.name,
                      'stack_status': '%s_%s' % (st.action, st.status),
                      'stack_status_reason': st.status_reason,
                      'creation_time': views.iso(st.created_at),
                      'updated_time': views.iso(st.updated_at),
                      'deletion_time': views.iso(st.deleted_at),
                      'tags': list(st.tags or ()) or None,
                      'project': st.project_id,
                      'parent': st.parent_id}
                     for st in rows
                     if not hidden or not hidden.intersection(st.tags or ())]
        return listing.select_stacks(found, **query)

    @_read
    def stack_identify(self, ctx, ident):
        """{'stack_name', 'id'} of a stack named by name (a live one) or by
        id (deleted ones too, as Heat's lookup)."""
        st = self._stack_or_group(ctx, ident,
                                  include_deleted=views.is_uuid(ident))
        return {'stack_name': st.name, 'id': st.id}

    @_read
    def stack_template(self, ctx, ident):
        """The stack's current template (as stored), its environment and
        its files: {'template', 'environment', 'files'}."""
        st = self._stack(ctx, ident, include_deleted=True)
        with self.engine.db.read() as s:
            tmpl = api.template_get(s, st.template_id) \
                if st.template_id else None
        bundle = (tmpl.bundle if tmpl is not None else None) or {}
        return self._masked(ctx, st.id, {
            'template': bundle.get('template') or {},
            'environment': bundle.get('environment') or {},
            'files': bundle.get('files') or {}})

    @_read
    def stack_show(self, ctx, ident, with_outputs=True):
        """Heat's stack show, deleted stacks included (the newest); a
        deployment group's nested stack too."""
        st = self._stack_or_group(ctx, ident, include_deleted=True)
        if isinstance(st, group_stack.GroupStack):
            return self._masked(ctx, st.parent.id, st.show(with_outputs))
        data = self._masked(ctx, st.id, views.stack(
            self.engine, st, with_outputs=with_outputs))
        if st.template_id is not None and data.get('outputs'):
            derived = secrecy.derived(self.engine, st.template_id)[1]
            for out in data['outputs']:
                if out['output_key'] in derived:
                    out['output_value'] = secrecy.masked_whole(
                        out['output_value'])
        return data

    @_read
    def stack_status(self, ctx, stack_id):
        """The stack's row (all columns but the stored outputs) as a record:
        what a caller waiting for a traversal looks at."""
        # polled while a caller waits: its reason was masked when
        # written (workers/reconcile.py), and is not masked again here
        return self._status(ctx, stack_id)

    @_read
    def stack_graph(self, ctx, ident):
        """The dependency graph in DOT."""
        return views.dot(self.engine, self._stack(ctx, ident))

    @_read
    def stack_drift(self, ctx, ident):
        """Observe every resource, nested stacks' too (one list call per
        driver), and record what was seen; what differs from what was
        applied."""
        from converge.engine import drift
        stack = self._stack(ctx, ident)
        return self._masked(ctx, stack.id, [
            {'resource_name': d.name, 'stack_name': d.stack_name,
             'physical_resource_id': d.physical_id, 'kind': d.kind,
             'drift': d.detail}
            for d in drift.scan(self.engine, stack)])

    def stack_preview_converge(self, ctx, ident):
        """What `stack converge` would repair (observed now, and recorded
        as observed); nothing is repaired."""
        stack = self._stack(ctx, ident)
        return self._masked(ctx, stack.id,
                            preview.converge(self.engine, stack))

    # -- resources ----------------------------------------------------------
    @_read
    def resource_list(self, ctx, ident, filters=None, nested_depth=0):
        """The resource each name stands for now; `filters` match name,
        status, type, action or id (physical), each a value or a list
        of them. With `nested_depth` N the
        resources of nested stacks down to N levels follow their owner
        (Heat's nested_depth), each with its stack (`stack_name`) and
        `parent_resource`: a nested stack's resources, a deployment
        group's members by member name. A deployment group's nested
        stack lists its members."""
        st = self._stack_or_group(ctx, ident)
        if isinstance(st, group_stack.GroupStack):
            out, owner = st.resource_rows(), st.parent.id
        else:
            # a nested stack's own resources say which resource owns it
            out, owner = self._resource_rows(
                st, nested_depth, st.parent_resource), st.id
        return self._masked(ctx, owner, [
            r for r in out if listing.matches(r, filters, _RESOURCE_KEYS)])

    def _resource_rows(self, st, depth, parent_resource):
        out = []
        rows, needed = views.resources_needed(self.engine, st)
        for name, row in sorted(rows.items()):
            out.append({'resource_name': name,
                        'physical_resource_id': row.physical_id or '',
                        'resource_type': api.shown_type(row),
                        'resource_status': '%s_%s' % (row.action,
                                                      row.status),
                        'resource_action': row.action,
                        'updated_time': views.iso(row.updated_at or
                                                  row.created_at),
                        'creation_time': views.iso(row.created_at),
                        'resource_status_reason': row.status_reason,
                        'drift': row.drift,
                        'observed_time': views.iso_ts(row.observed_at)
                        if row.observed_at else None,
                        'required_by': needed.get(name, []),
                        'stack_name': st.name, 'stack_id': st.id,
                        'parent_resource': parent_resource})
            if depth > 0:
                child = views.child_stack(self.engine, st, row)
                if child is not None:
                    out.extend(self._resource_rows(child, depth - 1, name))
                else:
                    out.extend(self._members(st, name, row, depth))
        return out

    def _members(self, st, name, row, depth):
        """A resource's members, as resource_list rows (`depth` levels:
        members have none of their own until nested stacks come)."""
        found = views.nested(self.engine, st, row)
        if found is None:
            return []
        stack_id, stack_name, members = found
        return group_stack.member_rows(stack_id, stack_name, members, name)

    @_read
    def resource_details(self, ctx, ident):
        """{name: properties, attributes, description, required_by} of
        the stack's current resources (a listing with detail), masked as
        resource_show masks one."""
        st = self._stack_or_group(ctx, ident)
        if isinstance(st, group_stack.GroupStack):
            return self._masked(ctx, st.parent.id, st.resource_details())
        data = self._masked(ctx, st.id,
                            views.resource_details(self.engine, st))
        for name, detail in data.items():
            self._mask_derived(st, name, detail)
        return data

    def _mask_derived(self, st, name, data):
        """Properties whose template reads a hidden parameter, masked
        whole (Heat's rule) where masking by value left them shown."""
        if st.template_id is None:
            return
        keys = secrecy.derived(self.engine, st.template_id)[0].get(name, ())
        for field in ('properties', 'desired_properties',
                      'applied_properties'):
            for key in keys:
                if key in (data.get(field) or {}):
                    data[field][key] = secrecy.masked_whole(data[field][key])

    @_read
    def resource_show(self, ctx, ident, name):
        st = self._stack_or_group(ctx, ident)
        if isinstance(st, group_stack.GroupStack):
            return self._masked(ctx, st.parent.id, st.resource_detail(name))
        data = self._masked(ctx, st.id,
                            views.resource_detail(self.engine, st, name))
        self._mask_derived(st, name, data)
        return data

    @_read
    def resource_metadata(self, ctx, ident, name):
        st = self._stack(ctx, ident)
        # a server's own Keystone user: its server's only
        stack_user.check_metadata(self.engine, ctx, st, name)
        return self._masked(ctx, st.id,
                            views.resource_metadata(self.engine, st, name))

    def resource_mark_unhealthy(self, ctx, ident, name, unhealthy=True,
                                reason=''):
        """Mark a resource CHECK_FAILED (or back, when only a mark made it
        so); the next update or converge does its action again."""
        return health.mark(self.engine, ident, name, unhealthy, reason,
                           project_id=self._scope(ctx, ident))

    def resource_signal(self, ctx, ident, name, details=None,
                        signal_id=None):
        """Signal a resource (an OS::Heat::ScalingPolicy: scale its
        group; an AWS::CloudWatch::Alarm: set its state and signal its
        actions, engine/alarms.py). Returns what became of the signal:
        {status (SCALING, IGNORED), reason, capacity, stack_id, traversal_id (the traversal
        scaling the group, or None)}. A signal {"unset_hook": HOOK}
        clears that hook of the resource (engine/hooks.py) instead:
        status CLEARED, traversal_id the root stack's, going on. A
        member of a deployment group's nested stack (`ident` the group's
        physical id): its deployment's run completes (status SIGNALLED),
        once (IGNORED when it is not running)."""
        st = self._stack_or_group(ctx, ident)
        if isinstance(st, group_stack.GroupStack):
            if stack_user.only_server_user(ctx):
                raise exception.Forbidden('A server\'s user may signal '
                                          'its own deployments only')
            return st.signal(self.engine, name, details)
        deployment = stack_user.deployment_of(self.engine, ctx, st, name)
        if deployment is not None:
            # heat-config-notify's HEAT_SIGNAL: the run in progress
            # completes once, as its agent's signal would
            answer = software.complete(self.engine, deployment, details)
            return {'status': 'SIGNALLED' if answer['accepted'] else
                    'IGNORED', 'reason': answer['reason'],
                    'capacity': None, 'stack_id': st.id,
                    'traversal_id': None}
        if isinstance(details, dict) and 'unset_hook' in details:
            return hooks.clear(self.engine, ident, name,
                               details['unset_hook'],
                               project_id=self._scope(ctx, ident))
        if alarms.is_alarm(self.engine, ident, name,
                           project_id=self._scope(ctx, ident)):
            return alarms.signal(self.engine, ident, name, details,
                                 project_id=self._scope(ctx, ident))
        return scaling.signal(self.engine, ident, name, details,
                              project_id=self._scope(ctx, ident),
                              signal_id=signal_id)

    @_read
    def hook_poll(self, ctx, ident, nested_depth=0):
        """The hooks the stack's resources (and, `nested_depth` levels
        down, its nested stacks') are paused at: the events that said so
        since the stack's action started (Heat's `stack hook poll`: the
        hooks of the stack's action, each event not followed by its
        clearing; converge's post-* too). Raises InvalidInput when the stack is not
        IN_PROGRESS."""
        st = self._stack(ctx, ident)
        hook = breakpoints.HOOK_OF_ACTION.get(st.action)
        if st.status != 'IN_PROGRESS' or hook is None:
            raise exception.InvalidInput(
                'Stack %s is %s_%s: hooks are polled while it is created, '
                'updated or deleted' % (st.name, st.action, st.status))
        with self.engine.db.read() as s:
            trav = api.traversal_get(s, st.current_traversal)
        since = trav.created_at.replace(
            tzinfo=datetime.timezone.utc).timestamp() if trav else 0
        return breakpoints.paused_events(
            [ev for ev in self.event_list(ctx, st.id,
                                          nested_depth=nested_depth)
             if ev['timestamp'] >= since],
            hook, breakpoints.POST_HOOK_OF_ACTION.get(st.action))

    def hooks_paused(self, ctx, stack_id):
        """Whether the stack's traversal (and its nested stacks') is held
        by hooks alone: nothing goes on until one is cleared."""
        self._status(ctx, stack_id)
        return hooks.paused(self.engine, stack_id)

    # -- outputs ------------------------------------------------------------
    @_read
    def output_list(self, ctx, ident):
        """output key -> {'value', 'description'[, 'error']}."""
        st = self._stack(ctx, ident)
        return self._outputs(ctx, st)

    def _outputs(self, ctx, st):
        """The stack's outputs, masked (views.outputs' shape)."""
        outs = self._masked(ctx, st.id, views.outputs(self.engine, st))
        if st.template_id is not None:
            for key in secrecy.derived(self.engine, st.template_id)[1]:
                if key in outs and 'value' in outs[key]:
                    outs[key]['value'] = secrecy.masked_whole(
                        outs[key]['value'])
        return outs

    @_read
    def output_show(self, ctx, ident, key):
        outs = self._outputs(ctx, self._stack(ctx, ident))
        if key not in outs:
            raise exception.NotFound('Output %s not found' % key)
        out = outs[key]
        data = {'output_key': key, 'output_value': out.get('value'),
                'description': out.get('description', '')}
        if 'error' in out:
            data['output_error'] = out['error']
        return data

    # -- events -------------------------------------------------------------
    @_read
    def event_list(self, ctx, ident, resource_name=None, limit=None,
                   nested_depth=0, query=None):
        """The stack's events, oldest first (the last `limit` of them).
        With `nested_depth`, those of its resources' nested stacks too (a
        deployment group's members), merged by time, each with its
        `stack_name` and `stack_id`. With `query` (Heat's: filters,
        sort_keys, sort_dir, limit, marker: an event's uuid), Heat's page
        of them instead."""
        st = self._stack_or_group(ctx, ident, include_deleted=True)
        # a deployment group's nested stack: its members' events
        grp = isinstance(st, group_stack.GroupStack)
        stacks = [(st.id, st.name)]
        if nested_depth > 0 and not grp and st.deleted_at is None:
            stacks += self._nested_stacks(st, nested_depth)
        events = []
        with self.engine.db.read() as s:
            for stack_id, name in stacks:
                events += [dict(_event(e), stack_name=name,
                                stack_id=stack_id)
                           for e in api.events_list(
                               s, stack_id, resource_name=resource_name)]
        if query is not None and resource_name in (None, st.name) and \
                not grp:
            # the stack's own events (under its own name too, as Heat's)
            with self.engine.db.read() as s:
                for stack_id, name in stacks:
                    events += views.stack_events(
                        api.traversals_of(s, stack_id), stack_id, name,
                        events)
            events.sort(key=lambda e: (e['timestamp'], e['id']))
        elif len(stacks) > 1:
            events.sort(key=lambda e: (e['timestamp'], e['id']))
        mask = self._mask(ctx, st.parent.id if grp else st.id)
        if query is not None:
            return mask(listing.select_events(events, **query))
        if limit:
            events = events[-limit:]
        return mask(events)

    @_read
    def event_show(self, ctx, ident, resource_name, event_id):
        """One event of the stack's resource, by its uuid."""
        for ev in self.event_list(ctx, ident, resource_name=resource_name,
                                  query={}):
            if ev['uuid'] == event_id:
                return ev
        raise exception.NotFound('Event %s not found' % event_id)

    def _nested_stacks(self, st, depth):
        """(id, name) of the stacks nested in `st`, `depth` levels down."""
        found = []
        for _, row in sorted(views.resources(self.engine, st).items()):
            child = views.child_stack(self.engine, st, row)
            if child is not None:
                found.append((child.id, child.name))
                if depth > 1:
                    found += self._nested_stacks(child, depth - 1)
                continue
            members = views.nested(self.engine, st, row)
            if members is not None:
                found.append(members[:2])
        return found

    @_read
    def events_since(self, ctx, stack_id, traversal_ids, after_id=0,
                     ids=None):
        """Events of these traversals of the stack with an id above
        `after_id` (and among `ids`, if given), in id order."""
        self._status(ctx, stack_id)
        with self.engine.db.read() as s:
            found = [_event(e) for e in api.events_list(
                s, stack_id, after_id=after_id,
                traversal_ids=traversal_ids, ids=ids)]
        return self._masked(ctx, stack_id, found) if found else found

    @_read
    def event_ids_since(self, ctx, stack_id, traversal_ids, after_id):
        self._status(ctx, stack_id)
        with self.engine.db.read() as s:
            return api.event_ids(s, stack_id, after_id, traversal_ids)

    # -- a live view of a stack tree (converge-api's dashboard) -------------
    def _texts_masked(self, ctx, stack_id, items):
        """`items` (dicts) with the secrets of the stack's tree masked in
        their texts; their numbers (an event's id, a box's place) are
        left as they are, whatever a hidden value may be."""
        mask = self._mask(ctx, stack_id)
        if not mask:
            return items
        return [{k: mask.text(v) if isinstance(v, str) else v
                 for k, v in item.items()} for item in items]

    @staticmethod
    def _tree_event(ev, names):
        return dict(_event(ev), stack_id=ev.stack_id,
                    stack_name=names.get(ev.stack_id, ''))

    @_read
    def stack_overview(self, ctx, ident, last=200):
        """The stack's tree at a glance (engine/live.py): {'stacks': the
        stack and its live nested stacks, parents first; 'resources':
        each name's current row, briefly; 'events': the last `last`
        events of the tree; 'last_event_id': the highest event id of the
        tree}. That id is read first, so an event after it (which the
        event stream sends) may be shown by the rows already: sent again,
        it changes nothing."""
        st = self._stack(ctx, ident)
        with self.engine.db.read() as s:
            stacks = live.tree(s, st.id)
            ids = [x.id for x in stacks]
            high = live.last_event_id(s, ids)
            rows = live.resources(s, stacks)
            events = [e for e in live.events(s, ids, last=last)
                      if e.id <= high] if last else []
        names = {x.id: x.name for x in stacks}
        return {
            'stacks': self._texts_masked(ctx, st.id, [{
                'id': x.id, 'stack_name': x.name, 'parent': x.parent_id,
                'parent_resource': x.parent_resource,
                'stack_status': '%s_%s' % (x.action, x.status),
                'stack_status_reason': x.status_reason or '',
                'current_traversal': x.current_traversal,
                'updated_time': views.iso(x.updated_at or x.created_at)}
                for x in stacks]),
            'resources': self._texts_masked(ctx, st.id, rows),
            'events': self._texts_masked(ctx, st.id, [
                self._tree_event(e, names) for e in events]),
            'last_event_id': high}

    @_read
    def tree_events_since(self, ctx, stack_id, after_id=0, ids=None,
                          limit=None):
        """The events of the stack and its live nested stacks above
        `after_id` (among `ids` if given), in id order, each with its
        stack_id and stack_name, the first `limit` of them: what the
        event stream sends."""
        self._status(ctx, stack_id)
        with self.engine.db.read() as s:
            stacks = live.tree(s, stack_id)
            found = live.events(s, [x.id for x in stacks],
                                after_id=after_id, ids=ids, first=limit)
        names = {x.id: x.name for x in stacks}
        return self._texts_masked(ctx, stack_id, [
            self._tree_event(e, names) for e in found]) if found else []

    @_read
    def tree_event_ids_since(self, ctx, stack_id, after_id=0):
        """Ids of the events of the stack's tree above `after_id`; with
        tree_events_since, what reads each event exactly once
        (converge/following.py)."""
        self._status(ctx, stack_id)
        with self.engine.db.read() as s:
            return live.event_ids(s, api.stack_tree(s, stack_id), after_id)

    @_read
    def tree_last_event_id(self, ctx, stack_id):
        """The highest event id of the stack's tree (0: none yet)."""
        self._status(ctx, stack_id)
        with self.engine.db.read() as s:
            return live.last_event_id(s, api.stack_tree(s, stack_id))

    @_read
    def stack_layout(self, ctx, ident):
        """The stack's dependency graph laid out for a view (its own
        resources: a nested stack is a box of its own, opened by its id):
        engine/live.py layout, with the stack's id and name."""
        st = self._stack(ctx, ident)
        defn = None
        if st.template_id is not None:
            try:
                defn = self.engine.definition(st.template_id, st)
            except exception.ConvergeError:
                pass
        with self.engine.db.read() as s:
            names = live.names(s, st.id)
        data = live.layout(defn.dependencies() if defn else {}, names)
        data.update(id=st.id, stack_name=st.name)
        return data

    @_read
    def stack_rollouts(self, ctx, ident):
        """The groups of the stack's tree rolling out: where each is, its
        batches, its health gate and failure budget (views.rollouts)."""
        st = self._stack(ctx, ident)
        return self._texts_masked(ctx, st.id, views.rollouts(
            self.engine, st, detail=True))

    # -- following a traversal ----------------------------------------------
    @_read
    def traversal_status(self, ctx, stack_id, traversal_id):
        """Where a traversal stands, for a caller following it: the stack
        record, and the traversal that owns the stack now if it is another
        ({'id', 'action', 'parent'}: parent is the traversal whose failure
        started it, for a rollback)."""
        stack = self._status(ctx, stack_id)
        current = None
        if stack.current_traversal and \
                stack.current_traversal != traversal_id:
            with self.engine.db.read() as s:
                trav = api.traversal_get(s, stack.current_traversal)
            if trav is not None:
                current = {'id': trav.id, 'action': trav.action,
                           'parent': (trav.options or {}).get('parent')}
        return {'stack': stack, 'superseded_by': current}

    @_read
    def traversal_progress(self, ctx, stack_id, traversal_id):
        """Resources of a traversal done, in all, in progress and failed.

        Counted per resource name, not per node: a traversal that resumes
        a stack whose rows exist has an update node and a cleanup node per
        resource, and counting nodes showed 500/500 for 250 resources. A
        name is done when every node of it is. `total` is 0 once the
        traversal's sync points are gone (it ended or was superseded).
        """
        self._status(ctx, stack_id)
        with self.engine.db.read() as s:
            nodes = api.sync_nodes_done(s, traversal_id)
            counts = api.resource_status_counts(s, stack_id, traversal_id)
            trav = api.traversal_get(s, traversal_id) if not nodes else None
        if trav is not None and trav.state == 'complete':
            # ended before anyone looked: its sync points are gone
            return {'done': trav.total, 'total': trav.total,
                    'in_progress': counts.get('IN_PROGRESS', 0),
                    'failed': counts.get('FAILED', 0)}
        pending = {}
        for key, done in nodes:
            name = plan_mod.resource_name(key)
            pending[name] = pending.get(name, False) or not done
        return {'done': sum(1 for p in pending.values() if not p),
                'total': len(pending),
                'in_progress': counts.get('IN_PROGRESS', 0),
                'failed': counts.get('FAILED', 0)}

    # -- what the engine is doing now (converge top) -------------------------
    @_read
    def engine_activity(self, ctx, all_projects=False, window=10.0,
                        due_within=30.0):
        """One snapshot of what runs now (engine/activity.py): the
        running traversals with their progress and rate over the last
        `window` seconds, the waits due within `due_within` seconds, the
        engines and their units in flight, the slowest recent actions.
        The project's stacks; every project's with `all_projects` (an
        admin's: the API checks its policy), with the live engines."""
        window = _seconds(window, 'window', ACTIVITY_MAX)
        due_within = _seconds(due_within, 'due_within', ACTIVITY_MAX)
        project = None if all_projects else request.project_of(ctx)
        return activity.snapshot(self.engine, project, window=window,
                                 due_within=due_within,
                                 group=conf.CONF.coordination.group)

    def drain_local(self):
        """Let this process's in-flight units of work end (embedded: the
        CLI process is a worker too) before it exits."""
        self.engine.idle.wait(timeout=self.engine.lock_wait)

    # -- software configs and deployments of no stack (Heat's API) ----------
    def software_config_create(self, ctx, data):
        return standalone.config_create(self.engine,
                                        request.project_of(ctx), data)

    @_read
    def software_config_list(self, ctx):
        found = standalone.config_list(self.engine, request.project_of(ctx))
        return self._masked_by(ctx, found, secrecy.config_stacks(
            self.engine, [c['id'] for c in found]))

    @_read
    def software_config_show(self, ctx, config_id):
        found = standalone.config_show(self.engine, request.project_of(ctx),
                                       config_id)
        # a config a stack's resource made, or a deployment's derived one
        return self._masked_by(ctx, [found], secrecy.config_stacks(
            self.engine, [config_id]) or secrecy.deployment_stacks(
                self.engine, [config_id]))[0]

    def software_config_delete(self, ctx, config_id):
        standalone.config_delete(self.engine, request.project_of(ctx),
                                 config_id)

    def software_deployment_create(self, ctx, data):
        return standalone.deployment_create(
            self.engine, request.project_of(ctx), data)

    @_read
    def software_deployment_list(self, ctx, server_id=None):
        return self._masked_deployments(ctx, standalone.deployment_list(
            self.engine, request.project_of(ctx), server_id))

    @_read
    def software_deployment_show(self, ctx, deployment_id):
        return self._masked_deployments(ctx, [standalone.deployment_show(
            self.engine, request.project_of(ctx), deployment_id)])[0]

    def _masked_deployments(self, ctx, found):
        """Deployments (dicts with their id), each masked as its
        stack's (one of no stack has no hidden values)."""
        return self._masked_by(ctx, found, secrecy.deployment_stacks(
            self.engine, [d['id'] for d in found]))

    def _masked_by(self, ctx, found, stacks_of):
        """Dicts with an id, each masked as the stack `stacks_of` names
        for its id (none: as it is)."""
        masks = {}
        out = []
        for d in found:
            stack_id = stacks_of.get(d['id'])
            if stack_id is None:
                out.append(d)
                continue
            if stack_id not in masks:
                masks[stack_id] = self._mask(ctx, stack_id)
            out.append(masks[stack_id](d))
        return out

    def software_deployment_update(self, ctx, deployment_id, data):
        return standalone.deployment_update(
            self.engine, request.project_of(ctx), deployment_id, data)

    def software_deployment_delete(self, ctx, deployment_id):
        standalone.deployment_delete(self.engine, request.project_of(ctx),
                                     deployment_id)

    @_read
    def software_deployment_metadata(self, ctx, server_id):
        return self._masked_deployments(ctx, standalone.server_metadata(
            self.engine, request.project_of(ctx), server_id))

    # -- deployments: config-download (a push over SSH) -----------------------
    @_read
    def deployment_plan(self, ctx, stack):
        """The stack's deployments as a push transport runs them: hosts
        (servers, deployed servers) and deployments by step and role
        (engine/configdl.py)."""
        from converge.engine import configdl
        return configdl.plan(self.engine, request.project_of(ctx), stack)

    def deployment_push_results(self, ctx, stack, results):
        """Record a push run's results ({id, run, payload} each) as
        agents' signals are recorded; an answer per result."""
        from converge.engine import configdl
        return configdl.record(self.engine, request.project_of(ctx), stack,
                               results)

    # -- deployments: day-2 actions -------------------------------------------
    def deployment_action_run(self, ctx, stack, resource, action,
                              inputs=None, members=None):
        """Run a deployment's action on its server(s) now (a component's
        day-2 action, or an explicit re-run); the stack is untouched.
        Returns one record per deployment (a group: per member)."""
        return software.run_action(self.engine, request.project_of(ctx),
                                   stack, resource, action, inputs, members)

    @_read
    def deployment_action_members(self, ctx, stack, resource):
        """The member names of a deployment group ([] for a lone
        deployment)."""
        return software.members(self.engine, request.project_of(ctx),
                                stack, resource)

    @_read
    def deployment_action_show(self, ctx, action_id):
        found = software.action_show(self.engine, request.project_of(ctx),
                                     action_id)
        if not found.get('stack_id'):
            return found
        return self._masked(ctx, found['stack_id'], found)

    @_read
    def deployment_action_list(self, ctx, stack, resource=None):
        return self._masked(ctx, self._stack(ctx, stack).id,
                            software.action_list(
                                self.engine, request.project_of(ctx),
                                stack, resource))
