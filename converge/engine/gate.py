"""How many units of work run engine code at once in one process.

Worker threads exist to wait: on a cloud action, on a remote database.
Engine code itself (resolving a template, building SQL and reading its
results) is Python under one GIL, and on SQLite every write queues for the
one writer anyway: eight threads running it at once hand the GIL and the
write lock to each other on every statement and finish later than one
thread alone (docs/performance.md has the figures). So a unit of work holds
the gate while it runs engine code and lets go of it while a plug-in waits
on the cloud, and the other threads wait at the gate, not in the middle of
a transaction.
"""

import collections
import contextlib
import threading


class Gate:
    """At most ``size`` threads inside ``held()`` at once; 0: no limit.

    First come, first served: a place that frees is handed to the thread
    that has waited longest. (A plain semaphore lets whichever thread runs
    next take it, so a thread could wait at the gate for seconds while
    others went round again: during a ramp of creates, some creates came
    out last, behind the looks at servers created long after them.)"""

    def __init__(self, size):
        self.size = size
        self._free = size
        self._mutex = threading.Lock()
        self._queue = collections.deque()
        self._local = threading.local()

    @contextlib.contextmanager
    def held(self):
        if not self.size or getattr(self._local, 'holding', False):
            yield
            return
        self._enter()
        self._local.holding = True
        try:
            yield
        finally:
            self._local.holding = False
            self._leave()

    @contextlib.contextmanager
    def released(self):
        """Let go while waiting on something outside the engine."""
        if not self.size or not getattr(self._local, 'holding', False):
            yield
            return
        self._local.holding = False
        self._leave()
        try:
            yield
        finally:
            self._enter()
            self._local.holding = True

    @property
    def queued(self):
        """Threads waiting for a place."""
        return len(self._queue)

    def _enter(self):
        with self._mutex:
            if self._free and not self._queue:
                self._free -= 1
                return
            turn = threading.Lock()
            turn.acquire()
            self._queue.append(turn)
        try:
            turn.acquire()   # until a leaving thread hands its place over
        except BaseException:
            # interrupted while waiting: leave the line, or pass on a
            # place handed over meanwhile (a place lost is a gate that
            # lets fewer threads in for good)
            with self._mutex:
                if turn in self._queue:
                    self._queue.remove(turn)
                else:
                    self._hand_over()
            raise

    def _leave(self):
        with self._mutex:
            self._hand_over()

    def _hand_over(self):
        if self._queue:
            self._queue.popleft().release()
        else:
            self._free += 1
