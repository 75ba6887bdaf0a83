"""check_resource: one unit of work, read top to bottom.

    lock -> load the node and desired state -> observe -> decide -> act
    -> one Outcome -> handle it (one transaction) -> tell dependents

Every unit ends with one outcome, handled in one place (`Unit.handle`):

    DONE     record the resource; mark the node done and release its
             dependents (one transaction); send the ready ones
    FAILED   record FAILED; the traversal fails (a CHECK reports it at the
             end instead). A retryable failure (the cloud's 5xx or 429) is
             not FAILED: it WAITs with backoff
    REPLACE  make a new row for the resource and converge that one
    WAIT     the step started something that takes time (a server
             building) or needs an event (a signal): record when to come
             back, in the database, and let go of the thread and the lock.
             Any live engine's timer (workers/pool.py) or the event itself
             sends the node again, and the same step runs again from the top
    LOST     another unit wrote the row first: stop without writing
    DROP     nothing to do: the node is done or its traversal is over

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
import dataclasses
import time

from oslo_log import log as logging

from converge import breakpoints
from converge import conf as conf_mod
from converge import exception
from converge.db import api
from converge import listeners
from converge import metrics
from converge import reasons
from converge import template as template_mod
from converge import tracing
from converge.engine import hooks
from converge.engine import rows as rows_mod
from converge.engine import secrecy
from converge.engine import stack_size
from converge.engine import traversal as traversal_mod
from converge.graph import plan
from converge.resources import nested as nested_res
from converge.resources import observe as observe_mod
from converge.resources import base
from converge.workers import decide as decide_mod
from converge.workers import limits
from converge.workers import walker

LOG = logging.getLogger(__name__)

DONE, FAILED, REPLACE, WAIT, LOST, DROP = (
    'done', 'failed', 'replace', 'wait', 'lost', 'drop')

#: seconds after its time a probe (base.Wait.probe) is recorded to come
#: due in the database, for any engine's timer: the engine that recorded
#: it holds it back no longer while its threads are busy
PROBE_BACKSTOP = 5.0


@dataclasses.dataclass
class Outcome:
    kind: str
    #: CREATE, UPDATE, CHECK, DELETE; None when nothing was done
    action: str | None = None
    reason: str = ''
    #: what the plug-in observed after acting (DONE)
    observed: object = None
    #: when and for what to come back (WAIT)
    wait: base.Wait | None = None
    #: write events for it (a row that was never created leaves quietly)
    events: bool = True
    #: FAILED, the resource left as it was (a restricted action: Heat
    #: keeps its state, and only the event and the stack tell)
    keep: bool = False


class Lost(Exception):
    """Another unit of work wrote this resource first; stop quietly."""


@listeners.timed
def check_resource(engine, stack_id, traversal_id, node):
    """Run one unit of work; returns its Outcome."""
    start = time.perf_counter()
    metrics.unit_started()
    ended = 'error'   # unless it ends as below
    try:
        outcome, ended = _check_resource(engine, stack_id, traversal_id,
                                         node)
        return outcome
    finally:
        _counted(ended, start, node)


def _check_resource(engine, stack_id, traversal_id, node):
    """check_resource's unit: its Outcome, and how it ended for the
    metrics (_counted: DROP, LOST, or the Unit that handled it)."""
    name = plan.resource_name(node)
    # lock the resource (by name: all its versions), then load; a node that
    # is done or whose traversal is over is dropped
    with engine.gate.held(), engine.locks.resource(
            stack_id, name, engine.lock_wait, waiting=engine.gate.released):
        unit = Unit.load(engine, traversal_id, node, name)
        if unit is None:
            return Outcome(DROP), DROP
        try:
            outcome = unit.converge() if unit.is_update else unit.clean_up()
            unit.handle(outcome)
        except Lost:
            LOG.debug('%s: another unit of work got there first', name)
            return Outcome(LOST), LOST
    unit.tell()
    return outcome, unit


def check_resources(engine, stack_id, traversal_id, nodes, failed):
    """Several nodes of one traversal (a message of a fan-out, waits that
    came due together), each its own unit of work as above, whose records
    share one transaction: a unit's write transaction (its begin, commit
    and WAL flush) cost about what its statements did, and in a ramp of
    thousands of server creates every unit ends in a wait or done.

    Each unit takes its lock (a node whose lock is held elsewhere is left
    out and returned, to run alone); then all are loaded in one read, and
    each acts as one alone does; those that wait or are done are then
    recorded together, the others (failed, replaced) at once in their
    own transactions. If one of the shared records loses its
    compare-and-swap (or the transaction fails), the whole transaction
    is rolled back and each is recorded alone. `failed(node)` is told of
    a unit that hit an unexpected error (sent again later by the
    caller). Returns the nodes left out."""
    together, left_out, names = [], [], {}
    with contextlib.ExitStack() as held, engine.gate.held():
        start = time.perf_counter()
        metrics.unit_started(len(nodes))
        wanted, seen = {}, set()
        for node in nodes:
            name = plan.resource_name(node)
            if name in seen:   # two nodes of one resource: one alone
                left_out.append(node)
            else:
                wanted[node] = name
                seen.add(name)
        locks = engine.locks.try_resources(stack_id, wanted.values())
        held.callback(engine.locks.release_resources, list(locks.values()))
        for node, name in wanted.items():
            if name in locks:
                names[node] = name
            else:
                left_out.append(node)
        try:
            units = Unit.load_many(engine, traversal_id, names)
        except Exception:
            LOG.exception('check_resources %s failed', traversal_id)
            units = {}
            for node in names:
                _heard(engine, traversal_id, node, start, 'error')
                failed(node)
        for node, unit in units.items():
            if unit is None:   # DROP
                _heard(engine, traversal_id, node, start, DROP)
                continue
            try:
                outcome = unit.converge() if unit.is_update \
                    else unit.clean_up()
                if outcome.kind in (WAIT, DONE):
                    together.append((unit, outcome, start))
                    continue
                unit.handle(outcome)
                together.append((unit, None, start))
            except Lost:
                _heard(engine, traversal_id, node, start, LOST)
            except Exception:
                LOG.exception('check_resource %s %s failed', traversal_id,
                              node)
                _heard(engine, traversal_id, node, start, 'error')
                failed(node)
        _record_together(engine, together, failed)
    for unit, outcome, start in together:
        if outcome is not False:   # False: lost, or failed (told)
            try:
                unit.tell()
            except Exception:
                LOG.exception('check_resource %s %s failed', traversal_id,
                              unit.sp.node)
                unit.ended = 'error'
                failed(unit.sp.node)
        _heard(engine, traversal_id, unit.sp.node, start, unit)
    return left_out


def _record_together(engine, together, failed):
    """Record the outcomes of `together` ((unit, outcome or None, start):
    None is recorded already) in one transaction, or each alone if that
    fails; an entry whose unit lost or failed gets outcome False."""
    shared = []
    pending = 0
    for i, (unit, outcome, start) in enumerate(together):
        if outcome is None:
            continue
        try:
            unit.batch_pending = pending
            unit.prepare(outcome)
            pending += unit.record_size
        except exception.RequestLimitExceeded as exc:
            # its values too large to record: it fails, alone, now
            # (before the shared transaction)
            unit.handle(unit.refused(outcome, exc))
            together[i] = (unit, None, start)
            continue
        except Exception:
            LOG.exception('check_resource %s %s failed', unit.trav.id,
                          unit.sp.node)
            unit.ended = 'error'
            together[i] = (unit, False, start)
            failed(unit.sp.node)
            continue
        shared.append((i, unit, outcome))
    if not shared:
        return
    keys = [(unit, unit.row.atomic_key if unit.row is not None else None)
            for _, unit, _ in shared]
    try:
        with engine.db.begin() as conn:
            batch = _Batch(conn, shared[0][1].trav.id)
            for _, unit, outcome in shared:
                unit.shared = batch
                unit.handle(outcome)
            batch.close()
        return
    except Exception:   # a lost write, a deadlock, a connection gone
        LOG.debug('recording %d units together failed; each alone',
                  len(shared), exc_info=True)
    finally:
        for _, unit, _ in shared:
            unit.shared = None
    for unit, key in keys:   # as before the rolled-back transaction
        if unit.row is not None:
            unit.row.atomic_key = key
        unit.ready, unit.woken, unit.wake, unit.failing = [], [], None, False
    for i, unit, outcome in shared:
        try:
            unit.handle(outcome)
        except Lost:
            unit.ended = LOST
            together[i] = (unit, False, together[i][2])
        except Exception:
            LOG.exception('check_resource %s %s failed', unit.trav.id,
                          unit.sp.node)
            unit.ended = 'error'
            together[i] = (unit, False, together[i][2])
            failed(unit.sp.node)


class _Batch:
    """The transaction the records of a batch share, and what it does
    once at its end: its units' rows written (one statement for the rows
    that set the same columns: those that wait, those that end; one that
    finds its row written since fails the batch, as each alone would
    lose), the waits of its units that wait recorded (one
    statement; one that finds its node gone or done fails the batch, as
    a lost write does), the nodes of its ended units marked done (one
    statement), the events (one statement), the traversal's state for
    the units that ended or were in flight (read after their writes, as
    each alone reads it after its own), and, last, the counts its ended
    units release: the rows many units count down (a wide stack's count
    shards) are locked only from there to the commit, and in one order by
    every batch, which cannot deadlock (walker.release_together). Counted
    before the events and the state's read, a batch held its shards for
    those statements too, and at the end of a ramp of 2,000 builds the
    batches queued on them (40 ms a count, 23 s in all)."""

    def __init__(self, conn, traversal_id):
        self.conn = conn
        self.traversal_id = traversal_id
        self.events = []
        self.ending = []   # (unit, its row's id) whose node is done
        self.waits = []    # (node, wake_at, event) of the units that wait
        self.writes = []   # (unit, values) of their rows' writes
        self.ask_failing = []

    def close(self):
        # the rows first, as each unit alone writes its row first; those
        # setting the same columns (the waits, the ends) in one statement
        by_columns = {}
        for unit, values in self.writes:
            by_columns.setdefault(tuple(sorted(values)), []).append(
                (unit, values))
        for group in by_columns.values():
            written = api.resource_cas_many(self.conn, [
                (unit.row.id, unit.row.atomic_key, values)
                for unit, values in group])
            if len(written) < len(group):   # another wrote one first
                raise Lost()
            for unit, _ in group:
                unit.row.atomic_key += 1
        if self.waits:
            waits = api.sync_wait_many(self.conn, self.traversal_id,
                                       self.waits)
            if len(waits) < len(self.waits):   # one gone or done meanwhile
                raise Lost()
        ended = []
        if self.ending:
            marked = api.sync_mark_done_many(
                self.conn, self.traversal_id,
                [(u.sp.node, rid) for u, rid in self.ending])
            for unit, _ in self.ending:
                if unit.sp.node in marked:
                    ended.append(unit)
                else:   # done already: nothing propagates
                    unit.ready = None
        if self.events:
            api.events_add(self.conn, *self.events)
        asking = ended + self.ask_failing
        if asking:
            failing = api.traversal_state(self.conn,
                                          self.traversal_id) == 'failing'
            for unit in asking:
                unit.failing = failing
        if ended:
            unit = ended[0]
            ready = walker.release_together(
                self.conn, unit.trav, unit.stack.id,
                {i: marked[u.sp.node] for i, u in enumerate(ended)})
            for i, unit in enumerate(ended):
                unit.ready = ready[i]


def _heard(engine, traversal_id, node, start, ended):
    """What check_resource's `listeners.timed` tells of each unit, and
    its count in the metrics (_counted)."""
    seconds = _counted(ended, start, node, alone=False)
    if engine.listeners:
        engine.listeners.on_unit(traversal_id, node, seconds)


def _counted(ended, start, node, alone=True):
    """Count a unit of work that ended in the metrics: `ended` is how
    (DROP, LOST, 'error'), or the Unit that handled its outcome (its
    `ended`, set where the outcome is handled); and describe it in its
    span (tracing.unit_ended: `alone`, the unit of its message). Returns
    its seconds."""
    seconds = time.perf_counter() - start
    unit = None
    if isinstance(ended, Unit):
        unit, ended = ended, ended.ended
        if unit.drift:
            metrics.DRIFT_FOUND.inc()
        if unit.repaired:
            metrics.DRIFT_REPAIRED.inc()
    metrics.unit_ended(ended, seconds)
    if tracing.enabled:
        tracing.unit_ended(node, plan.resource_name(node), ended, seconds,
                           unit, alone)
    return seconds


class Unit:
    def __init__(self, engine, trav, stack, sp, name):
        self.engine, self.trav, self.stack = engine, trav, stack
        self.sp, self.name = sp, name
        self.is_update = plan.is_update(sp.node)
        self.row = self.current_id = None
        self.defn = self.rdef = self.deps = self.props = None
        self._props_size = 0  # bytes of self.props as JSON
        # bytes of this unit's record; and of the records prepared before
        # it in its batch, not yet committed (so not summed by the size
        # check), which it counts as the stack's
        self.record_size = self.batch_pending = 0
        self.plugin = None
        self.started = None   # stamp of an unclaimed action's start
        self.ready = []       # dependents to send after commit
        self.woken = []       # (traversal, node) woken by a freed slot
        self.wake = None      # when this unit's wait ends (WAIT)
        self.probe = False    # and whether it only looks (Wait.probe)
        self.recorded = None  # and its time in the database
        self.failing = False  # the traversal is failing: settle it
        self.resuming = False  # back from this traversal's own wait
        self.drift = None     # what a CHECK found drifted
        self.before = None    # the row as loaded (Outcome.keep)
        self.shared = None    # the batch whose transaction this shares
        self._prepared = None  # its DONE record, made before (prepare)
        self.ended = 'error'   # how it ended, once handled (metrics)
        self.outcome = None    # and the Outcome it handled (tracing)
        self.repaired = False  # it was drifted, and is converged again

    @classmethod
    def load(cls, engine, traversal_id, node, name):
        """Everything the unit needs, read in one go under the lock; None
        when there is nothing to do."""
        with engine.db.connect() as conn:
            return cls._loaded(engine, conn, name,
                               api.unit_load(conn, traversal_id, node))

    @classmethod
    def load_many(cls, engine, traversal_id, names):
        """Unit.load of several nodes ({node: resource name}) of one
        traversal, each locked: their rows in one read. {node: Unit or
        None}."""
        with engine.db.connect() as conn:
            found = api.unit_load_many(conn, traversal_id, list(names))
            return {node: cls._loaded(engine, conn, name, found.get(node))
                    for node, name in names.items()}

    @classmethod
    def _loaded(cls, engine, conn, name, found):
        if found is None:
            return None
        sp, trav, stack, row, current_id = found
        if (trav.state != 'running' or stack.current_traversal != trav.id
                or sp.done):
            return None
        unit = cls(engine, trav, stack, sp, name)
        unit.row, unit.current_id = row, current_id
        # sent again by the timer (or its event) after this traversal's
        # own wait: go straight back to the step that waited
        unit.resuming = (sp.wake_at is not None and row is not None
                         and row.status == 'IN_PROGRESS'
                         and row.engine_id is None
                         and row.traversal_id == trav.id
                         and row.action in _RESUMABLE)
        if unit.is_update:
            if row is None:  # its row vanished (a concurrent cleanup)
                return None
            unit.row = rows_mod.settle(
                row, trav.template_id,
                lambda row_id: api.resource_get(conn, row_id))
            unit.defn = engine.definition(trav.template_id, stack)
            unit.rdef = unit.defn.resources[name]
            unit.deps = DependencyData(conn, trav.id, unit.rdef.requires)
        return unit

    # -- update nodes: observe, decide, act ---------------------------------
    def converge(self):
        row, rdef = self.row, self.rdef
        # what a refused action leaves it as (Outcome.keep)
        self.before = dict(action=row.action, status=row.status,
                           status_reason=row.status_reason,
                           traversal_id=row.traversal_id)
        if rdef.external_id:
            return self._adopt_external()
        if self.trav.action == 'CHECK' and rdef.requires and \
                self._input_failed():
            return self._skip()
        try:
            self.props = self.defn.resolve_properties(self.name, self.deps)
            # measured before the cloud is touched: a resource whose
            # resolved values would take the stack beyond its size is
            # made nowhere
            self._props_size = stack_size.json_size(self.props)
            self._bounded(self._props_size, 'resolved properties')
        except exception.ConvergeError as exc:
            return Outcome(FAILED, _first_action(row), str(exc))
        self.plugin = self._plugin(row)
        if self.resuming:  # the step looks at the world itself
            return self._act(_RESUMABLE[row.action], None)
        if _adopting(row, self.trav.action):
            return self._adopt()
        if row.action == 'INIT' and self.trav.action not in \
                traversal_mod.IN_PLACE:
            # never claimed, so never acted on: nothing of it can exist
            # yet (a create is claimed before it reaches the cloud)
            return self._paused(decide_mod.CREATE) or \
                self._act(decide_mod.CREATE, None)
        if row.type != self.rdef.type and self.trav.action not in \
                traversal_mod.IN_PLACE and not self._alias(row.type):
            # another type is another resource (Heat): the new one is
            # made, the old one cleaned up by its own type; the old one is
            # not updated, so no events say it "requires replacement"
            return self._restricted(decide_mod.REPLACE) or \
                self._paused(decide_mod.REPLACE) or \
                Outcome(REPLACE, events=False)
        seen = observe_mod.observe(self.plugin, self._waiting)
        decision = decide_mod.for_update(self.trav.action, row, self.plugin,
                                         seen.state)
        if decision == decide_mod.NOTHING:
            # Heat stops at a pre-update hook though nothing changes
            paused = self._paused(decide_mod.UPDATE) \
                if self.trav.action == 'UPDATE' else None
            return paused or Outcome(DONE, observed=seen.state)
        paused = self._restricted(decision) or self._paused(decision)
        if paused is not None:
            return paused
        if decision == decide_mod.REPLACE:
            return Outcome(REPLACE)
        return self._act(decision, seen.state)

    def _alias(self, old_type):
        """Whether `old_type` is another name of this resource's plug-in
        (a deprecated type, OS::Heat::SoftwareDeployments, and what
        replaced it, OS::Heat::SoftwareDeploymentGroup): Heat updates a
        resource whose type changes so (its substitute_class) in place,
        and so does this. A provider template's type is never one."""
        return not template_mod.is_provider(old_type) and \
            self.engine.plugin_class(old_type) is self.rdef.plugin

    def _input_failed(self):
        """In a check: whether a resource this one requires failed its
        check, or was skipped for one (its node ended with no row)."""
        with self.engine.db.connect() as conn:
            return api.sync_check_failed(
                conn, self.trav.id,
                [plan.update_key(n) for n in self.rdef.requires])

    def _skip(self):
        """Heat's check stops at a failed check: what depends on it is
        not checked and keeps its state. The node ends with no row (so
        its own dependents are skipped in turn); the row is not
        written."""
        with self.engine.db.begin() as conn:
            api.sync_set_resource(conn, self.trav.id, self.sp.node, None)
            self._finish(conn)
        return Outcome(DROP)

    def _restricted(self, decision):
        """The environment's ``restricted_actions`` forbid this update or
        replacement of the resource: a FAILED outcome that leaves it as it
        was (Heat's: its state kept, an UPDATE FAILED event saying why,
        the stack UPDATE_FAILED). None when allowed."""
        if self.trav.action != 'UPDATE' or decision not in (
                decide_mod.UPDATE, decide_mod.REPLACE):
            return None
        action = 'replace' if decision == decide_mod.REPLACE else 'update'
        if action not in breakpoints.restricted(
                self.defn.bundle.environment, self.name):
            return None
        return Outcome(FAILED, 'UPDATE', breakpoints.restricted_reason(action),
                       keep=True)

    def _paused(self, decision):
        """A hook the environment sets on this resource for what it is
        about to do (engine/hooks.py): reached now, its event written and
        the row's data marked, or still pending; then a WAIT for its
        clearing (no action: the row's state stays as it is). None when
        there is no hook, or it was cleared in this traversal."""
        hook = breakpoints.HOOK_OF_ACTION.get(self.trav.action)
        if decision not in _HOOKED.get(hook, ()):
            # as Heat's: a resource an update adds or removes is not
            # paused (pre-create and pre-delete are a create's, a delete's)
            return None
        row = self.row
        defn = self.defn
        if defn is None:   # a cleanup node: the stack's environment
            if self.stack.template_id is None:
                return None
            defn = self.engine.definition(self.stack.template_id, self.stack)
        if not breakpoints.matches(defn.bundle.environment, self.name, hook):
            return None
        if hooks.cleared_in(row.data, hook, self.trav.id):
            return None
        action = hook.split('-', 1)[1].upper()
        if self._timed_out():
            return Outcome(FAILED, action, 'Timed out')
        if not hooks.reached_in(row.data, hook, self.trav.id):
            data = hooks.reached(row.data, hook, self.trav.id)
            with self.engine.db.begin() as conn:
                self._cas(conn, data=data)
                api.events_add(conn, self._event(
                    row.physical_id, row.action, row.status,
                    breakpoints.paused_reason(hook)))
            row.data = data
        row_id = row.id
        reason = breakpoints.paused_reason(hook)
        return Outcome(WAIT, None, reason, wait=base.Wait(
            event=hooks.event_for(self.name, hook), after=hooks.RECHECK,
            reason=reason,
            still=lambda conn: hooks.still_pending(conn, row_id, hook)))

    def _act(self, decision, observed):
        action = decision  # CREATE, UPDATE, CHECK, SUSPEND, RESUME, SNAPSHOT
        plugin = self.plugin
        if self._timed_out():
            return Outcome(FAILED, action, 'Timed out')
        blocked = self._claim(action)
        if blocked is not None:
            return blocked
        try:
            with self._waiting():
                if decision == decide_mod.CREATE:
                    result = plugin.create()
                elif decision == decide_mod.UPDATE:
                    result = plugin.update(self.row.properties or {},
                                           observed)
                elif decision == decide_mod.SUSPEND:
                    result = plugin.suspend(observed)
                elif decision == decide_mod.RESUME:
                    result = plugin.resume(observed)
                elif decision == decide_mod.SNAPSHOT:
                    result = plugin.snapshot(
                        observed, (self.trav.options or {}).get('snapshot')
                        or self.trav.id)
                else:
                    result = self._check(observed)
                if isinstance(result, base.Wait):
                    return Outcome(WAIT, action, result.reason, wait=result)
                # a step that has just looked leaves what it saw
                observed = plugin.seen if plugin.seen is not None \
                    else plugin.observe()
        except exception.UpdateReplace:
            return Outcome(REPLACE, action)
        except exception.CloudTransient as exc:
            return self._retry(action, exc)
        except Exception as exc:  # the plug-in's failure is the resource's
            LOG.debug('%s %s failed', self.name, action, exc_info=True)
            return self._failure(action, exc)
        return Outcome(DONE, action, observed=observed)

    def _check(self, observed):
        """CHECK: first whether the real thing still matches what was
        applied (the drift is recorded with the outcome), then the
        plug-in's own check."""
        # {}: exists (logical) or could not be seen. A type that runs
        # something on its target (a deployment) is checked by running
        # its check again, not by what the last one found
        if observed != {} and self.plugin.observed_drift and \
                not self.plugin.reruns:
            self.drift = observe_mod.drift(
                self.plugin, observe_mod.Observation(observed))
            if self.drift:
                raise exception.ResourceFailure('drifted: %s' % self.drift)
        return self.plugin.check(observed)

    def _adopt_external(self):
        """external_id: the resource exists already and is not ours to
        create, change or delete; observe it and record what is there.
        A resource made (or taken over) as another is not turned into
        this one (Heat refuses a changed external_id, and so the update)."""
        row = self.row
        if row.action != 'INIT' and row.physical_id not in (
                None, self.rdef.external_id):
            return Outcome(
                FAILED, 'UPDATE', 'Update to property external_id of %s '
                '(%s) is not supported.' % (self.name,
                                            self.rdef.template_type),
                keep=True)
        self.plugin = self._plugin(self.row, props={})
        self.plugin.physical_id = self.rdef.external_id
        seen = observe_mod.observe(self.plugin, self._waiting)
        if seen.gone:
            return Outcome(FAILED, 'CREATE', 'external resource %s not '
                           'found' % self.rdef.external_id)
        if self.row.action == 'INIT':
            # first taken over (an id known only now, from a resource made
            # in this walk, was not checked at the request): the project's
            # own only, not another's it merely sees (engine/ownership.py)
            try:
                with self._waiting():
                    owned = self.plugin.owned(shared=True)
            except exception.CloudTransient as exc:
                return self._retry('CREATE', exc)
            except exception.CloudError:
                owned = False
            if not owned:
                return Outcome(FAILED, 'CREATE', 'external resource %s is '
                               'not this project\'s' %
                               self.rdef.external_id)
        action = 'CREATE' if self.row.action == 'INIT' else None
        return Outcome(DONE, action, observed=seen.state)

    def _adopt(self):
        """A row `stack adopt` laid out (engine/abandon.py) holds what the
        abandoned stack recorded: its physical id and data. Take the real
        thing over without creating it: it must exist; the plug-in then
        re-attaches what it needs (a server's agent credential)."""
        action = 'ADOPT'
        if self._timed_out():
            return Outcome(FAILED, action, 'Timed out')
        if self.row.action != action:  # not back from a wait of its own
            self.started = time.time()
        seen = observe_mod.observe(self.plugin, self._waiting)
        if isinstance(seen.error, exception.CloudTransient):
            return self._retry(action, seen.error)
        if seen.error is not None:
            return Outcome(FAILED, action, 'cannot observe %s %s: %s' % (
                self.rdef.type, self.row.physical_id, _reason(seen.error)))
        if seen.gone:
            if self.trav.action != action:
                # an update after a failed adopt: converge to the template
                self.started = None
                return self._act(decide_mod.CREATE, None)
            return Outcome(FAILED, action, '%s %s not found: there is '
                           'nothing to adopt' % (self.rdef.type,
                                                 self.row.physical_id))
        try:
            with self._waiting():
                self.plugin.adopt(seen.state)
        except exception.CloudTransient as exc:
            return self._retry(action, exc)
        except Exception as exc:
            LOG.debug('%s ADOPT failed', self.name, exc_info=True)
            return self._failure(action, exc)
        applied = self.row.properties
        if applied is not None and applied != self.plugin.properties:
            # the template asks for other properties than those the
            # abandoned stack applied (an edited file, a later update):
            # what was adopted is changed in place, or replaced
            self.started = None
            if self.plugin.needs_replace(applied):
                return Outcome(REPLACE)
            return self._act(decide_mod.UPDATE, seen.state)
        return Outcome(DONE, action, observed=seen.state)

    def _replace(self, outcome):
        """A new row for the new resource (the old one is cleaned up
        later), created now."""
        if outcome.action is not None:
            # found in update after all: the old row is no longer acted on
            self._write(status='COMPLETE', engine_id=None)
        refused = self._make_room()
        if refused is not None:
            return refused
        with self.engine.db.begin() as conn:
            new = api.resource_replacement(conn, self.row, self.rdef.type,
                                           self.trav.template_id,
                                           self.rdef.template_type)
            if new is None:
                raise Lost()
            api.sync_set_resource(conn, self.trav.id, self.sp.node, new.id)
            if outcome.events:
                api.events_add(conn, *self._replacement_events(outcome))
        self.row = new
        self.started = None
        self.plugin = self._plugin(new)
        return self._act(decide_mod.CREATE, None)

    def _make_room(self):
        """The old resource's prepare_for_replace, before its replacement
        is made; what it changed of its data is written with its row."""
        if self.plugin is None or self.row.physical_id is None:
            return None
        return self._row_step(self.plugin, self.row, 'prepare_for_replace',
                              'UPDATE')

    def _row_step(self, plugin, row, step, action):
        """Run a plug-in's `step` for `row` (not necessarily this unit's
        own: the name's lock covers every row of the name) and write the
        data it changed with that row; an Outcome when it failed, or when
        the step waits (base.Wait: a server's ports detaching): the unit
        then waits as any step does, and comes back to it."""
        try:
            with self._waiting():
                changed = getattr(plugin, step)()
        except exception.CloudTransient as exc:
            return self._retry(action, exc)
        except Exception as exc:
            LOG.debug('%s %s failed', self.name, step, exc_info=True)
            return self._failure(action, exc)
        wait = changed if isinstance(changed, base.Wait) else None
        if wait is not None and self._timed_out():
            return Outcome(FAILED, action, 'Timed out')
        if changed:
            with self.engine.db.begin() as conn:
                key = api.resource_cas(conn, row.id, row.atomic_key,
                                       data=plugin.data)
                if key is None:
                    raise Lost()
                row.atomic_key = key
        if wait is not None:
            return Outcome(WAIT, action, wait.reason, wait=wait)
        return None

    def _replacement_events(self, outcome):
        """As Heat tells a replacement: the old resource's update began
        and ended in it ("The Resource NAME requires replacement."),
        before the new one's create. An update that found it had claimed
        the resource, and a claim in its own transaction has written the
        start already."""
        old = self.row.physical_id
        events = [self._event(old, 'UPDATE', 'COMPLETE',
                              'The Resource %s requires replacement.'
                              % self.name)]
        if outcome.action is None or self.started is not None:
            events.insert(0, self._event(old, 'UPDATE', 'IN_PROGRESS',
                                         timestamp=self.started))
        return events

    # -- cleanup nodes ------------------------------------------------------
    def clean_up(self):
        row = self.row
        if row is None:  # already gone
            return Outcome(DONE)
        is_current = row.id == self.current_id
        if decide_mod.for_cleanup(row, is_current) == decide_mod.NOTHING:
            return Outcome(DONE)
        plugin_cls = self.engine.plugin_class(row.type)
        # never recorded as created; one whose create comes before its
        # claim may exist all the same (a unit died after the cloud call)
        unrecorded = row.physical_id is None and row.action == 'INIT'
        if unrecorded and (plugin_cls is None
                           or not plugin_cls.adopts_by_key):
            return self._give_back(row) or \
                Outcome(DONE, 'DELETE', events=False)
        policy, plugin_cls = self._cleanup_policy(row, plugin_cls)
        if plugin_cls is not None:
            self.plugin = self.engine.plugin(
                plugin_cls, row, row.properties or {}, self.stack)
        if unrecorded:  # find it by its key
            seen = observe_mod.observe(self.plugin, self._waiting)
            if seen.error is not None or seen.gone:
                if isinstance(seen.error, exception.CloudTransient):
                    return self._retry('DELETE', seen.error)
                if seen.error is not None:
                    return self._failure('DELETE', seen.error)
                return self._give_back(row) or \
                    Outcome(DONE, 'DELETE', events=False)
        if not (row.action == 'DELETE' and row.status == 'IN_PROGRESS'):
            paused = self._paused(decide_mod.DELETE)   # not back from a wait
            if paused is not None:
                return paused
        blocked = self._claim('DELETE')
        if blocked is not None:
            return blocked
        if policy != 'Retain' and self.plugin is not None:
            try:
                with self._waiting():
                    result = self.plugin.delete()
                if isinstance(result, base.Wait):
                    return Outcome(WAIT, 'DELETE', result.reason,
                                   wait=result)
            except exception.CloudTransient as exc:
                return self._retry('DELETE', exc)
            except Exception as exc:
                LOG.debug('%s DELETE failed', self.name, exc_info=True)
                return self._failure('DELETE', exc)
        return self._give_back(row) or Outcome(DONE, 'DELETE')

    def _give_back(self, row):
        """A replacement deleted while the row it replaced stands (a
        rollback kept it): that one takes back what it gave up for the
        replacement (restore_after_replace; this unit holds the name's
        lock, which both rows share)."""
        if row.replaces is None or row.replaces != self.current_id:
            return None
        with self.engine.db.connect() as conn:
            old = api.resource_get(conn, row.replaces)
        cls = self.engine.plugin_class(old.type) if old else None
        if cls is None or cls.restore_after_replace is \
                base.Resource.restore_after_replace:
            return None
        plugin = self.engine.plugin(cls, old, old.properties or {},
                                    self.stack)
        return self._row_step(plugin, old, 'restore_after_replace', 'DELETE')

    def _cleanup_policy(self, row, plugin_cls):
        """(deletion policy, plug-in class) of a row being cleaned up. The
        row records the policy it was converged with; only a row without
        one (never converged, or older than the column) needs the template
        version it came from, which may be long out of the definition
        cache: an update visits only what changed, so the rows of a
        22,000-resource stack keep many versions' ids, and parsing one
        for a single cleanup cost 1.5 s."""
        if row.deletion_policy is not None and plugin_cls is not None:
            return row.deletion_policy, plugin_cls
        defn = (self.engine.definition(row.template_id, self.stack)
                if row.template_id else None)
        rdef = defn.resources.get(row.name) if defn else None
        if rdef is None:
            return 'Delete', plugin_cls
        if rdef.type == row.type:
            plugin_cls = rdef.plugin   # a provider file's own class
        return _deletion_policy(rdef), plugin_cls

    # -- the one place outcomes are handled ---------------------------------
    def _bounded(self, size, what):
        """Refuse `size` bytes more of this resource's values beyond the
        stack's max_stack_size (stack_size.py)."""
        stack_size.check_resource(
            self.engine, self.defn, self.stack.id,
            self.row.id if self.row is not None else None, self.name, size,
            what, pending=self.batch_pending)

    def _failure(self, action, exc):
        """FAILED for the exception `action`'s step raised: the reason
        as Heat words it, `ValueError: resources.NAME: message`
        (reasons.py); a reason made of literal text (a timeout, a
        restricted action) is Heat's text as it is."""
        return Outcome(FAILED, action, reasons.failure(self.name, exc))

    def refused(self, outcome, exc):
        """A DONE outcome whose values were too large to record."""
        return Outcome(FAILED, outcome.action or self.row.action, str(exc))

    def handle(self, outcome):
        while outcome.kind == REPLACE:
            # found while updating (the plug-in raised UpdateReplace)
            outcome = self._restricted(decide_mod.REPLACE) or \
                self._replace(outcome)
        if outcome.kind == DONE:
            if self.is_update:
                try:
                    self._record(outcome)
                except exception.RequestLimitExceeded as exc:
                    # raised before the record's transaction began
                    self._failed(self.refused(outcome, exc))
                    self.ended = FAILED
                    return
            else:
                self._drop(outcome)
        elif outcome.kind == FAILED:
            self._failed(outcome)
        elif outcome.kind == WAIT:
            self._wait(outcome)
        # handled (a batch that fails handles its units again, each
        # alone: counted once, where the unit ends)
        self.ended, self.outcome = outcome.kind, outcome

    def prepare(self, outcome):
        """What a DONE update unit records, made before its transaction:
        the plug-in's part of it (its attributes) may read or write the
        database itself, which inside a batch's shared transaction would
        wait for that transaction (SQLite has one writer), and it need
        not lengthen the transaction anywhere."""
        if outcome.kind == DONE and self.is_update:
            self._prepared = self._done_record(outcome)

    def _record(self, outcome):
        values, events = self._prepared or self._done_record(outcome)
        self._prepared = None
        held = self._held(outcome)
        if held is not None:   # done, and paused at a post-* hook
            hook, reached = held
            values = dict(values, data=hooks.reached(
                values.get('data'), hook, self.trav.id))
            if reached:
                events = list(events) + [self._event(
                    values.get('physical_id'), outcome.action, 'COMPLETE',
                    breakpoints.paused_reason(hook))]
        with self._transaction() as conn:
            self._cas(conn, **values)
            if events:
                self._add_events(conn, *events)
            self._release_slot(conn)
            if held is not None:
                self._hold(conn, held[0])
            else:
                self._finish(conn, resource_id=self.row.id)

    def _held(self, outcome):
        """(hook, reached now) when the resource, done, pauses at the
        post-create or post-update hook its environment sets (Heat's: its
        action is recorded COMPLETE; what depends on it waits until the
        hook is cleared), or stays paused there; None otherwise."""
        hook = breakpoints.POST_HOOK_OF_ACTION.get(self.trav.action)
        if hook is None:
            return None
        data = self.row.data
        before = hooks.reached_in(data, hook, self.trav.id)
        if not before and outcome.action != self.trav.action:
            return None
        if hooks.cleared_in(data, hook, self.trav.id) or \
                not breakpoints.matches(self.defn.bundle.environment,
                                        self.name, hook):
            return None
        return hook, not before

    def _hold(self, conn, hook):
        """The node, done acting, waits for the hook's clearing (in the
        transaction recording it) instead of being marked done."""
        wake_at = time.time() + hooks.RECHECK
        event = hooks.event_for(self.name, hook)
        if self.shared is not None:   # with the batch's at its end
            self.shared.waits.append((self.sp.node, wake_at, event))
        elif not api.sync_wait(conn, self.trav.id, self.sp.node, wake_at,
                               event):
            raise Lost()
        self.wake = self.recorded = wake_at

    def _done_record(self, outcome):
        """(the row's values, the events) of a DONE update unit."""
        row, plugin, action = self.row, self.plugin, outcome.action
        observed = outcome.observed
        attrs = plugin.get_attributes(observed) if observed is not None \
            else None
        attrs = observe_mod.jsonable(attrs)
        observed = observe_mod.jsonable(observed)
        self.record_size = self._props_size + stack_size.json_size(attrs)
        self._bounded(self.record_size, 'properties and attributes')
        values = dict(
            physical_id=plugin.physical_id,
            reference_id=plugin.reference_id(),
            properties=plugin.properties, data=_done_data(plugin.data),
            attributes=attrs, observed=observed,
            template_id=self.trav.template_id, replaced_by=None,
            requires=self.deps.row_ids(), traversal_id=self.trav.id,
            engine_id=None, type=self.rdef.type,
            template_type=self.rdef.template_type,
            # what it now matches: an update to the same need not visit it
            applied_digest=self.defn.digest(self.name),
            deletion_policy=_deletion_policy(self.rdef))
        if action == 'CHECK' or (action and observed is not None):
            # checked, or just acted on and seen: as applied
            values.update(drift=None, observed_at=time.time())
            # drifted, and acted on (not only looked at): repaired
            self.repaired = bool(row.drift) and action != 'CHECK'
        events = []
        if action:
            reason = plugin.status_note or 'state changed'
            values.update(action=action, status='COMPLETE',
                          status_reason=reason)
            if self.started:
                events.append(self._event(row.physical_id, action,
                                          'IN_PROGRESS',
                                          timestamp=self.started))
            events += self._member_events()
            events.append(self._event(plugin.physical_id, action,
                                      'COMPLETE', reason))
        else:
            if row.status == 'IN_PROGRESS':
                # left so by a unit that died; nothing was left to do
                values.update(status='COMPLETE')
            events += self._member_events()
        return values, events

    def _drop(self, outcome):
        """A cleanup node's end: the row deleted (or kept, if current)."""
        row = self.row
        with self._transaction() as conn:
            if outcome.action == 'DELETE':
                if not api.resource_delete_row(conn, row.id, row.atomic_key):
                    raise Lost()
                if outcome.events:
                    events = [self._event(row.physical_id, 'DELETE',
                                          'COMPLETE')]
                    if self.started:
                        events.insert(0, self._event(
                            row.physical_id, 'DELETE', 'IN_PROGRESS',
                            timestamp=self.started))
                    self._add_events(conn, *self._member_events(), *events)
                self._release_slot(conn)
            self._finish(conn)

    def _failed(self, outcome):
        # the reason is kept (the row's, an event's, the traversal's) and
        # shown: a plug-in's error may quote a hidden value it was given
        outcome.reason = secrecy.stack_mask(
            self.engine, self.stack.id).text(outcome.reason)
        row, plugin, action = self.row, self.plugin, outcome.action
        with self.engine.db.begin() as conn:
            drift = {} if self.drift is None else dict(
                drift=self.drift, observed_at=time.time())
            if outcome.keep:
                # as it was before this unit (an update that found it must
                # replace had claimed it)
                self._cas(conn, engine_id=None, **self.before)
            else:
                self._cas(conn, action=action, status='FAILED',
                          status_reason=outcome.reason, engine_id=None,
                          **drift, traversal_id=self.trav.id,
                          physical_id=(plugin.physical_id if plugin
                                       else row.physical_id),
                          data=(plugin.data if plugin else row.data))
            started = [self._event(row.physical_id, action, 'IN_PROGRESS',
                                   timestamp=self.started)] \
                if self.started else []
            api.events_add(conn, *self._member_events(), *started,
                           self._event(row.physical_id, action, 'FAILED',
                                       outcome.reason))
            self._release_slot(conn)
            if self.trav.action == 'CHECK' or \
                    traversal_mod.cancelled(self.trav):
                # a failed check is reported at the end, not fatal; a
                # traversal draining its waits (cancelled, or failed
                # while nested stacks were in flight) failed already
                self._finish(conn)
            else:
                traversal_mod.fail(conn, self.trav, 'Resource %s failed: %s'
                                   % (action, outcome.reason))
                self.failing = True

    def _wait(self, outcome):
        """Record the wait and let go: no thread, lock or transaction is
        held while waiting. The stack's deadline bounds it: the unit comes
        back then at the latest, and fails as timed out."""
        wait, plugin = outcome.wait, self.plugin
        now = time.time()
        after = wait.after
        if wait.sooner is not None and after is not None and (
                self.engine.workers is None
                or not self.engine.workers.crowded(now + wait.sooner)):
            after = wait.sooner   # an earlier look offered, and affordable
        wake_at = now + after if after is not None else None
        deadline = self._deadline()
        if deadline and (wake_at is None or wake_at > deadline):
            wake_at = deadline
        # the row is written when this unit acted on it (claimed, or an
        # unclaimed logical step); one that waits for a slot before acting
        # is left as it is
        row = self.row
        acted = self.started or (
            row.status == 'IN_PROGRESS' and row.action == outcome.action
            and row.engine_id in (None, self.engine.engine_id))
        event = wait.event
        probe = wait.probe and wake_at is not None and event is None
        # a probe's time in the database is its backstop's: this engine
        # sends it (when its threads are free), any engine's timer only
        # PROBE_BACKSTOP later, should this one die; taken at its time,
        # the timer of an engine as busy as this one sent the first looks
        # of a ramp of creates into it
        recorded = wake_at
        if probe:
            recorded = wake_at + PROBE_BACKSTOP
            if deadline:
                recorded = min(recorded, deadline)
        with self._transaction() as conn:
            if event is not None and wait.still is not None and \
                    not wait.still(conn):
                # it happened while the step looked: again, at once
                event, wake_at = None, time.time()
            if acted:
                self._cas(conn, action=outcome.action, status='IN_PROGRESS',
                          status_reason=outcome.reason or 'waiting',
                          physical_id=plugin.physical_id if plugin
                          else self.row.physical_id,
                          data=plugin.data if plugin else self.row.data,
                          engine_id=None, traversal_id=self.trav.id)
                # with the plug-in's data that notes them: exactly once
                events = self._member_events()
                if events:
                    self._add_events(conn, *events)
            if self.started:  # an unclaimed step's first wait
                self._add_events(conn, self._event(
                    self.row.physical_id, outcome.action, 'IN_PROGRESS',
                    timestamp=self.started))
            if self.shared is not None:   # with the batch's at its end
                self.shared.waits.append((self.sp.node, recorded, event))
            elif not api.sync_wait(conn, self.trav.id, self.sp.node,
                                   recorded, event):
                raise Lost()
            if row.engine_id is not None:
                # it was in flight, and a failure elsewhere may have been
                # waiting for it to end: waiting, it no longer counts, so
                # it settles a failing traversal as an end would (else the
                # sweeper's stall timeout did, a minute later)
                self._ask_failing(conn)
        self.wake, self.recorded, self.probe = wake_at, recorded, probe

    # -- writing --------------------------------------------------------------
    def _transaction(self):
        """The transaction an outcome is recorded in: the unit's own, or
        the one the units of a batch share (check_resources)."""
        if self.shared is not None:
            return contextlib.nullcontext(self.shared.conn)
        return self.engine.db.begin()

    def _add_events(self, conn, *events):
        """Write events in the unit's transaction; a batch's are written
        together before it commits (one statement)."""
        if self.shared is not None:
            self.shared.events.extend(events)
        else:
            api.events_add(conn, *events)

    def _claim(self, action):
        """Before acting: claim the row (IN_PROGRESS under this engine, one
        transaction) so a crash mid-action is visible and resumable. A
        resumed wait is claimed already (no second IN_PROGRESS event). An
        instant, local (logical) action needs no claim, nor a create that
        adopts by key (with no cap on the stack's resources in progress):
        its IN_PROGRESS event is written with its outcome, stamped with its
        start. Returns None, or a
        WAIT outcome when a limit leaves no room now."""
        row = self.row
        resumed = (row.status == 'IN_PROGRESS' and row.action == action
                   and row.engine_id is None)
        if resumed:
            # claimed when it started (its IN_PROGRESS event written, its
            # slot taken). Not claimed again: a unit that dies now is sent
            # again by the timer (its wait's lease) or the sweeper
            return None
        if self.plugin is not None and (self.plugin.logical or (
                action == 'CREATE' and self.plugin.adopts_by_key
                and not self.plugin.looks_up_remotely
                and not limits.stack_cap())):
            # written with its outcome (one transaction fewer): a create
            # that finds what an earlier try made cannot make it twice
            self.started = time.time()
            return None
        with self.engine.db.begin() as conn:
            if not limits.take_stack_slot(conn, self.stack.id, row.id):
                wait = limits.stack_slot_wait(self.stack.id)
                return Outcome(WAIT, action, wait.reason, wait=wait)
            key = api.resource_cas(
                conn, row.id, row.atomic_key, traversal_running=self.trav.id,
                engine_id=self.engine.engine_id, traversal_id=self.trav.id,
                action=action, status='IN_PROGRESS', status_reason='')
            if key is None:
                raise Lost()
            api.events_add(conn, self._event(row.physical_id, action,
                                             'IN_PROGRESS'))
        if self.plugin is not None and action == 'CREATE' and \
                row.action == 'INIT':
            # claimed before its first try: nothing of it can exist yet
            self.plugin.fresh = True
        row.atomic_key = key
        row.status, row.action = 'IN_PROGRESS', action
        row.engine_id = self.engine.engine_id
        return None

    def _write(self, **values):
        with self.engine.db.begin() as conn:
            self._cas(conn, **values)

    def _cas(self, conn, **values):
        if self.shared is not None:   # with the batch's at its end
            self.shared.writes.append((self, values))
            return
        key = api.resource_cas(conn, self.row.id, self.row.atomic_key,
                               **values)
        if key is None:
            raise Lost()
        self.row.atomic_key = key

    def _release_slot(self, conn):
        self.woken = limits.release_stack_slot(conn, self.stack.id,
                                               self.row.id)

    def _retry(self, action, exc):
        """A transient cloud error: come back after a backoff (counted in
        the plug-in's data), fail once the retries are spent."""
        CONF = conf_mod.CONF.worker
        if isinstance(exc, exception.CloudThrottled):  # not a fault
            wait = base.Wait(after=exc.retry_after or 1.0, reason=str(exc))
            return Outcome(WAIT, action, 'throttled: %s' % exc, wait=wait)
        data = self.plugin.data
        tries = data.get(_RETRIES, 0) + 1
        if tries > CONF.transient_retries:
            return Outcome(FAILED, action, '%s (gave up after %d tries)'
                           % (reasons.failure(self.name, exc), tries))
        data[_RETRIES] = tries
        after = exc.retry_after or min(2 ** (tries - 1),
                                       CONF.transient_backoff_max)
        return Outcome(WAIT, action, 'cloud busy, retrying: %s' % exc,
                       wait=base.Wait(after=after, reason=str(exc)))

    # -- propagating ------------------------------------------------------
    def _event(self, physical_id, action, status, reason='state changed',
               timestamp=None):
        return api.event(self.stack.id, self.trav.id, self.name,
                         api.shown_type(self.row) if self.rdef is None
                         else self.rdef.template_type,
                         physical_id, action, status, reason, timestamp)

    def _member_events(self):
        """The events of the members the plug-in's step saw change (a
        deployment group's), as events of its nested stack; then the
        step's notes, as IN_PROGRESS events of the resource itself."""
        plugin = self.plugin
        if plugin is None or not (plugin.member_events or plugin.notes):
            return []
        nested = plugin.nested_stack_id()
        out = [api.event(nested, self.trav.id, e.name, e.type,
                         e.physical_id, e.action, e.status, e.reason,
                         e.timestamp) for e in plugin.member_events]
        action = self.row.action if self.row.action != 'INIT' else 'CREATE'
        return out + [self._event(plugin.physical_id, action, 'IN_PROGRESS',
                                  note) for note in plugin.notes]

    def _finish(self, conn, resource_id=None):
        """Mark the node done and release its dependents, in the caller's
        transaction. Whether the traversal is failing is read in the same
        transaction, because a failure elsewhere may be waiting for this
        unit to end."""
        if self.shared is not None:   # marked, and counted, at its end
            self.shared.ending.append((self, resource_id))
            return
        self.ready = walker.finish(conn, self.trav, self.stack.id,
                                   self.sp.node, resource_id=resource_id)
        if self.ready is not None:
            self._ask_failing(conn)

    def _ask_failing(self, conn):
        """Whether the traversal is failing, read after this unit's
        writes in its transaction (a batch's, once after all of them)."""
        if self.shared is not None:
            self.shared.ask_failing.append(self)
        else:
            self.failing = api.traversal_state(conn,
                                               self.trav.id) == 'failing'

    def tell(self):
        """After commit: send the dependents now ready; end a failing
        traversal if this was the last unit in flight."""
        if self.ready:
            self.engine.client.check_resources(self.stack.id, self.trav.id,
                                               self.ready)
        for trav_id, node in self.woken:  # waited for the slot we freed
            self.engine.client.check_resource(self.stack.id, trav_id, node)
        if self.wake is not None and self.engine.workers is not None:
            # this process sends it when its time comes, to the moment;
            # any engine's timer does, should this one die first
            self.engine.workers.wake_at(self.wake, self.stack.id,
                                        self.trav.id, self.sp.node,
                                        probe=self.probe,
                                        recorded=self.recorded)
        if self.failing:
            traversal_mod.settle(self.engine, self.trav, self.stack)

    # -- small things -------------------------------------------------------
    def _plugin(self, row, props=None):
        cls = self.rdef.plugin
        metadata = None
        if cls.wants_facade:
            metadata = self.defn.resolve_metadata(self.name, self.deps)
        plugin = self.engine.plugin(cls, row,
                                    self.props if props is None else props,
                                    self.stack, self.rdef.update_policy,
                                    metadata=metadata)
        if cls.wants_facade:
            plugin.deletion_policy = self.rdef.deletion_policy
            # what the template reads of it (a provider's resource.NAME)
            plugin.member_reads = self.defn.referenced_attributes(self.name)
        if cls.reads_attributes:
            plugin.attributes_read = self.defn.referenced_attributes(
                self.name)
        if (self.trav.options or {}).get('converge'):
            plugin.stack.converging = self.trav.id
        plugin.stack.traversal_id = self.trav.id
        return plugin

    def _waiting(self):
        """A plug-in that talks to the cloud waits outside the gate; one
        whose steps run here (logical, or an in-process cloud) computes
        inside it: letting go would only hand the GIL to another unit."""
        plugin = self.plugin
        if plugin is not None and (plugin.logical or plugin.computes_locally):
            return contextlib.nullcontext()
        return self.engine.gate.released()

    def _deadline(self):
        return (self.trav.options or {}).get('deadline')

    def _timed_out(self):
        deadline = self._deadline()
        return bool(deadline) and time.time() > deadline


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

    def attribute_error(self, name, attribute):
        return nested_res.attribute_error(self._rows.get(name), attribute)

    def row_ids(self):
        return sorted(r.id for r in self._rows.values())


#: a waiting row's action -> the decision that runs its step again
_RESUMABLE = {'CREATE': decide_mod.CREATE, 'UPDATE': decide_mod.UPDATE,
              'SUSPEND': decide_mod.SUSPEND, 'RESUME': decide_mod.RESUME,
              'SNAPSHOT': decide_mod.SNAPSHOT}

#: the decisions each hook pauses
_HOOKED = {'pre-create': (decide_mod.CREATE,),
           'pre-update': (decide_mod.UPDATE, decide_mod.REPLACE),
           'pre-delete': (decide_mod.DELETE,)}

#: the plug-in data key counting transient-error retries of one action
_RETRIES = 'converge:retries'


def _done_data(data):
    if _RETRIES in data:
        data = dict(data)
        del data[_RETRIES]
    return hooks.without_mark(data)


def _adopting(row, stack_action):
    """Whether the row is one `stack adopt` laid out and has not taken
    over yet: a physical id on a row never created (only an adopt makes
    one), or an adopt that waits or failed (tried again by the adopt's
    own traversal; a later update creates what could not be adopted)."""
    if stack_action in traversal_mod.IN_PLACE:
        return False
    if row.action == 'INIT':
        return row.physical_id is not None
    return row.action == 'ADOPT' and (
        row.status == 'IN_PROGRESS' or
        (row.status == 'FAILED' and stack_action == 'ADOPT'))


def _deletion_policy(rdef):
    """What cleaning the resource up does: its DeletionPolicy, or Retain
    for an external_id (adopted, never ours to delete)."""
    return 'Retain' if rdef.external_id else rdef.deletion_policy


def _first_action(row):
    return 'CREATE' if row.action == 'INIT' else 'UPDATE'


def _reason(exc):
    text = str(exc) or exc.__class__.__name__
    if not isinstance(exc, exception.ConvergeError):
        text = '%s: %s' % (exc.__class__.__name__, text)
    return text
