"""Hooks: what runs a deployment's config on the server.

A hook is found by entry point (group ``converge.agent.hooks``, name =
the config's ``group``); ``Heat::Ungrouped`` is the script hook, as in
Heat. A hook is a callable ``hook(deployment, disk, runner)`` returning
Heat's signal payload: ``deploy_stdout``, ``deploy_stderr``,
``deploy_status_code`` and every declared output it found, by name. A
failure (non-zero exit, an error_output with a value) is still just a
result: the engine decides FAILED from it.

``runner`` starts the hook's processes (`ProcessRunner`), so that whoever
owns the agent can cut them off (a reboot of a simulated server).
"""

import ctypes
import errno
import functools
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import weakref
from importlib import metadata

from converge.agent import rootfs

LOG = logging.getLogger(__name__)

GROUP = 'converge.agent.hooks'
#: stdout and stderr are each trimmed to this many bytes (Heat's API takes
#: a request of at most 1 MiB)
MAX_OUTPUT = 900 * 1024
_TRIMMED = '[... trimmed: only the last %d bytes are kept ...]\n'
#: scripts are written, and processes started, one at a time (rootfs.py)
FORK_LOCK = rootfs.FORK_LOCK


def trim(text):
    data = text.encode('utf-8', 'replace') if isinstance(text, str) \
        else bytes(text or b'')
    if len(data) <= MAX_OUTPUT:
        return data.decode('utf-8', 'replace')
    head = (_TRIMMED % MAX_OUTPUT).encode()
    return (head + data[-(MAX_OUTPUT - len(head)):]).decode(
        'utf-8', 'replace')


def _load_prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):   # not Linux
        return None


# looked up here, not in the forked child (no dlopen between fork and exec)
_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1
#: util-linux's setpriv sets the parent-death signal and execs the hook:
#: no Python function runs in the child, so subprocess can vfork. A
#: preexec_fn forces a full fork of the agent host, ~10 ms with a thousand
#: servers' agents in it against ~1.6 ms (measured here), and a thousand
#: servers run thousands of hooks.
_SETPRIV = shutil.which('setpriv')
_SETPRIV_ARGV = [_SETPRIV, '--pdeathsig', 'KILL', '--'] if _SETPRIV else []


def _die_with_parent():
    # Linux: the hook is killed when the thread that started it dies (the
    # agent killed, the server powered off) instead of running on unseen
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL))


class ProcessRunner:
    """Runs the hooks' processes of one server; `kill_all` cuts off the
    ones still running."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running = set()
        self._dead = False
        self._root = None   # the server's root (rootfs.Root), kept
        self._closing = False
        #: the overlays of the server's image in its root (rootfs.Root's
        #: `layers`), set by whoever boots it
        self.layers = ()

    def run(self, argv, env, cwd, disk=None):
        """(exit code, stdout, stderr) of argv, run to its end; with
        `disk`, in the simulated server's own root (`rootfs`)."""
        prefix = list(_SETPRIV_ARGV)
        # the cheap spawn: tools exec'd in a chain, no Python in the child
        # (a preexec_fn makes subprocess fork the whole agent host)
        preexec = None if prefix else _die_with_parent
        if disk:
            refused = rootfs.refused()
            if refused:
                raise rootfs.Unconfined(refused)
            binds = rootfs.plan(disk)
            if binds is not None:
                if not prefix:
                    raise rootfs.Unconfined('setpriv (util-linux) is missing')
                prefix = self._enter(disk, binds, cwd) + prefix
                cwd = None   # the root's own path, given to the chain
        with self._lock:
            if self._dead:
                raise Stopped()
            for attempt in range(5):
                try:
                    with FORK_LOCK:
                        proc = subprocess.Popen(
                            prefix + list(argv), env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=preexec)
                    break
                except OSError as e:
                    # another process (not ours) forked with it open
                    if e.errno != errno.ETXTBSY or attempt == 4:
                        raise
                    time.sleep(0.05 * 2 ** attempt)
            self._running.add(proc)
        try:
            out, err = proc.communicate()
        finally:
            with self._lock:
                self._running.discard(proc)
                last = self._closing and not self._running
            if last:
                self.close()
        if self._dead:
            raise Stopped()
        return proc.returncode, out, err

    def start(self, argv, env, cwd, disk, output):
        """A long-lived process of the server (a service of its image)
        started in its root, its stdout and stderr to descriptor
        `output`; it is cut off as the hooks are (`kill_all`), and
        forgotten once `reap`ed."""
        refused = rootfs.refused()
        if refused:
            raise rootfs.Unconfined(refused)
        binds = rootfs.plan(disk)
        if binds is None or not _SETPRIV_ARGV:
            raise rootfs.Unconfined('this host does not give the server a '
                                    'root of its own')
        prefix = self._enter(disk, binds, cwd) + list(_SETPRIV_ARGV)
        with self._lock:
            if self._dead:
                raise Stopped()
            with FORK_LOCK:
                proc = subprocess.Popen(
                    prefix + list(argv), env=env, stdin=subprocess.DEVNULL,
                    stdout=output, stderr=subprocess.STDOUT,
                    start_new_session=True)
            self._running.add(proc)
        return proc

    @property
    def dead(self):
        """Whether its processes were cut off (`kill_all`)."""
        return self._dead

    def reap(self, proc):
        """Forget `proc` (started by `start`) once it ended."""
        proc.wait()
        with self._lock:
            self._running.discard(proc)

    def _enter(self, disk, binds, cwd):
        """argv joining the server's root (made, or made again when its
        binds changed or it died)."""
        with self._lock:
            if self._dead:
                raise Stopped()
            root = self._root
            if root is not None and (root.binds != list(binds) or
                                     root.layers != list(self.layers) or
                                     not root.alive()):
                root.close()
                root = self._root = None
            if root is None:
                root = self._root = rootfs.Root(disk, binds,
                                                layers=self.layers)
                # a runner dropped without close() lets it go too
                weakref.finalize(self, root.close)
            return root.argv(os.path.abspath(cwd or disk))

    def close(self):
        """Let the server's root go once no hook runs in it (a hook still
        running keeps it)."""
        with self._lock:
            if self._running:
                self._closing = True
                return
            root, self._root = self._root, None
        if root is not None:
            root.close()

    def kill_all(self):
        with self._lock:
            self._dead = True
            running = list(self._running)
        for proc in running:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        # the power cut: the root goes now, with whatever runs in it
        with self._lock:
            root, self._root = self._root, None
        if root is not None:
            root.close()


class Stopped(Exception):
    """The hook was cut off by its server stopping: no result."""


def _env(deployment):
    """Heat's script contract: every input an environment variable, lists
    and maps JSON-encoded."""
    env = rootfs.base_env()
    for item in deployment.get('inputs') or ():
        name = item.get('name')
        if not name:
            continue
        value = item.get('value')
        if isinstance(value, (list, dict)):
            value = json.dumps(value)
        elif isinstance(value, bool):
            value = 'true' if value else 'false'
        elif value is None:
            value = ''
        env[str(name)] = str(value)
    return env


def _result(code, out, err, outputs=None):
    result = {'deploy_stdout': trim(out), 'deploy_stderr': trim(err),
              'deploy_status_code': code}
    result.update(outputs or {})
    return result


def _missing(tool, what):
    return _result(1, '', '%s is not installed on this server (%r not '
                   'found on PATH nor in %s): cannot apply a %s config'
                   % (what, tool, os.path.dirname(sys.executable),
                      what.split()[0].lower()))


def _tool(name):
    """The path of command `name`: on PATH, else beside the agent's own
    interpreter (a tool installed in the agent's virtualenv is there
    though the venv was never activated); None when neither has it."""
    found = shutil.which(name)
    if found is None:
        found = shutil.which(name, path=os.path.dirname(sys.executable))
    return found


# The server's software may change its disk while (or before) the agent
# reads and writes it there, and the agent runs as root on the host: a
# directory of the agent's on the disk is opened without following a
# symlink, and files in it by name (no "/") from that directory, so that
# a link the server left cannot point the agent at the host's files.

def _open_dir(path):
    """A descriptor of directory `path` (made, the server's to write),
    never a symlink's target: a link or file there is replaced."""
    for _attempt in range(3):
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY |
                         os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            os.unlink(path)   # the server's link (or file): not followed
            continue
        if rootfs.confining():   # made before its server was confined too
            os.fchown(fd, rootfs.host_id(0), rootfs.host_id(0))
        return fd
    raise OSError(errno.ELOOP, 'the server keeps replacing %s' % path)


def _safe_name(name):
    return bool(name) and '/' not in name and name not in ('.', '..')


def write_in(directory, name, data, mode=0o644):
    """Write `data` (str) to a new file `name` in `directory` (a path
    on the disk), the server's own; its path."""
    dfd = _open_dir(directory)
    try:
        with FORK_LOCK:   # no process forked while it is open (rootfs)
            try:
                os.unlink(name, dir_fd=dfd)
            except FileNotFoundError:
                pass
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                         os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
            with os.fdopen(fd, 'w') as f:
                f.write(data)
                os.fchmod(f.fileno(), mode)
                if rootfs.confining():
                    os.fchown(f.fileno(), rootfs.host_id(0),
                              rootfs.host_id(0))
    finally:
        os.close(dfd)
    return os.path.join(directory, name)


def append_in(directory, name, data):
    """Append `data` (bytes) to file `name` in `directory` (a path on
    the disk), never to what a symlink there points at."""
    dfd = _open_dir(directory)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT |
                     os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    finally:
        os.close(dfd)
    with os.fdopen(fd, 'ab') as f:
        f.write(data)


def _read_in(dfd, name):
    """The text of regular file `name` in directory `dfd`, or None."""
    if not _safe_name(name):
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                     os.O_CLOEXEC, dir_fd=dfd)
    except OSError:   # missing, or a link the server left
        return None
    with os.fdopen(fd, 'rb') as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read(MAX_OUTPUT + 1).decode('utf-8', 'replace')


def _outputs(disk, kind, deployment):
    """(outputs path, declared names) for Heat's ``heat_outputs_path``
    contract: the hook's tool writes output X to ``<path>.X``. Values a
    previous action left are removed first: they must not leak."""
    outdir = os.path.join(disk, 'heat-config-%s-outputs' % kind)
    path = os.path.join(outdir, deployment['id'])
    declared = [o['name'] for o in deployment.get('outputs') or ()
                if o.get('name')]
    dfd = _open_dir(outdir)
    try:
        for name in declared:
            if _safe_name('%s.%s' % (deployment['id'], name)):
                try:
                    os.unlink('%s.%s' % (deployment['id'], name),
                              dir_fd=dfd)
                except (FileNotFoundError, IsADirectoryError):
                    pass
    finally:
        os.close(dfd)
    return path, declared


#: the key of a result's facts (converge's own; the engine's fact store)
FACTS = 'converge_facts'


def _facts_path(disk, deployment):
    """converge's fact store: the script writes fact KEY to
    ``<path>.KEY`` (as an output to ``heat_outputs_path``); facts a
    previous run left are removed first."""
    factdir = os.path.join(disk, 'converge-facts')
    path = os.path.join(factdir, deployment['id'])
    prefix = os.path.basename(path) + '.'
    dfd = _open_dir(factdir)
    try:
        for name in os.listdir(dfd):
            if name.startswith(prefix):
                try:
                    os.unlink(name, dir_fd=dfd)
                except (FileNotFoundError, IsADirectoryError):
                    pass
    finally:
        os.close(dfd)
    return path


def _read_facts(path):
    factdir, prefix = os.path.dirname(path), os.path.basename(path) + '.'
    found = {}
    dfd = _open_dir(factdir)
    try:
        for name in sorted(os.listdir(dfd)):
            if name.startswith(prefix) and len(name) > len(prefix):
                text = _read_in(dfd, name)
                if text is not None:
                    found[name[len(prefix):]] = text.strip()
    finally:
        os.close(dfd)
    return found


def _read_outputs(path, declared):
    found = {}
    dfd = _open_dir(os.path.dirname(path))
    try:
        for name in declared:
            text = _read_in(dfd, '%s.%s' % (os.path.basename(path), name))
            if text is not None:
                found[name] = text
    finally:
        os.close(dfd)
    return found


def script(deployment, disk, runner):
    """Heat's script hook: the config is the program."""
    dep_id = deployment['id']
    path = write_in(os.path.join(disk, 'heat-config-script'), dep_id,
                     deployment.get('config') or '', 0o700)
    outputs_path, declared = _outputs(disk, 'script', deployment)
    facts_path = _facts_path(disk, deployment)
    env = _env(deployment)
    env['heat_outputs_path'] = outputs_path
    env['converge_facts_path'] = facts_path
    try:
        code, out, err = runner.run([path], env, disk, disk=disk)
    except OSError as e:   # no interpreter, bad #! line, not executable
        return _result(1, '', 'Cannot run the script %s: %s' % (path, e))
    result = _result(code, out, err, _read_outputs(outputs_path, declared))
    facts = _read_facts(facts_path)
    if facts:
        result[FACTS] = facts
    return result


def _ansible_env(disk):
    env = rootfs.base_env()
    # Ansible's own state (~/.ansible, its temp files) on the server's
    # disk, not in the home of whoever runs the agent
    state = os.path.join(disk, '.ansible')
    env.setdefault('ANSIBLE_HOME', state)
    env.setdefault('ANSIBLE_LOCAL_TEMP', os.path.join(state, 'tmp'))
    env.setdefault('ANSIBLE_REMOTE_TEMP', os.path.join(state, 'tmp'))
    # modules run with the agent's interpreter: interpreter discovery
    # may pick a python that cannot run them (a pyenv shim)
    env.setdefault('ANSIBLE_PYTHON_INTERPRETER', sys.executable)
    # facts are gathered only by a play that asks (gather_facts: true):
    # about 2 s per run otherwise, for facts of the host, not of the
    # simulated server. The agent's environment may say otherwise.
    env.setdefault('ANSIBLE_GATHERING', 'explicit')
    env.setdefault('ANSIBLE_RETRY_FILES_ENABLED', 'false')
    env.setdefault('ANSIBLE_NOCOLOR', '1')
    return env


def ansible(deployment, disk, runner):
    """Heat's heat-config-ansible contract: the config is a playbook run
    against localhost; the inputs, ``heat_config_id`` and
    ``heat_outputs_path`` are its extra vars; output X is read from
    ``{{heat_outputs_path}}.X``; options ``tags``, ``skip_tags``,
    ``modulepath``, ``inventory`` (a file in the working directory) and
    ``callback_plugins`` as Heat's hook takes them."""
    tool = _tool('ansible-playbook')
    if tool is None:
        return _missing('ansible-playbook', 'Ansible')
    dep_id = deployment['id']
    work = os.path.join(disk, 'heat-config-ansible')
    outputs_path, declared = _outputs(disk, 'ansible', deployment)
    variables = {'heat_config_id': dep_id}
    for item in deployment.get('inputs') or ():
        if item.get('name'):
            value = item.get('value')
            variables[item['name']] = '' if value is None else value
    variables['heat_outputs_path'] = outputs_path
    playbook = write_in(work, '%s_playbook.yaml' % dep_id,
                         deployment.get('config') or '')
    vars_file = write_in(work, '%s_variables.json' % dep_id,
                          json.dumps(variables))
    options = deployment.get('options') or {}
    inventory = 'localhost,'
    if options.get('inventory'):
        inventory = os.path.join(work, options['inventory'])
    argv = [tool, '-i', inventory, '--connection=local']
    for option, flag in (('tags', '--tags'), ('skip_tags', '--skip-tags'),
                         ('modulepath', '--module-path')):
        if options.get(option):
            argv += [flag, str(options[option])]
    argv += [playbook, '--extra-vars', '@' + vars_file]
    env = _ansible_env(disk)
    if options.get('callback_plugins'):
        env['ANSIBLE_CALLBACK_PLUGINS'] = str(options['callback_plugins'])
    code, out, err = runner.run(argv, env, work, disk=disk)
    return _result(code, out, err, _read_outputs(outputs_path, declared))


def puppet(deployment, disk, runner):
    """The config is a Puppet manifest (puppet apply); the inputs are
    facts (FACTER_<name>)."""
    tool = _tool('puppet')
    if tool is None:
        return _missing('puppet', 'Puppet')
    manifest = write_in(os.path.join(disk, 'heat-config-puppet'),
                         '%s.pp' % deployment['id'],
                         deployment.get('config') or '')
    env = rootfs.base_env()
    facts = _env({'inputs': deployment.get('inputs')})
    env.update({'FACTER_' + k: v for k, v in facts.items()
                if k not in env})
    code, out, err = runner.run(
        [tool, 'apply', '--detailed-exitcodes', manifest], env, disk,
        disk=disk)
    if code == 2:   # --detailed-exitcodes: 2 means "applied changes"
        code = 0
    return _result(code, out, err)


def find(group):
    """The hook for a config group, or None."""
    name = 'script' if group in (None, '', 'Heat::Ungrouped') else group
    ep = _entry_points().get(name)
    return ep.load() if ep is not None else None


@functools.lru_cache(maxsize=None)
def _entry_points():
    # read once per process: scanning the installed packages' entry points
    # on every run was a quarter of a busy agent host's time
    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


def run(deployment, disk, runner):
    """Run `deployment` with its hook; a group without a hook is a failed
    result naming it."""
    group = deployment.get('group')
    hook = find(group)
    if hook is None:
        return _result(1, '', 'No hook for config group %r on this server '
                       '(entry points of %s)' % (group, GROUP))
    refused = rootfs.refused()
    if refused:   # before anything is written on the disk
        return _result(1, '', refused)
    try:
        return hook(deployment, disk, runner)
    except rootfs.Unconfined as e:
        return _result(1, '', str(e))
