"""Resource locks and group membership through tooz (file:// embedded,
redis:// distributed). Embedded, resource locks are the cheaper
filelocks.py (tooz's file driver reopens a lock's file on every acquire).

A lock only keeps two workers from acting on one resource at once; it is
not what makes writes correct. A worker that loses its lock (expiry,
pause) is stopped by the fencing counter in the database.

Membership: a worker joins the group once and heartbeats. A worker whose
heartbeats stopped for longer than the timeout (a paused process, a
stalled host) is taken out of the group by the next member that lists it,
and tooz's heartbeat never puts it back: it would work on, outside the
group, and every sweep would take its work for a dead worker's. So this
module beats itself and, after each beat, joins its groups again; joining
a group one is already in costs one round trip and changes nothing.
"""

import contextlib
import functools
import hashlib
import os
import threading
import time
import urllib.parse

from oslo_log import log as logging

from converge import exception
from converge.coordination import filelocks
from converge import listeners as listeners_mod
from converge.coordination import redislocks

LOG = logging.getLogger(__name__)


#: seconds `Locks.stop` waits for the coordinator's own stop
STOP_WAIT = 0.1


def _tooz():
    """tooz's coordination module, imported when a lock is first made:
    a read-only command takes none (its import was a sixth of such a
    command's start)."""
    from tooz import coordination
    return coordination


class LockTimeout(exception.ConvergeError):
    pass


class Locks:
    def __init__(self, url, member_id, listeners=None):
        self.url = url
        self.member_id = member_id
        self.listeners = listeners_mod.Listeners() if listeners is None \
            else listeners
        self._coord = _tooz().get_coordinator(url, member_id.encode())
        self._coord.start()
        # what resource locks come from: on one host, files kept open
        self._resource_locks = self._coord
        if url.startswith('file://'):
            path = urllib.parse.urlparse(url).path
            self._resource_locks = filelocks.FileLocks(
                os.path.join(path, 'resources'))
        self._groups = set()
        self._membership = threading.Lock()  # a beat's rejoin vs leave()
        self._stopped = threading.Event()
        self._heart = threading.Thread(target=self._beat_until_stopped,
                                       name='heartbeat', daemon=True)
        self._heart.start()

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def name(stack_id, resource_name):
        digest = hashlib.sha1(('%s/%s' % (stack_id, resource_name))
                              .encode()).hexdigest()
        return ('converge-res-' + digest).encode()

    @contextlib.contextmanager
    def resource(self, stack_id, resource_name, wait,
                 waiting=contextlib.nullcontext):
        """Hold the resource's lock; ``waiting()`` is entered only if the
        lock is taken and this has to wait for it."""
        lock = self._resource_locks.get_lock(
            self.name(stack_id, resource_name))
        if not lock.acquire(blocking=False):
            # here, not at the top: the CLI's read-only commands import
            # this module and need not prometheus_client
            from converge import metrics
            metrics.LOCK_WAITS.inc()
            start = time.perf_counter()
            with waiting():
                got = lock.acquire(blocking=wait)
            metrics.LOCK_WAIT_SECONDS.observe(time.perf_counter() - start)
            if not got:
                metrics.LOCK_TIMEOUTS.inc()
                raise LockTimeout('Resource %s is locked by another '
                                  'worker' % resource_name)
        self.listeners.on_lock(stack_id, resource_name)
        try:
            yield
        finally:
            try:
                lock.release()
            except _tooz().ToozError:  # pragma: no cover - expired
                pass

    def try_resource(self, stack_id, resource_name):
        """The resource's lock, taken if nobody holds it (else None); the
        caller releases it (release_resource)."""
        lock = self._resource_locks.get_lock(
            self.name(stack_id, resource_name))
        if not lock.acquire(blocking=False):
            return None
        self.listeners.on_lock(stack_id, resource_name)
        return lock

    @staticmethod
    def release_resource(lock):
        try:
            lock.release()
        except _tooz().ToozError:  # pragma: no cover - expired
            pass

    def try_resources(self, stack_id, names):
        """try_resource for several resources of a stack: {name: lock}
        of those taken (the others are held elsewhere). On Redis, all in
        one round trip (redislocks.py); the caller lets them go with
        release_resources."""
        locks = {name: self._resource_locks.get_lock(
            self.name(stack_id, name)) for name in names}
        if locks and redislocks.usable(self._coord,
                                       next(iter(locks.values()))):
            got = set(redislocks.acquire_many(self._coord,
                                              list(locks.values())))
            taken = {n: lock for n, lock in locks.items() if lock in got}
        else:
            taken = {n: lock for n, lock in locks.items()
                     if lock.acquire(blocking=False)}
        for name in taken:
            self.listeners.on_lock(stack_id, name)
        return taken

    def release_resources(self, locks):
        """Let go of locks taken by try_resources."""
        if locks and redislocks.usable(self._coord, locks[0]):
            try:
                redislocks.release_many(self._coord, locks)
            except Exception:  # expire by themselves, as tooz's would
                LOG.warning('releasing %d resource locks failed; they '
                            'expire', len(locks), exc_info=True)
            return
        for lock in locks:
            self.release_resource(lock)

    def idle(self, stack_id, resource_name):
        """True when nobody holds the resource's lock (a unit of work holds
        it from start to end), so nobody is working on the resource."""
        lock = self._resource_locks.get_lock(
            self.name(stack_id, resource_name))
        if not lock.acquire(blocking=False):
            return False
        try:
            lock.release()
        except _tooz().ToozError:  # pragma: no cover - expired
            pass
        return True

    # -- membership: the live workers ----------------------------------------
    def join(self, group):
        """Join `group`, and stay in it: every heartbeat rejoins."""
        with self._membership:
            self._groups.add(group)
            return self._join(group.encode())

    def _join(self, group):
        """Returns True when this joined (was not a member before)."""
        try:
            self._coord.join_group(group).get()
        except _tooz().MemberAlreadyExist:
            return False
        except _tooz().GroupNotCreated:
            try:
                self._coord.create_group(group).get()
            except _tooz().GroupAlreadyExist:
                pass
            try:
                self._coord.join_group(group).get()
            except _tooz().MemberAlreadyExist:
                return False
        return True

    def _beat_until_stopped(self):
        while not self._stopped.is_set():
            try:
                # beat first: a member listed before its beat is renewed
                # is taken out again by whoever lists the group
                interval = self._coord.heartbeat() or 1.0
                with self._membership:
                    for group in self._groups:
                        if self._join(group.encode()):
                            LOG.warning('worker %s was out of group %s (no '
                                        'heartbeat for longer than the '
                                        'timeout: paused?); rejoined',
                                        self.member_id, group)
            except Exception:
                if self._stopped.is_set():
                    return
                # the coordination backend is away: try again soon
                LOG.warning('heartbeat failed; trying again in 1 s',
                            exc_info=True)
                interval = 2.0
            # half the timeout, as tooz's own heart does: better too soon
            self._stopped.wait(interval / 2.0)

    def leave(self, group):
        with self._membership:
            self._groups.discard(group)
            try:
                self._coord.leave_group(group.encode()).get()
            except (_tooz().GroupNotCreated,
                    _tooz().MemberNotJoined):
                pass

    def members(self, group):
        """Engine ids of the live workers (heartbeats not expired)."""
        try:
            found = self._coord.get_members(group.encode()).get()
        except _tooz().GroupNotCreated:
            return set()
        return {m.decode() if isinstance(m, bytes) else m for m in found}

    def try_lock(self, name):
        """A non-blocking named lock (e.g. one sweeper at a time)."""
        lock = self._coord.get_lock(('converge-' + name).encode())
        return lock if lock.acquire(blocking=False) else None

    def stop(self):
        self._stopped.set()
        with self._membership:
            self._groups.clear()
        if self._resource_locks is not self._coord:
            self._resource_locks.close()
        # tooz's stop joins its executor's idle threads, which look for
        # work once a second (futurist): a second lost at the end of every
        # command. Nothing waits on the rest of the stop (the groups were
        # left already, a lock dies with its holder), so it goes on in the
        # background; a process exiting meanwhile ends it
        stopper = threading.Thread(target=self._stop_coordinator,
                                   name='tooz-stop', daemon=True)
        stopper.start()
        stopper.join(STOP_WAIT)

    def _stop_coordinator(self):
        try:
            self._coord.stop()
        except _tooz().ToozError:  # pragma: no cover
            pass
