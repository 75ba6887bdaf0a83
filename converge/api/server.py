"""Serving the WSGI application with waitress.

Why waitress rather than cheroot (which served it before): cheroot hands
a connection to a worker thread as soon as its first byte arrives, and
the thread reads the request line, headers and body itself, so a client
sending its headers a byte at a time holds a thread for as long as it
likes (40 such connections made every other request wait). Waitress reads
and buffers whole requests in its I/O loop and hands a thread only a
complete request: slow clients hold a socket, never a thread. What it
lacks is a deadline for a request as a whole (its channel_timeout is
reset by every byte): `_Channel` and `_Server.maintenance` add one for
the headers and one for the body.

Three pools of threads: the agents' routes (/v1/agent/..., whose long
polls are held up to [api] max_poll_wait) have their own, and so have the
event streams (a stack's /event_stream, held up to [api]
max_stream_time: converge/api/v1/live.py), so however many agents poll
and dashboards follow, the orchestration API keeps its threads. A
request waits in its pool's queue, which holds at most one request per
open connection, and connections are at most [api] max_connections.

Embedded, the command that runs the engine serves the agents' routes while
it runs, at one address kept in the home ($home/api.url): chosen free the
first time, the same port every time after, so a server's agent (which was
given the address at boot) finds it from one command to the next.
"""

import errno
import json
import os
import socket
import threading
import time
import urllib.parse

from oslo_log import log as logging
from waitress import channel as waitress_channel
from waitress import server as waitress_server
from waitress import task as waitress_task
from waitress import wasyncore

from converge import conf as conf_mod
from converge.api import auth
from converge.api import limits
from converge.api import wsgi
from converge.drivers import software as drivers_software

LOG = logging.getLogger(__name__)

#: the routes served by the agents' pool
AGENT_PREFIX = '/v1/agent/'
#: the routes served by the streams' pool: their paths end so
STREAM_SUFFIX = '/event_stream'


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


class _ErrorTask(waitress_task.ErrorTask):
    """waitress's own refusals (a body or headers too large, a request it
    cannot parse), answered with Heat's JSON error body as the
    application's are."""

    def execute(self):
        error = self.request.error
        api = conf_mod.CONF.api
        message = {
            413: 'Request body is larger than %d bytes ([api] '
                 'max_json_body_size)' % api.max_json_body_size,
            431: 'Request headers are larger than %d bytes ([api] '
                 'max_header_size)' % api.max_header_size,
        }.get(error.code, '%s: %s' % (error.reason, error.body))
        body = json.dumps(wsgi.error_body(error.code, message)).encode()
        self.status = '%d %s' % (error.code, error.reason)
        self.response_headers.append(('Content-Type', 'application/json'))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _Channel(waitress_channel.HTTPChannel):
    """A connection that notes when its request began and when its
    headers ended, for the server's deadlines."""

    error_task_class = _ErrorTask
    request_began = None
    headers_ended = None

    def received(self, data):
        if data and self.request is None:
            self.request_began = time.monotonic()
            self.headers_ended = None
        done = super().received(data)
        req = self.request
        if req is None:
            self.request_began = self.headers_ended = None
        elif req.headers_finished and self.headers_ended is None:
            self.headers_ended = time.monotonic()
        return done


class _Server(waitress_server.TcpWSGIServer):
    channel_class = _Channel

    def __init__(self, app, agents, streams, header_timeout, body_timeout,
                 **kw):
        self.agents, self.streams = agents, streams
        self.header_timeout, self.body_timeout = header_timeout, body_timeout
        super().__init__(app, **kw)

    def add_task(self, channel):
        requests = getattr(channel, 'requests', None)
        if requests and requests[0].path.startswith(AGENT_PREFIX):
            self.agents.add_task(channel)
        elif requests and requests[0].path.rstrip('/').endswith(
                STREAM_SUFFIX):
            self.streams.add_task(channel)
        else:
            self.task_dispatcher.add_task(channel)

    def maintenance(self, now):
        super().maintenance(now)
        mono = time.monotonic()
        for channel in list(self.active_channels.values()):
            began = getattr(channel, 'request_began', None)
            if began is None or channel.request is None:
                continue
            ended = channel.headers_ended
            if ended is None:
                late = mono - began > self.header_timeout
            else:
                late = mono - ended > self.body_timeout
            if late:
                LOG.info('converge-api: closing %s, whose request took too '
                         'long to arrive ([api] header_timeout, '
                         'body_timeout)', channel.addr)
                channel.will_close = True
                channel.request_began = None


def _pool(threads):
    pool = waitress_task.ThreadedTaskDispatcher()
    pool.set_thread_count(threads)
    return pool


class Served:
    """The application served on host:port in a background thread
    (`lazy`: built at the first request)."""

    def __init__(self, engine, host, port, threads=None, quick_stop=False,
                 lazy=False):
        api = conf_mod.CONF.api
        if lazy:
            self.app = _Deferred(engine)
        else:
            from converge.api import app as app_mod
            self.app = app_mod.App(engine)
        self._pool = _pool(threads or api.threads)
        self._agents = _pool(api.agent_threads)
        self._streams = _pool(api.stream_threads)
        # how often the loop looks for a stop and for late requests:
        # stopping waited half of it on average, at the end of every
        # command that served the agents
        self._tick = 0.05 if quick_stop else 0.5
        self._map = {}
        try:
            self.server = self._server(host, port)
        except BaseException:
            self._shutdown()
            raise
        self.host = self.server.effective_host
        self.port = int(self.server.effective_port)
        self.url = 'http://%s:%d' % (self.host, self.port)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve,
                                        name='converge-api', daemon=True)
        self._thread.start()

    def _server(self, host, port):
        api = conf_mod.CONF.api
        #: the per-credential bound (its `queued` signals: tests, stats)
        self.concurrency = limits.Concurrency(auth.wrap(self.app))
        return _Server(
            self.concurrency, self._agents, self._streams,
            api.header_timeout, api.body_timeout, map=self._map,
            dispatcher=self._pool, host=host, port=port,
            connection_limit=api.max_connections,
            channel_timeout=api.client_socket_timeout,
            cleanup_interval=min(1.0, api.header_timeout / 4),
            max_request_body_size=api.max_json_body_size,
            max_request_header_size=api.max_header_size,
            ident='converge-api', expose_tracebacks=False,
            asyncore_use_poll=True)

    def _serve(self):
        while not self._stop.is_set():
            wasyncore.loop(timeout=self._tick, map=self._map,
                           use_poll=True, count=1)

    def stop(self):
        # held long polls answer first, so stopping waits for no one
        self.app.stopping.set()
        drivers_software.CHANGES.notify()
        self._stop.set()
        self._thread.join(timeout=10)
        self._shutdown()

    def _shutdown(self):
        self._pool.shutdown(timeout=5)
        self._agents.shutdown(timeout=5)
        self._streams.shutdown(timeout=5)
        wasyncore.close_all(self._map, ignore_all=True)


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
