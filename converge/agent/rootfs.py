"""A simulated server's root: the tree its software sees, and the
launcher that runs a program in it, confined.

Only for simulated servers (`enable`, called by the sim's agent host): a
standalone agent runs on the server it configures. Many simulated
servers share one real machine with the engine, its database and its
keys, and their deployment scripts are the tenants' own. So each
server's hooks and first-boot scripts run, where the agent host may
(root on Linux):

- in a **mount namespace** whose root is a tmpfs of the server's own
  (``pivot_root``: the host's tree is not hidden under it, it is gone):
  the host's ``/usr`` (and ``/bin``, ``/lib``... as the host has them)
  read-only, a few files of ``/etc`` (`ETC`) copied, ``/dev/null`` and
  the like, a ``/proc`` of its own, ``/tmp``, ``/var/tmp`` and ``/home``
  from its disk (and ``/etc/passwd``, ``/etc/group`` once its first boot
  made them), its disk read-write at its own path, and the directories of
  the agent's interpreter read-only (a hook runs the agent's Python). The
  engine's home, database, key files and sockets, and every other
  server's disk, are not in it;
- in a **PID namespace**: its ``/proc`` shows its own processes only, and
  they all die with it (and an IPC namespace: no shared memory or message
  queue of the host's);
- in a **user namespace**: root inside, host uids ``[sim] server_uid`` +
  0..65535 outside (`host_id`), never root on the host;
- in a **network namespace**: its own loopback and no route out, so not
  what listens on the host's loopback (the engine's database, a broker,
  converge's processes) nor the host's abstract unix sockets. What
  converge gave the server to reach, converge-api (its wait conditions'
  and deployments' signal URLs), is there at the same address and port:
  a socket listening in the namespace whose connections the agent host
  forwards (`netns`, `relay`; `enable`'s endpoints).

A root is made once per server (`Root`: a process that built it and
sleeps as its PID 1) and each hook joins it with util-linux's nsenter:
``Root(disk, binds(disk)).argv(cwd) + [program, ...]`` runs any program
there (the hooks' tools today; a server's own agent, os-collect-config,
would run the same way, from the agent's directories bound read-only).
Where roots cannot be made (not root, not Linux, a tool missing, no
network namespace, an endpoint that cannot be forwarded) the
hooks of simulated servers fail saying so, unless the operator chose to
run them unconfined (``[sim] confine_servers = false``).
"""

import concurrent.futures
import logging
import os
import queue
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading

from converge.agent import netns
from converge.agent import relay

LOG = logging.getLogger(__name__)

#: directories a server has of its own (bind mounts of <disk>/<dir>)
PRIVATE_DIRS = ('/tmp', '/var/tmp', '/home')
#: files the server's first boot may have written (users, groups)
PRIVATE_FILES = ('/etc/passwd', '/etc/group')
_STICKY = {'/tmp': 0o1777, '/var/tmp': 0o1777}
#: the host's system directories, read-only (or the same symlink)
SYSTEM_DIRS = ('/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64',
               '/libx32')
#: what of the host's /etc a server gets (copied, its own to change):
#: name resolution, the dynamic linker, locale and shell basics. Not the
#: rest: it holds services' configuration and passwords.
ETC = ('passwd', 'group', 'hosts', 'hostname', 'resolv.conf',
       'nsswitch.conf', 'host.conf', 'gai.conf', 'ld.so.cache',
       'ld.so.conf', 'ld.so.conf.d', 'localtime', 'timezone',
       'alternatives', 'protocols', 'services', 'networks', 'mime.types',
       'os-release', 'debian_version', 'redhat-release', 'system-release',
       'profile', 'bash.bashrc', 'environment', 'shells', 'login.defs',
       'inputrc', 'python3', 'terminfo')
#: of /etc, bound read-only (too big to copy per server)
ETC_BOUND = ('ssl', 'pki', 'ca-certificates')
DEVICES = ('null', 'zero', 'full', 'random', 'urandom')
#: directories made empty in the root, the server's to write
EMPTY_DIRS = ('/root', '/run', '/opt', '/srv', '/mnt', '/var/lib',
              '/var/log', '/var/cache', '/dev/shm')
#: environment variables of the agent host a server's processes keep
#: (the rest may name the engine's database, its passwords, its home)
KEEP_ENV = ('PATH', 'LANG', 'LANGUAGE', 'TZ', 'TERM')
KEEP_ENV_PREFIXES = ('LC_', 'ANSIBLE_')
#: the first host uid (and gid) of a server's 65536
DEFAULT_UID = 2000000000
UID_COUNT = 65536
#: the size of a root's own tmpfs (what is written outside its disk)
ROOT_SIZE = '256m'
#: where the launcher builds a root, in a mount namespace of its own
#: (covered there only; nothing a root is made of lives under it)
_STAGE = '/sys'

_TOOLS = {name: shutil.which(name) for name in (
    'setpriv', 'unshare', 'nsenter', 'mount', 'umount', 'pivot_root',
    'mkdir', 'rmdir', 'cp', 'chown', 'sleep', 'env')}
_STATE = {'available': None, 'enabled': False, 'confine': True,
          'uid': DEFAULT_UID, 'reason': None, 'endpoints': (),
          'endpoint_file': None, 'targets': None}
_PROBE_LOCK = threading.Lock()


class Unconfined(OSError):
    """A simulated server's software cannot be confined here."""


def enable(on=True, confine=True, uid=DEFAULT_UID, endpoints=(),
           endpoint_file=None):
    """This process runs the hooks of simulated servers (the sim's agent
    host): confine them (or not, if the operator said so), the server's
    uids from `uid` on the host. What they reach of the network is
    converge-api at the URLs `endpoints` and the one kept in
    `endpoint_file` (an embedded home's api.url, read as roots are
    made), the URLs converge gives its servers."""
    _STATE.update(enabled=on, confine=confine, uid=int(uid),
                  endpoints=tuple(endpoints), endpoint_file=endpoint_file,
                  targets=None)


def targets():
    """The endpoints a server's root forwards (`netns.Target`s), its
    names resolved once; OSError when one cannot be."""
    urls = list(_STATE['endpoints'])
    if _STATE['endpoint_file']:
        try:
            with open(_STATE['endpoint_file']) as f:
                kept = f.read().strip()
        except OSError:   # no command of the home has served it yet
            kept = ''
        if kept and kept not in urls:
            urls.append(kept)
    cached = _STATE['targets']
    if cached is None or cached[0] != urls:
        cached = _STATE['targets'] = (urls, netns.targets(urls))
    return cached[1]


def confining():
    """Whether this process's simulated servers run confined: enabled,
    not turned off, and possible here."""
    return bool(_STATE['enabled'] and _STATE['confine'] and available())


def refused():
    """Why a simulated server's software must not run here, or None:
    it is to be confined and cannot be."""
    if _STATE['enabled'] and _STATE['confine'] and not available():
        return ('this host cannot confine a simulated server\'s software '
                '(%s): not run. Run the agent host as root on Linux with '
                'util-linux, or set [sim] confine_servers = false to run '
                'it unconfined as %s on this machine (trusted templates '
                'only)' % (_STATE['reason'], _whoami()))
    return None


def _whoami():
    try:
        import pwd
        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return 'the agent host\'s user'


def available():
    """Whether roots can be made here (probed once: one is made)."""
    with _PROBE_LOCK:
        if _STATE['available'] is None:
            _STATE['reason'] = _probe()
            _STATE['available'] = _STATE['reason'] is None
            if _STATE['reason'] and _STATE['enabled']:
                LOG.warning('simulated servers cannot be confined: %s',
                            _STATE['reason'])
        return _STATE['available']


def _probe():
    """None when a root can be made and run here, else why not."""
    if not hasattr(os, 'geteuid') or sys.platform != 'linux':
        return 'not Linux'
    if os.geteuid() != 0:
        return 'the agent host does not run as root'
    missing = sorted(name for name, path in _TOOLS.items() if not path)
    if missing:
        return 'missing %s (util-linux, coreutils)' % ', '.join(missing)
    disk = tempfile.mkdtemp(prefix='converge-root-probe-')
    root = None
    try:
        root = Root(disk, binds(disk))
        done = subprocess.run(root.argv('/') + ['/bin/sh', '-c', 'id -u'],
                              stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=60)
        if done.returncode != 0 or done.stdout.strip() != b'0':
            return 'a program cannot run in a root made here: %s' % (
                done.stderr.decode('utf-8', 'replace').strip() or
                'exit %d' % done.returncode)
        return None
    except (OSError, subprocess.SubprocessError) as e:
        return 'a root cannot be made here (%s)' % e
    finally:
        if root is not None:
            root.close()
        shutil.rmtree(disk, ignore_errors=True)


def host_id(inner):
    """The host's uid (or gid) of a confined server's uid `inner`."""
    return _STATE['uid'] + inner if confining() else inner


def give(path):
    """Make `path` (on a confined server's disk, made by the host) its
    root's, so its software may use it."""
    if confining():
        os.chown(path, _STATE['uid'], _STATE['uid'], follow_symlinks=False)


def base_env():
    """The environment a simulated server's processes start from: the
    agent host's, less what is not theirs to see when confined."""
    if not confining():
        return dict(os.environ)
    env = {k: v for k, v in os.environ.items()
           if k in KEEP_ENV or k.startswith(KEEP_ENV_PREFIXES)}
    env.update(HOME='/root', USER='root', LOGNAME='root')
    env.setdefault('PATH', os.defpath)
    return env


def _agent_paths():
    """The directories of the agent's interpreter and tools."""
    return {os.path.realpath(p) for p in (
        sys.prefix, sys.base_prefix,
        os.path.dirname(os.path.realpath(sys.executable)))}


def _kept(disk, directory):
    """What under `directory` stays visible in the root: the disk and
    the agent's directories, outermost only."""
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
    """The binds a server at `disk` gets in its root (`binds`), or None
    when its software is not confined (not a simulated server, turned
    off, or not possible here)."""
    if not confining():
        return None
    return binds(disk)


def binds(disk):
    """(source, target, writable) of the server at `disk`, in mount
    order: its own directories (made on the disk as needed), its users
    once its first boot made them, its disk and the agent's directories
    at their own paths. Directories kept under one of its own are marked
    there by an empty chain of directories.

    The server's software may change its disk, and the launcher (root on
    the host) binds what is named here: a source it could replace by a
    link would bind a host directory of its choosing into its root. So
    the disk is the host root's, sticky, and writable by the server's
    group (it makes its own files, it cannot rename the host's); each
    source is the host root's and not a link (else it is not bound)."""
    disk = os.path.realpath(disk)
    uid = _STATE['uid']
    _own(disk, 0, uid, 0o1770)
    found = []
    kept = _agent_paths() | {disk}
    for target in PRIVATE_DIRS:
        source = os.path.join(disk, target.lstrip('/'))
        os.makedirs(os.path.dirname(source), exist_ok=True)
        if not _is_dir(source):
            if os.path.lexists(source):   # the server's: not the host's
                _remove(source)
            os.mkdir(source)
        if target in _STICKY:
            _own(source, 0, 0, _STICKY[target])
        else:   # its users' homes: made by its root (the group)
            _own(source, 0, uid, 0o775)
        found.append((source, target, True))
        for keep in _kept(disk, target):
            os.makedirs(os.path.join(source, os.path.relpath(keep, target)),
                        exist_ok=True)
    for target in PRIVATE_FILES:
        source = os.path.join(disk, target.lstrip('/'))
        parent = os.lstat(os.path.dirname(source)) if _is_dir(
            os.path.dirname(source)) else None
        if parent is not None and parent.st_uid == 0 and \
                _is(source, stat.S_ISREG):
            found.append((source, target, True))
    outer = []
    for path in sorted(kept, key=len):
        if not any(_under(path, o) for o in outer):
            outer.append(path)
    for path in outer:
        found.append((path, path, path == disk))
    return found


def _is(path, kind):
    try:
        return kind(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _is_dir(path):
    return _is(path, stat.S_ISDIR)


def _own(path, uid, gid, mode):
    st = os.lstat(path)
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.chown(path, uid, gid, follow_symlinks=False)
    if stat.S_IMODE(st.st_mode) != mode:
        os.chmod(path, mode)


def _remove(path):
    if _is_dir(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _fstab_path(path):
    # fstab(5): blanks and backslashes in a path are octal escapes
    return ''.join('\\%03o' % ord(c) if c in ' \t\n\\' else c for c in path)


#: what a path given to an overlay layer may not hold (its options'
#: separators, fstab's blanks)
_LAYER_UNSAFE = set(' \t\n\\,:')


def _layer_lines(layers, stage):
    """fstab entries (source, target, type, options) of a root's overlay
    `layers`: (target, [lower dirs: None is the root's own directory as
    built], upper dir or None (read-only), work dir). An image's tree
    over the host's /usr, its /etc and /var with what the server writes
    kept on its disk (`converge.agent.image`)."""
    found = []
    for target, lowers, upper, work in layers:
        paths = [stage + target if p is None else p for p in lowers]
        if upper is not None:
            paths += [upper, work]
        for path in paths + [target]:
            if set(path) & _LAYER_UNSAFE or not os.path.isabs(path):
                raise OSError('an overlay layer cannot use the path %r'
                              % path)
        options = 'lowerdir=' + ':'.join(
            stage + target if p is None else p for p in lowers)
        if upper is not None:
            options += ',upperdir=%s,workdir=%s' % (upper, work)
        else:
            options += ',ro'
        found.append(('overlay', target, 'overlay',
                      options + ',nosuid,nodev'))
    return found


def _launcher(binds, uid, hosts=(), layers=()):
    """The shell, run as root in fresh mount, PID and network namespaces
    (as their PID 1), that builds the root under `_STAGE` (`hosts`: lines
    added to its /etc/hosts; `layers`: overlays, mounted first, see
    `_layer_lines`), moves into it and, in a user namespace of its own,
    says ``ready <host pid>``, waits for its uid map and sleeps as the
    root's root."""
    stage = _STAGE
    dirs, copies, fstab = set(), [], []
    layered = {target for target, _l, _u, _w in layers}
    fstab += _layer_lines(layers, stage)
    dirs.update(layered)
    for path in SYSTEM_DIRS:
        if path in layered:
            continue
        if os.path.islink(path):
            copies.append(path)
        elif os.path.isdir(path):
            dirs.add(path)
            fstab.append((path, path, 'none', 'bind,ro,nosuid,nodev'))
    copies += [os.path.join('/etc', n) for n in ETC
               if os.path.lexists(os.path.join('/etc', n))]
    for name in ETC_BOUND:
        path = os.path.join('/etc', name)
        if os.path.isdir(path) and not os.path.islink(path):
            dirs.add(path)
            fstab.append((path, path, 'none', 'bind,ro,nosuid,nodev'))
    files = []
    for name in DEVICES:
        path = os.path.join('/dev', name)
        if os.path.exists(path):
            files.append(path)
            fstab.append((path, path, 'none', 'bind,nosuid,noexec'))
    dirs.update(EMPTY_DIRS)
    dirs.update(('/etc', '/dev', '/proc', '/.old'))
    for source, target, writable in binds:
        if os.path.isdir(source):
            if not any(_under(target, d) and target != d
                       for d in PRIVATE_DIRS):
                dirs.add(target)   # else made on the disk beforehand
        else:
            files.append(target)
        fstab.append((source, target, 'none', 'bind,nosuid,nodev' + (
            '' if writable else ',ro')))
    fstab.append(('proc', '/proc', 'proc', 'nosuid,nodev,noexec'))
    lines = ['%s %s %s %s 0 0' % (_fstab_path(s), _fstab_path(stage + t),
                                  kind, options)
             for s, t, kind, options in fstab]
    q = shlex.quote
    t = _TOOLS
    rel = lambda p: q('.' + p)   # noqa: E731
    script = [
        'set -e',
        # the shell's own pid on the host (the new /proc is not mounted)
        'read -r pid rest < /proc/self/stat',
        '%s -t tmpfs -o mode=0755,size=%s converge-root %s' % (
            q(t['mount']), ROOT_SIZE, q(stage)),
        'cd %s' % q(stage),
        '%s -p -- %s' % (q(t['mkdir']), ' '.join(
            rel(d) for d in sorted(dirs))),
    ]
    if copies:
        script.append('%s -a --parents -- %s .' % (
            q(t['cp']), ' '.join(q(p) for p in copies)))
    script += [': > %s' % rel(f) for f in files]
    if hosts:
        script.append('printf "%%s\\n" %s >> etc/hosts' % ' '.join(
            q(line) for line in hosts))
    script += [
        '%s -hR %d:%d .' % (q(t['chown']), uid, uid),
        # the table is read whole before the /proc mount covers it
        'printf "%%s\\n" %s > proc/fstab' % ' '.join(q(x) for x in lines),
        '%s -a -T proc/fstab' % q(t['mount']),
        '%s . .old' % q(t['pivot_root']),
        '%s -l /.old' % q(t['umount']),
        'cd /',
        '%s /.old' % q(t['rmdir']),
        # root inside, `uid` outside: the map is written by the agent
        # host (a process cannot map more than its own uid)
        'exec %s --user --keep-caps -- /bin/sh -c %s "$pid"' % (
            q(t['unshare']), q(
                'echo "ready $0"; read -r go; exec %s --reuid 0 --regid 0 '
                '--clear-groups --pdeathsig KILL -- %s infinity' % (
                    q(t['setpriv']), q(t['sleep'])))),
    ]
    return '\n'.join(script)


class Root:
    """A server's root, kept while it runs: a process that built it and
    sleeps as its PID 1. Each of the server's programs joins it (`argv`,
    util-linux's nsenter): made once per server, not per hook. It dies
    with the agent's process (parent-death signal, set from a thread
    that lives as long) or when `close`d, and every process in it with
    it, and its forwarders (`endpoints`: the `netns.Target`s its network
    namespace gets, by default `targets()`; `layers`: overlays of an
    image, `_layer_lines`)."""

    def __init__(self, disk, binds, uid=None, endpoints=None, layers=()):
        self.binds = list(binds)
        self.layers = list(layers or ())
        self.uid = _STATE['uid'] if uid is None else uid
        self.endpoints = targets() if endpoints is None else list(endpoints)
        self._lock = threading.Lock()
        self._closed = False
        self._forwarding = None
        disk = os.path.realpath(disk)   # named in an error
        t = _TOOLS
        self.proc = _SPAWNER.popen(
            [t['setpriv'], '--pdeathsig', 'KILL', '--', t['unshare'],
             '--mount', '--pid', '--ipc', '--net', '--fork', '--kill-child',
             '--propagation', 'private', '--', '/bin/sh', '-c',
             _launcher(self.binds, self.uid,
                       netns.hosts_lines(self.endpoints), self.layers)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True)
        try:
            ready = self.proc.stdout.readline().split()
            if len(ready) != 2 or ready[0] != b'ready':
                raise OSError('the root of %s could not be made: %s' % (
                    disk, self._error()))
            self.pid = int(ready[1])
            for name in ('uid_map', 'gid_map'):
                with open('/proc/%d/%s' % (self.pid, name), 'w') as f:
                    f.write('0 %d %d\n' % (self.uid, UID_COUNT))
            self._network(disk)
            self.proc.stdin.write(b'go\n')
            self.proc.stdin.close()
        except (OSError, ValueError):
            self.close()
            raise
        finally:
            self.proc.stdout.close()
        self.proc.stderr.close()

    def _network(self, disk):
        """Its loopback up, and a forwarder at each of its endpoints."""
        try:
            listeners = netns.listen(self.pid, self.endpoints)
        except OSError as e:
            raise OSError('the network of the root of %s could not be '
                          'made: %s' % (disk, e))
        if not listeners:
            return
        try:
            self._forwarding = relay.RELAY.forward(listeners)
        except BaseException:
            for sock, _target in listeners:
                sock.close()
            raise

    def _error(self):
        self.close()
        text = self.proc.stderr.read().decode('utf-8', 'replace').strip()
        self.proc.stderr.close()
        return text[-500:] or 'exit %s' % self.proc.returncode

    def alive(self):
        return self.proc.poll() is None

    def argv(self, cwd):
        """argv that runs the rest of its arguments in the root, as its
        root, in directory `cwd` (a path in the root)."""
        t = _TOOLS
        return [t['nsenter'], '--target=%d' % self.pid, '--user',
                '--mount', '--pid', '--ipc', '--net', '--', t['env'], '-C',
                cwd]

    def close(self):
        with self._lock:   # once: its pid may be another's once reaped
            if self._closed:
                return
            self._closed = True
        if self._forwarding is not None:
            self._forwarding.close()
        if self.proc.poll() is None:   # not reaped yet: its pid is its own
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        self.proc.wait()


# A process forked while another thread has a script open for writing
# holds that descriptor until it execs, and exec of the script then fails
# with "Text file busy": scripts are written, and processes started, one
# at a time, whichever thread starts them (the hooks' runners, first boot,
# the spawner of roots below).
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
