"""Measurement for converge-bench: pure arithmetic, and the engine listener
that counts what one traversal does (units, casts, locks, SQL, unit
latency, threads alive)."""

import collections
import graphlib
import math
import resource as resource_mod
import sys
import threading

from sqlalchemy import event

from converge import listeners


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

#: threads whose name starts so are the benchmark's, not the engine's
OWN_THREADS = 'bench-'
#: how often the thread sampler counts the threads alive
THREAD_SAMPLE = 0.02


def engine_threads_alive():
    """Python threads alive in this process, the benchmark's own left out."""
    return sum(1 for t in threading.enumerate()
               if not t.name.startswith(OWN_THREADS))


class ThreadSampler:
    """The most threads alive at once in this process, sampled every
    THREAD_SAMPLE seconds (a thread that lives shorter may be missed)."""

    def __init__(self, interval=THREAD_SAMPLE, count=engine_threads_alive):
        self.interval = interval
        self.count = count
        self._lock = threading.Lock()
        self._peak = count()
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._loop,
                                        name=OWN_THREADS + 'threads',
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()

    def sample(self):
        alive = self.count()
        with self._lock:
            self._peak = max(self._peak, alive)

    def take_peak(self):
        """The peak since the last call (or the start); the next period
        starts from the threads alive now."""
        self.sample()
        with self._lock:
            peak, self._peak = self._peak, self.count()
        return peak

    def _loop(self):
        while not self._stop.wait(self.interval):
            self.sample()


class Recorder(listeners.Listener):
    """An engine listener counting every check_resource unit (with its
    duration), every cast and every resource lock taken, and (by
    SQLAlchemy events) the SQL statements of this process, all since it
    was started; it also samples the threads alive.

    ``own_statements``: what to do with statements issued by the thread that
    started it (the benchmark's own: storing the stack, waiting for the
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
        self._started = self._listening = False
        self.threads = None

    # the engine's hooks (converge/listeners.py) -------------------
    def on_unit(self, traversal_id, node, seconds):
        with self._lock:
            self.units[traversal_id].append(seconds)

    def on_cast(self, traversal_id, node):
        with self._lock:
            self.casts[traversal_id] += 1

    def on_lock(self, stack_id, resource_name):
        with self._lock:
            self.locks += 1

    def _statement(self, *args, **kw):
        if threading.get_ident() == self._own_thread:
            with self._lock:
                self.own += 1

    # start / stop ---------------------------------------------------------
    def start(self):
        """Count statements and sample threads from now on; the engine
        calls the hooks once this is one of its listeners."""
        db = self.engine.db
        self._sql_engines = {db.writer_engine, db.reader_engine}
        for sql_engine in self._sql_engines:
            event.listen(sql_engine, 'before_cursor_execute', self._statement)
        self._base = db.counter.statements
        self.threads = ThreadSampler().start()
        self._started = True
        return self

    def install(self):
        """start(), and become one of the engine's listeners."""
        self.start()
        self.engine.listeners.append(self)
        self._listening = True
        return self

    def remove(self):
        if self._listening:
            self.engine.listeners.remove(self)
            self._listening = False
        if self._started:
            for sql_engine in self._sql_engines:
                event.remove(sql_engine, 'before_cursor_execute',
                             self._statement)
            self.threads.stop()
            self._started = False

    def __enter__(self):
        return self.install()

    def __exit__(self, *exc):
        self.remove()
        return False

    # reading --------------------------------------------------------------
    def snapshot(self):
        """This process's counts so far (JSON-able; to take differences),
        with the most threads alive at once since the previous snapshot."""
        with self._lock:
            if self.mode == 'none':
                statements = 0
            else:
                statements = self.engine.db.counter.statements - self._base
                if self.mode == 'exclude':
                    statements -= self.own
            return dict(units={t: list(v) for t, v in self.units.items()},
                        casts=dict(self.casts), locks=self.locks,
                        statements=statements, peak_rss_mb=peak_rss_mb(),
                        threads_peak=self.threads.take_peak(),
                        worker_threads=self.engine.threads)


def combine(snapshots):
    """One snapshot of several processes (the engine's, together)."""
    units = collections.defaultdict(list)
    casts = collections.Counter()
    for snap in snapshots:
        for trav, secs in snap['units'].items():
            units[trav].extend(secs)
        casts.update(snap['casts'])
    # the API process of the distributed mode is not an engine: it reports
    # no RSS and no threads
    engines = [s for s in snapshots if s.get('peak_rss_mb')]
    return dict(units=dict(units), casts=dict(casts),
                locks=sum(s['locks'] for s in snapshots),
                statements=sum(s['statements'] for s in snapshots),
                rss_each=[s['peak_rss_mb'] for s in engines],
                threads_each=[s.get('threads_peak') for s in engines],
                worker_threads_each=[s.get('worker_threads')
                                     for s in engines])


def window(before, after, traversal_id=None):
    """What happened between two snapshots: the units and casts of one
    traversal (of every traversal when `traversal_id` is None: a parent's
    and its nested stacks'), and every lock and statement."""
    travs = [traversal_id] if traversal_id is not None else \
        sorted(set(after['units']) | set(after['casts']))
    units = [s for t in travs for s in after['units'].get(t, [])[
        len(before['units'].get(t, [])):]]
    casts = sum(after['casts'].get(t, 0) - before['casts'].get(t, 0)
                for t in travs)
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


def threads(snapshot):
    """The engine's threads in a combined snapshot: worker threads
    configured per process, and the most alive at once in each process
    since the previous snapshot."""
    each = snapshot.get('worker_threads_each') or []
    peaks = snapshot.get('threads_each') or []
    return dict(
        worker_threads=each[0] if len(set(each)) == 1 else None,
        worker_threads_each=each,
        threads_peak_each=peaks,
        threads_peak=max(peaks) if peaks else None,
        threads='/'.join('%d' % p for p in peaks) if peaks else None)


def _ms(seconds):
    return None if seconds is None else seconds * 1000.0
