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


def _die_in_own_root(binds):
    # in the child (no util-linux tools): what the chain does
    _die_with_parent()
    rootfs.enter(binds)


class ProcessRunner:
    """Runs the hooks' processes of one server; `kill_all` cuts off the
    ones still running."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running = set()
        self._dead = False
        self._holder = None   # the server's mount namespace, kept

    def run(self, argv, env, cwd, disk=None):
        """(exit code, stdout, stderr) of argv, run to its end; with
        `disk`, seeing the server's own /tmp, /home... (`rootfs`)."""
        binds = rootfs.plan(disk) if disk else None
        # the cheap spawn: tools exec'd in a chain, no Python in the child
        # (a preexec_fn makes subprocess fork the whole agent host)
        prefix = list(_SETPRIV_ARGV)
        preexec = None if prefix else _die_with_parent
        if binds:
            enter = self._enter(binds, cwd) if prefix else None
            if enter is None:
                enter = rootfs.chain(binds)
            if enter is not None and prefix:
                prefix = enter + prefix
            else:
                prefix = []
                preexec = functools.partial(_die_in_own_root, binds)
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
        if self._dead:
            raise Stopped()
        return proc.returncode, out, err

    def _enter(self, binds, cwd):
        """argv joining the server's kept mount namespace (made, or made
        again when its binds changed or it died); None when it cannot be
        kept here: each hook then makes its own."""
        if not rootfs.Holder.possible():
            return None
        with self._lock:
            if self._dead:
                raise Stopped()
            holder = self._holder
            if holder is not None and (holder.binds != list(binds) or
                                       not holder.alive()):
                holder.close()
                holder = self._holder = None
            if holder is None:
                try:
                    holder = self._holder = rootfs.Holder(binds)
                except OSError as e:
                    LOG.warning('hooks make their own mounts: %s', e)
                    return None
                # a runner dropped without close() lets it go too
                weakref.finalize(self, holder.close)
            return holder.argv(os.path.abspath(cwd or os.getcwd()))

    def close(self):
        """Let the kept namespace go (the hooks still running keep it)."""
        with self._lock:
            holder, self._holder = self._holder, None
        if holder is not None:
            holder.close()

    def kill_all(self):
        with self._lock:
            self._dead = True
            running = list(self._running)
        for proc in running:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        self.close()


class Stopped(Exception):
    """The hook was cut off by its server stopping: no result."""


def _env(deployment):
    """Heat's script contract: every input an environment variable, lists
    and maps JSON-encoded."""
    env = dict(os.environ)
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


def _outputs(disk, kind, deployment):
    """(outputs path, declared names) for Heat's ``heat_outputs_path``
    contract: the hook's tool writes output X to ``<path>.X``. Values a
    previous action left are removed first: they must not leak."""
    outdir = os.path.join(disk, 'heat-config-%s-outputs' % kind)
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, deployment['id'])
    declared = [o['name'] for o in deployment.get('outputs') or ()
                if o.get('name')]
    for name in declared:
        try:
            os.unlink('%s.%s' % (path, name))
        except FileNotFoundError:
            pass
    return path, declared


#: the key of a result's facts (converge's own; the engine's fact store)
FACTS = 'converge_facts'


def _facts_path(disk, deployment):
    """converge's fact store: the script writes fact KEY to
    ``<path>.KEY`` (as an output to ``heat_outputs_path``); facts a
    previous run left are removed first."""
    factdir = os.path.join(disk, 'converge-facts')
    os.makedirs(factdir, exist_ok=True)
    path = os.path.join(factdir, deployment['id'])
    prefix = os.path.basename(path) + '.'
    for name in os.listdir(factdir):
        if name.startswith(prefix):
            os.unlink(os.path.join(factdir, name))
    return path


def _read_facts(path):
    factdir, prefix = os.path.dirname(path), os.path.basename(path) + '.'
    found = {}
    for name in sorted(os.listdir(factdir)):
        if name.startswith(prefix) and len(name) > len(prefix):
            with open(os.path.join(factdir, name), 'rb') as f:
                found[name[len(prefix):]] = f.read().decode(
                    'utf-8', 'replace').strip()
    return found


def _read_outputs(path, declared):
    found = {}
    for name in declared:
        try:
            with open('%s.%s' % (path, name), 'rb') as f:
                found[name] = f.read().decode('utf-8', 'replace')
        except FileNotFoundError:
            pass
    return found


def script(deployment, disk, runner):
    """Heat's script hook: the config is the program."""
    dep_id = deployment['id']
    work = os.path.join(disk, 'heat-config-script')
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, dep_id)
    with FORK_LOCK:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
        with os.fdopen(fd, 'w') as f:
            f.write(deployment.get('config') or '')
    os.chmod(path, 0o700)
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
    env = dict(os.environ)
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
    os.makedirs(work, exist_ok=True)
    outputs_path, declared = _outputs(disk, 'ansible', deployment)
    variables = {'heat_config_id': dep_id}
    for item in deployment.get('inputs') or ():
        if item.get('name'):
            value = item.get('value')
            variables[item['name']] = '' if value is None else value
    variables['heat_outputs_path'] = outputs_path
    playbook = os.path.join(work, '%s_playbook.yaml' % dep_id)
    vars_file = os.path.join(work, '%s_variables.json' % dep_id)
    with open(playbook, 'w') as f:
        f.write(deployment.get('config') or '')
    with open(vars_file, 'w') as f:
        json.dump(variables, f)
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
    work = os.path.join(disk, 'heat-config-puppet')
    os.makedirs(work, exist_ok=True)
    manifest = os.path.join(work, '%s.pp' % deployment['id'])
    with open(manifest, 'w') as f:
        f.write(deployment.get('config') or '')
    env = dict(os.environ)
    facts = _env({'inputs': deployment.get('inputs')})
    env.update({'FACTER_' + k: v for k, v in facts.items()
                if k not in os.environ})
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
    return hook(deployment, disk, runner)
