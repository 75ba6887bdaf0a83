"""A simulated server's own /tmp, /home, /var/tmp (and /etc/passwd):
its hooks must not write the host's.

Only for simulated servers (`enable`, called by the sim's agent host):
a standalone agent runs on the server it configures, whose /tmp is its
own. Many simulated servers share one real machine. A script that writes
``/tmp/x`` or ``/home/extrauser/.ssh`` would write the host's files, and
every server would see every other's. Where the agent may (root on
Linux), each hook process enters a mount namespace of its own in which
those directories are bind mounts of the server's disk, so ``/tmp/x``
lands in ``<disk>/tmp/x``: the host's files are untouched and nothing
outlives the process (the namespace dies with it).

Left out: a directory holding the agent's own interpreter (its tools
would vanish) and one that does not exist on the host. Elsewhere (not
root, not Linux, a container that forbids it) hooks run as before, and
the agent says so once in its log.
"""

import concurrent.futures
import ctypes
import logging
import os
import queue
import shlex
import signal
import shutil
import subprocess
import sys
import threading

LOG = logging.getLogger(__name__)

#: directories a server has of its own (bind mounts of <disk>/<dir>)
PRIVATE_DIRS = ('/tmp', '/var/tmp', '/home')
#: files the server's first boot may have written (users, groups)
PRIVATE_FILES = ('/etc/passwd', '/etc/group')
_STICKY = {'/tmp': 0o1777, '/var/tmp': 0o1777}

_CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18


def _libc():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare, libc.mount
    except (OSError, AttributeError):   # not Linux
        return None, None


# looked up here, not in a forked child
_UNSHARE, _MOUNT = _libc()
_STATE = {'available': None, 'enabled': False}
_PROBE_LOCK = threading.Lock()


def _call(fn, *args):
    if fn(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def enter(binds):
    """In the child, before exec: a mount namespace of its own, nothing
    shared back with the host's, then each (source, target) bound."""
    _call(_UNSHARE, _CLONE_NEWNS)
    _call(_MOUNT, b'none', b'/', None, _MS_REC | _MS_PRIVATE, None)
    for source, target in binds:
        _call(_MOUNT, source.encode(), target.encode(), None,
              _MS_BIND | _MS_REC, None)


_UNSHARE_BIN = shutil.which('unshare')
_MOUNT_BIN = shutil.which('mount')


def chain(binds):
    """argv that enters a mount namespace of its own, makes `binds`,
    then execs the rest of its arguments: util-linux's unshare and mount
    instead of a preexec_fn, so the agent host's spawn is a vfork
    (a preexec_fn forks the whole host: ~11 ms against ~6 ms, measured
    here); None when those tools are missing."""
    if not (_UNSHARE_BIN and _MOUNT_BIN):
        return None
    return [_UNSHARE_BIN, '--mount', '--propagation', 'private', '--',
            '/bin/sh', '-c', _chain_script(binds), 'converge-rootfs']


def _chain_script(binds, ready=False):
    """The shell that makes `binds`, then execs its arguments (or, for
    a `Holder`, says ready and sleeps)."""
    mounts = ' && '.join('%s --rbind %s %s' % (
        shlex.quote(_MOUNT_BIN), shlex.quote(source), shlex.quote(target))
        for source, target in binds)
    then = ('echo ready && exec %s infinity' % shlex.quote(_SLEEP_BIN)
            if ready else 'exec "$@"')
    return (mounts + ' && ' if mounts else '') + then


_NSENTER_BIN = shutil.which('nsenter')
_SETPRIV_BIN = shutil.which('setpriv')
_SLEEP_BIN = shutil.which('sleep')


class Holder:
    """A server's mount namespace kept for its hooks: a process that
    entered it, made the binds and sleeps. Each hook then joins it
    (`argv`, util-linux's nsenter) instead of making its own: three
    programs started per hook instead of eight (unshare, sh, a mount per
    bind), ~2.5 ms of CPU against ~9 ms measured here, and a thousand
    servers run thousands of hooks. It dies with the agent's process
    (parent-death signal, set from a thread that lives as long) or when
    `close`d; a hook that runs on in it keeps the namespace alive."""

    def __init__(self, binds):
        self.binds = list(binds)
        self._lock = threading.Lock()
        self._closed = False
        self.proc = _SPAWNER.popen(
            [_SETPRIV_BIN, '--pdeathsig', 'KILL', '--', _UNSHARE_BIN,
             '--mount', '--propagation', 'private', '--', '/bin/sh', '-c',
             _chain_script(binds, ready=True)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True)
        ready = self.proc.stdout.readline()
        self.proc.stdout.close()
        if ready.strip() != b'ready':
            self.close()
            raise OSError('the mount namespace of %s could not be made'
                          % (binds[-1][0] if binds else '?'))

    def alive(self):
        return self.proc.poll() is None

    def argv(self, cwd):
        """argv that runs the rest of its arguments in the namespace, in
        directory `cwd` (joining a mount namespace moves to its root)."""
        return [_NSENTER_BIN, '--mount=/proc/%d/ns/mnt' % self.proc.pid,
                '--wd=%s' % cwd, '--']

    def close(self):
        with self._lock:   # once: its pid may be another's once reaped
            if self._closed:
                return
            self._closed = True
        if self.proc.poll() is None:   # not reaped yet: its pid is its own
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        self.proc.wait()

    @staticmethod
    def possible():
        return bool(_NSENTER_BIN and _SETPRIV_BIN and _SLEEP_BIN and
                    _UNSHARE_BIN and _MOUNT_BIN)


# A process forked while another thread has a script open for writing
# holds that descriptor until it execs, and exec of the script then fails
# with "Text file busy": scripts are written, and processes started, one
# at a time, whichever thread starts them (the hooks' runners, first boot,
# the spawner of kept namespaces below).
FORK_LOCK = threading.Lock()


class _Spawner:
    """Starts processes from one thread that lives as long as the agent:
    a parent-death signal is sent when the *thread* that forked the child
    ends, and the agents' own threads come and go."""

    def __init__(self):
        self._lock = threading.Lock()
        self._queue = None

    def popen(self, argv, **kw):
        with self._lock:
            if self._queue is None:
                self._queue = queue.SimpleQueue()
                threading.Thread(target=self._loop, args=(self._queue,),
                                 daemon=True, name='rootfs-spawner').start()
        future = concurrent.futures.Future()
        self._queue.put((argv, kw, future))
        return future.result()

    @staticmethod
    def _loop(requests):
        while True:
            argv, kw, future = requests.get()
            try:
                with FORK_LOCK:
                    proc = subprocess.Popen(argv, **kw)
                future.set_result(proc)
            except Exception as e:
                future.set_exception(e)


_SPAWNER = _Spawner()


def enable(on=True):
    """This process's hooks run for simulated servers (the sim's agent
    host): give them their own directories where possible."""
    _STATE['enabled'] = on


def available():
    """Whether hooks can get their own mounts here (probed once)."""
    with _PROBE_LOCK:
        if _STATE['available'] is None:
            _STATE['available'] = _probe()
        return _STATE['available']


def _probe():
    if _UNSHARE is None or not hasattr(os, 'geteuid') or os.geteuid() != 0:
        reason = 'the agent does not run as root on Linux'
    else:
        try:
            subprocess.run(['true'], check=True,
                           preexec_fn=lambda: enter(()))
            return True
        except (OSError, subprocess.SubprocessError) as e:
            reason = 'a mount namespace cannot be made here (%s)' % e
    LOG.warning('hooks write the host\'s /tmp and /home: %s', reason)
    return False


def _agent_paths():
    """The directories of the agent's interpreter and tools."""
    return {os.path.realpath(p) for p in (
        sys.prefix, sys.base_prefix,
        os.path.dirname(os.path.realpath(sys.executable)))}


def _is_within_agent(directory):
    """Whether `directory` is (or is inside) one of the agent's own: the
    cover would be bound over the agent's tools themselves."""
    return any(_under(os.path.realpath(directory), p)
               for p in _agent_paths())


def _kept(disk, directory):
    """What under `directory` stays visible in the namespace: the disk
    and the agent's directories, outermost only."""
    found = sorted(p for p in _agent_paths() | {disk}
                   if _under(p, directory) and p != directory)
    outer = []
    for path in found:
        if not any(_under(path, o) for o in outer):
            outer.append(path)
    return outer


def _under(path, directory):
    return path == directory or path.startswith(directory.rstrip('/') + '/')


def plan(disk):
    """The (source, target) binds that give the server at `disk` its own
    directories (made on the disk as needed), in mount order; None when
    hooks do not get them (not a simulated server, or not possible)."""
    if not _STATE['enabled'] or not available():
        return None
    disk = os.path.realpath(disk)
    binds = []
    for target in PRIVATE_DIRS:
        if not os.path.isdir(target) or _is_within_agent(target):
            continue
        source = os.path.join(disk, target.lstrip('/'))
        if not os.path.isdir(source):
            os.makedirs(source, exist_ok=True)
            if target in _STICKY:
                os.chmod(source, _STICKY[target])
        # what lives in the directory being covered and must stay: the
        # disk itself, the agent's own interpreter and tools (a checkout
        # under /tmp). Each stays reachable at its own path, bound inside
        # the cover (an empty chain of directories marks where).
        for keep in _kept(disk, target):
            inner = os.path.join(source, os.path.relpath(keep, target))
            os.makedirs(inner, exist_ok=True)
            binds.append((keep, inner))
        binds.append((source, target))
    for target in PRIVATE_FILES:
        source = os.path.join(disk, target.lstrip('/'))
        if os.path.isfile(source) and os.path.isfile(target):
            binds.append((source, target))
    return binds
