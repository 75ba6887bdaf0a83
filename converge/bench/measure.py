"""Measurement for converge-bench: pure arithmetic, and the wrappers that
count what one traversal does (units, casts, locks, SQL, unit latency)."""

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
    its duration), every cast, every resource lock taken, and the SQL
    statements issued by the benchmark's own thread (to subtract them:
    waiting for the end polls the database)."""

    def __init__(self, engine):
        self.engine = engine
        self._lock = threading.Lock()
        self.units = []        # (traversal_id, seconds)
        self.casts = []        # traversal_id
        self.locks = 0
        self.own_statements = 0
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
                self.units.append((traversal_id, took))

    def _cast(self, stack_id, traversal_id, node, *args, **kw):
        with self._lock:
            self.casts.append(traversal_id)
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
                self.own_statements += 1

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
        """Where the counts are now (to take differences)."""
        with self._lock:
            return dict(units=len(self.units), casts=len(self.casts),
                        locks=self.locks, own=self.own_statements,
                        statements=self.engine.db.counter.statements)

    def window(self, before, after, traversal_id):
        """Figures between two snapshots, for units/casts of one traversal."""
        with self._lock:
            units = [t for tid, t in self.units[before['units']:after['units']]
                     if tid == traversal_id]
            casts = sum(1 for tid in self.casts[before['casts']:after['casts']]
                        if tid == traversal_id)
        statements = (after['statements'] - before['statements']
                      - (after['own'] - before['own']))
        return dict(units=len(units), casts=casts,
                    locks=after['locks'] - before['locks'],
                    statements=statements, unit_seconds=units)


def figures(window):
    """Per-unit figures of one Recorder.window()."""
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
