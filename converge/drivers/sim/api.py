"""SimCompute: a Nova-like compute API over the sim database.

Every call is appended to ``sim_api_log`` in the same transaction as its
effect, so the log is an exact record of what the cloud did (a create
that was logged happened, and vice versa). Faults configured in
``sim_faults`` apply to every process using the same database.

As with Nova, the long actions return at once and the server shows them
in its status for as long as they take (the ``latency`` of the op's
fault): a create is BUILD, then ACTIVE; a rebuild REBUILD, then ACTIVE; a
resize RESIZE, then VERIFY_RESIZE until ``confirm_resize``, then ACTIVE;
a delete keeps the server visible with ``task_state`` deleting, then it
is not found. ``progress`` (0..100) tells how far the action is. Other
calls take their latency as their own response time.

A server's nics may name the cloud's ports, networks or subnets, its
block devices volumes, its scheduler hints a server group (objects.py):
its create and delete then bind, make or let go of them in their own
transaction (wiring.py). The default server (no nics, or ``private`` by
name) runs the statements it always ran.

Errors follow HTTP: 404 is CloudNotFound, 5xx and 429 are CloudTransient
(worth retrying), other 4xx a plain CloudError. When the sim's own
database connection drops, the call is retried a few times at once where
repeating it is safe, then CloudTransient is raised.
"""

import contextlib
import datetime
import json
import logging
import random
import time
import uuid

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from converge import exception
from converge.drivers import cloud
from converge.drivers.sim import agents
from converge.db import prepared
from converge.drivers.sim import seed
from converge.drivers.sim import store
from converge.drivers.sim import wiring

LOG = logging.getLogger(__name__)

OPS = ('create', 'get', 'find', 'list', 'delete', 'rebuild', 'resize',
       'confirm_resize', 'update', 'stop', 'start', 'reboot', 'interfaces',
       'attach', 'detach')
READ_OPS = ('get', 'find', 'list')
#: the calls on the cloud's other kinds (objects.py): KIND.OP, faults
#: and the log naming them so (``network.create``, ``volume.delete``)
OBJECT_OPS = ('create', 'find', 'get', 'update', 'delete', 'list',
              'resolve')
OBJECT_READ_OPS = ('find', 'get', 'list', 'resolve')
#: ops whose latency is how long the server stays in a transitional
#: status; the call itself returns at once
TASK_OPS = ('create', 'rebuild', 'resize', 'delete')
#: where each op may start (Nova refuses others with 409)
ALLOWED_FROM = {
    'rebuild': ('ACTIVE', 'SHUTOFF', 'ERROR'),
    'resize': ('ACTIVE', 'SHUTOFF'),
    'confirm_resize': ('VERIFY_RESIZE',),
    'stop': ('ACTIVE', 'SHUTOFF', 'ERROR'),
    'start': ('ACTIVE', 'SHUTOFF', 'ERROR'),
    'reboot': ('ACTIVE', 'SHUTOFF', 'ERROR'),
}
#: seconds between two looks, per SimCompute, for the agent host while
#: servers with agents are read
AGENT_HOST_CHECK = 5.0
HOSTS = 4
_CREATE_ATTEMPTS = 5
#: a dropped connection to the sim's database: tries, and the first pause
#: between them (doubling)
DB_ATTEMPTS = 4
DB_RETRY_DELAY = 0.05


def is_object_op(op):
    """Whether `op` names a call on another kind than servers."""
    kind, dot, name = op.partition('.')
    return bool(dot) and kind in cloud.KINDS and name in OBJECT_OPS


def clock():
    """The sim's time, in seconds since the epoch. Every decision about
    transitional statuses asks this (tests replace it to move time)."""
    return time.time()


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def _loads(text, default):
    if text is None or text == '':
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def _dumps(value):
    return json.dumps(value, sort_keys=True, default=str)


def _ip(n):
    return '10.%d.%d.%d' % (n // 62500 % 256, n // 250 % 250, n % 250 + 2)


def _net_name(item):
    for key in ('network', 'uuid', 'subnet', 'port'):
        value = item.get(key)
        if value:
            return str(value)
    return 'private'


def _normalise_networks(networks):
    """The nics asked for; Nova's special values as Nova takes them:
    'none' is no network at all, 'auto' (and nothing) the one network
    the project has (the sim's `private`)."""
    if networks == 'none':
        return []
    if not networks or networks == 'auto':
        return [{'network': 'private'}]
    result = []
    for item in networks:
        if isinstance(item, str):
            item = {'network': item}
        elif not isinstance(item, dict):
            raise exception.CloudError(
                'Invalid network specification: %r' % (item,), 400)
        result.append(dict(item))
    return result


def _progress(started, ends, now):
    if started is None or ends <= started:
        return 0
    return max(0, min(99, int(100 * (now - started) / (ends - started))))


def _state(row, now):
    """(status, flavor, task_state, progress) of a server at `now`: an
    action whose time is up is over, whoever looks."""
    status, flavor, task, progress = row.status, row.flavor, None, 100
    if row.ready_at is not None:
        if now >= row.ready_at:
            outcome = _loads(row.outcome, {})
            status = outcome.get('status', status)
            flavor = outcome.get('flavor', flavor)
        else:
            task = row.task_state
            progress = _progress(row.task_started, row.ready_at, now)
    if row.gone_at is not None:
        task = 'deleting'
        progress = _progress(row.delete_started, row.gone_at, now)
    return status, flavor, task, progress


def _visible(now):
    """Rows of servers that exist at `now` (a delete under way included)."""
    c = store.servers.c
    return sa.and_(c.deleted == sa.false(),
                   sa.or_(c.gone_at.is_(None), c.gone_at > now))


# The calls every server makes (create, get, delete, the faults each call
# reads, the log each call writes) run thousands of times a minute: their
# statements are built once, with bind parameters, and run as prepared
# statements (prepared.py: on the driver's cursor on SQLite).
bp = sa.bindparam
_S = store.servers.c
_VISIBLE = _visible(bp('now'))
_P = prepared.Statement
#: (sim URL, op) -> (the faults' version, the faults that applied to op
#: then): kept while none of them counts its failures down
_FAULT_ROWS = {}
_FAULTS = _P(sa.select(store.faults).where(
    sa.or_(store.faults.c.op == bp('op'), store.faults.c.op == '*')))
_BY_ID = _P(sa.select(store.servers).where(_S.id == bp('id'), _VISIBLE))
# the live key, whether or not the server is still visible
_BY_LIVE_KEY = _P(sa.select(store.servers).where(_S.live_key == bp('key')))
_LIVE_BY_KEY = _P(_BY_LIVE_KEY.stmt.where(_VISIBLE))
_FREE_KEY = _P(store.servers.update().where(_S.seq == bp('b_seq')).values(
    live_key=None))
_LOG = _P(store.api_log.insert())
_SERVER_ADD = _P(store.servers.insert())
_ADDRESSES_ADD = _P(store.addresses.insert())
_IP_NEXT = _P(store.counters.update().where(
    store.counters.c.name == 'ip').values(
    value=store.counters.c.value + bp('b_count', type_=sa.Integer)))
_IP_VALUE = _P(sa.select(store.counters.c.value).where(
    store.counters.c.name == 'ip'))
_IP_TAKE = _P(_IP_NEXT.stmt.returning(store.counters.c.value))
_IN_USE = _P(sa.select(store.addresses.c.seq).select_from(
    store.addresses.join(store.servers,
                         store.servers.c.seq == store.addresses.c.seq)).where(
    store.addresses.c.addr == bp('addr'), store.addresses.c.net == bp('net'),
    _VISIBLE).limit(1))


def _cloud_error(message, code):
    """The error an HTTP status stands for."""
    if code == 404:
        return exception.CloudNotFound(message)
    if code == 429 or code >= 500:
        return exception.CloudTransient(message, code)
    return exception.CloudError(message, code)


def _server(row, now):
    status, flavor, task, progress = _state(row, now)
    addresses = _loads(row.addresses, {})
    first = ''
    for entries in addresses.values():
        if entries:
            first = entries[0]['addr']
            break
    found = {
        'id': row.id,
        'name': row.name,
        'status': status,
        'task_state': task,
        'progress': progress,
        'image': row.image,
        'flavor': flavor,
        'key_name': row.key_name,
        'metadata': _loads(row.meta, {}),
        'user_data': row.user_data,
        'addresses': addresses,
        'accessIPv4': first,
        'accessIPv6': '',
        'networks': _loads(row.networks, []),
        'idempotency_key': row.idempotency_key,
        'resource': row.resource,
        'created': row.created,
        'updated': row.updated,
        'host': row.host,
    }
    if row.first_boot:   # the agent host runs its user_data (firstboot)
        found['first_boot'] = True
    return found


class _Row:
    """A server row built from the values just inserted (no read-back)."""

    def __init__(self, **values):
        self.__dict__.update(values)


#: what a call's first pass returns when it must sleep its latency first
_SLEEP = object()


class _Failed(Exception):
    """Carries an error out of a transaction that must still commit
    (the failed call is logged)."""

    def __init__(self, error):
        self.error = error


class SimCompute:
    """The simulated compute cloud at database `url`.

    A server whose user_data has a bootstrap part runs an agent, with its
    disk in `disks_dir` (default: [sim] disks_dir, else <home>/sim-disks);
    see `converge.drivers.sim.agents`.

    The simulated cloud runs in the caller's process: a call computes (its
    own SQL, on this process's core) rather than waits, so an engine keeps
    its gate around it (``in_process``). Where a call does wait (an
    injected response time, a retry's pause) it does so inside
    ``waiting()``, which an engine sets to let go of its gate meanwhile.
    """

    #: calls run on this process's CPU, not in a remote service
    in_process = True

    def __init__(self, url, disks_dir=None, waiting=None):
        self.url = url
        self.waiting = waiting or contextlib.nullcontext
        self._engine = store.get_engine(url)
        self._admin = False
        #: the project whose token the calls carry (for_project); None:
        #: no project's (the engine's own tools), every server seen
        self.project_id = None
        self._disks_dir = disks_dir
        self._host_checked = None

    def __repr__(self):
        return 'SimCompute(%r%s)' % (self.url,
                                     ', admin' if self._admin else '')

    def admin(self):
        """The same cloud seen by its operator (the ``converge sim`` CLI).

        Injected faults do not apply (so inspecting the cloud neither
        fails nor uses up a ``fail_count`` meant for the engine, and an
        operator's delete is immediate), reads are not logged, and
        changes are logged with ``admin: true``."""
        other = SimCompute.__new__(SimCompute)
        other.__dict__.update(self.__dict__)
        other._admin = True
        other.project_id = None
        return other

    def for_project(self, project_id):
        """The same cloud as `project_id` sees it: the servers it makes
        are that project's, another project's are not found (get,
        delete, every action: 404, as Nova answers that project's
        token), nor listed."""
        other = SimCompute.__new__(SimCompute)
        other.__dict__.update(self.__dict__)
        other.project_id = str(project_id) if project_id else None
        return other

    def _sees(self, row):
        """Whether the caller's project sees the server `row`."""
        return self.project_id is None or row.project_id is None or \
            row.project_id == self.project_id

    # -- agents -----------------------------------------------------------

    @property
    def disks_dir(self):
        if self._disks_dir is None:
            self._disks_dir = agents.default_disks_dir()
        return self._disks_dir

    def disk(self, server):
        """The directory of a server (a dict) that runs an agent or a
        first boot, or None."""
        if not agents.boots(server):
            return None
        return agents.disk_of(self.disks_dir, server['id'])

    def ensure_agents(self):
        """Start the agent host unless it runs ([sim] boot_agents)."""
        from converge import conf
        if not conf.CONF.sim.boot_agents:
            return
        with self.waiting():   # starting the host waits for it
            agents.ensure_running(self.url, self.disks_dir)
        self._host_checked = time.monotonic()

    def _agents_needed(self):
        # reading a server with an agent: make sure the host runs (it may
        # have been shut down), at most every AGENT_HOST_CHECK seconds
        last = self._host_checked
        if last is None or time.monotonic() - last > AGENT_HOST_CHECK:
            self.ensure_agents()

    def shutdown_agents(self):
        """Stop the agent host; True when one was running."""
        self._host_checked = None
        return agents.shutdown(self.url, self.disks_dir)

    def agents_running(self):
        return agents.running(self.disks_dir)

    # -- plumbing ---------------------------------------------------------

    def _db(self, what, fn, repeatable=True):
        """Run fn(), which opens its own transaction(s), retrying it at once
        (a few times, briefly) when the sim's database connection drops,
        as a real cloud's API would retry its own database.

        When the connection dropped during a commit the call may have
        taken effect: it is repeated only if `repeatable` (a read; a
        create with an idempotency key, which adopts; a delete, start,
        stop or update, which land in the same state). Otherwise, and
        when the retries run out, CloudTransient: the caller looks at
        the cloud again later."""
        error = None
        for attempt in range(DB_ATTEMPTS):
            try:
                return fn()
            except (sa_exc.DBAPIError, store.CommitUnknown) as e:
                if not store.dropped(e):
                    raise
                error = e
                if isinstance(e, store.CommitUnknown) and not repeatable:
                    raise exception.CloudTransient(
                        'The cloud lost its database connection while '
                        'completing %s; it may or may not have happened: '
                        '%s' % (what, e)) from e
                LOG.warning('sim: %s: database connection dropped (%s); '
                            'retrying', what, e)
                if attempt + 1 < DB_ATTEMPTS:
                    with self.waiting():
                        time.sleep(DB_RETRY_DELAY * 2 ** attempt)
        raise exception.CloudTransient(
            'The cloud could not serve %s: its database is unavailable: %s'
            % (what, error)) from error

    def _log(self, conn, op, ok, server_id=None, idempotency_key=None,
             resource=None, object_id=None, **detail):
        if self._admin:
            if op in READ_OPS or op.partition('.')[2] in OBJECT_READ_OPS:
                return
            detail['admin'] = True
        detail = {k: v for k, v in detail.items() if v is not None}
        entry = {
            'ts': time.time(), 'op': op, 'server_id': server_id,
            'idempotency_key': idempotency_key, 'resource': resource,
            'ok': bool(ok), 'detail': _dumps(detail) if detail else None}
        if object_id is not None:   # a call on another kind (objects.py)
            entry['object_id'] = object_id
        _LOG.run(conn, entry)

    def _owner(self, conn, server_id):
        """(idempotency_key, resource) of a server, for the log."""
        row = conn.execute(sa.select(
            store.servers.c.idempotency_key, store.servers.c.resource).where(
            store.servers.c.id == str(server_id))).first()
        return (row.idempotency_key, row.resource) if row else (None, None)

    def _faults(self, conn, op):
        """The faults that apply to `op`: its own first, then the
        wildcard (none for the operator). On SQLite, not read again until
        the faults change (store.faults_version, read before the faults
        are), unless one counts its failures down (fail_count, written as
        it is used up): none, or a latency, almost always; one statement
        less of every call under the one write lock."""
        if self._admin:
            return []
        version = store.faults_version(self._engine)
        key = (self.url, op)
        kept = _FAULT_ROWS.get(key)
        if version is not None and kept is not None and kept[0] == version:
            return kept[1]
        rows = sorted(_FAULTS.run(conn, {'op': op}).all(),
                      key=lambda r: r.op == '*')
        if version is not None and not any(r.fail_count for r in rows):
            _FAULT_ROWS[key] = (version, rows)
        return rows

    def _fail_maybe(self, conn, op, rows, latency, server_id=None,
                    idempotency_key=None, resource=None, object_id=None):
        """Use up an injected failure of `op` when one applies: it is
        logged and raised as _Failed (the transaction still commits)."""
        for row in rows:
            if not row.fail_count and not row.fail_rate:
                continue
            how = None
            if row.fail_count:
                # decrement atomically: only one caller wins each
                res = conn.execute(
                    store.faults.update()
                    .where(store.faults.c.op == row.op)
                    .where(store.faults.c.fail_count > 0)
                    .values(fail_count=store.faults.c.fail_count - 1))
                if res.rowcount == 1:
                    how = 'fail_count'
            if how is None and row.fail_rate and \
                    random.random() < row.fail_rate:
                how = 'fail_rate'
            if how is None:
                continue
            message = row.message or 'Injected failure in %s' % op
            code = row.code or 500
            key, owner = idempotency_key, resource
            if server_id is not None and owner is None:
                key, owner = self._owner(conn, server_id)
            self._log(conn, op, False, server_id=server_id,
                      idempotency_key=key, resource=owner,
                      object_id=object_id, error=message,
                      injected=how, fault=row.op, code=code,
                      latency=latency or None)
            raise _Failed(_cloud_error(message, code))

    def _call(self, op, fn, server_id=None, idempotency_key=None,
              resource=None, repeatable=True, faults=True, task=None,
              object_id=None):
        """Run fn(conn, latency, now) in one write transaction, after the
        faults configured for `op` (read in that same transaction).

        The latency of a long action (TASK_OPS, or `task` for a call on
        another kind) is how long the server (the object) stays in its
        transitional status; any other op takes it as its own response
        time, slept outside any transaction. fn may raise _Failed(error):
        the transaction (with the failure logged by fn) commits, then the
        error is raised."""
        slept = [False]

        def body(conn):
            rows = self._faults(conn, op) if faults else []
            latency = sum(r.latency or 0.0 for r in rows if r.latency)
            if latency > 0 and not slept[0] and not (
                    op in TASK_OPS if task is None else task):
                return _SLEEP, latency
            try:
                self._fail_maybe(conn, op, rows, latency,
                                 server_id=server_id,
                                 idempotency_key=idempotency_key,
                                 resource=resource, object_id=object_id)
                return fn(conn, latency, clock()), None
            except _Failed as e:
                return None, e      # commit: the failure is logged

        def once():
            # perhaps together with other threads' calls (store.run)
            return store.run(self._engine, body)
        result, failed = self._db(op, once, repeatable)
        if result is _SLEEP:
            with self.waiting():
                time.sleep(failed)  # the op's response time
            slept[0] = True
            result, failed = self._db(op, once, repeatable)
        if failed is not None:
            raise failed.error
        return result

    def _row(self, conn, server_id, now):
        row = _BY_ID.run(conn, {'id': str(server_id), 'now': now}).first()
        return row if row is None or self._sees(row) else None

    def _live_row_or_fail(self, conn, op, server_id, latency, now):
        row = self._row(conn, server_id, now)
        if row is None:
            self._log(conn, op, False, server_id=str(server_id),
                      error='not found', latency=latency or None)
            raise _Failed(exception.CloudNotFound(
                'Server %s could not be found' % server_id))
        return row

    def _finish_due(self, conn, row, now):
        """Write down the end of an action whose time is up (readers only
        compute it), before changing the server again."""
        if row.ready_at is None or now < row.ready_at:
            return row
        status, flavor, _task, _progress = _state(row, now)
        conn.execute(store.servers.update().where(
            store.servers.c.seq == row.seq).values(
            status=status, flavor=flavor, task_state=None,
            task_started=None, ready_at=None, outcome=None))
        return self._row(conn, row.id, now)

    def _refuse(self, conn, op, row, latency, now):
        """Nova's 409 for an action the server's state does not allow."""
        status, _flavor, task, _progress = _state(row, now)
        allowed = ALLOWED_FROM.get(op)
        if task is None and (allowed is None or status in allowed):
            return
        where = 'status %s' % status + (
            ' (task_state %s)' % task if task else '')
        self._log(conn, op, False, server_id=row.id,
                  idempotency_key=row.idempotency_key, resource=row.resource,
                  error='conflict: %s' % where, latency=latency or None)
        raise _Failed(exception.CloudError(
            "Cannot '%s' server %s while it is in %s" % (op, row.id, where),
            409))

    def _change(self, op, server_id, values_fn, repeatable=True):
        """Shared shape of rebuild/resize/confirm/update/stop/start:
        values_fn(row, status, latency, now) -> (column values, detail)."""
        def fn(conn, latency, now):
            row = self._live_row_or_fail(conn, op, server_id, latency, now)
            row = self._finish_due(conn, row, now)
            if op != 'update':
                self._refuse(conn, op, row, latency, now)
            values, detail = values_fn(row, _state(row, now)[0], latency,
                                       now)
            if values:
                values['updated'] = _now()
                conn.execute(store.servers.update().where(
                    store.servers.c.seq == row.seq).values(**values))
            self._log(conn, op, True, server_id=row.id,
                      idempotency_key=row.idempotency_key,
                      resource=row.resource, latency=latency or None,
                      **detail)
            return _server(self._row(conn, row.id, now), now)
        return self._call(op, fn, server_id=str(server_id),
                          repeatable=repeatable)

    def _next_ips(self, conn, now, wanted):
        """`wanted` [(net, taken set)] -> a new address on each: the next
        of the cloud's counter that no live server holds (a fixed_ip may
        have taken one), the counter moved once for all of them."""
        if not wanted:
            return []
        first = self._take_ips(conn, len(wanted))
        found = []
        for index, (net, taken) in enumerate(wanted):
            addr = _ip(first + index)
            while addr in taken or self._in_use(conn, now, net, addr):
                addr = _ip(self._take_ips(conn, 1))
            taken.add(addr)
            found.append(addr)
        return found

    @staticmethod
    def _take_ips(conn, count):
        """Move the address counter on by `count`; the first number."""
        if conn.dialect.update_returning:   # one statement (not MariaDB)
            return _IP_TAKE.run(conn, {'b_count': count}).first()[0] - count
        _IP_NEXT.run(conn, {'b_count': count})
        return _IP_VALUE.run(conn).scalar_one() - count

    def _in_use(self, conn, now, net, addr):
        """Whether a live server has `addr` on `net` (indexed)."""
        return _IN_USE.run(conn, {'addr': addr, 'net': net,
                                  'now': now}).first() is not None

    def _live_by_key(self, conn, key, now):
        row = _LIVE_BY_KEY.run(conn, {'key': key, 'now': now}).first()
        return row if row is None or self._sees(row) else None

    def _holder_of_key(self, conn, key):
        """The live server holding `key`, to adopt; a server being
        deleted gives its key up to the one about to be made."""
        row = _BY_LIVE_KEY.run(conn, {'key': key}).first()
        if row is not None and row.gone_at is not None:
            _FREE_KEY.run(conn, {'b_seq': row.seq})
            return None
        return row

    @staticmethod
    def _task(task_state, busy_status, latency, now, **outcome):
        """Column values for a long action: `busy_status` (and Nova's
        `task_state`) for `latency` seconds, then the `outcome` values;
        or the outcome at once when the action takes no time."""
        if latency <= 0:
            return dict(outcome, task_state=None, task_started=None,
                        ready_at=None, outcome=None)
        return dict(status=busy_status, task_state=task_state,
                    task_started=now,
                    ready_at=now + latency, outcome=_dumps(outcome))

    # -- servers ----------------------------------------------------------

    def create_server(self, name, image, flavor, networks=None,
                      metadata=None, user_data=None, key_name=None,
                      idempotency_key=None, resource=None, fresh=False,
                      **extra):
        """Boot a server: BUILD for the create latency, then ACTIVE.

        A live server made with the same idempotency key is returned
        instead (adopted); one being deleted does not count."""
        # `fresh` changes nothing: the look-up by key is part of the
        # create's own transaction, no call of its own
        networks = _normalise_networks(networks)
        key = str(idempotency_key) if idempotency_key else None
        refused = agents.heat_agents_mismatch(image, user_data)
        if refused:
            # before anything is made: nothing of the server to undo
            raise exception.CloudError(refused, 400)
        first_boot = agents.first_boot(user_data, image) or None
        with_agent = first_boot or agents.has_agent(user_data) or None

        def adopt(conn, row, latency, now):
            self._log(conn, 'create', True, server_id=row.id,
                      idempotency_key=key, resource=resource or row.resource,
                      adopted=True, latency=latency or None)
            return row, now

        def fn(conn, latency, now):
            if key is not None:
                row = self._holder_of_key(conn, key)
                if row is not None and not self._sees(row):
                    # never handed to another project (the objects'
                    # keys are refused alike: objects.py)
                    self._log(conn, 'create', False, idempotency_key=key,
                              resource=resource, error='key of another '
                              'project\'s server', latency=latency or None)
                    raise _Failed(exception.CloudError(
                        'Idempotency key %s is another project\'s server'
                        % key, 409))
                if row is not None:
                    return adopt(conn, row, latency, now)
            ident = uuid.uuid4()
            wired = None
            if not wiring.plain(networks, extra):
                # nics naming the cloud's ports or networks, volumes, a
                # server group (never the default server's)
                asked = extra if self.project_id is None or \
                    'project_id' in extra else dict(
                        extra, project_id=self.project_id)
                wired = self._wire(conn, key, resource, latency, lambda: (
                    wiring.Wiring(conn, now, networks, asked, str(ident),
                                  HOSTS)))
            mine = {}  # given to this server already, per network
            chosen = []  # (net, fixed address or None)
            for index, item in enumerate(networks):
                if wired is not None and index in wired.nics:
                    chosen.append((None, index))   # its port's: below
                    continue
                net = _net_name(item)
                used = mine.setdefault(net, set())
                fixed = item.get('fixed_ip')
                if fixed:
                    if fixed in used or self._in_use(conn, now, net,
                                                     str(fixed)):
                        self._log(conn, 'create', False, idempotency_key=key,
                                  resource=resource,
                                  error='address %s in use' % fixed,
                                  latency=latency or None)
                        raise _Failed(exception.CloudError(
                            'Fixed IP address %s is already in use on '
                            'network %s' % (fixed, net), 409))
                    used.add(str(fixed))
                chosen.append((net, str(fixed) if fixed else None))
            if wired is not None:
                chosen = self._wire(conn, key, resource, latency,
                                    lambda: wired.ports(chosen, mine))
            auto = iter(self._next_ips(conn, now, [
                (net, mine[net]) for net, addr in chosen if addr is None]))
            addresses = {}
            for net, addr in chosen:
                addresses.setdefault(net, []).append(
                    {'addr': addr or next(auto), 'version': 4,
                     'OS-EXT-IPS:type': 'fixed'})
            if wired is not None:
                wired.describe(addresses)
            stamp = _now()
            values = dict(
                id=str(ident), name=name or '',
                image=None if image is None else str(image),
                flavor=None if flavor is None else str(flavor),
                key_name=key_name, meta=_dumps(dict(metadata or {})),
                user_data=user_data, networks=_dumps(networks),
                addresses=_dumps(addresses), idempotency_key=key,
                live_key=key, resource=resource,
                host='sim-host-%d' % (ident.int % HOSTS + 1),
                created=stamp, updated=stamp, deleted=False,
                delete_started=None, gone_at=None, agent=with_agent,
                first_boot=first_boot, reboots=None,
                project_id=self.project_id,
                **self._task('spawning', 'BUILD', latency, now,
                             status='ACTIVE'))
            if wired is not None:
                values.update(wired.values())
            seq = _SERVER_ADD.run(conn, values).inserted_primary_key[0]
            _ADDRESSES_ADD.run(conn, [
                {'seq': seq, 'net': net, 'addr': entry['addr']}
                for net, entries in addresses.items() for entry in entries])
            detail = {'name': name, 'image': image, 'flavor': flavor}
            if extra:
                detail['extra'] = sorted(extra)
            self._log(conn, 'create', True, server_id=values['id'],
                      idempotency_key=key, resource=resource,
                      latency=latency or None, **detail)
            # made into the server's view after the commit (not under
            # the one write lock)
            return _Row(seq=seq, **values), now

        def adopt_raced(conn, latency, now):
            row = self._live_by_key(conn, key, now)
            return adopt(conn, row, latency, now) if row is not None \
                else None

        # repeating a create that may have committed adopts what it made;
        # without a key it would make a second server
        for attempt in range(_CREATE_ATTEMPTS):
            try:
                server = _server(*self._call(
                    'create', fn, idempotency_key=key, resource=resource,
                    repeatable=key is not None, faults=attempt == 0))
                if with_agent:
                    self.ensure_agents()
                return server
            except sa_exc.IntegrityError:
                if key is None:
                    raise
            # another process created a server with this key between our
            # check and our insert: adopt it (unless it is gone again)
            found = self._call('create', adopt_raced, idempotency_key=key,
                               resource=resource, faults=False)
            if found is not None:
                if with_agent:
                    self.ensure_agents()
                return _server(*found)
        raise exception.CloudError(
            'Could not create server %s: idempotency key %s kept '
            'conflicting' % (name, key), 409)

    def _wire(self, conn, key, resource, latency, step):
        """A step of a server's ties to the cloud's objects (wiring.py):
        the cloud's refusal is the create's, logged."""
        try:
            return step()
        except exception.CloudError as e:
            self._log(conn, 'create', False, idempotency_key=key,
                      resource=resource, error=str(e), code=e.code,
                      latency=latency or None)
            raise _Failed(e)

    def find_server_by_key(self, idempotency_key):
        key = str(idempotency_key)

        def fn(conn, latency, now):
            row = self._live_by_key(conn, key, now)
            self._log(conn, 'find', True,
                      server_id=row.id if row is not None else None,
                      idempotency_key=key,
                      resource=row.resource if row is not None else None,
                      found=row is not None, latency=latency or None)
            return _server(row, now) if row is not None else None
        return self._call('find', fn, idempotency_key=key)

    def get_server(self, server_id):
        def fn(conn, latency, now):
            row = self._live_row_or_fail(conn, 'get', server_id, latency,
                                         now)
            self._log(conn, 'get', True, server_id=row.id,
                      idempotency_key=row.idempotency_key,
                      resource=row.resource, latency=latency or None)
            return _server(row, now), row.agent
        server, with_agent = self._call('get', fn, server_id=str(server_id))
        if with_agent:
            self._agents_needed()
        return server

    def interfaces(self, server_id):
        """The server's ports (Nova's interface list), in the order they
        were made; a server on the default network is given its port
        now (wiring.interfaces)."""
        def fn(conn, latency, now):
            row = self._live_row_or_fail(conn, 'interfaces', server_id,
                                         latency, now)
            found = wiring.interfaces(conn, now, row)
            self._log(conn, 'interfaces', True, server_id=row.id,
                      latency=latency or None)
            return found
        return self._call('interfaces', fn, server_id=str(server_id))

    def attach_interface(self, server_id, nic, key, security_groups=None):
        """Nova's interface attach (wiring.attach); `key` and
        `security_groups` are the OpenStack driver's (for a port it makes
        itself): the sim's Nova makes its own."""
        def fn(conn, latency, now):
            row = self._live_row_or_fail(conn, 'attach', server_id,
                                         latency, now)
            try:
                port = wiring.attach(conn, now, row, nic, self.project_id,
                                     HOSTS)
            except exception.CloudError as e:
                self._log(conn, 'attach', False, server_id=row.id,
                          error=str(e), latency=latency or None)
                raise _Failed(e)
            self._log(conn, 'attach', True, server_id=row.id,
                      resource=row.resource, latency=latency or None)
            return port
        return self._call('attach', fn, server_id=str(server_id))

    def detach_interface(self, server_id, port_id):
        """Nova's interface detach (wiring.detach)."""
        def fn(conn, latency, now):
            row = self._live_row_or_fail(conn, 'detach', server_id,
                                         latency, now)
            try:
                wiring.detach(conn, now, row, str(port_id))
            except exception.CloudError as e:
                self._log(conn, 'detach', False, server_id=row.id,
                          error=str(e), latency=latency or None)
                raise _Failed(e)
            self._log(conn, 'detach', True, server_id=row.id,
                      resource=row.resource, latency=latency or None)
        self._call('detach', fn, server_id=str(server_id))

    def owns_server(self, server_id):
        """Whether the server is the caller's project's own (another
        project's is not found: get_server)."""
        try:
            self.get_server(server_id)
        except exception.CloudNotFound:
            return False
        return True

    def list_servers(self):
        def fn(conn, latency, now):
            rows = [r for r in conn.execute(sa.select(store.servers).where(
                _visible(now)).order_by(store.servers.c.seq)).all()
                if self._sees(r)]
            self._log(conn, 'list', True, count=len(rows),
                      latency=latency or None)
            return [_server(r, now) for r in rows]
        return self._call('list', fn)

    def delete_server(self, server_id):
        """Delete: the server shows task_state deleting for the delete
        latency, then it is not found. Deleting a server already being
        deleted changes nothing (as Nova accepts it again)."""
        def fn(conn, latency, now):
            row = self._live_row_or_fail(conn, 'delete', server_id, latency,
                                         now)
            if row.gone_at is not None:
                self._log(conn, 'delete', True, server_id=row.id,
                          idempotency_key=row.idempotency_key,
                          resource=row.resource, noop=True,
                          latency=latency or None)
                return
            if row.wired:   # ports, volumes, a group to let go of
                wiring.unwire(conn, now, row, gone_in=max(latency, 0.0))
            if latency > 0:
                # it stops whatever it was doing and shows what it is now
                status, flavor, _task, _progress = _state(row, now)
                values = dict(status=status, flavor=flavor, task_state=None,
                              task_started=None, ready_at=None, outcome=None,
                              delete_started=now, gone_at=now + latency)
            else:
                values = dict(status='DELETED', deleted=True, live_key=None)
            conn.execute(store.servers.update().where(
                store.servers.c.seq == row.seq).values(
                updated=_now(), **values))
            self._log(conn, 'delete', True, server_id=row.id,
                      idempotency_key=row.idempotency_key,
                      resource=row.resource, latency=latency or None)
        self._call('delete', fn, server_id=str(server_id))

    def rebuild_server(self, server_id, image):
        """REBUILD for the rebuild latency, then ACTIVE (SHUTOFF if it was);
        the new image shows at once, as in Nova."""
        def values(row, status, latency, now):
            after = 'SHUTOFF' if status == 'SHUTOFF' else 'ACTIVE'
            return dict(self._task('rebuilding', 'REBUILD', latency, now,
                                   status=after),
                        image=None if image is None else str(image)), \
                {'image': image, 'old_image': row.image}
        # repeated after an unknown commit it would rebuild twice
        return self._change('rebuild', server_id, values, repeatable=False)

    def resize_server(self, server_id, flavor):
        """RESIZE for the resize latency, then VERIFY_RESIZE with the new
        flavor until confirm_resize."""
        new = None if flavor is None else str(flavor)

        def values(row, status, latency, now):
            return self._task('resize_migrating', 'RESIZE', latency, now,
                              status='VERIFY_RESIZE', flavor=new), \
                {'flavor': flavor, 'old_flavor': row.flavor}
        return self._change('resize', server_id, values, repeatable=False)

    def confirm_resize(self, server_id):
        """VERIFY_RESIZE -> ACTIVE."""
        def values(row, status, latency, now):
            return {'status': 'ACTIVE'}, {}
        return self._change('confirm_resize', server_id, values,
                            repeatable=False)

    def update_server(self, server_id, name=None, metadata=None):
        def values(row, status, latency, now):
            changes = {}
            if name is not None:
                changes['name'] = name
            if metadata is not None:
                changes['meta'] = _dumps(dict(metadata))
            return changes, {'changed': sorted(
                {'name': 'name', 'meta': 'metadata'}[k] for k in changes)}
        return self._change('update', server_id, values)

    def stop_server(self, server_id):
        def values(row, status, latency, now):
            if status == 'SHUTOFF':
                return {}, {'noop': True}
            return {'status': 'SHUTOFF'}, {'old_status': status}
        return self._change('stop', server_id, values)

    def reboot_server(self, server_id):
        """Reboot: the server stays ACTIVE (a stopped one starts) and its
        agent is restarted, its memory lost and its journal read again."""
        def values(row, status, latency, now):
            return {'status': 'ACTIVE', 'reboots': (row.reboots or 0) + 1}, \
                {'old_status': status, 'reboots': (row.reboots or 0) + 1}
        server = self._change('reboot', server_id, values, repeatable=False)
        if agents.boots(server):
            self.ensure_agents()
        return server

    def start_server(self, server_id):
        def values(row, status, latency, now):
            if status == 'ACTIVE':
                return {}, {'noop': True}
            return {'status': 'ACTIVE'}, {'old_status': status}
        return self._change('start', server_id, values)

    # -- observation and faults ------------------------------------------

    def api_log(self, op=None, idempotency_key=None, resource=None,
                object_id=None):
        q = sa.select(store.api_log).order_by(store.api_log.c.id)
        if op is not None:
            q = q.where(store.api_log.c.op == op)
        if object_id is not None:
            q = q.where(store.api_log.c.object_id == str(object_id))
        if idempotency_key is not None:
            q = q.where(store.api_log.c.idempotency_key ==
                        str(idempotency_key))
        if resource is not None:
            q = q.where(store.api_log.c.resource == resource)
        with store.read(self._engine) as conn:
            rows = conn.execute(q).all()
        return [{'id': r.id, 'ts': r.ts, 'op': r.op,
                 'server_id': r.server_id,
                 'idempotency_key': r.idempotency_key,
                 'resource': r.resource, 'ok': bool(r.ok),
                 'object_id': r.object_id,
                 'detail': _loads(r.detail, {})} for r in rows]

    def set_fault(self, op, latency=None, fail_rate=None, fail_count=None,
                  message=None, code=None):
        """Set (replace) the fault for `op`: a server's (OPS), another
        kind's as KIND.OP (``volume.create``: objects.py), or '*' for
        every op.

        `code` is the HTTP status of the injected failures (default 500):
        5xx and 429 are transient (the engine retries), 404 is not found,
        other 4xx are fatal."""
        if op != '*' and op not in OPS and not is_object_op(op):
            raise exception.ConvergeError(
                'Unknown sim operation %r: use one of %s, KIND.OP (KIND one '
                'of %s; OP one of %s) or *' % (
                    op, ', '.join(OPS), ', '.join(cloud.KINDS),
                    ', '.join(OBJECT_OPS)))
        if latency is not None and latency < 0:
            raise exception.ConvergeError('latency must be >= 0')
        if fail_rate is not None and not 0 <= fail_rate <= 1:
            raise exception.ConvergeError('fail_rate must be in 0..1')
        if fail_count is not None and fail_count < 0:
            raise exception.ConvergeError('fail_count must be >= 0')
        if code is not None and not 400 <= code <= 599:
            raise exception.ConvergeError(
                'code must be an HTTP error status, 400..599')
        for attempt in range(3):
            try:
                with store.write(self._engine) as conn:
                    conn.execute(store.faults.delete().where(
                        store.faults.c.op == op))
                    conn.execute(store.faults.insert().values(
                        op=op, latency=latency, fail_rate=fail_rate,
                        fail_count=fail_count, message=message, code=code))
                store.faults_changed(self._engine)
                return
            except sa_exc.IntegrityError:
                # a concurrent set for the same op won; last writer wins
                if attempt == 2:
                    raise

    def clear_faults(self, op=None):
        with store.write(self._engine) as conn:
            q = store.faults.delete()
            if op is not None:
                q = q.where(store.faults.c.op == op)
            conn.execute(q)
        store.faults_changed(self._engine)

    def faults(self):
        with store.read(self._engine) as conn:
            rows = conn.execute(sa.select(store.faults).order_by(
                store.faults.c.op)).all()
        return [{'op': r.op, 'latency': r.latency, 'fail_rate': r.fail_rate,
                 'fail_count': r.fail_count, 'code': r.code,
                 'message': r.message}
                for r in rows]

    def reset(self):
        """Drop every server, log entry and fault, and every object but
        those the cloud starts with (tests)."""
        with store.write(self._engine) as conn:
            for table in (store.api_log, store.addresses, store.servers,
                          store.faults, store.ips, store.objects):
                conn.execute(table.delete())
            conn.execute(store.counters.update().values(value=0))
            seed.plant(conn)
        store.faults_changed(self._engine)
