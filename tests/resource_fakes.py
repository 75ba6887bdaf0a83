"""In-memory fakes of the drivers plug-ins reach through ``clients``."""

import copy
import itertools
import uuid

from converge import exception
from converge.resources import base


class FakeCompute:
    """Just enough of SimCompute, in memory, with a call log."""

    def __init__(self):
        self.servers = {}       # id -> server dict (live only)
        self.calls = []         # (op, args...)
        self.fail_next = {}     # op -> exception to raise once
        self.create_status = 'ACTIVE'
        self._ips = itertools.count(2)

    def _maybe_fail(self, op):
        exc = self.fail_next.pop(op, None)
        if exc is not None:
            raise exc

    def _live(self, server_id):
        server = self.servers.get(server_id)
        if server is None:
            raise exception.CloudNotFound('Server %s could not be found'
                                          % server_id)
        return server

    def create_server(self, name, image, flavor, networks=None,
                      metadata=None, user_data=None, key_name=None,
                      idempotency_key=None, resource=None, fresh=False,
                      **extra):
        self.calls.append(('create', name, idempotency_key))
        self._maybe_fail('create')
        if idempotency_key is not None and not fresh:
            found = self.find_server_by_key(idempotency_key, log=False)
            if found is not None:
                return found
        addresses = {}
        for net in networks or [{'network': 'private'}]:
            label = net.get('network') or net.get('port') or 'private'
            addr = net.get('fixed_ip') or '10.0.0.%d' % next(self._ips)
            addresses.setdefault(label, []).append(
                {'addr': addr, 'version': 4, 'OS-EXT-IPS:type': 'fixed'})
        sid = str(uuid.uuid4())
        self.servers[sid] = {
            'id': sid, 'name': name, 'status': self.create_status,
            'image': image, 'flavor': flavor, 'key_name': key_name,
            'metadata': dict(metadata or {}), 'user_data': user_data,
            'addresses': addresses,
            'accessIPv4': next(iter(addresses.values()))[0]['addr']
            if addresses else '',
            'accessIPv6': '', 'networks': list(networks or []),
            'idempotency_key': idempotency_key, 'resource': resource,
            'created': 'now', 'updated': 'now', 'host': 'sim-host-1',
            'extra': dict(extra),
        }
        return copy.deepcopy(self.servers[sid])

    def find_server_by_key(self, key, log=True):
        if log:
            self.calls.append(('find', key))
            self._maybe_fail('find')
        for server in self.servers.values():
            if server['idempotency_key'] == key:
                return copy.deepcopy(server)
        return None

    def get_server(self, server_id):
        self.calls.append(('get', server_id))
        self._maybe_fail('get')
        return copy.deepcopy(self._live(server_id))

    def delete_server(self, server_id):
        self.calls.append(('delete', server_id))
        self._maybe_fail('delete')
        self._live(server_id)
        del self.servers[server_id]

    def rebuild_server(self, server_id, image):
        self.calls.append(('rebuild', server_id, image))
        self._live(server_id)['image'] = image
        return self.get_server(server_id)

    def resize_server(self, server_id, flavor):
        self.calls.append(('resize', server_id, flavor))
        self._live(server_id)['flavor'] = flavor
        return self.get_server(server_id)

    def update_server(self, server_id, name=None, metadata=None):
        self.calls.append(('update', server_id, name, metadata))
        server = self._live(server_id)
        if name is not None:
            server['name'] = name
        if metadata is not None:
            server['metadata'] = dict(metadata)
        return self.get_server(server_id)

    def stop_server(self, server_id):
        self.calls.append(('stop', server_id))
        self._live(server_id)['status'] = 'SHUTOFF'
        return self.get_server(server_id)

    def start_server(self, server_id):
        self.calls.append(('start', server_id))
        self._live(server_id)['status'] = 'ACTIVE'
        return self.get_server(server_id)

    def ops(self, op):
        return [c for c in self.calls if c[0] == op]


class FakeConfigs:
    """The engine's software-config store, in memory."""

    def __init__(self):
        self.rows = {}
        self.creates = 0

    def create(self, id, name, group, config, options=None, inputs=None,
               outputs=None, project_id=None):
        self.creates += 1
        if id in self.rows:
            return
        self.rows[id] = dict(id=id, name=name, group=group, config=config,
                             options=options or {}, inputs=inputs or [],
                             outputs=outputs or [])

    def get(self, id):
        row = self.rows.get(id)
        return copy.deepcopy(row) if row is not None else None

    def delete(self, id):
        self.rows.pop(id, None)


class FakeClients:
    def __init__(self):
        self.compute = FakeCompute()
        self.configs = FakeConfigs()


STACK = base.StackInfo('stack-id-1', 'mystack')


def make(cls, name='res', props=None, clients=None, uuid_=None, **kw):
    """Build a plug-in the way the engine does, validating properties."""
    values = cls.validate_properties(props or {})
    return cls(name, values, stack=kw.pop('stack', STACK),
               uuid=uuid_ or str(uuid.uuid4()), clients=clients, **kw)


def again(plugin, props=None):
    """The same resource row, rebuilt (as after a crash or a new traversal)
    with its persisted physical_id and data and (maybe) new properties."""
    cls = type(plugin)
    values = cls.validate_properties(props) if props is not None \
        else plugin.properties
    return cls(plugin.name, values, stack=plugin.stack, uuid=plugin.uuid,
               physical_id=plugin.physical_id, data=plugin.data,
               clients=plugin.clients)
