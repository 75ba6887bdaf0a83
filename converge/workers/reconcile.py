"""check_resource: one unit of work, read top to bottom.

    load the node -> lock -> load desired -> observe -> decide -> act
    -> record (state, event, propagation: one transaction) -> tell dependents

A message may arrive twice, late, or for a traversal that a newer one has
superseded; a worker may die at any line. So: a node already done or no
longer current is dropped; the action is idempotent (plug-ins adopt what
exists); every write is a compare-and-swap on the row's fencing counter,
and a unit of work that loses one stops without writing anything else.
"""

import time

from oslo_log import log as logging

from converge import exception
from converge.db import api
from converge.workers import decide as decide_mod
from converge.workers import walker

LOG = logging.getLogger(__name__)


class Lost(Exception):
    """Another unit of work wrote this resource first; stop quietly."""


def check_resource(engine, traversal_id, node):
    # 1. the node, its traversal and its stack; stale or done -> drop
    is_update = node.startswith('u:')
    with engine.db.read() as s:
        found = api.sync_load(s, traversal_id, node)
        if found is None:
            return
        sp, trav, stack = found
        if (trav.state != 'running' or stack.current_traversal != trav.id
                or sp.done):
            return
        row = None
        if not is_update and sp.resource_id:
            row = api.resource_get(s, sp.resource_id)
    name = node[2:] if is_update else (row.name if row else None)
    if name is None:  # cleanup of a row already gone
        return _finish_only(engine, trav, stack, sp)

    # 2. lock the resource (by name: all its versions) and work
    with engine.locks.resource(stack.id, name, engine.lock_wait):
        unit = Unit(engine, trav, stack, sp, name)
        try:
            if is_update:
                unit.converge()
            else:
                unit.clean_up()
        except (Lost, Duplicate):
            LOG.debug('%s: another unit of work got there first', name)


class Duplicate(Exception):
    """This node was done by another copy of its message meanwhile."""


def _still_pending(s, trav, node):
    fresh = api.sync_nodes(s, trav.id, [node])
    if not fresh or fresh[0].done:
        raise Duplicate()


class Unit:
    def __init__(self, engine, trav, stack, sp, name):
        self.engine, self.trav, self.stack = engine, trav, stack
        self.sp, self.name = sp, name
        self.ready = []

    # -- update nodes -------------------------------------------------------
    def converge(self):
        # load desired state (fresh, under the lock)
        defn = self.engine.definition(self.trav.template_id, self.stack)
        rdef = defn.resources[self.name]
        with self.engine.db.read() as s:
            _still_pending(s, self.trav, self.sp.node)
            row = self._current_row(s)
            deps = DependencyData(s, self.trav.id, rdef.requires)
        if rdef.external_id:
            return self._adopt_external(row, rdef, deps)
        try:
            props = defn.resolve_properties(self.name, deps)
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
        started = None
        if plugin.logical:
            # instant and local: no separate claim; the IN_PROGRESS event
            # is written with the result (the fencing counter still rules)
            started = time.time()
        else:
            row.atomic_key = self._claim(row, action, plugin)
        try:
            if decision == decide_mod.CREATE:
                plugin.create()
            elif decision == decide_mod.UPDATE:
                try:
                    plugin.update(row.properties or {}, observed)
                except exception.UpdateReplace:
                    return self._replace_late(row, rdef, props, deps)
            else:
                plugin.check(observed)
            observed = plugin.observe()
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

    def _current_row(self, s):
        row = api.resource_get(s, self.sp.resource_id)
        if row is None:  # its row vanished (a concurrent cleanup): recreate
            raise Lost()
        # a replacement made for this same template by a superseded
        # traversal is where this node now stands
        while row.replaced_by:
            new = api.resource_get(s, row.replaced_by)
            if new is None or new.template_id != self.trav.template_id:
                break
            row = new
        return row

    def _observe(self, plugin):
        try:
            return plugin.observe()
        except exception.CloudError as exc:
            LOG.warning('%s: observing failed: %s', self.name, exc)
            return {}

    def _claim(self, row, action, plugin):
        """Take the row for this traversal: IN_PROGRESS, one transaction."""
        with self.engine.db.write() as s:
            key = api.resource_cas(
                s, row.id, row.atomic_key, traversal_running=self.trav.id,
                action=action, status='IN_PROGRESS', status_reason='',
                engine_id=self.engine.engine_id, traversal_id=self.trav.id)
            if key is None:
                raise Lost()
            api.event_add(s, self.stack.id, self.trav.id, self.name,
                          row.type, plugin.physical_id, action,
                          'IN_PROGRESS', 'state changed')
        return key

    def _make_replacement(self, row, rdef):
        """A new row for the new resource; the old one is cleaned up later."""
        with self.engine.db.write() as s:
            new = api.resource_replacement(s, row, rdef.type,
                                           self.trav.template_id)
            if new is None:
                raise Lost()
            api.sync_set_resource(s, self.trav.id, self.sp.node, new.id)
        return new

    def _replace_late(self, row, rdef, props, deps):
        """The plug-in found in update that it must replace after all."""
        with self.engine.db.write() as s:
            api.resource_cas(s, row.id, row.atomic_key, status='COMPLETE')
        row.atomic_key += 1
        new = self._make_replacement(row, rdef)
        plugin = self.engine.plugin(rdef.plugin, new, props, self.stack)
        key = self._claim(new, 'CREATE', plugin)
        new.atomic_key = key
        try:
            plugin.create()
            observed = plugin.observe()
        except Exception as exc:
            return self._failed(new, 'CREATE', _reason(exc), plugin)
        self._record(new, plugin, 'CREATE', observed, deps, rdef)

    def _record(self, row, plugin, action, observed, deps, rdef,
                started=None):
        attrs = plugin.get_attributes(observed) if observed is not None \
            else None
        with self.engine.db.write() as s:
            values = dict(
                physical_id=plugin.physical_id,
                reference_id=plugin.reference_id(),
                properties=plugin.properties, data=plugin.data,
                attributes=_jsonable(attrs), observed=_jsonable(observed),
                template_id=self.trav.template_id, replaced_by=None,
                requires=deps.row_ids(), traversal_id=self.trav.id,
                engine_id=None, type=rdef.type)
            if action:
                values.update(action=action, status='COMPLETE',
                              status_reason='state changed')
            elif row.status == 'IN_PROGRESS':
                # left so by a unit that died; nothing was left to do
                values.update(status='COMPLETE')
            if api.resource_cas(s, row.id, row.atomic_key, **values) is None:
                raise Lost()
            if action and started:
                api.event_add(s, self.stack.id, self.trav.id, self.name,
                              rdef.type, row.physical_id, action,
                              'IN_PROGRESS', 'state changed',
                              timestamp=started)
            if action:
                api.event_add(s, self.stack.id, self.trav.id, self.name,
                              rdef.type, plugin.physical_id, action,
                              'COMPLETE', 'state changed')
            self.ready = walker.finish(s, self.trav, self.stack.id,
                                       self.sp.node, self.sp.dependents,
                                       resource_id=row.id)
            failing = self._failing(s)
        self._tell(self.ready, failing)

    def _failed(self, row, action, reason, plugin=None):
        with self.engine.db.write() as s:
            if api.resource_cas(s, row.id, row.atomic_key, action=action,
                                status='FAILED', status_reason=reason,
                                engine_id=None,
                                traversal_id=self.trav.id,
                                physical_id=(plugin.physical_id if plugin
                                             else row.physical_id),
                                data=(plugin.data if plugin else row.data)
                                ) is None:
                raise Lost()
            api.event_add(s, self.stack.id, self.trav.id, self.name,
                          row.type, row.physical_id, action, 'FAILED', reason)
            if self.trav.action == 'CHECK':
                # a failed check is reported at the end, not fatal
                self.ready = walker.finish(s, self.trav, self.stack.id,
                                           self.sp.node, self.sp.dependents)
            else:
                walker.fail(s, self.trav, 'Resource %s failed: %s' % (
                    action, reason))
        if self.trav.action == 'CHECK':
            return self._tell(self.ready, False)
        self.engine.settle(self.trav, self.stack)

    # -- cleanup nodes ------------------------------------------------------
    def clean_up(self):
        with self.engine.db.read() as s:
            _still_pending(s, self.trav, self.sp.node)
            row = api.resource_get(s, self.sp.resource_id)
            current = api.sync_nodes(s, self.trav.id, ['u:' + self.name])
        if row is None:
            return _finish_only(self.engine, self.trav, self.stack, self.sp)
        is_current = bool(current) and current[0].resource_id == row.id
        if decide_mod.for_cleanup(row, is_current) == decide_mod.NOTHING:
            return _finish_only(self.engine, self.trav, self.stack, self.sp)
        defn = (self.engine.definition(row.template_id, self.stack)
                if row.template_id else None)
        rdef = defn.resources.get(row.name) if defn else None
        policy = rdef.deletion_policy if rdef else 'Delete'
        if rdef is not None and rdef.external_id:
            policy = 'Retain'  # adopted, never ours to delete
        plugin_cls = self.engine.plugin_class(row.type)
        if row.physical_id is None and row.action == 'INIT':
            return self._drop(row, event=False)
        key = self._claim(row, 'DELETE', _Shown(row))
        row.atomic_key = key
        if policy != 'Retain' and plugin_cls is not None:
            plugin = self.engine.plugin(plugin_cls, row,
                                        row.properties or {}, self.stack)
            try:
                plugin.delete()
            except Exception as exc:
                LOG.debug('%s DELETE failed', self.name, exc_info=True)
                return self._failed(row, 'DELETE', _reason(exc), plugin)
        self._drop(row, event=True)

    def _drop(self, row, event):
        with self.engine.db.write() as s:
            if not api.resource_delete_row(s, row.id, row.atomic_key):
                raise Lost()
            if event:
                api.event_add(s, self.stack.id, self.trav.id, row.name,
                              row.type, row.physical_id, 'DELETE',
                              'COMPLETE', 'state changed')
            self.ready = walker.finish(s, self.trav, self.stack.id,
                                       self.sp.node, self.sp.dependents)
            failing = self._failing(s)
        self._tell(self.ready, failing)

    def _failing(self, s):
        """Read in the recording transaction: a failure elsewhere may be
        waiting for this unit to end."""
        if self.ready is None:
            return False
        trav = api.traversal_get(s, self.trav.id)
        return trav is not None and trav.state == 'failing'

    def _tell(self, ready, failing):
        for node in ready or ():
            self.engine.client.check_resource(self.trav.id, node)
        if failing:
            self.engine.settle(self.trav, self.stack)


class _Shown:
    """Enough of a plug-in for an event about a row being deleted."""

    def __init__(self, row):
        self.physical_id = row.physical_id


class DependencyData:
    """What get_resource/get_attr read: the rows this node's inputs chose."""

    def __init__(self, session, traversal_id, names):
        self._rows = {}
        if names:
            self._rows = api.dependency_rows(session, traversal_id, names)

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


def _finish_only(engine, trav, stack, sp):
    with engine.db.write() as s:
        ready = walker.finish(s, trav, stack.id, sp.node, sp.dependents)
    for node in ready or ():
        engine.client.check_resource(trav.id, node)


def _reason(exc):
    text = str(exc) or exc.__class__.__name__
    if not isinstance(exc, exception.ConvergeError):
        text = '%s: %s' % (exc.__class__.__name__, text)
    return text


def _jsonable(value):
    import json
    if value is None:
        return None
    return json.loads(json.dumps(value, default=str))
