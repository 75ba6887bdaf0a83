"""Resource locks through tooz (file:// embedded, redis:// distributed).

A lock only keeps two workers from acting on one resource at once; it is
not what makes writes correct. A worker that loses its lock (expiry,
pause) is stopped by the fencing counter in the database.
"""

import contextlib
import hashlib
import threading

from tooz import coordination

from converge import exception
from converge.engine import listeners as listeners_mod


class LockTimeout(exception.ConvergeError):
    pass


class Locks:
    def __init__(self, url, member_id, listeners=None):
        self.url = url
        self.listeners = listeners_mod.Listeners() if listeners is None \
            else listeners
        self._coord = coordination.get_coordinator(url, member_id.encode())
        self._coord.start(start_heart=True)
        self._stopped = threading.Event()

    @staticmethod
    def name(stack_id, resource_name):
        digest = hashlib.sha1(('%s/%s' % (stack_id, resource_name))
                              .encode()).hexdigest()
        return ('converge-res-' + digest).encode()

    @contextlib.contextmanager
    def resource(self, stack_id, resource_name, wait,
                 waiting=contextlib.nullcontext):
        """Hold the resource's lock; ``waiting()`` is entered only if the
        lock is taken and this has to wait for it."""
        lock = self._coord.get_lock(self.name(stack_id, resource_name))
        if not lock.acquire(blocking=False):
            with waiting():
                if not lock.acquire(blocking=wait):
                    raise LockTimeout('Resource %s is locked by another '
                                      'worker' % resource_name)
        self.listeners.on_lock(stack_id, resource_name)
        try:
            yield
        finally:
            try:
                lock.release()
            except coordination.ToozError:  # pragma: no cover - expired
                pass

    # -- membership: the live workers ----------------------------------------
    def join(self, group):
        group = group.encode()
        try:
            self._coord.create_group(group).get()
        except coordination.GroupAlreadyExist:
            pass
        try:
            self._coord.join_group(group).get()
        except coordination.MemberAlreadyExist:
            pass

    def leave(self, group):
        try:
            self._coord.leave_group(group.encode()).get()
        except (coordination.GroupNotCreated,
                coordination.MemberNotJoined):
            pass

    def members(self, group):
        """Engine ids of the live workers (heartbeats not expired)."""
        try:
            found = self._coord.get_members(group.encode()).get()
        except coordination.GroupNotCreated:
            return set()
        return {m.decode() if isinstance(m, bytes) else m for m in found}

    def try_lock(self, name):
        """A non-blocking named lock (e.g. one sweeper at a time)."""
        lock = self._coord.get_lock(('converge-' + name).encode())
        return lock if lock.acquire(blocking=False) else None

    def stop(self):
        try:
            self._coord.stop()
        except coordination.ToozError:  # pragma: no cover
            pass
