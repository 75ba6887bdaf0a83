"""What cloud-init does with a simulated server's user_data at its first
boot: once per instance, never again on a reboot.

The user_data is read as cloud-init reads it: a MIME multipart (Heat's
MultipartMime, or the bootstrap document of a SOFTWARE_CONFIG server)
or a single document. Of its parts:

- ``text/cloud-config`` (or a text starting ``#cloud-config``):
  ``users`` (``default`` is the image's default user, which gets the
  server's public key) are added to the disk's ``etc/passwd`` and
  ``etc/group`` (copies of the host's, plus them) with a home under
  ``home/``; ``write_files`` are written under the disk;
  ``runcmd`` runs after the scripts, as cloud-init's scripts-user does;
- ``text/x-shellscript`` (or a text starting ``#!``) is run.

Scripts run as deployment hooks do on a simulated server: in a mount
namespace where /tmp, /home, /etc/passwd... are the disk's (`rootfs`),
with ``os-apply-config`` on their PATH answering from the server's
metadata (its public key: ``public-keys.0.openssh-key``). Where that
namespace cannot be made, scripts are not run (they would write the
host's /home): the journal says so.

Exactly once: ``<disk>/firstboot.json`` records each part as started
before it runs and done after; a part found started (the server lost
power) is recorded interrupted, not run again. Output goes to
``<disk>/var/log/cloud-init-output.log``, as on a real server.
"""

import base64
import hashlib
import json
import logging
import os
import shlex
import shutil
import sys
import threading

import yaml

from converge import userdata
from converge.agent import hooks
from converge.agent import journal as journal_mod
from converge.agent import rootfs

LOG = logging.getLogger(__name__)

JOURNAL = 'firstboot.json'
CLOUD_CONFIG = userdata.CLOUD_CONFIG
SHELLSCRIPT = userdata.SHELLSCRIPT
BOOTHOOK = userdata.BOOTHOOK
PART_HANDLER = userdata.PART_HANDLER
#: the parts of a user_data cloud-init acts on (converge/userdata.py)
parts = userdata.parts
OUTPUT_LOG = os.path.join('var', 'log', 'cloud-init-output.log')
# the default user of an image, by a word of its name (else cloud-user)
_DEFAULT_USERS = ('ubuntu', 'fedora', 'centos', 'debian', 'cirros')

# os-apply-config, as far as a simulated server's scripts need it:
# --key K prints the metadata value at dotted path K
_OAC = '''#!%(python)s
# converge sim: os-apply-config --key KEY [--type raw]: a metadata value
import json, sys
args = sys.argv[1:]
if '--key' not in args or args.index('--key') + 1 >= len(args):
    sys.exit('os-apply-config (converge sim): only --key KEY is known')
value = json.load(open(%(meta)r))
try:
    for part in args[args.index('--key') + 1].split('.'):
        value = value[int(part)] if isinstance(value, list) else value[part]
except (KeyError, IndexError, ValueError, TypeError):
    sys.exit('os-apply-config: key %%s not found' %% args[
        args.index('--key') + 1])
print(value if isinstance(value, str) else json.dumps(value))
'''


def public_key(key_name):
    """The simulated cloud's public key of keypair `key_name` (made up:
    stable, and naming the keypair)."""
    blob = base64.b64encode(b'\x00\x00\x00\x07ssh-rsa' + hashlib.sha256(
        key_name.encode()).digest()).decode()
    return 'ssh-rsa %s %s' % (blob, key_name)


def status(disk):
    """What the first boot did: the journal, or None before it ran."""
    try:
        with open(os.path.join(disk, JOURNAL)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _save(disk, state):
    journal_mod.write_atomically(os.path.join(disk, JOURNAL),
                                 json.dumps(state, sort_keys=True).encode())


def run(disk, user_data_parts, server, processes, path=None):
    """The first boot of the server at `disk` (`server`: id, name,
    image, key_name), once: a boot after it only counts itself.

    `user_data_parts`: (content type, text[, filename]) as
    `userdata.parts` (or, for an image whose cloud-init acts on part
    handlers and boothooks, `userdata.mime_parts`) gives them. `path`:
    the PATH its scripts run with, that of the server's image (else the
    host's, with the os-apply-config shim first)."""
    user_data_parts = [tuple(p) + (None,) * (3 - len(p))
                       for p in user_data_parts]
    state = status(disk) or {'parts': [], 'state': 'started', 'boots': 0}
    state['boots'] += 1
    first = not state['parts']
    if first:
        state['parts'] = [{'type': kind, 'state': 'pending'}
                          for kind, _text, _name in user_data_parts]
    for entry in state['parts']:
        if entry['state'] == 'started':   # power lost while it ran
            entry.update(state='interrupted', note='the server stopped '
                         'while it ran; not run again')
    if not first and state['state'] == 'started':
        state['state'] = 'interrupted'   # the parts not begun stay so
    _save(disk, state)
    if not first:
        return state
    meta = _metadata(disk, server)
    runcmd = []
    # cloud-init's order: every cloud-config (its init and config
    # stages), then the scripts (its final stage) in their order. Here it
    # also means that what the host writes on the disk as root (users,
    # homes, write_files) is written before any of the server's software
    # ran, which could have left links there for it to follow.
    # Boothooks and part handlers, server software too, run after them
    # for the same reason (cloud-init runs them earlier, in its init
    # stage); then the scripts.
    parts = list(enumerate(user_data_parts))
    parts.sort(key=lambda p: _STAGES.get(p[1][0], len(_STAGES)))
    for index, (kind, text, _name) in parts:
        entry = state['parts'][index]
        if kind == PART_HANDLER:
            _part_handler(disk, state, entry, text,
                          user_data_parts[index + 1:], processes, path)
        elif kind not in _STAGES:
            _finish(disk, state, entry, 0, 'not a part cloud-init runs: '
                    'left to a part handler')
        elif kind == CLOUD_CONFIG:
            try:
                config = yaml.safe_load(text) or {}
            except yaml.YAMLError as e:
                config = 'invalid YAML: %s' % e
            if not isinstance(config, dict):
                _finish(disk, state, entry, 1, str(config)
                        if isinstance(config, str) else 'not a map')
                continue
            _users(disk, config.get('users', ['default']), server, meta)
            _write_files(disk, config.get('write_files') or [])
            if config.get('runcmd'):
                runcmd.append(config['runcmd'])
            _finish(disk, state, entry, 0)
        else:
            if kind == BOOTHOOK and text.startswith('#cloud-boothook'):
                # cloud-init runs what follows its first line
                text = text.partition('\n')[2]
                if not text.startswith('#!'):
                    text = '#!/bin/sh\n' + text
            _script(disk, state, entry, text, processes, path)
    for commands in runcmd:
        entry = {'type': 'runcmd', 'state': 'pending'}
        state['parts'].append(entry)
        _script(disk, state, entry, _runcmd_script(commands), processes,
                path)
    state['state'] = 'done'
    _save(disk, state)
    return state


def _finish(disk, state, entry, code, note=None):
    entry.update(state='done', exit_code=code)
    if note:
        entry['note'] = note
    _save(disk, state)


def _script(disk, state, entry, text, processes, search_path=None,
            args=()):
    if not rootfs.plan(disk):
        entry.update(state='skipped', note=rootfs.refused() or (
            'this host does not give the server a root of its own: '
            'scripts not run'))
        _save(disk, state)
        return
    folder = os.path.join(disk, 'var', 'lib', 'cloud', 'instance',
                          'scripts')
    os.makedirs(folder, exist_ok=True)
    path = hooks.write_in(
        folder, 'part-%03d' % state['parts'].index(entry), text, 0o700)
    entry['state'] = 'started'
    _save(disk, state)   # before it runs: never twice
    env = rootfs.base_env()
    env['HOME'] = '/root'
    if search_path is not None:
        env['PATH'] = search_path
    else:
        env['PATH'] = os.path.join(disk, 'var', 'lib', 'cloud', 'bin') + \
            os.pathsep + env.get('PATH', os.defpath)
    try:
        code, out, err = processes.run([path] + list(args), env, '/',
                                       disk=disk)
    except OSError as e:
        code, out, err = 1, b'', ('cannot run: %s' % e).encode()
    hooks.append_in(os.path.join(disk, os.path.dirname(OUTPUT_LOG)),
                    os.path.basename(OUTPUT_LOG), out + err)
    _finish(disk, state, entry, code)


#: the parts cloud-init acts on by itself, in the order they run here
_STAGES = {CLOUD_CONFIG: 0, BOOTHOOK: 1, PART_HANDLER: 2, SHELLSCRIPT: 3}

# cloud-init's part handler contract, run in the server's root by its
# image's Python (or the host's): the handler's list_types(), then
# handle_part() with "__begin__", each later part of a type it lists,
# "__end__"
_HANDLER_DRIVER = '''
import importlib.util, json, os, sys
# cloud-init's own directories, which handlers write to
for folder in ('/var/lib/cloud/data', '/var/lib/cloud/instance'):
    os.makedirs(folder, exist_ok=True)
spec = importlib.util.spec_from_file_location('part_handler', sys.argv[1])
handler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(handler)
with open(sys.argv[2]) as f:
    parts = json.load(f)
types = list(handler.list_types())
version = int(getattr(handler, 'handler_version', 1))
def call(ctype, filename, payload):
    if version >= 2:
        handler.handle_part(None, ctype, filename, payload, 0)
    else:
        handler.handle_part(None, ctype, filename, payload)
call('__begin__', None, None)
for ctype, filename, payload in parts:
    if ctype in types:
        print('%s: %s' % (ctype, filename))
        call(ctype, filename, payload)
call('__end__', None, None)
'''


def _part_handler(disk, state, entry, text, later, processes, path):
    """A ``text/part-handler`` part: cloud-init's custom handler, given
    the parts after it of the types it lists."""
    folder = os.path.join(disk, 'var', 'lib', 'cloud', 'instance',
                          'handlers')
    index = state['parts'].index(entry)
    handler = hooks.write_in(folder, 'part-%03d.py' % index, text, 0o600)
    data = hooks.write_in(folder, 'part-%03d.json' % index, json.dumps(
        [[kind, name or 'part-%03d' % (index + 1 + n), payload]
         for n, (kind, payload, name) in enumerate(later)]), 0o600)
    _script(disk, state, entry, '#!/usr/bin/env python3\n' +
            _HANDLER_DRIVER, processes, path, args=(handler, data))


def _runcmd_script(commands):
    lines = ['#!/bin/sh']
    for command in commands if isinstance(commands, list) else [commands]:
        if isinstance(command, list):
            lines.append(' '.join(shlex.quote(str(a)) for a in command))
        else:
            lines.append(str(command))
    return '\n'.join(lines) + '\n'


def _metadata(disk, server):
    """The server's metadata (what os-apply-config answers from) and the
    os-apply-config shim that reads it."""
    meta = {'uuid': server.get('id'), 'name': server.get('name'),
            'hostname': server.get('name')}
    if server.get('key_name'):
        meta['public-keys'] = {'0': {'openssh-key': public_key(
            server['key_name'])}}
    instance = os.path.join(disk, 'var', 'lib', 'cloud', 'instance')
    bindir = os.path.join(disk, 'var', 'lib', 'cloud', 'bin')
    os.makedirs(instance, exist_ok=True)
    os.makedirs(bindir, exist_ok=True)
    os.makedirs(os.path.join(disk, os.path.dirname(OUTPUT_LOG)),
                exist_ok=True)
    meta_path = os.path.join(instance, 'meta_data.json')
    with open(meta_path, 'w') as f:
        json.dump(meta, f)
    shim = os.path.join(bindir, 'os-apply-config')
    with hooks.FORK_LOCK:
        fd = os.open(shim, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755)
        with os.fdopen(fd, 'w') as f:
            f.write(_OAC % {'python': sys.executable, 'meta': meta_path})
    return meta


def _default_user(server):
    image = str(server.get('image') or '').lower()
    for word in _DEFAULT_USERS:
        if word in image:
            return word
    return 'cloud-user'


def _users(disk, users, server, meta):
    """Add `users` (cloud-config's list) to the disk's passwd and group,
    each with a home; the default user gets the server's key."""
    if isinstance(users, str):
        users = [u.strip() for u in users.split(',') if u.strip()]
    etc = os.path.join(disk, 'etc')
    os.makedirs(etc, exist_ok=True)
    for name in ('passwd', 'group'):
        if not os.path.exists(os.path.join(etc, name)) and \
                os.path.exists(os.path.join('/etc', name)):
            shutil.copyfile(os.path.join('/etc', name),
                            os.path.join(etc, name))
    key = (meta.get('public-keys') or {}).get('0', {}).get('openssh-key')
    for user in users or ():
        keys = []
        if user == 'default':
            user = {'name': _default_user(server)}
            keys = [key] if key else []
        elif isinstance(user, str):
            user = {'name': user}
        if not isinstance(user, dict) or not user.get('name'):
            continue
        keys += list(user.get('ssh_authorized_keys') or ())
        uid = _add_user(etc, str(user['name']), user)
        home = os.path.join(disk, str(user.get('homedir') or
                                      '/home/' + user['name']).lstrip('/'))
        os.makedirs(home, exist_ok=True)
        # the server's uid, as the host sees it (its root maps them)
        uid = rootfs.host_id(uid)
        os.chown(home, uid, uid)
        if keys:
            ssh = os.path.join(home, '.ssh')
            os.makedirs(ssh, mode=0o700, exist_ok=True)
            with open(os.path.join(ssh, 'authorized_keys'), 'w') as f:
                f.write(''.join(k.strip() + '\n' for k in keys))
            for path in (ssh, os.path.join(ssh, 'authorized_keys')):
                os.chown(path, uid, uid)


def _ids(path):
    found = {}
    try:
        with open(path) as f:
            for line in f:
                fields = line.split(':')
                if len(fields) > 2 and fields[2].isdigit():
                    found[fields[0]] = int(fields[2])
    except FileNotFoundError:
        pass
    return found


def _add_user(etc, name, user):
    """The uid of `name` in the disk's passwd, added (with a group of
    its own) unless there."""
    passwd, group = os.path.join(etc, 'passwd'), os.path.join(etc, 'group')
    users = _ids(passwd)
    if name in users:
        return users[name]
    taken = set(users.values()) | set(_ids(group).values())
    uid = 1000
    while uid in taken:
        uid += 1
    home = user.get('homedir') or '/home/' + name
    shell = user.get('shell') or '/bin/sh'
    with open(passwd, 'a') as f:
        f.write('%s:x:%d:%d:%s:%s:%s\n' % (name, uid, uid,
                                           user.get('gecos') or '', home,
                                           shell))
    with open(group, 'a') as f:
        f.write('%s:x:%d:\n' % (name, uid))
    return uid


def _write_files(disk, files):
    for item in files:
        if not isinstance(item, dict) or not item.get('path'):
            continue
        content = item.get('content') or ''
        data = content.encode() if isinstance(content, str) else \
            bytes(content)
        if str(item.get('encoding') or '').lower() in ('b64', 'base64'):
            data = base64.b64decode(data)
        path = os.path.normpath(os.path.join(
            disk, str(item['path']).lstrip('/')))
        if not path.startswith(os.path.join(disk, '')):
            LOG.warning('write_files: %r is not on the server: skipped',
                        item['path'])
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'ab' if item.get('append') else 'wb') as f:
            f.write(data)
            rootfs.give(path)   # root's, on the server (cloud-init's)
        if item.get('permissions'):
            os.chmod(path, int(str(item['permissions']), 8))


class Boot:
    """One boot of a simulated server: its first-boot user data (in a
    thread of its own), then its agent, if it has one (`start_agent()`
    returns it), or its image's services (`image`: an image of
    `converge.agent.imageboot`, whose layers its root gets)."""

    def __init__(self, disk, user_data_parts, server, start_agent=None,
                 image=None):
        self.disk = disk
        self.processes = hooks.ProcessRunner()
        self.agent = None
        self.stopped = False
        self._lock = threading.Lock()
        self._start_agent = start_agent
        self.image = image
        self._thread = threading.Thread(
            target=self._run, args=(user_data_parts, server), daemon=True,
            name='firstboot-%s' % str(server.get('id'))[:8])
        self._thread.start()

    def _run(self, user_data_parts, server):
        path = None
        if self.image is not None:
            try:
                self.image.prepare(self.disk, self.processes)
            except (OSError, RuntimeError) as e:
                LOG.error('server %s: its image\'s software does not run: '
                          '%s', server.get('id'), e)
                state = status(self.disk) or {'parts': [], 'boots': 0,
                                              'state': 'pending'}
                state['image_error'] = str(e)
                _save(self.disk, state)
                return
            path = self.image.path
        try:
            run(self.disk, user_data_parts, server, self.processes, path)
        except hooks.Stopped:
            return
        except Exception:
            LOG.exception('server %s: first boot failed', server.get('id'))
        with self._lock:
            if self.stopped:
                return
            if self.image is not None:
                self.agent = self.image.start(self.disk, self.processes)
            elif self._start_agent is not None:
                self.agent = self._start_agent()

    def stop(self, reason=None, kill_hooks=True):
        with self._lock:
            self.stopped = True
            agent = self.agent
        if kill_hooks:
            self.processes.kill_all()
        else:   # its kept mount namespace goes
            self.processes.close()
        if agent is not None:
            agent.stop(reason, kill_hooks=kill_hooks)
