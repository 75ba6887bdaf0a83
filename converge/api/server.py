"""Serving the WSGI application with cheroot (a threaded HTTP/1.1 server;
oslo.service's wsgi server is deprecated).

Embedded, the command that runs the engine serves the agents' routes while
it runs, at one address kept in the home ($home/api.url): chosen free the
first time, the same port every time after, so a server's agent (which was
given the address at boot) finds it from one command to the next.
"""

import errno
import os
import socket
import threading
import urllib.parse

import cheroot.wsgi
from oslo_log import log as logging

from converge import conf as conf_mod
from converge.api import auth
from converge.drivers import software as drivers_software

LOG = logging.getLogger(__name__)


class _Deferred:
    """The application, built at its first request: a command that runs
    the engine serves its servers' agents, and most stacks have none
    (importing the API, its routes and policies, was about a quarter of
    a second of every such command)."""

    def __init__(self, engine):
        self.engine = engine
        self.stopping = threading.Event()
        self._app = None
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        if self._app is None:
            with self._lock:
                if self._app is None:
                    from converge.api import app as app_mod
                    self._app = app_mod.App(self.engine, self.stopping)
        return self._app(environ, start_response)


class Served:
    """The application served on host:port in a background thread
    (`lazy`: built at the first request)."""

    def __init__(self, engine, host, port, threads=None, quick_stop=False,
                 lazy=False):
        if lazy:
            self.app = _Deferred(engine)
        else:
            from converge.api import app as app_mod
            self.app = app_mod.App(engine)
        self.server = cheroot.wsgi.Server(
            (host, port), auth.wrap(self.app),
            numthreads=threads or conf_mod.CONF.api.threads,
            server_name='converge-api')
        if quick_stop:
            # cheroot's loop looks for a stop every expiration_interval
            # (0.5 s): stopping waited a quarter of a second on average,
            # at the end of every command that served the agents
            self.server.expiration_interval = 0.05
        self.server.prepare()   # binds now: a busy port fails here
        self.host, self.port = self.server.bind_addr[:2]
        self.url = 'http://%s:%d' % (self.host, self.port)
        self._thread = threading.Thread(target=self.server.serve,
                                        name='converge-api', daemon=True)
        self._thread.start()

    def stop(self):
        # held long polls answer first, so stopping waits for no one
        self.app.stopping.set()
        drivers_software.CHANGES.notify()
        self.server.stop()
        self._thread.join(timeout=10)


def serve_embedded(engine):
    """Serve the agents' routes from this (engine) process at the home's
    address. Returns the Served, or None when another process of the same
    home serves that address now (its engine reads the same database)."""
    path = conf_mod.api_url_file()
    host, port = conf_mod.CONF.api.bind_host, conf_mod.CONF.api.bind_port
    try:
        with open(path) as f:
            kept = urllib.parse.urlsplit(f.read().strip())
        if not port and kept.port:
            host, port = kept.hostname or host, kept.port
    except OSError:
        pass
    if not port:
        # chosen here, not by binding port 0: a socket bound to port 0
        # has no SO_REUSEADDR, and the connections it leaves in TIME_WAIT
        # would keep the next command from binding the same port
        port = _free_port(host)
    try:
        served = Served(engine, host, port, quick_stop=True, lazy=True)
    except OSError as e:
        if e.errno != errno.EADDRINUSE and 'in use' not in str(e):
            raise
        LOG.warning('converge-api: %s:%s is in use (another command of '
                    'this home serves the agents, or another program '
                    'took the port: then set [api] bind_port)', host, port)
        return None
    keep_url(served)
    return served


def keep_url(served):
    """Keep `served`'s address in the home, where agents booted by this
    home's engine are told to reach (unless a public endpoint is set)."""
    if conf_mod.CONF.api.public_endpoint:
        return
    path = conf_mod.api_url_file()
    tmp = '%s.%d' % (path, os.getpid())
    with open(tmp, 'w') as f:
        f.write(served.url + '\n')
    os.replace(tmp, path)


def _free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
