"""Prometheus metrics: what each converge process counts, and serving them.

Every process has its own registry (prometheus_client's default) and is
scraped on its own: converge-api under ``/metrics`` on its own address,
each converge-worker process and converge-observer on a port of its own
(``[metrics]``; docs/operating.md lists the metrics). No multiprocess
mode: no two processes share a registry.

What is counted on the engine's threads costs a dictionary look-up and a
locked increment or two (about a microsecond a unit of work; the unit
itself takes milliseconds). What a scrape can read for itself is read
then, not counted as it happens: the SQL statements (db/session.py
counts them already), the units in flight (each engine counts them),
and what the database knows for the whole deployment (traversals in
flight, waits due and overdue, deployments running), one query each per
scrape.
"""

import datetime
import logging
import socket
import threading
import time
import weakref

import prometheus_client
from prometheus_client import core

LOG = logging.getLogger(__name__)
# no <name>_created series beside each counter and histogram: they double
# what a scrape carries and no alert reads them
prometheus_client.disable_created_metrics()

#: seconds, for the durations of units, lock waits and API requests
_FAST = (.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1.0, 2.5, 5.0,
         10.0, 30.0, 60.0)
#: seconds, for what lasts minutes (software deployments' runs)
_SLOW = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)

OUTCOMES = ('done', 'failed', 'wait', 'lost', 'drop', 'error')

UNITS_STARTED = prometheus_client.Counter(
    'converge_units_started', 'Units of work (check_resource) started.')
UNITS_ENDED = prometheus_client.Counter(
    'converge_units_ended', 'Units of work ended, by outcome (done, '
    'failed, wait, lost: another wrote first, drop: nothing to do, '
    'error: an unexpected error, sent again later).', ['outcome'])
_ENDED = {kind: UNITS_ENDED.labels(kind) for kind in OUTCOMES}
UNIT_SECONDS = prometheus_client.Histogram(
    'converge_unit_duration_seconds', 'Wall time of a unit of work, from '
    'its lock to its end.', buckets=_FAST)
MESSAGES_SENT = prometheus_client.Counter(
    'converge_messages_sent', 'check_resource messages cast, by method.',
    ['method'])
MESSAGES_RECEIVED = prometheus_client.Counter(
    'converge_messages_received', 'check_resource messages taken from '
    'the bus, by method.', ['method'])
LOCK_WAITS = prometheus_client.Counter(
    'converge_lock_waits', 'Resource locks found held by another unit '
    'and waited for.')
LOCK_WAIT_SECONDS = prometheus_client.Histogram(
    'converge_lock_wait_seconds', 'Time waited for a held resource lock.',
    buckets=_FAST)
LOCK_TIMEOUTS = prometheus_client.Counter(
    'converge_lock_timeouts', 'Resource locks still held after '
    '[worker] lock_wait: the unit is sent again later.')
LOCKS_BUSY = prometheus_client.Counter(
    'converge_locks_busy', 'Nodes of a batch whose resource lock was '
    'held elsewhere, left out to run alone.')
WAITS_FIRED = prometheus_client.Counter(
    'converge_waits_fired', 'Waits that came due and were sent, by the '
    'timer that sent them (soon: this engine\'s own, to the moment; '
    'tick: the database timer any engine runs).', ['timer'])
_FIRED = {t: WAITS_FIRED.labels(t) for t in ('soon', 'tick')}
WAIT_LATENESS_SECONDS = prometheus_client.Histogram(
    'converge_wait_lateness_seconds', 'How long after its time a wait was '
    'sent by the soon-timer.', buckets=_FAST)
DRIFT_FOUND = prometheus_client.Counter(
    'converge_drift_found', 'Resources a check found drifted from what '
    'was applied.')
DRIFT_REPAIRED = prometheus_client.Counter(
    'converge_drift_repaired', 'Drifted resources converged back to what '
    'the template says.')
DEPLOYMENT_SECONDS = prometheus_client.Histogram(
    'converge_deployment_duration_seconds', 'Software deployment runs, from '
    'their start to their agent\'s signal, by result.', ['status'],
    buckets=_SLOW)
API_REQUESTS = prometheus_client.Counter(
    'converge_api_requests', 'HTTP requests served by converge-api, by '
    'method, route (the path pattern) and status.',
    ['method', 'route', 'status'])
API_SECONDS = prometheus_client.Histogram(
    'converge_api_request_duration_seconds', 'Time to answer an HTTP '
    'request, by method and route.', ['method', 'route'], buckets=_FAST)


def unit_started(count=1):
    UNITS_STARTED.inc(count)


def unit_ended(kind, seconds):
    """One unit of work ended with outcome `kind` after `seconds`."""
    _ENDED.get(kind, _ENDED['error']).inc()
    UNIT_SECONDS.observe(seconds)


def waits_fired(timer, count, lateness=()):
    if count:
        _FIRED[timer].inc(count)
    for late in lateness:
        WAIT_LATENESS_SECONDS.observe(max(late, 0.0))


def deployment_ended(status, started_at):
    """A deployment's run ended; `started_at` its row's last change (a
    naive UTC datetime, as stored)."""
    if started_at is None:
        return
    try:
        if started_at.tzinfo is None:
            started_at = started_at.replace(tzinfo=datetime.timezone.utc)
        seconds = (datetime.datetime.now(datetime.timezone.utc)
                   - started_at).total_seconds()
    except (TypeError, AttributeError):
        return
    DEPLOYMENT_SECONDS.labels(status).observe(max(seconds, 0.0))


# -- read at scrape time ----------------------------------------------------

_ENGINES = weakref.WeakSet()


def watch(engine):
    """Report `engine`'s units in flight, and what its database knows,
    at each scrape."""
    _ENGINES.add(engine)


class _Scraped:
    """What a scrape reads for itself (the module docstring says why)."""

    def collect(self):
        from converge.db import session
        statements = core.CounterMetricFamily(
            'converge_db_statements', 'SQL statements issued by this '
            'process (SQLAlchemy\'s before_cursor_execute, and BEGIN).')
        statements.add_metric([], session.statements_issued())
        yield statements
        engines = list(_ENGINES)
        inflight = core.GaugeMetricFamily(
            'converge_units_in_flight', 'Units of work running in this '
            'process now (a message\'s batch of nodes, worked through in '
            'turn, counts as one).')
        inflight.add_metric([], sum(e.inflight for e in engines))
        yield inflight
        if not engines:
            return
        try:
            counts = _database_counts(engines[0])
        except Exception:   # the database away: the rest still served
            LOG.debug('metrics: the database could not be read',
                      exc_info=True)
            return
        for name, doc, value in counts:
            family = core.GaugeMetricFamily(name, doc)
            family.add_metric([], value)
            yield family


def _database_counts(engine):
    import sqlalchemy as sa
    from converge import conf as conf_mod
    from converge.db import models
    now = time.time()
    overdue = now - conf_mod.CONF.worker.stall_timeout
    trav = models.Traversal.__table__
    sync = models.SyncPoint.__table__
    deps = models.SoftwareDeployment.__table__
    count = sa.func.count()
    with engine.db.connect() as conn:
        running = conn.execute(sa.select(count).where(
            trav.c.state == 'running')).scalar()
        due = conn.execute(sa.select(count).where(
            sync.c.done.is_(False), sync.c.wake_at <= now)).scalar()
        late = conn.execute(sa.select(count).where(
            sync.c.done.is_(False), sync.c.wake_at <= overdue)).scalar()
        deploying = conn.execute(sa.select(count).where(
            deps.c.status == 'IN_PROGRESS')).scalar()
    return [
        ('converge_traversals_in_flight', 'Traversals running in the '
         'deployment (from the database).', running),
        ('converge_waits_due', 'Waits whose time has come, not yet taken '
         'by an engine (from the database).', due),
        ('converge_waits_overdue', 'Waits due for longer than [worker] '
         'stall_timeout: no engine is taking them (from the database).',
         late),
        ('converge_deployments_running', 'Software deployments whose run '
         'is in progress (from the database).', deploying),
    ]


prometheus_client.REGISTRY.register(_Scraped())


# -- serving ----------------------------------------------------------------

def exposition():
    """(body, content type) of this process's metrics."""
    return (prometheus_client.generate_latest(prometheus_client.REGISTRY),
            prometheus_client.CONTENT_TYPE_LATEST)


_SERVING = {}
_SERVE_LOCK = threading.Lock()
#: ports tried from the one configured (worker processes of one host)
PORTS_TRIED = 64


def serve(kind):
    """Serve this process's metrics on the port `[metrics] <kind>_port`
    (or the first free one after it), if [metrics] enabled and the port
    is not 0. Returns the port, or None."""
    from converge import conf as conf_mod
    CONF = conf_mod.CONF.metrics
    first = getattr(CONF, '%s_port' % kind)
    if not CONF.enabled or not first:
        return None
    with _SERVE_LOCK:
        if kind in _SERVING:
            return _SERVING[kind]
        for port in range(first, min(first + PORTS_TRIED, 65536)):
            try:
                prometheus_client.start_http_server(port, CONF.bind_host)
            except OSError:   # taken (another process of this host)
                continue
            _SERVING[kind] = port
            LOG.info('metrics: serving on http://%s:%d/metrics',
                     _shown(CONF.bind_host), port)
            return port
    LOG.warning('metrics: no free port in %d..%d; not served', first,
                first + PORTS_TRIED - 1)
    return None


def _shown(host):
    return socket.gethostname() if host in ('0.0.0.0', '::') else host
