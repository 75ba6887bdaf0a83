"""OpenTelemetry traces: one stack operation, one trace, across processes.

    POST /v1/{project_id}/stacks              converge-api  (the request)
      converge.traversal  CREATE              converge-api  (laid out)
        converge.check_resource  web1         converge-worker (a unit)
        converge.check_resources  (8 nodes)   converge-worker (a message)
          converge.check_resource  v1 ...     (each unit of it)
        converge.traversal.end  complete      whichever engine ended it
      POST /v1/agent/deployments/{id}/signal  converge-api  (an agent's)

The trace context (W3C traceparent) crosses processes two ways, never
through this process's memory alone: it is kept in the traversal's
options (``trace``) when the traversal starts, and every check_resource
message carries it (its context, ``traceparent``). A unit whose message
came without it (a wait sent by any engine's timer, the sweeper's
resend) finds it in the traversal, read once per process and traversal.
Units are the traversal's children, not each other's: a chain of 40
resources is 40 siblings, in time order, not 40 levels. The context a
software deployment's run started in goes to its agent with the
deployment, and comes back as the traceparent header of its signal.

``[tracing] enabled = false`` (the default): `enabled` stays False,
opentelemetry is never imported, and each place that would make a span
tests that one module attribute first (docs/performance.md: no change
in the bench's statements or time).
"""

import contextlib
import logging
import threading
import time

LOG = logging.getLogger(__name__)

#: spans are made in this process (setup); read before any other call
enabled = False

_NOOP = contextlib.nullcontext()
_STATE = {'tracer': None, 'provider': None, 'propagator': None,
          'kind': None}
_LOCK = threading.Lock()

#: traversal id -> its traceparent ('' for one started untraced): what
#: the messages of its nodes carry, and whom a unit's span is the child
#: of. Filled where a traversal starts, from the messages received and
#: from the traversal's row; emptied when it grows past _REMEMBERED
_TRAVERSALS = {}
_REMEMBERED = 10000

TRAVERSAL = 'converge.traversal'
TRAVERSAL_END = 'converge.traversal.end'
UNIT = 'converge.check_resource'
UNITS = 'converge.check_resources'


def setup(kind, exporter=None):
    """Make spans in this process, as `kind` (api, worker, observer, cli),
    if [tracing] enabled, sent over OTLP/HTTP by a batch processor; or
    to `exporter` (a test's, sent at once) whatever the option says.
    Again in the same process: nothing (a test's exporter replaces the
    one before). Returns whether spans are made."""
    global enabled
    from converge import conf as conf_mod
    CONF = conf_mod.CONF.tracing
    if exporter is None and not CONF.enabled:
        return enabled
    with _LOCK:
        if enabled and exporter is None:
            return True
        try:
            from opentelemetry.sdk import resources
            from opentelemetry.sdk import trace as sdk_trace
            from opentelemetry.sdk.trace import export
            from opentelemetry.sdk.trace import sampling
            from opentelemetry.trace.propagation import tracecontext
        except ImportError:
            LOG.error('[tracing] enabled, but OpenTelemetry is not '
                      'installed (pip install \'converge[tracing]\'): no '
                      'spans are made')
            return False
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http import \
                trace_exporter
            processor = export.BatchSpanProcessor(
                trace_exporter.OTLPSpanExporter(
                    endpoint=CONF.otlp_endpoint or None))
        else:
            processor = export.SimpleSpanProcessor(exporter)
        name = CONF.service_name
        if kind != 'cli':
            name = '%s-%s' % (name, kind)
        provider = sdk_trace.TracerProvider(
            resource=resources.Resource.create({'service.name': name}),
            sampler=sampling.ParentBased(
                sampling.TraceIdRatioBased(CONF.sample_ratio)),
            # flushed by shutdown(), where the process stops gracefully
            shutdown_on_exit=True)
        provider.add_span_processor(processor)
        old = _STATE['provider']
        _STATE.update(tracer=provider.get_tracer('converge'),
                      provider=provider, kind=kind,
                      propagator=tracecontext.TraceContextTextMapPropagator())
        _TRAVERSALS.clear()
        enabled = True
    if old is not None:
        old.shutdown()
    LOG.info('tracing: spans of %s sent to %s', name,
             'a test\'s exporter' if exporter is not None else
             CONF.otlp_endpoint or 'the OTLP exporter\'s default')
    return True


def shutdown():
    """Send what is left and make no more spans (a process stopping; a
    test putting things back)."""
    global enabled
    with _LOCK:
        provider = _STATE['provider']
        enabled = False
        _STATE.update(tracer=None, provider=None, kind=None)
        _TRAVERSALS.clear()
    if provider is not None:
        provider.shutdown()


def flush(timeout=30.0):
    """Send the spans made so far (a worker process stopping: its
    children leave without running atexit)."""
    provider = _STATE['provider']
    if provider is not None:
        provider.force_flush(int(timeout * 1000))


# -- the context, as text ---------------------------------------------------

def _context_of(traceparent):
    """An OpenTelemetry context whose span is the remote `traceparent`."""
    return _STATE['propagator'].extract({'traceparent': traceparent})


def traceparent(span=None):
    """`span`'s (by default the current span's) W3C traceparent, or None
    when it is not a real one."""
    from opentelemetry import trace
    carrier = {}
    ctx = None if span is None else trace.set_span_in_context(span)
    _STATE['propagator'].inject(carrier, context=ctx)
    return carrier.get('traceparent')


def remember(traversal_id, value):
    if len(_TRAVERSALS) >= _REMEMBERED:
        _TRAVERSALS.clear()
    _TRAVERSALS[traversal_id] = value or ''


def carried(traversal_id):
    """The context of a check_resource message for a node of
    `traversal_id`: {'traceparent': ...}, or {} when this process does not
    know the traversal's (the receiver finds it in the traversal)."""
    value = _TRAVERSALS.get(traversal_id)
    return {'traceparent': value} if value else {}


# -- spans ------------------------------------------------------------------

def _attributes(attrs):
    return {'converge.' + k: v for k, v in attrs.items() if v is not None}


def _set_error(span, description):
    from opentelemetry.trace import status
    span.set_status(status.Status(status.StatusCode.ERROR, description))


@contextlib.contextmanager
def _request(method, headers):
    from opentelemetry import trace
    parent = _STATE['propagator'].extract(headers)
    with _STATE['tracer'].start_as_current_span(
            method, context=parent, kind=trace.SpanKind.SERVER,
            attributes={'http.request.method': method}) as span:
        yield span


#: the servers' routes: converge-agent's, and Heat's transports'
#: (os-collect-config's metadata polls, cfn's)
SERVERS_ROUTES = ('/v1/agent/', '/v1/transport/', '/v1/cfn/')


def request(method, path, headers):
    """The span of one API request (current while it is handled), or a
    no-op: the servers' routes are traced only when the request carries
    a traceparent (converge-agent's signals do; the servers' polls would
    be thousands of spans of no stack operation). Name it with
    `answered`."""
    if not enabled or (path.startswith(SERVERS_ROUTES)
                       and 'traceparent' not in headers):
        return _NOOP
    return _request(method, headers)


def answered(span, method, route, path, status):
    if span is None:
        return
    span.update_name('%s %s' % (method, route))
    span.set_attribute('http.route', route)
    span.set_attribute('url.path', path)
    span.set_attribute('http.response.status_code', status)
    if status >= 500:
        _set_error(span, 'HTTP %d' % status)


class _Traversal:
    """traversal.start's span, and the traceparent it leaves to the
    traversal (`started`)."""

    def __init__(self, stack_id, action):
        from opentelemetry import trace
        self.span = _STATE['tracer'].start_span(
            TRAVERSAL, kind=trace.SpanKind.INTERNAL,
            attributes=_attributes({'stack.id': stack_id,
                                    'traversal.action': action}))

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None:
            self.span.record_exception(exc)
            _set_error(self.span, '%s: %s' % (kind.__name__, exc))
        self.span.end()
        return False

    def started(self, traversal_id, resources, supersedes=None):
        """The traversal's id is known: its traceparent (kept in its
        options), remembered for the messages of its nodes."""
        self.span.set_attributes(_attributes({
            'traversal.id': traversal_id, 'traversal.resources': resources,
            'traversal.supersedes': supersedes}))
        value = traceparent(self.span)
        remember(traversal_id, value)
        return value


def traversal(stack_id, action):
    """``with tracing.traversal(...) as trace``: the span of laying out a
    traversal (a child of the current span: the API request, the unit
    that started a nested stack's or a rollback); `trace` is None when
    tracing is off."""
    return _Traversal(stack_id, action) if enabled else _NOOP


def traversal_ended(trav, state, reason=''):
    """A span saying `trav` (a Traversal row) ended, `state` (complete,
    failed), a child of its own span, lasting from its start to now."""
    if not enabled:
        return
    value = (trav.options or {}).get('trace')
    if not value:
        return
    start = None
    created = getattr(trav, 'created_at', None)
    if created is not None:
        import datetime
        if created.tzinfo is None:
            created = created.replace(tzinfo=datetime.timezone.utc)
        start = int(created.timestamp() * 1e9)
    span = _STATE['tracer'].start_span(
        TRAVERSAL_END, context=_context_of(value), start_time=start,
        attributes=_attributes({
            'stack.id': trav.stack_id, 'traversal.id': trav.id,
            'traversal.action': trav.action, 'traversal.state': state,
            'reason': reason or None}))
    if state != 'complete':
        _set_error(span, reason or state)
    span.end()


def work(name, ctxt, stack_id, traversal_id, stored, **attrs):
    """The span of a check_resource message (`name`: UNIT, UNITS),
    current while it is worked on: a child of its traversal's span,
    found in `ctxt` (the message's context), else remembered, else
    `stored(traversal_id)` (its traceparent read from the traversal). A
    no-op when tracing is off or the traversal has no trace."""
    if not enabled:
        return _NOOP
    value = ctxt.get('traceparent') if isinstance(ctxt, dict) else None
    if value:
        remember(traversal_id, value)
    else:
        value = _TRAVERSALS.get(traversal_id)
        if value is None:
            try:
                value = stored(traversal_id)
            except Exception:   # tracing never stops the work
                LOG.debug('tracing: traversal %s not read', traversal_id,
                          exc_info=True)
                return _NOOP
            remember(traversal_id, value)
    if not value:
        return _NOOP
    from opentelemetry import trace
    return _STATE['tracer'].start_as_current_span(
        name, context=_context_of(value), kind=trace.SpanKind.CONSUMER,
        attributes=_attributes(dict(attrs, **{
            'stack.id': stack_id, 'traversal.id': traversal_id})))


def unit_ended(node, resource, kind, seconds, unit=None, alone=True):
    """A unit of work ended (`kind`: done, failed, wait, lost, drop,
    error; `unit`: the reconcile.Unit, when it was loaded). `alone`: it
    was its message's, whose span (current) it describes; else one of a
    message of several, a span of its own under the message's, from its
    start to now."""
    if not enabled:
        return
    from opentelemetry import trace
    current = trace.get_current_span()
    if not current.is_recording():
        return
    attrs = {'node': node, 'resource.name': resource, 'outcome': kind}
    if unit is not None:
        outcome = getattr(unit, 'outcome', None)
        attrs['resource.type'] = getattr(unit.row, 'type', None)
        if outcome is not None:
            attrs['action'] = outcome.action
            attrs['reason'] = outcome.reason or None
    attrs = _attributes(attrs)
    if alone:
        span = current
        span.set_attributes(attrs)
    else:
        now = time.time_ns()
        span = _STATE['tracer'].start_span(
            UNIT, start_time=now - int(seconds * 1e9), attributes=attrs)
    if kind in ('failed', 'error'):
        _set_error(span, attrs.get('converge.reason') or kind)
    if not alone:
        span.end()
