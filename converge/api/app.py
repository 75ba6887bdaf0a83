"""The WSGI application: routes -> controllers, JSON in and out, Heat's
error body. Controllers call the engine's service functions only.

Two sets of routes: the agents' (/v1/agent/..., their own credentials)
and Heat's orchestration API (/v1/{project_id}/..., converge/api/v1).

Every request is counted by method, route (the pattern it matched, not its
path: a stack's id is not a label) and status, and timed; the process's
Prometheus metrics are served at GET /metrics, unauthenticated, while
[metrics] enabled (converge/metrics.py). With [tracing] enabled, each
request is a span too, the parent of what it starts (converge/tracing.py).
"""

import threading
import time

import routes
import routes.middleware
import webob.dec

from oslo_log import log as logging

from converge import conf as conf_mod
from converge import exception
from converge import metrics
from converge import tracing
from converge.api import agent
from converge.api import dashboard
from converge.api import transport
from converge.api import v1
from converge.api.wsgi import Error, error_response, json_response

LOG = logging.getLogger(__name__)


def versions(req):
    """Heat's answer at the root: 300 Multiple Choices, the one version
    (v1.0, CURRENT) with its address."""
    return json_response({'versions': [{
        'id': 'v1.0', 'status': 'CURRENT',
        'links': [{'rel': 'self', 'href': req.host_url + '/v1/'}]}]},
        status=300)


#: request methods counted by name (any other: 'other', so that a client
#: cannot add label values)
_METHODS = frozenset(('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE',
                      'OPTIONS'))


class App:
    def __init__(self, engine, stopping=None):
        self.engine = engine
        #: set when the service stops (held long polls then answer)
        self.stopping = stopping or threading.Event()
        mapper = routes.Mapper()
        # the versions document, unauthenticated (clients discover the
        # API with it before they hold a token)
        mapper.connect('/', handler=versions, conditions={'method': ['GET']})
        agent.add_routes(mapper, agent.Controller(engine, self.stopping))
        transport.add_routes(mapper, transport.Controller(engine))
        v1.add_routes(mapper, engine, self.stopping)
        dashboard.add_routes(mapper)
        # no method override from a form field: it would parse every
        # POST body as a form (a JSON API has none), and a malformed
        # multipart body would fail there, outside any error handling
        self._router = routes.middleware.RoutesMiddleware(
            self._dispatch, mapper, use_method_override=False)
        self._metrics = conf_mod.CONF.metrics.enabled
        if self._metrics:
            metrics.watch(engine)

    @webob.dec.wsgify
    def __call__(self, req):
        if self._metrics and req.path_info == '/metrics':
            return self._exposition(req)
        start = time.perf_counter()
        method = req.method if req.method in _METHODS else 'other'
        with tracing.request(method, req.path_info, req.headers) as span:
            resp = req.get_response(self._router)
            route = req.environ.get('routes.route')
            route = route.routepath if route is not None else 'unmatched'
            tracing.answered(span, method, route, req.path_info,
                             resp.status_code)
        metrics.API_REQUESTS.labels(method, route,
                                    str(resp.status_code)).inc()
        metrics.API_SECONDS.labels(method, route).observe(
            time.perf_counter() - start)
        return resp

    @staticmethod
    def _exposition(req):
        if req.method not in ('GET', 'HEAD'):
            return error_response(405, 'GET /metrics only')
        body, content_type = metrics.exposition()
        resp = webob.Response(body=body)
        resp.headers['Content-Type'] = content_type
        return resp

    @webob.dec.wsgify
    def _dispatch(self, req):
        match = req.environ['wsgiorg.routing_args'][1]
        if not match:
            return error_response(404, 'The resource could not be found: '
                                  '%s %s' % (req.method, req.path))
        handler = match.pop('handler')
        match.pop('controller', None)
        match.pop('action', None)
        try:
            return handler(req, **match)
        except Error as e:
            return error_response(e.code, e.message, title=e.title)
        except exception.ConvergeError as e:
            resp = error_response(exception.http_status(e), str(e),
                                  type(e).__name__)
            if getattr(e, 'retry_after', None):
                resp.headers['Retry-After'] = '%d' % e.retry_after
            return resp
        except Exception:
            LOG.exception('%s %s failed', req.method, req.path)
            return error_response(500, 'The server could not complete the '
                                  'request (see converge-api\'s log)')
