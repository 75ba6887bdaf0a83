"""Resource locks of the embedded mode (a ``file://`` coordination URL):
every lock is one byte of one file, held with an open-file-description
(OFD) record lock, fcntl(2)'s F_OFD_SETLK.

Why not a file per lock: tooz's file driver opens the lock's file on
every acquire (six system calls, a fifth of a unit of work's time). A file
kept open per lock still costs a file creation for every resource ever
locked, and files that are never removed. Creating a file is not always
cheap: on an ext4 without a journal, which skips inodes freed in the last
12 hours when it allocates one, a creation here cost 0.7-1.1 ms of kernel
time after a day of test runs, 2 s of the 2,000-server ramp
(docs/performance.md). One file, created once, costs no creation at all.

Why OFD locks: a POSIX lock (lockf) belongs to the process, so two
FileLocks of one process would not keep each other out, and closing any
descriptor of the file would drop every lock of the process. An OFD lock
belongs to the open file, as flock's does, but covers a byte range, so
one file holds any number of locks. Threads of this process share the
descriptor (its locks do not exclude each other), so a thread lock per
name keeps them apart before the record lock keeps processes apart.

A lock's byte is at an offset taken from a hash of its name (60 bits):
two names sharing one is as likely as a SHA-1 collision.
"""

import errno
import fcntl
import hashlib
import os
import struct
import threading
import time

#: seconds between tries while another process holds a lock
POLL = (0.001, 0.05)
#: the file in the lock directory that holds every lock
FILE = 'ranges'

# struct flock: short l_type, short l_whence, off_t l_start, off_t l_len,
# pid_t l_pid (0 for OFD locks), native alignment, padded to its size
_FLOCK = struct.Struct('@hhqqi4x')


def _offset(name):
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:8],
                          'big') >> 4


class _Entry:
    """The threads of this process that hold or want one name."""
    __slots__ = ('mutex', 'users', 'held')

    def __init__(self):
        self.mutex = threading.Lock()
        self.users = 0
        self.held = False


class FileLocks:
    """Named locks in `directory` shared by every process of the host."""

    def __init__(self, directory):
        if not hasattr(fcntl, 'F_OFD_SETLK'):   # pragma: no cover
            raise OSError('embedded resource locks need open file '
                          'description locks (Linux 3.15 or later)')
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._fd = os.open(os.path.join(directory, FILE),
                           os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._entries = {}
        self._guard = threading.Lock()

    def get_lock(self, name):
        if isinstance(name, bytes):
            name = name.decode()
        return FileLock(self, name)

    def _enter(self, name):
        with self._guard:
            entry = self._entries.get(name)
            if entry is None:
                entry = self._entries[name] = _Entry()
            entry.users += 1
            return entry

    def _leave(self, name, entry):
        with self._guard:
            entry.users -= 1
            if not entry.users:
                del self._entries[name]

    def _record(self, kind, offset):
        """Set (F_RDLCK/F_WRLCK) or clear (F_UNLCK) the byte at
        `offset`; False when another open file holds it."""
        try:
            fcntl.fcntl(self._fd, fcntl.F_OFD_SETLK,
                        _FLOCK.pack(kind, os.SEEK_SET, offset, 1, 0))
            return True
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise

    def close(self):
        # closing the file drops every lock still held through it, as
        # the end of the process would
        with self._guard:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class FileLock:
    def __init__(self, locks, name):
        self._locks = locks
        self._name = name
        self._offset = _offset(name)
        self._entry = None

    def acquire(self, blocking=True):
        """True once held. `blocking`: False (one try), True (as long as
        it takes) or seconds."""
        deadline = None
        if blocking is not True and blocking is not False:
            deadline = time.monotonic() + float(blocking)
        locks = self._locks
        entry = locks._enter(self._name)
        have = held = False
        try:
            have = self._take_mutex(entry.mutex, blocking, deadline)
            pause = POLL[0]
            while have:
                if locks._record(fcntl.F_WRLCK, self._offset):
                    entry.held = held = True
                    self._entry = entry
                    return True
                if blocking is False or (
                        deadline is not None and time.monotonic() >= deadline):
                    return False
                # another process holds it: a record lock that waits
                # (F_OFD_SETLKW) cannot be given a timeout, so try again
                # shortly (a unit of work holds a lock for ms)
                time.sleep(pause)
                pause = min(pause * 2, POLL[1])
            return False
        finally:
            if not held:   # not taken, or interrupted: as if never asked
                if have:
                    entry.mutex.release()
                locks._leave(self._name, entry)

    @staticmethod
    def _take_mutex(mutex, blocking, deadline):
        if blocking is False:
            return mutex.acquire(blocking=False)
        if deadline is None:
            return mutex.acquire()
        return mutex.acquire(timeout=max(0.0, deadline - time.monotonic()))

    def release(self):
        entry = self._entry
        if entry is None or not entry.held:
            raise RuntimeError('releasing a lock that is not held')
        entry.held = False
        self._entry = None
        try:
            self._locks._record(fcntl.F_UNLCK, self._offset)
        finally:
            entry.mutex.release()
            self._locks._leave(self._name, entry)
