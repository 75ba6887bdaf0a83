"""Resource locks of the embedded mode (a ``file://`` coordination URL):
one file per lock, held with flock(2) on a descriptor kept open.

tooz's file driver (used for the group and the sweeper's lock) opens the
lock's file, creating its directory, on every acquire and closes it on
every release: six system calls and a fifth of a unit of work's time
(py-spy, one worker thread, 2,000 server creates). A unit takes one of
these locks per resource, so here the descriptor of a lock taken lately
stays open and taking it again is one flock() call.

flock, not fcntl's lockf: a POSIX lock belongs to the process, and
closing any descriptor of its file drops it, so evicting an idle
descriptor could drop a lock another thread holds on the same file.
flock's lock belongs to the open file, so it is exactly as long-lived as
its descriptor. Threads of this process share a descriptor, so a thread
lock per name keeps them apart before flock keeps processes apart.
"""

import collections
import errno
import fcntl
import os
import threading
import time

#: descriptors kept open for locks not held at the moment
KEEP_OPEN = 1024
#: seconds between tries while another process holds a lock
POLL = (0.001, 0.05)


class _Entry:
    __slots__ = ('path', 'fd', 'mutex', 'held')

    def __init__(self, path):
        self.path = path
        self.fd = None
        self.mutex = threading.Lock()   # threads of this process
        self.held = False


class FileLocks:
    """Named locks in `directory` shared by every process of the host."""

    def __init__(self, directory):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._entries = collections.OrderedDict()
        self._guard = threading.Lock()

    def get_lock(self, name):
        if isinstance(name, bytes):
            name = name.decode()
        if os.sep in name or name.startswith('.'):
            raise ValueError('bad lock name %r' % name)
        with self._guard:
            entry = self._entries.get(name)
            if entry is None:
                entry = self._entries[name] = _Entry(
                    os.path.join(self.directory, name))
            self._entries.move_to_end(name)
            self._evict()
        return FileLock(self, entry)

    def _evict(self):
        # close the oldest idle descriptors beyond KEEP_OPEN (a held lock,
        # or one a thread is taking, keeps its descriptor)
        extra = len(self._entries) - KEEP_OPEN
        if extra <= 0:
            return
        victims = []
        for name, entry in self._entries.items():   # oldest first
            if len(victims) >= extra:
                break
            if not entry.held and entry.mutex.acquire(blocking=False):
                victims.append((name, entry))
        for name, entry in victims:
            if entry.fd is not None:
                os.close(entry.fd)
                entry.fd = None
            del self._entries[name]
            entry.mutex.release()

    def close(self):
        with self._guard:
            for entry in self._entries.values():
                if entry.fd is not None and not entry.held:
                    os.close(entry.fd)
                    entry.fd = None
            self._entries.clear()


class FileLock:
    def __init__(self, locks, entry):
        self._locks = locks
        self._entry = entry

    def acquire(self, blocking=True):
        """True once held. `blocking`: False (one try), True (as long as
        it takes) or seconds."""
        deadline = None
        if blocking is not True and blocking is not False:
            deadline = time.monotonic() + float(blocking)
        entry = self._entry
        if not self._take_mutex(blocking, deadline):
            return False
        try:
            pause = POLL[0]
            while True:
                if self._try_flock():
                    entry.held = True
                    return True
                if blocking is False or (
                        deadline is not None and time.monotonic() >= deadline):
                    entry.mutex.release()
                    return False
                # another process holds it: flock has no timeout, so try
                # again shortly (a unit of work holds a lock for ms)
                time.sleep(pause)
                pause = min(pause * 2, POLL[1])
        except BaseException:
            if not entry.held:
                entry.mutex.release()
            raise

    def _take_mutex(self, blocking, deadline):
        mutex = self._entry.mutex
        if blocking is False:
            return mutex.acquire(blocking=False)
        if deadline is None:
            return mutex.acquire()
        return mutex.acquire(timeout=max(0.0, deadline - time.monotonic()))

    def _try_flock(self):
        entry = self._entry
        if entry.fd is None:
            entry.fd = os.open(
                entry.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(entry.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise

    def release(self):
        entry = self._entry
        if not entry.held:
            raise RuntimeError('releasing a lock that is not held')
        entry.held = False
        try:
            fcntl.flock(entry.fd, fcntl.LOCK_UN)
        finally:
            entry.mutex.release()
