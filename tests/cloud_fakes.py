"""An in-memory cloud (drivers/cloud.py's contract), small and predictable:
for the plug-ins' paths the simulator makes hard to reach on purpose
(an object that fails, a delete refused as in use, one call failing).

Objects settle after ``settle_after`` looks (volumes, images,
attachments); ``fail_next[op]`` raises once; ``statuses[kind]`` sets the
status an object of that kind settles in; ``in_use[id]`` makes deletes
of that object answer 409 that many times.
"""

import copy
import itertools
import uuid

import pytest

from converge import exception
from converge.drivers import cloud as cloud_mod

NEUTRON = ('network', 'subnet', 'port', 'router', 'security_group',
           'security_group_rule', 'floating_ip')
#: what an object of a kind is while it settles
BUSY = {'volume': 'creating', 'image': 'importing',
        'volume_attachment': 'attaching'}
DONE = {'volume': 'available', 'image': 'active',
        'volume_attachment': 'attached'}


class FakeCloud(cloud_mod.Cloud):
    name = 'fake'
    in_process = True

    def __init__(self, project_id='proj'):
        self.project_id = project_id
        self.objects = {}        # (kind, id) -> dict
        self.keys = {}           # (kind, id) -> key
        self.calls = []
        self.fail_next = {}
        self.statuses = {}
        self.settle_after = 1
        self.in_use = {}
        self._looks = {}
        self._ips = itertools.count(10)
        self.seed('network', name='public', **{'router:external': True})
        self.seed('security_group', name='default')
        self.seed('image', name='cirros', status='active')
        self.seed('flavor', name='m1.tiny', ram=512, vcpus=1, disk=1)

    def seed(self, kind, **fields):
        obj = dict(id=str(uuid.uuid4()), **fields)
        self.objects[(kind, obj['id'])] = obj
        return obj

    def of(self, kind):
        return [self._view(k, id_, o) for (k, id_), o in
                self.objects.items() if k == kind]

    def _view(self, kind, id_, obj):
        """The object as the service shows it: a Neutron object with its
        key among its tags, as the drivers keep it."""
        view = copy.deepcopy(obj)
        key = self.keys.get((kind, id_))
        if key and kind in NEUTRON:
            view['tags'] = list(view.get('tags') or []) + [
                cloud_mod.key_tag(key)]
        return view

    def ops(self, op, kind=None):
        return [c for c in self.calls if c[0] == op and
                (kind is None or c[1] == kind)]

    def _maybe_fail(self, op):
        exc = self.fail_next.pop(op, None)
        if exc is not None:
            raise exc

    # -- the contract ---------------------------------------------------
    def create(self, kind, body, key, fresh=False):
        self.calls.append(('create', kind, key))
        self._maybe_fail('create')
        found = self.find(kind, key, body, log=False) if (
            key and not fresh) or kind == 'security_group_rule' else None
        if found is not None:
            return found
        obj = copy.deepcopy(body)
        obj['id'] = self._new_id(kind, body)
        if kind in BUSY:
            obj['status'] = BUSY[kind]
            self._looks[obj['id']] = 0
        self._fill(kind, obj)
        self.objects[(kind, obj['id'])] = obj
        self.keys[(kind, obj['id'])] = key
        return self._view(kind, obj['id'], obj)

    def _new_id(self, kind, body):
        if kind == 'keypair':
            return body['name']
        if kind == 'router_interface':
            return '%s:%s' % (body['router_id'], body.get('subnet_id') or
                              'port=%s' % body.get('port_id'))
        if kind == 'volume_attachment':
            return body['volume_id']
        return str(uuid.uuid4())

    def _fill(self, kind, obj):
        if kind == 'security_group':
            for eth in ('IPv4', 'IPv6'):   # Neutron's own: no key
                self.seed('security_group_rule', direction='egress',
                          security_group_id=obj['id'], ethertype=eth)
        if kind == 'port':
            obj.setdefault('fixed_ips', [{}])
            for ip in obj['fixed_ips']:
                ip.setdefault('ip_address', '10.0.0.%d' % next(self._ips))
            obj.setdefault('mac_address', 'fa:16:3e:00:00:01')
            obj.setdefault('status', 'DOWN')
        if kind == 'keypair' and 'public_key' not in obj:
            obj['public_key'] = 'ssh-rsa AAAAgenerated'
            obj['private_key'] = '-----BEGIN PRIVATE KEY-----'
        if kind == 'floating_ip':
            obj['floating_ip_address'] = '172.24.4.%d' % next(self._ips)
        if kind == 'volume_attachment':
            self._attached(obj['volume_id'], obj)

    def _attached(self, volume_id, attachment):
        vol = self.objects.get(('volume', volume_id))
        if vol is not None:
            vol['status'] = 'in-use' if attachment else 'available'
            vol['attachments'] = [{
                'server_id': attachment['server_id'],
                'volume_id': volume_id}] if attachment else []

    def find(self, kind, key, body=None, log=True):
        if log:
            self.calls.append(('find', kind, key))
        for (k, id_), obj in self.objects.items():
            if key and k == kind and self.keys.get((k, id_)) == key:
                return self._view(k, id_, obj)
        if body and kind in ('keypair', 'router_interface',
                             'volume_attachment', 'flavor', 'server_group',
                             'security_group_rule'):
            want = self._new_id(kind, body) \
                if kind in ('keypair', 'router_interface',
                            'volume_attachment') else None
            for (k, id_), obj in self.objects.items():
                if k != kind:
                    continue
                if want is not None and id_ == want:
                    return self._view(k, id_, obj)
                if kind in ('flavor', 'server_group') and \
                        obj.get('name') == body.get('name'):
                    return self._view(k, id_, obj)
                if kind == 'security_group_rule' and all(
                        obj.get(f) == body.get(f) for f in (
                            'security_group_id', 'direction', 'ethertype',
                            'protocol', 'port_range_min', 'port_range_max',
                            'remote_ip_prefix', 'remote_group_id')):
                    return self._view(k, id_, obj)
        return None

    def get(self, kind, id):
        self.calls.append(('get', kind, id))
        self._maybe_fail('get')
        obj = self.objects.get((kind, id))
        if obj is None:
            return None
        if id in self._looks:
            self._looks[id] += 1
            if self._looks[id] >= self.settle_after:
                del self._looks[id]
                obj['status'] = self.statuses.get(kind, DONE[kind])
        obj = self._view(kind, id, obj)
        if kind == 'security_group':
            obj['security_group_rules'] = self.list(
                'security_group_rule', security_group_id=id, log=False)
        if kind == 'network':
            obj['subnets'] = [s['id'] for s in self.list(
                'subnet', network_id=id, log=False)]
        return obj

    def update(self, kind, id, body):
        self.calls.append(('update', kind, id, copy.deepcopy(body)))
        self._maybe_fail('update')
        obj = self.objects.get((kind, id))
        if obj is None:
            raise exception.CloudNotFound('%s %s could not be found' % (
                kind, id))
        for field, value in body.items():
            if kind == 'volume' and field == 'size':
                if value < obj['size']:
                    raise exception.CloudError('cannot shrink', 400)
                obj['status'] = 'extending'
                self._looks[id] = 0
            obj[field] = copy.deepcopy(value)
        return self.get(kind, id)

    def delete(self, kind, id):
        self.calls.append(('delete', kind, id))
        self._maybe_fail('delete')
        if self.in_use.get(id):
            self.in_use[id] -= 1
            raise exception.CloudError('%s %s is in use' % (kind, id), 409)
        if (kind, id) not in self.objects:
            raise exception.CloudNotFound('%s %s could not be found' % (
                kind, id))
        del self.objects[(kind, id)]
        if kind == 'volume_attachment':
            self._attached(id, None)
        if kind == 'security_group':
            for rule in self.list('security_group_rule',
                                  security_group_id=id, log=False):
                del self.objects[('security_group_rule', rule['id'])]

    def list(self, kind, log=True, **filters):
        if log:
            self.calls.append(('list', kind, filters))
        return [o for o in self.of(kind)
                if all(o.get(k) == v for k, v in filters.items())]

    def resolve(self, kind, name_or_id):
        self.calls.append(('resolve', kind, name_or_id))
        self._maybe_fail('resolve')
        found = [o['id'] for o in self.of(kind)
                 if name_or_id in (o['id'], o.get('name'))]
        if not found:
            raise exception.CloudNotFound(
                'No %s named %s' % (kind, name_or_id))
        if len(found) > 1:
            raise exception.CloudError(
                'Multiple %s matches found for name %r' % (kind, name_or_id),
                409)
        return found[0]


class FakeClients:
    def __init__(self, cloud=None):
        self.cloud = cloud or FakeCloud()


def settle(step, *args, timeout=30.0):
    """Run a step as the engine does: again after each base.Wait (sleeping
    a little, so a simulated cloud's time passes), until it is done;
    returns its result."""
    import time

    from converge.resources import base
    deadline = time.time() + timeout
    while True:
        result = step(*args)
        if not isinstance(result, base.Wait):
            return result
        if time.time() > deadline:
            raise AssertionError('still waiting: %r' % result)
        time.sleep(min(result.after or 0.01, 0.1))


# -- the cloud the plug-ins' tests run on: this fake, and the simulator --

def _sim_cloud(tmp_path):
    try:
        from converge.drivers.sim import objects
    except ImportError:
        pytest.skip('the simulated cloud (drivers/sim/objects.py) is not '
                    'there yet')
    from converge.drivers.sim import store
    url = 'sqlite:///%s' % (tmp_path / 'sim.db')
    return objects.SimCloud(url, 'proj'), lambda: store.forget(url)


@pytest.fixture(params=['fake', 'sim'])
def cloud(request, tmp_path):
    """A cloud for one test: the in-memory fake, then the simulator (on a
    SQLite file of the test's own)."""
    if request.param == 'fake':
        yield FakeCloud()
        return
    made, forget = _sim_cloud(tmp_path)
    yield made
    forget()


@pytest.fixture
def sim_cloud(tmp_path):
    """The simulator only."""
    made, forget = _sim_cloud(tmp_path)
    yield made
    forget()


@pytest.fixture
def clients(cloud):
    return FakeClients(cloud)


# -- steps as the engine runs them -----------------------------------------

def made(cls, clients, rname, **props):
    """A resource of `cls` created (waited for)."""
    from tests.resource_fakes import make
    res = make(cls, rname, props, clients=clients)
    assert settle(res.create) is None
    return res


def gone(res):
    """`res` deleted (waited for), and seen gone."""
    assert settle(res.delete) is None
    assert res.observe() is None


def changed(res, **props):
    """The same resource with properties changed (None: taken out), as
    the engine builds it for an update: (plug-in, prior properties)."""
    from tests.resource_fakes import again
    new = dict(res.properties)
    new.update(props)
    for key, value in list(new.items()):
        if value is None:
            del new[key]
    return again(res, new), res.properties


def updated(res, **props):
    """`res` updated in place (waited for) to the changed properties."""
    new, prior = changed(res, **props)
    assert not new.needs_replace(prior)
    assert settle(new.update, prior, new.observe()) is None
    return new
