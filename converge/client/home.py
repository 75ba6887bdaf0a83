"""A home's read server, as a read-only command sees it.

An embedded read (`stack list`, `show`, `resource list`, `event list`,
`output show`...) run in its own process spends most of its half second
importing SQLAlchemy and the engine, not reading (docs/performance.md, "A
CLI that answers at once"). So the first read of a home starts a server
beside it (converge/cmd/readserver.py): an engine of that home that stays
up between commands and answers the service layer's read methods over a
Unix socket. A later read sends its call there and imports neither; the
answer is the service layer's own, computed by the same code with the
same request context (project, user, roles) as this process would have.

The server is this process's engine in every way that matters: one per
home, configuration (files and OS_* variables), Python and converge's
code; any of them changed, another socket is used and the old server
idles out. It only reads: killed at any line, nothing is lost, and the
next command answers itself and starts another. Its socket sits in a
folder only its owner can open (as the home is), so what it answers is
no more than the database file already shows that account.

Only the standard library here: this module is what a read imports
instead of the engine.
"""

import errno
import hashlib
import http.client
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile

from converge import exception

LOG = logging.getLogger(__name__)

#: the service layer's methods a read server answers: reads only, each
#: answering plain data (converge/engine/service.py)
READS = frozenset((
    'stack_list', 'stack_show', 'stack_identify', 'stack_template',
    'resource_list', 'resource_show', 'output_list', 'output_show',
    'event_list', 'event_show'))

#: seconds a call may take (a stack of thousands of resources listed)
TIMEOUT = 300
#: the context fields a call carries (engine/request.py make())
CONTEXT = ('project_id', 'user_id', 'roles', 'cloud', 'credentials')


class Unavailable(Exception):
    """No answer from a read server: the caller answers itself."""

    def __init__(self, message, absent=False):
        super().__init__(message)
        #: no server listens (none started, or it ended): start one
        self.absent = absent


def folder():
    """The folder of this account's read servers' sockets (0700, ours):
    in $XDG_RUNTIME_DIR, else in the temporary folder; None when neither
    can be trusted (someone else's, or not a folder): then there is no
    read server."""
    for base in (os.environ.get('XDG_RUNTIME_DIR'),
                 tempfile.gettempdir()):
        if not base:
            continue
        path = os.path.join(base, 'converge-%d' % os.getuid())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            continue
        st = os.lstat(path)
        if os.path.isdir(path) and not os.path.islink(path) and \
                st.st_uid == os.getuid() and not st.st_mode & 0o077:
            return path
    return None


def _newest(path):
    """The newest modification time of the .py files under `path`."""
    newest = 0
    for root, _, files in os.walk(path):
        for name in files:
            if name.endswith('.py'):
                try:
                    newest = max(newest, os.stat(
                        os.path.join(root, name)).st_mtime_ns)
                except OSError:
                    pass
    return newest


def _file_mark(path):
    try:
        st = os.stat(path)
        return [os.path.realpath(path), st.st_mtime_ns, st.st_size]
    except OSError:
        return [path, None, None]


def _package():
    """The folder of the converge package this process runs."""
    return os.path.dirname(os.path.abspath(exception.__file__))


def fingerprint(home, config_files):
    """What the server must share with this process to answer as it
    would: the home, the configuration (its files as they are now, and
    oslo.config's OS_GROUP__OPTION variables), the Python and converge's
    code as it is now, the installed packages (an entry point added)."""
    package = _package()
    return json.dumps([
        os.path.realpath(home), [_file_mark(f) for f in config_files],
        sorted((k, v) for k, v in os.environ.items()
               if k.startswith('OS_') and '__' in k),
        sys.executable, package, _newest(package),
        [_file_mark(p)[1:] for p in sys.path if p and os.path.isdir(p)],
    ], sort_keys=True)


def socket_path(home, config_files):
    """The socket of the read server for this home and configuration,
    or None (no trusted folder for it)."""
    where = folder()
    if where is None:
        return None
    digest = hashlib.sha256(
        fingerprint(home, config_files).encode()).hexdigest()[:24]
    path = os.path.join(where, 'read-%s.sock' % digest)
    # a Unix socket's path has at most 107 bytes
    return path if len(os.fsencode(path)) < 100 else None


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__('localhost', timeout=timeout)
        self._path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def call(path, method, ctx, args, kwargs, timeout=TIMEOUT):
    """`method` of the service layer, answered by the read server at
    `path`: its result, or the converge error it raised; Unavailable
    when it did not answer."""
    body = json.dumps({
        'context': {k: getattr(ctx, k, None) for k in CONTEXT},
        'args': list(args), 'kwargs': kwargs}).encode()
    conn = _UnixConnection(path, timeout)
    try:
        try:
            conn.request('POST', '/v1/call/%s' % method, body,
                         {'Content-Type': 'application/json'})
        except OSError as e:
            raise Unavailable(str(e), absent=e.errno in (
                errno.ENOENT, errno.ECONNREFUSED))
        try:
            answer = conn.getresponse()
            raw = answer.read()
        except (OSError, http.client.HTTPException) as e:
            raise Unavailable(str(e))
    finally:
        conn.close()
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if answer.status == 200 and isinstance(data, dict) and 'result' in data:
        return data['result']
    err = data.get('error') if isinstance(data, dict) else None
    if answer.status == 400 and isinstance(err, dict):
        exc = exception.from_answer(err.get('type'), err.get('message'))
        for k, v in (err.get('attributes') or {}).items():
            setattr(exc, k, v)
        raise exc
    raise Unavailable('the read server answered %d: %s' % (
        answer.status, raw[:200].decode('utf-8', 'replace')))


class Reads:
    """The service layer of a read-only command: each read answered by
    the home's read server at `path`, the rest (and every read once the
    server did not answer) by `local()`, this process's own service."""

    def __init__(self, path, local):
        #: the read server's socket
        self.socket = path
        self._path = path
        self._local = local
        #: the server was absent: start one once the command is done
        self.absent = False

    def __getattr__(self, name):
        if name not in READS or self._path is None:
            return getattr(self._local(), name)

        def read(ctx, *args, **kwargs):
            if self._path is not None:
                try:
                    found = call(self._path, name, ctx, args, kwargs)
                except Unavailable as e:
                    LOG.debug('the read server %s did not answer (%s): '
                              'this command reads for itself', self._path,
                              e)
                    self.absent = e.absent
                    self._path = None
                except exception.ConvergeError:
                    LOG.debug('%s answered by the read server %s: an '
                              'error', name, self._path)
                    raise
                else:
                    LOG.debug('%s answered by the read server %s', name,
                              self._path)
                    return found
            return getattr(self._local(), name)(ctx, *args, **kwargs)
        return read


def start(path, home, config_files, idle):
    """Start the read server of `path` in the background, on its own:
    it outlives this command and ends after `idle` seconds unasked. Its
    output goes to PATH.log."""
    package = _package()
    argv = [sys.executable, '-m', 'converge.cmd.readserver',
            '--socket', path, '--idle', str(idle), '--package', package]
    if home:
        argv += ['--home', home]
    for f in config_files:
        argv += ['--config-file', os.path.abspath(f)]
    fd = os.open(path + '.log', os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                 0o600)
    try:
        # run from beside this converge, so that `-m` imports the same
        # one (not one in this command's working directory)
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd,
                         stderr=fd, close_fds=True, start_new_session=True,
                         cwd=os.path.dirname(package))
    except OSError as e:
        LOG.debug('no read server started: %s', e)
    finally:
        os.close(fd)
