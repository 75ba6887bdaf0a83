"""check_resource: one unit of work, read top to bottom.

    lock -> load the node and desired state -> observe -> decide -> act
    -> record (state, event, propagation: one transaction) -> tell dependents

A message may arrive twice, late, or for a traversal that a newer one has
superseded; a worker may die at any line. So: a node already done or no
longer current is dropped; the action is idempotent (plug-ins adopt what
exists); every write is a compare-and-swap on the row's fencing counter,
and a unit of work that loses one stops without writing anything else.

The lock comes first (the node key names its resource), so everything the
unit reads afterwards is fresh: one read before acting, one write after
(plus an IN_PROGRESS claim before a real cloud action).
"""

import contextlib
import json
import time

from oslo_log import log as logging

from converge import exception
from converge.db import api
from converge.engine import listeners
from converge.graph import plan
from converge.workers import decide as decide_mod
from converge.workers import walker

LOG = logging.getLogger(__name__)


class Lost(Exception):
    """Another unit of work wrote this resource first; stop quietly."""


@listeners.timed
def check_resource(engine, stack_id, traversal_id, node):
    name = plan.resource_name(node)
    # lock the resource (by name: all its versions), then load; a node that
    # is done or whose traversal is over is dropped
    with engine.gate.held(), engine.locks.resource(
            stack_id, name, engine.lock_wait, waiting=engine.gate.released):
        unit = Unit.load(engine, traversal_id, node, name)
        if unit is None:
            return
        try:
            if unit.is_update:
                unit.converge()
            else:
                unit.clean_up()
        except Lost:
            LOG.debug('%s: another unit of work got there first', name)


class Unit:
    def __init__(self, engine, trav, stack, sp, name):
        self.engine, self.trav, self.stack = engine, trav, stack
        self.sp, self.name = sp, name
        self.is_update = plan.is_update(sp.node)
        self.row = self.current_id = None
        self.defn = self.rdef = self.deps = None
        self.ready = []

    @classmethod
    def load(cls, engine, traversal_id, node, name):
        """Everything the unit needs, read in one go under the lock; None
        when there is nothing to do."""
        with engine.db.connect() as conn:
            found = api.unit_load(conn, traversal_id, node)
            if found is None:
                return None
            sp, trav, stack, row, current_id = found
            if (trav.state != 'running' or stack.current_traversal != trav.id
                    or sp.done):
                return None
            unit = cls(engine, trav, stack, sp, name)
            unit.row, unit.current_id = row, current_id
            if unit.is_update:
                if row is None:  # its row vanished (a concurrent cleanup)
                    return None
                unit.row = _settled(conn, row, trav.template_id)
                unit.defn = engine.definition(trav.template_id, stack)
                unit.rdef = unit.defn.resources[name]
                unit.deps = DependencyData(conn, trav.id, unit.rdef.requires)
        return unit

    # -- update nodes -------------------------------------------------------
    def converge(self):
        row, rdef, deps = self.row, self.rdef, self.deps
        if rdef.external_id:
            return self._adopt_external(row, rdef, deps)
        try:
            props = self.defn.resolve_properties(self.name, deps)
        except exception.ConvergeError as exc:
            return self._failed(row, 'CREATE' if row.action == 'INIT'
                                else 'UPDATE', str(exc))
        plugin = self.engine.plugin(rdef.plugin, row, props, self.stack)

        # observe, decide
        observed = self._observe(plugin)
        decision = decide_mod.for_update(self.trav.action, row, plugin,
                                         observed)
        if decision == decide_mod.REPLACE:
            row = self._make_replacement(row, rdef)
            plugin = self.engine.plugin(rdef.plugin, row, props, self.stack)
            decision = decide_mod.CREATE
        if decision == decide_mod.NOTHING:
            return self._record(row, plugin, None, observed, deps, rdef)

        # act
        action = {decide_mod.CREATE: 'CREATE', decide_mod.UPDATE: 'UPDATE',
                  decide_mod.CHECK: 'CHECK'}[decision]
        if self._timed_out():
            return self._failed(row, action, 'Timed out')
        started = self._start(row, action, plugin)
        try:
            with self._on_cloud(plugin):
                if decision == decide_mod.CREATE:
                    plugin.create()
                elif decision == decide_mod.UPDATE:
                    plugin.update(row.properties or {}, observed)
                else:
                    plugin.check(observed)
                observed = plugin.observe()
        except exception.UpdateReplace:
            return self._replace_late(row, rdef, props, deps)
        except Exception as exc:  # the plug-in's failure is the resource's
            LOG.debug('%s %s failed', self.name, action, exc_info=True)
            return self._failed(row, action, _reason(exc), plugin)

        # record and propagate
        self._record(row, plugin, action, observed, deps, rdef,
                     started=started)

    def _adopt_external(self, row, rdef, deps):
        """external_id: the resource exists already and is not ours to
        create, change or delete; observe it and record what is there."""
        plugin = self.engine.plugin(rdef.plugin, row, {}, self.stack)
        plugin.physical_id = rdef.external_id
        observed = self._observe(plugin)
        if observed is None:
            return self._failed(row, 'CREATE', 'external resource %s not '
                                'found' % rdef.external_id, plugin)
        action = 'CREATE' if row.action == 'INIT' else None
        self._record(row, plugin, action, observed, deps, rdef)

    def _timed_out(self):
        deadline = (self.trav.options or {}).get('deadline')
        return bool(deadline) and time.time() > deadline

    def _on_cloud(self, plugin):
        """A plug-in that talks to the cloud waits outside the gate."""
        if plugin.logical:
            return contextlib.nullcontext()
        return self.engine.gate.released()

    def _observe(self, plugin):
        try:
            with self._on_cloud(plugin):
                return plugin.observe()
        except exception.CloudError as exc:
            LOG.warning('%s: observing failed: %s', self.name, exc)
            return {}

    def _start(self, row, action, plugin):
        """Before acting: claim the row (IN_PROGRESS, one transaction) so a
        crash mid-action is visible and resumable. An instant, local
        (logical) action needs no claim: its IN_PROGRESS event is written
        with its result, stamped now. Returns that stamp, or None."""
        if plugin.logical:
            return time.time()
        row.atomic_key = self._claim(row, action, plugin.physical_id)
        return None

    def _claim(self, row, action, physical_id):
        with self.engine.db.begin() as conn:
            key = api.resource_cas(
                conn, row.id, row.atomic_key, traversal_running=self.trav.id,
                action=action, status='IN_PROGRESS', status_reason='',
                engine_id=self.engine.engine_id, traversal_id=self.trav.id)
            if key is None:
                raise Lost()
            api.event_add(conn, self.stack.id, self.trav.id, self.name,
                          row.type, physical_id, action, 'IN_PROGRESS',
                          'state changed')
        return key

    def _make_replacement(self, row, rdef):
        """A new row for the new resource; the old one is cleaned up later."""
        with self.engine.db.begin() as conn:
            new = api.resource_replacement(conn, row, rdef.type,
                                           self.trav.template_id)
            if new is None:
                raise Lost()
            api.sync_set_resource(conn, self.trav.id, self.sp.node, new.id)
        return new

    def _replace_late(self, row, rdef, props, deps):
        """The plug-in found in update that it must replace after all."""
        with self.engine.db.begin() as conn:
            api.resource_cas(conn, row.id, row.atomic_key, status='COMPLETE')
        row.atomic_key += 1
        new = self._make_replacement(row, rdef)
        plugin = self.engine.plugin(rdef.plugin, new, props, self.stack)
        new.atomic_key = self._claim(new, 'CREATE', plugin.physical_id)
        try:
            with self._on_cloud(plugin):
                plugin.create()
                observed = plugin.observe()
        except Exception as exc:
            return self._failed(new, 'CREATE', _reason(exc), plugin)
        self._record(new, plugin, 'CREATE', observed, deps, rdef)

    def _record(self, row, plugin, action, observed, deps, rdef,
                started=None):
        attrs = plugin.get_attributes(observed) if observed is not None \
            else None
        values = dict(
            physical_id=plugin.physical_id,
            reference_id=plugin.reference_id(),
            properties=plugin.properties, data=plugin.data,
            attributes=_jsonable(attrs), observed=_jsonable(observed),
            template_id=self.trav.template_id, replaced_by=None,
            requires=deps.row_ids(), traversal_id=self.trav.id,
            engine_id=None, type=rdef.type)
        events = []
        if action:
            values.update(action=action, status='COMPLETE',
                          status_reason='state changed')
            if started:
                events.append(self._event(rdef.type, row.physical_id, action,
                                          'IN_PROGRESS', timestamp=started))
            events.append(self._event(rdef.type, plugin.physical_id, action,
                                      'COMPLETE'))
        elif row.status == 'IN_PROGRESS':
            # left so by a unit that died; nothing was left to do
            values.update(status='COMPLETE')
        with self.engine.db.begin() as conn:
            if api.resource_cas(conn, row.id, row.atomic_key,
                                **values) is None:
                raise Lost()
            if events:
                api.events_add(conn, *events)
            failing = self._finish(conn, resource_id=row.id)
        self._tell(failing)

    def _failed(self, row, action, reason, plugin=None):
        with self.engine.db.begin() as conn:
            if api.resource_cas(conn, row.id, row.atomic_key, action=action,
                                status='FAILED', status_reason=reason,
                                engine_id=None,
                                traversal_id=self.trav.id,
                                physical_id=(plugin.physical_id if plugin
                                             else row.physical_id),
                                data=(plugin.data if plugin else row.data)
                                ) is None:
                raise Lost()
            api.events_add(conn, self._event(row.type, row.physical_id,
                                             action, 'FAILED', reason))
            if self.trav.action == 'CHECK':
                # a failed check is reported at the end, not fatal
                self.ready = walker.finish(conn, self.trav, self.stack.id,
                                           self.sp.node, self.sp.dependents)
            else:
                walker.fail(conn, self.trav, 'Resource %s failed: %s' % (
                    action, reason))
        if self.trav.action == 'CHECK':
            return self._tell(False)
        self.engine.settle(self.trav, self.stack)

    # -- cleanup nodes ------------------------------------------------------
    def clean_up(self):
        row = self.row
        if row is None:  # already gone
            return self._finish_only()
        is_current = row.id == self.current_id
        if decide_mod.for_cleanup(row, is_current) == decide_mod.NOTHING:
            return self._finish_only()
        defn = (self.engine.definition(row.template_id, self.stack)
                if row.template_id else None)
        rdef = defn.resources.get(row.name) if defn else None
        policy = rdef.deletion_policy if rdef else 'Delete'
        if rdef is not None and rdef.external_id:
            policy = 'Retain'  # adopted, never ours to delete
        plugin_cls = self.engine.plugin_class(row.type)
        if row.physical_id is None and row.action == 'INIT':
            return self._drop(row, events=())
        events = []
        if plugin_cls is not None and plugin_cls.logical:
            events.append(self._event(row.type, row.physical_id, 'DELETE',
                                      'IN_PROGRESS'))
        else:
            row.atomic_key = self._claim(row, 'DELETE', row.physical_id)
        if policy != 'Retain' and plugin_cls is not None:
            plugin = self.engine.plugin(plugin_cls, row,
                                        row.properties or {}, self.stack)
            try:
                with self._on_cloud(plugin):
                    plugin.delete()
            except Exception as exc:
                LOG.debug('%s DELETE failed', self.name, exc_info=True)
                return self._failed(row, 'DELETE', _reason(exc), plugin)
        events.append(self._event(row.type, row.physical_id, 'DELETE',
                                  'COMPLETE'))
        self._drop(row, events)

    def _drop(self, row, events):
        with self.engine.db.begin() as conn:
            if not api.resource_delete_row(conn, row.id, row.atomic_key):
                raise Lost()
            if events:
                api.events_add(conn, *events)
            failing = self._finish(conn)
        self._tell(failing)

    def _finish_only(self):
        with self.engine.db.begin() as conn:
            failing = self._finish(conn)
        self._tell(failing)

    # -- recording, propagating ---------------------------------------------
    def _event(self, rtype, physical_id, action, status,
               reason='state changed', timestamp=None):
        return api.event(self.stack.id, self.trav.id, self.name, rtype,
                         physical_id, action, status, reason, timestamp)

    def _finish(self, conn, resource_id=None):
        """Mark the node done and release its dependents, in the caller's
        transaction (self.ready: whom to tell after commit). Returns
        whether the traversal is failing: read in the recording
        transaction, because a failure elsewhere may be waiting for this
        unit to end."""
        self.ready = walker.finish(conn, self.trav, self.stack.id,
                                   self.sp.node, self.sp.dependents,
                                   resource_id=resource_id)
        return (self.ready is not None and
                api.traversal_state(conn, self.trav.id) == 'failing')

    def _tell(self, failing):
        for node in self.ready or ():
            self.engine.client.check_resource(self.stack.id, self.trav.id,
                                              node)
        if failing:
            self.engine.settle(self.trav, self.stack)


def _settled(conn, row, template_id):
    """A replacement made for this same template by a superseded traversal
    is where this node now stands."""
    while row.replaced_by:
        new = api.resource_get(conn, row.replaced_by)
        if new is None or new.template_id != template_id:
            break
        row = new
    return row


class DependencyData:
    """What get_resource/get_attr read: the rows this node's inputs chose."""

    def __init__(self, conn, traversal_id, names):
        self._rows = {}
        if names:
            self._rows = api.dependency_rows(
                conn, traversal_id, [plan.update_key(n) for n in names])

    def reference_id(self, name):
        row = self._rows.get(name)
        if row is None:
            return name
        return row.reference_id or row.physical_id or name

    def attributes(self, name):
        row = self._rows.get(name)
        return row.attributes if row is not None else None

    def row_ids(self):
        return sorted(r.id for r in self._rows.values())


def _reason(exc):
    text = str(exc) or exc.__class__.__name__
    if not isinstance(exc, exception.ConvergeError):
        text = '%s: %s' % (exc.__class__.__name__, text)
    return text


def _jsonable(value):
    if value is None:
        return None
    return json.loads(json.dumps(value, default=str))
