"""SimCompute: a Nova-like compute API over the sim database.

Every call is appended to ``sim_api_log`` in the same transaction as its
effect, so the log is an exact record of what the cloud did (a create
that was logged happened, and vice versa). Faults configured in
``sim_faults`` apply to every process using the same database.
"""

import datetime
import json
import random
import time
import uuid

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from converge import exception
from converge.drivers.sim import store

OPS = ('create', 'get', 'find', 'list', 'delete', 'rebuild', 'resize',
       'update', 'stop', 'start')
READ_OPS = ('get', 'find', 'list')
HOSTS = 4
_CREATE_ATTEMPTS = 5


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
    if not networks:
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


def _server(row):
    addresses = _loads(row.addresses, {})
    first = ''
    for entries in addresses.values():
        if entries:
            first = entries[0]['addr']
            break
    return {
        'id': row.id,
        'name': row.name,
        'status': row.status,
        'image': row.image,
        'flavor': row.flavor,
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


class _Failed(Exception):
    """Carries an error out of a transaction that must still commit
    (the failed call is logged)."""

    def __init__(self, error):
        self.error = error


class SimCompute:
    """The simulated compute cloud at database `url`."""

    def __init__(self, url):
        self.url = url
        self._engine = store.get_engine(url)
        self._admin = False

    def __repr__(self):
        return 'SimCompute(%r%s)' % (self.url,
                                     ', admin' if self._admin else '')

    def admin(self):
        """The same cloud seen by its operator (the ``converge sim`` CLI).

        Injected faults do not apply (so inspecting the cloud neither
        fails nor uses up a ``fail_count`` meant for the engine), reads
        are not logged, and changes are logged with ``admin: true``."""
        other = SimCompute.__new__(SimCompute)
        other.url = self.url
        other._engine = self._engine
        other._admin = True
        return other

    # -- plumbing ---------------------------------------------------------

    def _log(self, conn, op, ok, server_id=None, idempotency_key=None,
             resource=None, **detail):
        if self._admin:
            if op in READ_OPS:
                return
            detail['admin'] = True
        detail = {k: v for k, v in detail.items() if v is not None}
        conn.execute(store.api_log.insert().values(
            ts=time.time(), op=op, server_id=server_id,
            idempotency_key=idempotency_key, resource=resource, ok=bool(ok),
            detail=_dumps(detail) if detail else None))

    def _owner(self, conn, server_id):
        """(idempotency_key, resource) of a server, for the log."""
        row = conn.execute(sa.select(
            store.servers.c.idempotency_key, store.servers.c.resource).where(
            store.servers.c.id == str(server_id))).first()
        return (row.idempotency_key, row.resource) if row else (None, None)

    def _active_faults(self, op):
        with store.read(self._engine) as conn:
            rows = conn.execute(sa.select(store.faults).where(
                store.faults.c.op.in_([op, '*']))).all()
        # the op's own fault first, then the wildcard
        return sorted(rows, key=lambda r: r.op == '*')

    def _inject(self, op, server_id=None, idempotency_key=None,
                resource=None):
        """Apply faults for `op`: sleep, then maybe fail (logged).

        Returns the latency slept (for the log of the real call)."""
        if self._admin:
            return 0.0
        rows = self._active_faults(op)
        if not rows:
            return 0.0
        latency = sum(r.latency or 0.0 for r in rows if r.latency)
        if latency > 0:
            time.sleep(latency)  # outside any transaction
        for row in rows:
            if not row.fail_count and not row.fail_rate:
                continue
            message = row.message or 'Injected failure in %s' % op
            with store.write(self._engine) as conn:
                how = None
                if row.fail_count:
                    # decrement atomically: only one caller wins each unit
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
                if how is not None:
                    if server_id is not None and resource is None:
                        idempotency_key, resource = self._owner(
                            conn, server_id)
                    self._log(conn, op, False, server_id=server_id,
                              idempotency_key=idempotency_key,
                              resource=resource, error=message,
                              injected=how, fault=row.op,
                              latency=latency or None)
            if how is not None:
                raise exception.CloudError(message, 500)
        return latency

    def _call(self, op, fn, server_id=None, idempotency_key=None,
              resource=None):
        """Run fn(conn, latency) in one write transaction after faults.

        fn may raise _Failed(error): the transaction (with the failure
        logged by fn) commits, then the error is raised."""
        latency = self._inject(op, server_id=server_id,
                               idempotency_key=idempotency_key,
                               resource=resource)
        with store.write(self._engine) as conn:
            try:
                return fn(conn, latency)
            except _Failed as e:
                failed = e      # commit: the failure is logged
        raise failed.error

    def _row(self, conn, server_id):
        return conn.execute(sa.select(store.servers).where(
            store.servers.c.id == str(server_id)).where(
            store.servers.c.deleted == sa.false())).first()

    def _live_row_or_fail(self, conn, op, server_id, latency):
        row = self._row(conn, server_id)
        if row is None:
            self._log(conn, op, False, server_id=str(server_id),
                      error='not found', latency=latency or None)
            raise _Failed(exception.CloudNotFound(
                'Server %s could not be found' % server_id))
        return row

    def _change(self, op, server_id, values_fn):
        """Shared shape of rebuild/resize/update/stop/start."""
        def fn(conn, latency):
            row = self._live_row_or_fail(conn, op, server_id, latency)
            values, detail = values_fn(row)
            if values:
                values['updated'] = _now()
                conn.execute(store.servers.update().where(
                    store.servers.c.seq == row.seq).values(**values))
            self._log(conn, op, True, server_id=row.id,
                      idempotency_key=row.idempotency_key,
                      resource=row.resource, latency=latency or None,
                      **detail)
            return _server(self._row(conn, row.id))
        return self._call(op, fn, server_id=str(server_id))

    def _next_ip(self, conn, used):
        while True:
            conn.execute(store.counters.update()
                         .where(store.counters.c.name == 'ip')
                         .values(value=store.counters.c.value + 1))
            n = conn.execute(sa.select(store.counters.c.value).where(
                store.counters.c.name == 'ip')).scalar_one()
            addr = _ip(n - 1)
            if addr not in used:
                return addr

    def _used_addresses(self, conn):
        used = {}
        for (text,) in conn.execute(sa.select(store.servers.c.addresses)
                                    .where(store.servers.c.deleted ==
                                           sa.false())):
            for net, entries in _loads(text, {}).items():
                for entry in entries:
                    used.setdefault(net, set()).add(entry.get('addr'))
        return used

    def _live_by_key(self, conn, key):
        return conn.execute(sa.select(store.servers).where(
            store.servers.c.live_key == key)).first()

    # -- servers ----------------------------------------------------------

    def create_server(self, name, image, flavor, networks=None,
                      metadata=None, user_data=None, key_name=None,
                      idempotency_key=None, resource=None, **extra):
        networks = _normalise_networks(networks)
        key = str(idempotency_key) if idempotency_key else None

        def adopt(conn, row, latency):
            self._log(conn, 'create', True, server_id=row.id,
                      idempotency_key=key, resource=resource or row.resource,
                      adopted=True, latency=latency or None)
            return _server(row)

        def fn(conn, latency):
            if key is not None:
                row = self._live_by_key(conn, key)
                if row is not None:
                    return adopt(conn, row, latency)
            all_used = self._used_addresses(conn)
            addresses = {}
            for item in networks:
                net = _net_name(item)
                used = all_used.setdefault(net, set())
                fixed = item.get('fixed_ip')
                if fixed:
                    if fixed in used:
                        self._log(conn, 'create', False, idempotency_key=key,
                                  resource=resource,
                                  error='address %s in use' % fixed,
                                  latency=latency or None)
                        raise _Failed(exception.CloudError(
                            'Fixed IP address %s is already in use on '
                            'network %s' % (fixed, net), 409))
                    addr = str(fixed)
                else:
                    addr = self._next_ip(conn, used)
                used.add(addr)
                addresses.setdefault(net, []).append(
                    {'addr': addr, 'version': 4,
                     'OS-EXT-IPS:type': 'fixed'})
            server_id = str(uuid.uuid4())
            stamp = _now()
            res = conn.execute(store.servers.insert().values(
                id=server_id, name=name or '', status='ACTIVE',
                image=None if image is None else str(image),
                flavor=None if flavor is None else str(flavor),
                key_name=key_name, meta=_dumps(dict(metadata or {})),
                user_data=user_data, networks=_dumps(networks),
                addresses=_dumps(addresses), idempotency_key=key,
                live_key=key, resource=resource, host=None,
                created=stamp, updated=stamp, deleted=False))
            seq = res.inserted_primary_key[0]
            conn.execute(store.servers.update()
                         .where(store.servers.c.seq == seq)
                         .values(host='sim-host-%d' % (seq % HOSTS + 1)))
            detail = {'name': name, 'image': image, 'flavor': flavor}
            if extra:
                detail['extra'] = sorted(extra)
            self._log(conn, 'create', True, server_id=server_id,
                      idempotency_key=key, resource=resource,
                      latency=latency or None, **detail)
            return _server(self._row(conn, server_id))

        latency = self._inject('create', idempotency_key=key,
                               resource=resource)
        for _attempt in range(_CREATE_ATTEMPTS):
            failed = None
            try:
                with store.write(self._engine) as conn:
                    try:
                        return fn(conn, latency)
                    except _Failed as e:
                        failed = e      # commit: the failure is logged
            except sa_exc.IntegrityError:
                if key is None:
                    raise
            if failed is not None:
                raise failed.error
            # another process created a server with this key between our
            # check and our insert: adopt it (unless it is gone again)
            with store.write(self._engine) as conn:
                row = self._live_by_key(conn, key)
                if row is not None:
                    return adopt(conn, row, latency)
        raise exception.CloudError(
            'Could not create server %s: idempotency key %s kept '
            'conflicting' % (name, key), 409)

    def find_server_by_key(self, idempotency_key):
        key = str(idempotency_key)

        def fn(conn, latency):
            row = self._live_by_key(conn, key)
            self._log(conn, 'find', True,
                      server_id=row.id if row is not None else None,
                      idempotency_key=key,
                      resource=row.resource if row is not None else None,
                      found=row is not None, latency=latency or None)
            return _server(row) if row is not None else None
        return self._call('find', fn, idempotency_key=key)

    def get_server(self, server_id):
        def fn(conn, latency):
            row = self._live_row_or_fail(conn, 'get', server_id, latency)
            self._log(conn, 'get', True, server_id=row.id,
                      idempotency_key=row.idempotency_key,
                      resource=row.resource, latency=latency or None)
            return _server(row)
        return self._call('get', fn, server_id=str(server_id))

    def list_servers(self):
        def fn(conn, latency):
            rows = conn.execute(sa.select(store.servers).where(
                store.servers.c.deleted == sa.false()).order_by(
                store.servers.c.seq)).all()
            self._log(conn, 'list', True, count=len(rows),
                      latency=latency or None)
            return [_server(r) for r in rows]
        return self._call('list', fn)

    def delete_server(self, server_id):
        def fn(conn, latency):
            row = self._live_row_or_fail(conn, 'delete', server_id, latency)
            conn.execute(store.servers.update().where(
                store.servers.c.seq == row.seq).values(
                status='DELETED', deleted=True, live_key=None,
                updated=_now()))
            self._log(conn, 'delete', True, server_id=row.id,
                      idempotency_key=row.idempotency_key,
                      resource=row.resource, latency=latency or None)
        self._call('delete', fn, server_id=str(server_id))

    def rebuild_server(self, server_id, image):
        return self._change('rebuild', server_id, lambda row: (
            {'image': None if image is None else str(image)},
            {'image': image, 'old_image': row.image}))

    def resize_server(self, server_id, flavor):
        return self._change('resize', server_id, lambda row: (
            {'flavor': None if flavor is None else str(flavor)},
            {'flavor': flavor, 'old_flavor': row.flavor}))

    def update_server(self, server_id, name=None, metadata=None):
        def values(row):
            changes = {}
            if name is not None:
                changes['name'] = name
            if metadata is not None:
                changes['meta'] = _dumps(dict(metadata))
            return changes, {'changed': sorted(
                {'name': 'name', 'meta': 'metadata'}[k] for k in changes)}
        return self._change('update', server_id, values)

    def stop_server(self, server_id):
        def values(row):
            if row.status == 'SHUTOFF':
                return {}, {'noop': True}
            return {'status': 'SHUTOFF'}, {'old_status': row.status}
        return self._change('stop', server_id, values)

    def start_server(self, server_id):
        def values(row):
            if row.status == 'ACTIVE':
                return {}, {'noop': True}
            return {'status': 'ACTIVE'}, {'old_status': row.status}
        return self._change('start', server_id, values)

    # -- observation and faults ------------------------------------------

    def api_log(self, op=None, idempotency_key=None, resource=None):
        q = sa.select(store.api_log).order_by(store.api_log.c.id)
        if op is not None:
            q = q.where(store.api_log.c.op == op)
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
                 'detail': _loads(r.detail, {})} for r in rows]

    def set_fault(self, op, latency=None, fail_rate=None, fail_count=None,
                  message=None):
        """Set (replace) the fault for `op` ('*' for every op)."""
        if op != '*' and op not in OPS:
            raise exception.ConvergeError(
                'Unknown sim operation %r: use one of %s or *'
                % (op, ', '.join(OPS)))
        if latency is not None and latency < 0:
            raise exception.ConvergeError('latency must be >= 0')
        if fail_rate is not None and not 0 <= fail_rate <= 1:
            raise exception.ConvergeError('fail_rate must be in 0..1')
        if fail_count is not None and fail_count < 0:
            raise exception.ConvergeError('fail_count must be >= 0')
        for attempt in range(3):
            try:
                with store.write(self._engine) as conn:
                    conn.execute(store.faults.delete().where(
                        store.faults.c.op == op))
                    conn.execute(store.faults.insert().values(
                        op=op, latency=latency, fail_rate=fail_rate,
                        fail_count=fail_count, message=message))
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

    def faults(self):
        with store.read(self._engine) as conn:
            rows = conn.execute(sa.select(store.faults).order_by(
                store.faults.c.op)).all()
        return [{'op': r.op, 'latency': r.latency, 'fail_rate': r.fail_rate,
                 'fail_count': r.fail_count, 'message': r.message}
                for r in rows]

    def reset(self):
        """Drop every server, log entry and fault (tests)."""
        with store.write(self._engine) as conn:
            for table in (store.api_log, store.servers, store.faults):
                conn.execute(table.delete())
            conn.execute(store.counters.update().values(value=0))
