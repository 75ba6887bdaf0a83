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

import contextlib
import threading


class Gate:
    """At most ``size`` threads inside ``held()`` at once; 0: no limit."""

    def __init__(self, size):
        self.size = size
        self._sem = threading.Semaphore(size) if size else None
        self._local = threading.local()

    @contextlib.contextmanager
    def held(self):
        if self._sem is None or getattr(self._local, 'holding', False):
            yield
            return
        self._sem.acquire()
        self._local.holding = True
        try:
            yield
        finally:
            self._local.holding = False
            self._sem.release()

    @contextlib.contextmanager
    def released(self):
        """Let go while waiting on something outside the engine."""
        if self._sem is None or not getattr(self._local, 'holding', False):
            yield
            return
        self._local.holding = False
        self._sem.release()
        try:
            yield
        finally:
            self._sem.acquire()
            self._local.holding = True
