"""Files only their owner reads: the home (0700), its databases and key
files (0600). What they hold (stacks' parameters, the engine's token
key, the encryption key) is no business of another account on the host.

An existing file or folder is narrowed too, when it is ours: a home made
by an older converge (0755, 0644) is closed at its next start.
"""

import os


def _narrow(path, mode):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if st.st_uid == os.getuid() and (st.st_mode & 0o777) & ~mode:
        os.chmod(path, (st.st_mode & 0o777) & mode)


def folder(path):
    """Make `path` (and parents) if missing; it ends 0700."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    _narrow(path, 0o700)
    return path


def file(path):
    """Make `path` empty if missing; it ends 0600 (so is anything SQLite
    makes beside it later: its journal takes the database's mode)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL,
                         0o600))
    except FileExistsError:
        pass
    for p in (path, path + '-wal', path + '-shm', path + '-journal'):
        _narrow(p, 0o600)
    return path


def sqlite(url):
    """The file of a SQLite URL made 0600 before SQLite makes it (0644
    under the usual umask); other URLs as they are."""
    if not str(url).startswith('sqlite'):
        return url
    # not at import: conf imports this module, and a command sent to a
    # converge-api needs no database (sqlalchemy is a fifth of its start)
    from sqlalchemy.engine import make_url
    path = make_url(str(url)).database
    if path and path != ':memory:' and not path.startswith('file:'):
        folder_of = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(folder_of):
            file(path)
    return url

