"""A home's read server: an engine of one embedded home that stays up
between commands and answers the service layer's reads over a Unix
socket (why, and what it shares with the commands: converge/client/
home.py). A read-only command starts it; nobody runs it by hand:

    python -m converge.cmd.readserver --socket PATH --home DIR \
        [--config-file F]... [--idle SECONDS]

One request: ``POST /v1/call/<method>`` with ``{"context": {...},
"args": [...], "kwargs": {...}}``; the answer is ``{"result": ...}``, or
400 with ``{"error": {"type", "message", "attributes"}}`` for a converge
error (not found, invalid input), or 500 for anything else, which the
command then answers for itself.

It ends after --idle seconds without a request, when the home's database
is gone (a test's home deleted) or when its socket is no longer its own
(another server took the name); its socket goes with it.
"""

import argparse
import fcntl
import http.server
import json
import os
import socketserver
import sys
import threading
import time

import converge  # first: the threading backend before oslo_messaging

from converge import conf as conf_mod
from converge import exception
from converge.client import home as home_mod

#: seconds between two looks at whether to end
TICK = 1.0
#: what a read imports at its first use (converge/lazy.py), imported
#: before the first command asks, so that it waits for none of it
WARM = ('converge.engine.views', 'converge.engine.secrecy',
        'converge.engine.listing', 'converge.engine.group_stack',
        'converge.template', 'converge.template.definition', 'yaml')


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path, service):
        self.service = service
        self.last = time.monotonic()
        self.busy = 0
        self.busy_lock = threading.Lock()
        super().__init__(path, _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def address_string(self):
        return 'local'

    def log_message(self, fmt, *args):  # the command logs, not this
        pass

    def do_POST(self):
        server = self.server
        with server.busy_lock:
            server.busy += 1
        try:
            status, body = self._answer()
        finally:
            with server.busy_lock:
                server.busy -= 1
                server.last = time.monotonic()
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _answer(self):
        prefix = '/v1/call/'
        method = self.path[len(prefix):] if self.path.startswith(prefix) \
            else None
        if method not in home_mod.READS:
            return 404, {'error': {'type': 'NotFound', 'message':
                                   'No read %s' % self.path}}
        try:
            length = int(self.headers.get('Content-Length') or 0)
            call = json.loads(self.rfile.read(length))
            from converge.engine import request
            ctx = request.make(**{k: call['context'].get(k)
                                  for k in home_mod.CONTEXT
                                  if call['context'].get(k) is not None})
            result = getattr(self.server.service, method)(
                ctx, *call['args'], **call['kwargs'])
        except exception.ConvergeError as e:
            return 400, {'error': {
                'type': type(e).__name__, 'message': str(e),
                'attributes': _plain(vars(e))}}
        except Exception as e:  # the command answers for itself
            return 500, {'error': {'type': type(e).__name__,
                                   'message': str(e)}}
        # only what JSON carries back exactly (a tuple would come back a
        # list, a number as a map's key a string): anything else, the
        # command reads for itself
        if not _exact(result):
            return 500, {'error': {'type': 'NotPlain', 'message':
                                   'not plain JSON data'}}
        return 200, {'result': result}


def _exact(value):
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if type(value) is list:
        return all(_exact(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _exact(v) for k, v in value.items())
    return False


def _plain(attrs):
    return {k: v for k, v in attrs.items()
            if k != 'message' and not k.startswith('_') and _exact(v)}


def _ours(path, inode):
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def serve(path, idle, database):
    """Serve reads at `path` until `idle` seconds pass unasked, the
    database file `database` is gone or the socket is another's."""
    from converge.engine import context
    from converge.engine import service
    engine = context.Engine()
    server = _Server(path, service.Service(engine))
    os.chmod(path, 0o600)
    inode = os.stat(path).st_ino
    for name in WARM:
        __import__(name)
    server.timeout = TICK
    try:
        while True:
            server.handle_request()
            with server.busy_lock:
                quiet = not server.busy and \
                    time.monotonic() - server.last > idle
            if quiet or not _ours(path, inode) or (
                    database and not os.path.exists(database)):
                break
    finally:
        if _ours(path, inode):
            os.unlink(path)
        server.server_close()
        engine.close()


def main(argv=None):
    parser = argparse.ArgumentParser(prog='converge-readserver')
    parser.add_argument('--socket', required=True)
    parser.add_argument('--home')
    parser.add_argument('--config-file', action='append', default=[],
                        dest='config_files')
    parser.add_argument('--idle', type=float, default=300)
    parser.add_argument('--package',
                        help='the converge package the command runs: '
                             'this server leaves if it runs another')
    args = parser.parse_args(argv)
    here = os.path.dirname(os.path.abspath(converge.__file__))
    if args.package and os.path.realpath(args.package) != \
            os.path.realpath(here):
        sys.stderr.write('converge-readserver: runs %s, not %s\n'
                         % (here, args.package))
        return 1
    conf_mod.setup([], home=args.home,
                   default_config_files=args.config_files, log=False,
                   messaging=False, make_home=False)
    # one server per socket: the one holding its lock; a second started
    # at the same time leaves at once
    lock = os.fdopen(os.open(args.socket + '.lock',
                             os.O_WRONLY | os.O_CREAT, 0o600), 'w')
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0
    try:
        if os.path.exists(args.socket):
            os.unlink(args.socket)  # a server killed left it
        url = conf_mod.database_url()
        database = url[len('sqlite:///'):] \
            if url.startswith('sqlite:///') else None
        serve(args.socket, args.idle, database)
    finally:
        lock.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
