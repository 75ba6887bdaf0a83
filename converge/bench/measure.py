"""Measurement for converge-bench: pure arithmetic, and the wrappers that
count what one traversal does (units, casts, locks, SQL, unit latency)."""

import collections
import contextlib
import graphlib
import math
import resource as resource_mod
import sys
import threading
import time

from sqlalchemy import event

from converge.workers import reconcile


# -- arithmetic ---------------------------------------------------------------

def critical_path(deps, weight=1.0):
    """Weight of the heaviest dependency chain of ``{name: set(deps)}``.

    ``weight`` is one number for every node, a dict (missing nodes weigh
    0), or a callable ``weight(name)``. A node named only as a dependency
    is a node too. The empty graph weighs 0.
    """
    if callable(weight):
        wof = weight
    elif isinstance(weight, dict):
        wof = lambda name: weight.get(name, 0)  # noqa: E731
    else:
        wof = lambda name: weight  # noqa: E731
    done = {}
    for name in graphlib.TopologicalSorter(deps).static_order():
        before = [done[d] for d in deps.get(name, ())]
        done[name] = wof(name) + (max(before) if before else 0)
    return max(done.values()) if done else 0


def longest_chain(deps):
    """Resources on the longest dependency chain."""
    return critical_path(deps, 1)


def percentile(values, pct):
    """The pct-th percentile (0..100), linear between closest ranks (as
    numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * pct / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return ordered[lo]
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def per_unit(total, units):
    """total / units, or None when there were no units."""
    if not units:
        return None
    return total / units


def ratio(num, den):
    """num / den, or None when either is missing or den is 0."""
    if num is None or not den:
        return None
    return num / den


def peak_rss_mb():
    """Peak resident set size of this process, in MB."""
    peak = resource_mod.getrusage(resource_mod.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes
    return peak / (1024.0 * 1024.0) if sys.platform == 'darwin' \
        else peak / 1024.0


# -- instrumentation ----------------------------------------------------------

class Recorder:
    """Counts, while installed on an engine, every check_resource unit (with
    its duration), every cast, every resource lock taken and the SQL
    statements of this process, all since it was installed.

    ``own_statements``: what to do with statements issued by the thread that
    installed it (the benchmark's own: storing the stack, waiting for the
    end): 'exclude' them (embedded: the workers share this process),
    or count 'all' (a worker process), or 'none' (an API-only process,
    whose statements are not check_resource's).
    """

    def __init__(self, engine, own_statements='exclude'):
        self.engine = engine
        self.mode = own_statements
        self._lock = threading.Lock()
        self.units = collections.defaultdict(list)   # traversal -> [s]
        self.casts = collections.Counter()            # traversal -> n
        self.locks = 0
        self.own = 0
        self._own_thread = threading.get_ident()
        self._installed = False

    # the wrappers ---------------------------------------------------------
    def _unit(self, engine, stack_id, traversal_id, node, *args, **kw):
        start = time.perf_counter()
        try:
            return self._real_unit(engine, stack_id, traversal_id, node,
                                   *args, **kw)
        finally:
            took = time.perf_counter() - start
            with self._lock:
                self.units[traversal_id].append(took)

    def _cast(self, stack_id, traversal_id, node, *args, **kw):
        with self._lock:
            self.casts[traversal_id] += 1
        return self._real_cast(stack_id, traversal_id, node, *args, **kw)

    @contextlib.contextmanager
    def _resource_lock(self, *args, **kw):
        with self._real_lock(*args, **kw):
            with self._lock:
                self.locks += 1
            yield

    def _statement(self, *args, **kw):
        if threading.get_ident() == self._own_thread:
            with self._lock:
                self.own += 1

    # install / remove -----------------------------------------------------
    def install(self):
        eng = self.engine
        self._real_unit = reconcile.check_resource
        reconcile.check_resource = self._unit
        self._client = eng.client
        self._real_cast = self._client.check_resource
        self._client.check_resource = self._cast
        self._locks = eng.locks
        self._real_lock = self._locks.resource
        self._locks.resource = self._resource_lock
        self._sql_engines = {eng.db.writer_engine, eng.db.reader_engine}
        for sql_engine in self._sql_engines:
            event.listen(sql_engine, 'before_cursor_execute', self._statement)
        self._base = eng.db.counter.statements
        self._installed = True
        return self

    def remove(self):
        if not self._installed:
            return
        reconcile.check_resource = self._real_unit
        del self._client.check_resource
        del self._locks.resource
        for sql_engine in self._sql_engines:
            event.remove(sql_engine, 'before_cursor_execute', self._statement)
        self._installed = False

    def __enter__(self):
        return self.install()

    def __exit__(self, *exc):
        self.remove()
        return False

    # reading --------------------------------------------------------------
    def snapshot(self):
        """This process's counts so far (JSON-able; to take differences)."""
        with self._lock:
            if self.mode == 'none':
                statements = 0
            else:
                statements = self.engine.db.counter.statements - self._base
                if self.mode == 'exclude':
                    statements -= self.own
            return dict(units={t: list(v) for t, v in self.units.items()},
                        casts=dict(self.casts), locks=self.locks,
                        statements=statements, peak_rss_mb=peak_rss_mb())


def combine(snapshots):
    """One snapshot of several processes (the engine's, together)."""
    units = collections.defaultdict(list)
    casts = collections.Counter()
    for snap in snapshots:
        for trav, secs in snap['units'].items():
            units[trav].extend(secs)
        casts.update(snap['casts'])
    return dict(units=dict(units), casts=dict(casts),
                locks=sum(s['locks'] for s in snapshots),
                statements=sum(s['statements'] for s in snapshots),
                rss_each=[s['peak_rss_mb'] for s in snapshots
                          if s.get('peak_rss_mb')])


def window(before, after, traversal_id):
    """What happened between two snapshots: the units and casts of one
    traversal, and every lock and statement."""
    units = after['units'].get(traversal_id, [])[
        len(before['units'].get(traversal_id, [])):]
    casts = (after['casts'].get(traversal_id, 0)
             - before['casts'].get(traversal_id, 0))
    return dict(units=len(units), casts=casts,
                locks=after['locks'] - before['locks'],
                statements=after['statements'] - before['statements'],
                unit_seconds=units)


def figures(window):
    """Per-unit figures of one window()."""
    units = window['units']
    return dict(
        check_resources=units,
        casts=window['casts'],
        statements=window['statements'],
        statements_per_check_resource=per_unit(window['statements'], units),
        messages_per_check_resource=per_unit(window['casts'], units),
        locks_per_check_resource=per_unit(window['locks'], units),
        cr_p50_ms=_ms(percentile(window['unit_seconds'], 50)),
        cr_p95_ms=_ms(percentile(window['unit_seconds'], 95)),
    )


def _ms(seconds):
    return None if seconds is None else seconds * 1000.0
