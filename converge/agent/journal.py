"""The agent's journal: what it ran, on the server's own disk.

One file per run, ``<disk>/journal/<deployment id>/<action>-<run>.json``,
replaced atomically (temp file, fsync, rename, fsync of the directory) at
each step, so a power cut at any line leaves either the old or the new
state:

- ``{"state": "started"}`` is written **before** the hook starts: a run
  that has an entry is never started again;
- ``{"state": "done", "result": {...}}`` once the hook returned;
- ``"acked": true`` once converge-api took the signal (or answered that
  it had it already).

After a restart, `unfinished` lists the entries whose signal may not have
arrived: done ones are signalled again as they are, started ones (the
agent stopped while the hook ran) are reported as interrupted.
"""

import json
import os
import re
import tempfile

INTERRUPTED = 'interrupted: the agent stopped while the hook ran'
# ids and run keys become file names: nothing that could climb out
_SAFE = re.compile(r'^[A-Za-z0-9_.:-]{1,200}$')


def _check(what, value):
    if not isinstance(value, str) or not _SAFE.match(value) or \
            value in ('.', '..'):
        raise ValueError('deployment %s %r cannot name a journal file '
                         '(letters, digits, "_.:-" only)' % (what, value))
    return value


def write_atomically(path, data):
    """Replace `path` with `data` (bytes) so that a crash leaves the old
    or the new content, never a mix."""
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.tmp-')
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)   # the rename itself survives a power cut
    finally:
        os.close(dfd)


class Journal:
    """The journal under `disk`."""

    def __init__(self, disk):
        self.root = os.path.join(disk, 'journal')
        os.makedirs(self.root, exist_ok=True)

    def path(self, dep_id, action, run):
        return os.path.join(self.root, _check('id', dep_id), '%s-%s.json' % (
            _check('action', action), _check('run', run)))

    def get(self, dep_id, action, run):
        """The entry of this run, or None when it never started."""
        try:
            with open(self.path(dep_id, action, run), 'rb') as f:
                return json.loads(f.read().decode('utf-8'))
        except FileNotFoundError:
            return None

    def _put(self, entry):
        path = self.path(entry['id'], entry['action'], entry['run'])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomically(path, json.dumps(entry, sort_keys=True).encode(
            'utf-8'))
        return entry

    def started(self, dep_id, action, run, name=None):
        return self._put({'id': dep_id, 'action': action, 'run': run,
                          'name': name, 'state': 'started', 'acked': False})

    def done(self, entry, result):
        return self._put(dict(entry, state='done', result=result))

    def acked(self, entry, note=None):
        entry = dict(entry, acked=True)
        if note:
            entry['ack_note'] = note
        return self._put(entry)

    def entries(self):
        """Every entry, oldest file first."""
        found = []
        for dep_id in os.listdir(self.root):
            folder = os.path.join(self.root, dep_id)
            if not os.path.isdir(folder):
                continue
            for name in os.listdir(folder):
                if not name.endswith('.json'):
                    continue   # a temp file a crash left behind
                path = os.path.join(folder, name)
                try:
                    with open(path, 'rb') as f:
                        entry = json.loads(f.read().decode('utf-8'))
                    mtime = os.stat(path).st_mtime
                except (OSError, ValueError):
                    continue
                found.append((mtime, name, entry))
        return [e for _m, _n, e in sorted(found, key=lambda t: t[:2])]

    def unfinished(self):
        """Entries whose result converge-api may not have: done but not
        acked, and started but never done (those are turned into done
        with the interrupted result here, so the next step is the same
        for both: signal)."""
        pending = []
        for entry in self.entries():
            if entry.get('acked'):
                continue
            if entry.get('state') != 'done':
                entry = self.done(entry, interrupted_result())
            pending.append(entry)
        return pending


def interrupted_result():
    return {'deploy_stdout': '', 'deploy_stderr': INTERRUPTED,
            'deploy_status_code': -1, 'deploy_status_reason': INTERRUPTED}
