"""The simulated cloud's kinds besides servers (drivers/sim/objects.py),
as a user of drivers/cloud.py's interface sees them."""

import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from converge import exception
from converge.drivers import cloud as cloud_mod
from converge.drivers import sim
from converge.drivers.sim import api as sim_api
from converge.drivers.sim import objects
from converge.drivers.sim import store
from converge.drivers.sim import wiring

# the portable tests run on SQLite and PostgreSQL (a database of their
# own, made for the module: skipped without a server on 127.0.0.1), and
# on CONVERGE_SIM_TEST_URLS as tests/test_sim.py does
EXTRA_URLS = os.environ.get('CONVERGE_SIM_TEST_URLS', '').split()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def pg_url():
    from converge.bench import fleet
    if fleet.missing('postgresql'):
        pytest.skip('needs postgresql on 127.0.0.1')
    name = 'conv_simcloud_%s' % uuid.uuid4().hex[:10]
    admin = fleet._admin('postgresql')
    admin.cursor().execute('CREATE DATABASE %s' % name)
    yield fleet._url('postgresql', name)
    store.forget(fleet._url('postgresql', name))
    admin.cursor().execute('DROP DATABASE IF EXISTS %s WITH (FORCE)' % name)
    admin.close()


@pytest.fixture(params=['sqlite', 'postgresql'] + EXTRA_URLS)
def url(request, tmp_path):
    if request.param == 'sqlite':
        u = 'sqlite:///%s' % (tmp_path / 'sim.db')
    elif request.param == 'postgresql':
        u = request.getfixturevalue('pg_url')
    else:
        u = request.param
    if request.param != 'sqlite':
        sim.SimCompute(u).reset()
    yield u
    store.forget(u)


@pytest.fixture
def compute(url):
    return sim.SimCompute(url)


@pytest.fixture
def cloud(url, compute):
    return objects.SimCloud(url, 'project-a', compute)


@pytest.fixture
def other(url):
    return objects.SimCloud(url, 'project-b')


class Clock:
    """The sim's clock, moved by hand."""

    def __init__(self):
        self.now = time.time()

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(sim_api, 'clock', c)
    return c


def _key():
    return str(uuid.uuid4())


def _net(cloud, cidr='192.168.10.0/24', **fields):
    net = cloud.create('network', dict({'name': 'net'}, **fields), _key())
    subnet = cloud.create('subnet', {'network_id': net['id'], 'cidr': cidr,
                                     'name': 'sub'}, _key())
    return net, subnet


def _refused(code, call, *args):
    with pytest.raises(exception.CloudError) as e:
        call(*args)
    assert e.value.code == code, e.value
    return str(e.value)


# -- what every cloud starts with --------------------------------------------

def test_the_seeded_objects_are_every_projects(cloud, other):
    for c in (cloud, other):
        nets = {n['name']: n for n in c.list('network')}
        assert set(nets) == {'private', 'public'}
        assert nets['private']['shared'] is True
        assert nets['public']['router:external'] is True
        subnets = {s['name']: s for s in c.list('subnet')}
        assert subnets['private-subnet']['cidr'] == '10.0.0.0/16'
        assert subnets['public-subnet']['cidr'] == '172.24.4.0/24'
        assert nets['private']['subnets'] == [
            subnets['private-subnet']['id']]
        assert {i['name'] for i in c.list('image')} == {
            'cirros', 'fedora', 'ubuntu', 'heat-agents'}
        assert [f['name'] for f in c.list('flavor')] == [
            'm1.tiny', 'm1.small', 'm1.medium', 'm1.large', 'm1.xlarge']
    assert cloud.get('flavor', '1')['ram'] == 512
    # ids derived from names: the same in every sim
    assert cloud.resolve('network', 'public') == \
        objects.rows.derived_id('network', 'public')


def test_a_sim_seeded_before_image_heat_agents_gets_it_once(tmp_path):
    """A sim database seeded before the image heat-agents existed (its
    seed marker, its three images) gets the image the next time it is
    opened, and only once."""
    import sqlalchemy as sa
    from converge.drivers.sim import seed
    url = 'sqlite:///%s' % (tmp_path / 'old.db')
    engine = store.get_engine(url)
    heat_agents = objects.rows.derived_id('image', 'heat-agents')
    with engine.begin() as conn:   # as the older seed left it
        conn.execute(store.objects.delete().where(sa.or_(
            objects.rows.C.id == heat_agents,
            objects.rows.C.live_ident == seed.MARKER_IMAGES)))
    old = objects.SimCloud(url, 'project-a')
    assert 'heat-agents' not in {i['name'] for i in old.list('image')}
    store.forget(url)
    for _ in range(2):
        seed.ensure(store.get_engine(url))
    names = [i['name'] for i in objects.SimCloud(
        url, 'project-a').list('image')]
    assert sorted(names) == ['cirros', 'fedora', 'heat-agents', 'ubuntu']


def test_the_seed_is_planted_once(url, cloud):
    before = len(cloud.list('network'))
    store.forget(url)
    store.get_engine(url)    # a new process's first use
    assert len(objects.SimCloud(url, 'x').list('network')) == before == 2
    sim.SimCompute(url).reset()
    assert len(cloud.list('network')) == 2


# -- create, find, get, delete ---------------------------------------------

def test_a_create_with_the_same_key_returns_the_same_object(cloud, compute):
    key = _key()
    net = cloud.create('network', {'name': 'web'}, key)
    again = cloud.create('network', {'name': 'web'}, key)
    assert again['id'] == net['id']
    assert [n['id'] for n in cloud.list('network', name='web')] == \
        [net['id']]
    assert cloud.find('network', key)['id'] == net['id']
    assert cloud_mod.key_tag(key) in net['tags']
    assert cloud.find('network', _key()) is None
    creates = compute.api_log(op='network.create')
    assert [e['detail'].get('adopted') for e in creates] == [None, True]
    assert {e['object_id'] for e in creates} == {net['id']}


def test_get_of_a_deleted_or_unknown_object_is_none(cloud):
    net = cloud.create('network', {'name': 'n'}, _key())
    assert cloud.get('network', net['id'])['status'] == 'ACTIVE'
    cloud.delete('network', net['id'])
    assert cloud.get('network', net['id']) is None
    assert cloud.get('network', 'no-such-id') is None
    cloud.delete('network', net['id'])      # gone already: success
    cloud.delete('port', 'no-such-id')


def test_a_key_frees_with_its_object(cloud):
    key = _key()
    first = cloud.create('security_group', {'name': 'g'}, key)
    cloud.delete('security_group', first['id'])
    assert cloud.find('security_group', key) is None
    second = cloud.create('security_group', {'name': 'g'}, key)
    assert second['id'] != first['id']


def test_unknown_kinds_and_fields_are_refused(cloud):
    assert 'no objects of kind' in _refused(400, cloud.create, 'thing', {},
                                            _key())
    assert "'colour'" in _refused(400, cloud.create, 'network',
                                  {'colour': 'red'}, _key())
    net, _ = _net(cloud)
    assert 'read-only' in _refused(400, cloud.update, 'network', net['id'],
                                   {'subnets': []})


# -- networks, subnets, ports ------------------------------------------------

def test_subnet_defaults_and_port_addresses(cloud):
    net, subnet = _net(cloud, '192.168.10.0/24')
    assert subnet['gateway_ip'] == '192.168.10.1'
    assert subnet['allocation_pools'] == [
        {'start': '192.168.10.2', 'end': '192.168.10.254'}]
    assert subnet['ip_version'] == 4 and subnet['enable_dhcp'] is True
    assert cloud.get('network', net['id'])['subnets'] == [subnet['id']]
    port = cloud.create('port', {'network_id': net['id']}, _key())
    assert port['fixed_ips'] == [{'subnet_id': subnet['id'],
                                  'ip_address': '192.168.10.2'}]
    assert port['mac_address'].startswith('fa:16:3e:')
    assert port['status'] == 'DOWN' and port['device_id'] == ''
    # a port gets its project's default security group
    group = cloud.get('security_group', port['security_groups'][0])
    assert group['name'] == 'default'
    fixed = cloud.create('port', {'network_id': net['id'], 'fixed_ips': [
        {'subnet_id': subnet['id'], 'ip_address': '192.168.10.50'}]}, _key())
    assert fixed['fixed_ips'][0]['ip_address'] == '192.168.10.50'
    message = _refused(409, cloud.create, 'port', {
        'network_id': net['id'],
        'fixed_ips': [{'ip_address': '192.168.10.50'}]}, _key())
    assert message == 'IP address 192.168.10.50 already allocated in ' \
        'subnet %s' % subnet['id']
    assert 'not a valid IP for the specified subnet' in _refused(
        400, cloud.create, 'port', {'network_id': net['id'], 'fixed_ips': [
            {'subnet_id': subnet['id'], 'ip_address': '10.9.9.9'}]}, _key())


def test_subnet_pools_and_exhaustion(cloud):
    net, subnet = _net(cloud, '192.168.20.0/29')
    assert subnet['allocation_pools'] == [
        {'start': '192.168.20.2', 'end': '192.168.20.6'}]
    addrs = [cloud.create('port', {'network_id': net['id']}, _key())[
        'fixed_ips'][0]['ip_address'] for _ in range(5)]
    assert addrs == ['192.168.20.%d' % i for i in range(2, 7)]
    assert _refused(409, cloud.create, 'port', {'network_id': net['id']},
                    _key()) == 'No more IP addresses available on network ' \
        '%s.' % net['id']
    overlapping = _refused(400, cloud.create, 'subnet', {
        'network_id': net['id'], 'cidr': '192.168.20.0/24'}, _key())
    assert 'overlaps with another subnet' in overlapping


def test_processes_racing_on_one_key_make_one_object(cloud, url,
                                                     compute):
    key = _key()
    code = ('import sys\n'
            'from converge.drivers.sim import SimCloud\n'
            'c = SimCloud(sys.argv[1], "project-a")\n'
            'net = c.resolve("network", "private")\n'
            'sys.stdin.read()\n'    # start together
            'print(c.create("port", {"network_id": net}, sys.argv[2])["id"])'
            '\n')
    env = dict(os.environ)
    env['PYTHONPATH'] = REPO + os.pathsep + env.get('PYTHONPATH', '')
    procs = [subprocess.Popen([sys.executable, '-c', code, url, key],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(4)]
    outs = [p.communicate('', timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    assert len({o.strip() for o, _ in outs}) == 1
    assert [p['id'] for p in cloud.list('port')] == [outs[0][0].strip()]
    made = [e for e in compute.api_log(op='port.create')
            if e['ok'] and not e['detail'].get('adopted')]
    assert len(made) == 1


def test_concurrent_ports_get_distinct_addresses(cloud, url):
    net, subnet = _net(cloud, '192.168.30.0/24')
    found, errors = [], []

    def make(n):
        mine = objects.SimCloud(url, 'project-a')
        try:
            for _ in range(n):
                found.append(mine.create('port', {'network_id': net['id']},
                                         _key())['fixed_ips'][0][
                    'ip_address'])
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=make, args=(10,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(found) == 40 and len(set(found)) == 40


def test_a_network_or_subnet_in_use_is_not_deleted(cloud):
    net, subnet = _net(cloud)
    port = cloud.create('port', {'network_id': net['id']}, _key())
    assert _refused(409, cloud.delete, 'network', net['id']) == (
        'Unable to complete operation on network %s. There are one or more '
        'ports still in use on the network.' % net['id'])
    assert _refused(409, cloud.delete, 'subnet', subnet['id']) == (
        'Unable to complete operation on subnet %s: One or more ports have '
        'an IP allocation from this subnet.' % subnet['id'])
    cloud.delete('port', port['id'])
    cloud.delete('subnet', subnet['id'])
    assert cloud.get('network', net['id'])['subnets'] == []
    cloud.delete('network', net['id'])
    assert cloud.get('network', net['id']) is None


def test_port_update_moves_its_address(cloud):
    net, subnet = _net(cloud)
    port = cloud.create('port', {'network_id': net['id'], 'name': 'p'},
                        _key())
    old = port['fixed_ips'][0]['ip_address']
    moved = cloud.update('port', port['id'], {'name': 'q', 'fixed_ips': [
        {'subnet_id': subnet['id'], 'ip_address': '192.168.10.77'}]})
    assert moved['name'] == 'q'
    assert moved['fixed_ips'][0]['ip_address'] == '192.168.10.77'
    assert moved['revision_number'] == 2
    # asking again for an address of the subnet keeps the one it has
    kept = cloud.update('port', port['id'], {'fixed_ips': [
        {'subnet_id': subnet['id']}]})
    assert kept['fixed_ips'] == moved['fixed_ips']
    # the old address is free again
    again = cloud.create('port', {'network_id': net['id'], 'fixed_ips': [
        {'ip_address': old}]}, _key())
    assert again['fixed_ips'][0]['ip_address'] == old


# -- routers, floating IPs ---------------------------------------------------

def test_router_gateway_interfaces_and_floating_ip(cloud):
    public = cloud.resolve('network', 'public')
    net, subnet = _net(cloud)
    port = cloud.create('port', {'network_id': net['id']}, _key())
    message = _refused(404, cloud.create, 'floating_ip', {
        'floating_network_id': public, 'port_id': port['id']}, _key())
    assert message == (
        'External network %s is not reachable from subnet %s.  Therefore, '
        'cannot associate Port %s with a Floating IP.' % (
            public, subnet['id'], port['id']))
    router = cloud.create('router', {'name': 'r', 'external_gateway_info': {
        'network_id': public}}, _key())
    gateway = router['external_gateway_info']['external_fixed_ips'][0]
    assert gateway['ip_address'].startswith('172.24.4.')
    # the gateway it has, asked for again, stays as it is
    assert cloud.update('router', router['id'], {
        'external_gateway_info': router['external_gateway_info']})[
        'external_gateway_info'] == router['external_gateway_info']
    body = {'router_id': router['id'], 'subnet_id': subnet['id']}
    interface = cloud.create('router_interface', body, _key())
    assert interface['id'] == '%s:%s' % (router['id'], subnet['id'])
    assert cloud.create('router_interface', body, _key())['id'] == \
        interface['id']
    assert cloud.find('router_interface', _key(), body)['id'] == \
        interface['id']
    rport = cloud.get('port', interface['port_id'])
    assert rport['device_owner'] == 'network:router_interface'
    assert rport['device_id'] == router['id']
    assert rport['fixed_ips'][0]['ip_address'] == subnet['gateway_ip']
    assert 'cannot be deleted directly' in _refused(
        409, cloud.delete, 'port', rport['id'])

    fip = cloud.create('floating_ip', {'floating_network_id': public,
                                       'port_id': port['id']}, _key())
    assert fip['status'] == 'ACTIVE' and fip['router_id'] == router['id']
    assert fip['fixed_ip_address'] == port['fixed_ips'][0]['ip_address']
    assert fip['floating_ip_address'] != gateway['ip_address']
    assert 'required by one or more floating IPs' in _refused(
        409, cloud.delete, 'router_interface', interface['id'])
    assert cloud.update('floating_ip', fip['id'], {'port_id': None})[
        'status'] == 'DOWN'
    assert _refused(409, cloud.delete, 'router', router['id']) == \
        'Router %s still has ports' % router['id']
    cloud.delete('router_interface', interface['id'])
    assert cloud.get('router_interface', interface['id']) is None
    assert cloud.get('port', rport['id']) is None
    cloud.delete('router', router['id'])
    cloud.delete('floating_ip', fip['id'])
    # the external network's addresses are free again
    assert cloud.list('port', network_id=public) == []


def test_a_floating_ip_needs_an_external_network(cloud):
    net, _ = _net(cloud)
    assert 'not a valid external network' in _refused(
        400, cloud.create, 'floating_ip', {'floating_network_id': net['id']},
        _key())
    assert 'is not an external network' in _refused(
        400, cloud.create, 'router', {'external_gateway_info': {
            'network_id': net['id']}}, _key())


# -- security groups ---------------------------------------------------------

def test_security_group_rules(cloud):
    group = cloud.create('security_group', {'name': 'web'}, _key())
    assert sorted((r['direction'], r['ethertype'])
                  for r in group['security_group_rules']) == [
        ('egress', 'IPv4'), ('egress', 'IPv6')]
    rule = {'security_group_id': group['id'], 'direction': 'ingress',
            'protocol': 'tcp', 'port_range_min': 22, 'port_range_max': 22,
            'remote_ip_prefix': '0.0.0.0/0'}
    made = cloud.create('security_group_rule', rule, _key())
    # its twin is itself (Neutron refuses a second one)
    assert cloud.create('security_group_rule', rule, _key())['id'] == \
        made['id']
    assert cloud.find('security_group_rule', _key(), rule)['id'] == made['id']
    assert _refused(409, cloud.create, 'security_group_rule', dict(
        rule, description='ssh'), _key()) == (
        'Security group rule already exists. Rule id is %s.' % made['id'])
    assert len(cloud.get('security_group', group['id'])[
        'security_group_rules']) == 3
    assert 'port_range_min must be <= port_range_max' in _refused(
        400, cloud.create, 'security_group_rule', dict(
            rule, port_range_min=80, port_range_max=79), _key())
    net, _ = _net(cloud)
    port = cloud.create('port', {'network_id': net['id'],
                                 'security_groups': [group['id']]}, _key())
    assert _refused(409, cloud.delete, 'security_group', group['id']) == \
        'Security Group %s in use.' % group['id']
    cloud.update('port', port['id'], {'security_groups': []})
    cloud.delete('security_group', group['id'])
    assert cloud.get('security_group_rule', made['id']) is None


# -- projects ----------------------------------------------------------------

def test_another_projects_objects_are_invisible(cloud, other):
    net, subnet = _net(cloud)
    assert other.get('network', net['id']) is None
    assert other.get('subnet', subnet['id']) is None
    assert net['id'] not in [n['id'] for n in other.list('network')]
    assert other.find('network', cloud.get('network', net['id'])['tags'][
        0].split('=', 1)[1]) is None
    with pytest.raises(exception.CloudNotFound):
        other.update('network', net['id'], {'name': 'mine'})
    with pytest.raises(exception.CloudNotFound):
        other.delete('network', net['id'])
    assert cloud.get('network', net['id'])['name'] == 'net'
    with pytest.raises(exception.CloudNotFound):
        other.create('port', {'network_id': net['id']}, _key())
    with pytest.raises(exception.CloudNotFound):
        other.resolve('network', 'net')


def test_shared_objects_are_seen_but_not_changed(cloud, other):
    private = other.resolve('network', 'private')
    port = other.create('port', {'network_id': private}, _key())
    assert port['fixed_ips'][0]['ip_address'].startswith('10.0.')
    assert port['project_id'] == 'project-b'
    assert _refused(403, other.update, 'network', private,
                    {'name': 'x'}).startswith('(rule:update_network)')
    assert _refused(403, other.delete, 'image',
                    other.resolve('image', 'cirros'))
    shared, _ = _net(cloud, shared=True)
    assert other.get('network', shared['id'])['shared'] is True
    assert len(other.list('subnet', network_id=shared['id'])) == 1


# -- volumes and attachments -------------------------------------------------

def test_a_volume_is_creating_for_the_create_latency(cloud, compute,
                                                     clock):
    compute.set_fault('volume.create', latency=2)
    started = time.monotonic()
    volume = cloud.create('volume', {'size': 1, 'name': 'data'}, _key())
    assert time.monotonic() - started < 1.5    # the call did not wait
    assert volume['status'] == 'creating'
    assert cloud_mod.SETTLING['volume']['creating'] is False
    clock.advance(1)
    assert cloud.get('volume', volume['id'])['status'] == 'creating'
    clock.advance(1)
    got = cloud.get('volume', volume['id'])
    assert got['status'] == 'available' and got['size'] == 1
    assert got['metadata'] == {cloud_mod.KEY_NAME: cloud.find(
        'volume', got['metadata'][cloud_mod.KEY_NAME])['metadata'][
        cloud_mod.KEY_NAME]}
    assert 'Invalid volume' in _refused(400, cloud.delete, 'volume',
                                        cloud.create('volume', {'size': 1},
                                                     _key())['id'])


def test_injected_failures_of_an_object_op(cloud, compute):
    compute.set_fault('volume.create', fail_count=1, code=409,
                      message='over quota')
    assert _refused(409, cloud.create, 'volume', {'size': 1}, _key()) == \
        'over quota'
    assert cloud.create('volume', {'size': 1}, _key())['status'] == \
        'available'
    failed = [e for e in compute.api_log(op='volume.create') if not e['ok']]
    assert failed[0]['detail']['injected'] == 'fail_count'
    compute.set_fault('network.get', fail_count=1, code=503)
    with pytest.raises(exception.CloudTransient):
        cloud.get('network', cloud.resolve('network', 'private'))
    with pytest.raises(exception.ConvergeError):
        compute.set_fault('volume.explode', latency=1)


def test_a_volume_only_grows(cloud, compute, clock):
    volume = cloud.create('volume', {'size': 2}, _key())
    message = _refused(400, cloud.update, 'volume', volume['id'],
                       {'size': 1})
    assert 'must be greater than current size' in message
    compute.set_fault('volume.update', latency=5)
    grown = cloud.update('volume', volume['id'], {'size': 3,
                                                  'name': 'bigger'})
    assert grown['status'] == 'extending' and grown['size'] == 3
    clock.advance(5)
    assert cloud.get('volume', volume['id'])['status'] == 'available'
    # the key stays in the metadata whatever the update says
    meta = cloud.update('volume', volume['id'], {'metadata': {'a': '1'}})[
        'metadata']
    assert meta['a'] == '1' and cloud_mod.KEY_NAME in meta


def test_attach_and_detach_a_volume(cloud, compute, clock):
    server = compute.create_server('db', 'cirros', 'm1.tiny')
    volume = cloud.create('volume', {'size': 1}, _key())
    with pytest.raises(exception.CloudNotFound):
        cloud.create('volume_attachment', {'server_id': 'no-such-server',
                                           'volume_id': volume['id']},
                     _key())
    compute.set_fault('volume_attachment.create', latency=3)
    body = {'server_id': server['id'], 'volume_id': volume['id']}
    attached = cloud.create('volume_attachment', body, _key())
    assert attached['id'] == volume['id']
    assert attached['status'] == 'attaching'
    assert attached['device'] == '/dev/vdb'
    assert cloud.get('volume', volume['id'])['status'] == 'attaching'
    clock.advance(3)
    assert cloud.get('volume_attachment', volume['id'])['status'] == \
        'attached'
    got = cloud.get('volume', volume['id'])
    assert got['status'] == 'in-use'
    assert got['attachments'][0]['server_id'] == server['id']
    assert cloud.create('volume_attachment', body, _key())['id'] == \
        volume['id']
    assert 'Invalid volume' in _refused(400, cloud.delete, 'volume',
                                        volume['id'])
    cloud.delete('volume_attachment', volume['id'])
    assert cloud.get('volume_attachment', volume['id']) is None
    assert cloud.get('volume', volume['id'])['status'] == 'available'
    cloud.delete('volume', volume['id'])
    assert cloud.get('volume', volume['id']) is None


def test_a_servers_delete_detaches_its_volumes(cloud, compute):
    server = compute.create_server('db', 'cirros', 'm1.tiny')
    volume = cloud.create('volume', {'size': 1}, _key())
    cloud.create('volume_attachment', {'server_id': server['id'],
                                       'volume_id': volume['id']}, _key())
    compute.delete_server(server['id'])
    assert cloud.get('volume', volume['id'])['status'] == 'available'
    assert cloud.get('volume_attachment', volume['id']) is None


def test_a_volume_delete_takes_its_latency(cloud, compute, clock):
    volume = cloud.create('volume', {'size': 1}, _key())
    compute.set_fault('volume.delete', latency=4)
    cloud.delete('volume', volume['id'])
    assert cloud.get('volume', volume['id'])['status'] == 'deleting'
    clock.advance(4)
    assert cloud.get('volume', volume['id']) is None


# -- servers on ports --------------------------------------------------------

def test_a_server_on_a_port_has_its_address(cloud, compute):
    net, subnet = _net(cloud)
    port = cloud.create('port', {'network_id': net['id']}, _key())
    addr = port['fixed_ips'][0]['ip_address']
    server = compute.create_server('web', 'cirros', 'm1.tiny',
                                   networks=[{'port': port['id']}])
    assert [a['addr'] for a in server['addresses']['net']] == [addr]
    assert server['accessIPv4'] == addr
    bound = cloud.get('port', port['id'])
    assert bound['status'] == 'ACTIVE'
    assert bound['device_id'] == server['id']
    assert bound['device_owner'] == 'compute:nova'
    assert 'still in use' in _refused(409, compute.create_server, 'x',
                                      'cirros', 'm1.tiny',
                                      [{'port': port['id']}])
    # the port's new address is the server's (Nova hears of it)
    cloud.update('port', port['id'], {'fixed_ips': [
        {'subnet_id': subnet['id'], 'ip_address': '192.168.10.40'}]})
    assert [a['addr'] for a in compute.get_server(server['id'])[
        'addresses']['net']] == ['192.168.10.40']
    compute.delete_server(server['id'])
    unbound = cloud.get('port', port['id'])
    assert unbound['status'] == 'DOWN' and unbound['device_id'] == ''
    assert unbound['fixed_ips'][0]['ip_address'] == '192.168.10.40'


def test_a_server_on_a_network_gets_a_port_of_its_own(cloud, compute,
                                                       clock):
    net, subnet = _net(cloud)
    server = compute.create_server('web', 'cirros', 'm1.tiny', networks=[
        {'network': net['id']}, {'network': 'net', 'fixed_ip':
                                 '192.168.10.99'}])
    ports = cloud.list('port', device_id=server['id'])
    assert len(ports) == 2
    assert sorted(a['addr'] for a in server['addresses']['net']) == sorted(
        p['fixed_ips'][0]['ip_address'] for p in ports)
    assert '192.168.10.99' in [a['addr'] for a in server['addresses']['net']]
    compute.delete_server(server['id'])
    # Nova's ports outlive the server a moment, and hold the subnet and
    # the network as Neutron's do
    assert len(cloud.list('port', network_id=net['id'])) == 2
    assert 'One or more ports have an IP allocation' in _refused(
        409, cloud.delete, 'subnet', subnet['id'])
    assert 'still in use' in _refused(409, cloud.delete, 'network',
                                      net['id'])
    clock.advance(wiring.PORT_LINGER + 0.01)
    assert cloud.list('port', network_id=net['id']) == []
    cloud.delete('subnet', subnet['id'])
    cloud.delete('network', net['id'])


def test_interfaces_attach_and_detach(cloud, compute):
    net, subnet = _net(cloud)
    other = cloud.create('subnet', {'network_id': net['id'],
                                    'cidr': '192.168.20.0/24'}, _key())
    server = compute.create_server('web', 'cirros', 'm1.tiny', networks=[
        {'network': net['id']}])
    [first] = compute.interfaces(server['id'])
    made = compute.attach_interface(server['id'], {'subnet': other['id']},
                                    'k')
    assert made['device_id'] == server['id']
    assert made['fixed_ips'][0]['subnet_id'] == other['id']
    given = cloud.create('port', {'network_id': net['id']}, _key())
    compute.attach_interface(server['id'], {'port': given['id']}, 'k2')
    assert {p['id'] for p in compute.interfaces(server['id'])} == {
        first['id'], made['id'], given['id']}
    addrs = [a['addr'] for a in compute.get_server(server['id'])[
        'addresses']['net']]
    assert made['fixed_ips'][0]['ip_address'] in addrs
    # Nova's own port goes with its detach; one it was given is unbound
    compute.detach_interface(server['id'], made['id'])
    compute.detach_interface(server['id'], given['id'])
    assert [p['id'] for p in compute.interfaces(server['id'])] == [
        first['id']]
    assert cloud.get('port', made['id']) is None
    assert cloud.get('port', given['id'])['device_id'] == ''
    assert [a['addr'] for a in compute.get_server(server['id'])[
        'addresses']['net']] == [first['fixed_ips'][0]['ip_address']]
    with pytest.raises(exception.CloudNotFound):
        compute.detach_interface(server['id'], given['id'])


def test_a_network_the_cloud_does_not_have_keeps_the_counter(cloud,
                                                             compute):
    server = compute.create_server('web', 'cirros', 'm1.tiny', networks=[
        {'network': 'free-form'}, {'network': 'private'}])
    assert set(server['addresses']) == {'free-form', 'private'}
    assert server['addresses']['private'][0]['addr'] == sim_api._ip(1)
    assert [p for p in cloud.list('port')
            if p['device_id'] == server['id']] == []
    # the default server asks nothing of the cloud's objects
    plain = compute.create_server('plain', 'cirros', 'm1.tiny')
    assert plain['addresses']['private'][0]['addr'] == sim_api._ip(2)
    assert compute.api_log(op='create')[-1]['ok']
    assert [e['op'] for e in compute.api_log()
            if e['op'].startswith('port.')] == ['port.list']


def test_a_port_deleted_behind_a_servers_back_leaves_it(cloud, compute):
    net, subnet = _net(cloud)
    port = cloud.create('port', {'network_id': net['id']}, _key())
    server = compute.create_server('web', 'cirros', 'm1.tiny',
                                   networks=[{'port': port['id']}])
    cloud.admin().delete('port', port['id'])
    assert cloud.get('port', port['id']) is None
    assert compute.get_server(server['id'])['addresses'] == {}
    compute.delete_server(server['id'])


def test_ports_and_servers_on_private_do_not_share_addresses(cloud,
                                                             compute):
    servers = [compute.create_server('s%d' % i, 'cirros', 'm1.tiny')
               for i in range(3)]
    private = cloud.resolve('network', 'private')
    ports = [cloud.create('port', {'network_id': private}, _key())
             for _ in range(3)]
    held = {s['accessIPv4'] for s in servers} | {
        p['fixed_ips'][0]['ip_address'] for p in ports}
    assert len(held) == 6
    # a port never takes an address a server was given by hand
    mine = compute.create_server('mine', 'cirros', 'm1.tiny', networks=[
        {'network': 'private', 'fixed_ip': '10.0.255.253'}])
    taken = cloud.create('port', {'network_id': private}, _key())
    assert taken['fixed_ips'][0]['ip_address'] not in held | {
        mine['accessIPv4']}


def test_a_server_group_has_its_members(cloud, compute):
    group = cloud.create('server_group', {'name': 'g',
                                          'policy': 'anti-affinity'}, _key())
    assert group['members'] == [] and group['policy'] == 'anti-affinity'
    a = compute.create_server('a', 'cirros', 'm1.tiny',
                              scheduler_hints={'group': group['id']})
    b = compute.create_server('b', 'cirros', 'm1.tiny',
                              scheduler_hints={'group': group['id']})
    assert cloud.get('server_group', group['id'])['members'] == [
        a['id'], b['id']]
    assert a['host'] != b['host']
    compute.delete_server(a['id'])
    assert cloud.get('server_group', group['id'])['members'] == [b['id']]
    assert "is not one of" in _refused(400, cloud.create, 'server_group', {
        'name': 'h', 'policy': 'sideways'}, _key())


# -- images, key pairs, flavors, resolve -------------------------------------

def test_an_image_imports_for_its_latency(cloud, compute, clock):
    compute.set_fault('image.create', latency=10)
    image = cloud.create('image', {
        'name': 'web', 'disk_format': 'qcow2', 'container_format': 'bare',
        'location': 'http://example.com/web.qcow2'}, _key())
    assert image['status'] == 'importing' and image['size'] is None
    clock.advance(10)
    got = cloud.get('image', image['id'])
    assert got['status'] == 'active' and got['size'] > 0
    assert got['owner'] == 'project-a' and got['visibility'] == 'shared'
    assert cloud.find('image', got[cloud_mod.KEY_NAME])['id'] == image['id']
    assert "is not one of" in _refused(400, cloud.create, 'image', {
        'name': 'x', 'disk_format': 'floppy'}, _key())
    cloud.update('image', image['id'], {'protected': True})
    assert _refused(403, cloud.delete, 'image', image['id']) == \
        'Image %s is protected and cannot be deleted.' % image['id']


def test_a_key_pair_is_found_by_its_name(cloud, other):
    made = cloud.create('keypair', {'name': 'mykey'}, _key())
    assert made['id'] == made['name'] == 'mykey'
    assert made['private_key'].startswith('-----BEGIN OPENSSH PRIVATE KEY')
    assert made['public_key'].startswith('ssh-ed25519 ')
    assert len(made['fingerprint'].split(':')) == 16
    again = cloud.create('keypair', {'name': 'mykey'}, _key())
    assert again['fingerprint'] == made['fingerprint']
    assert 'private_key' not in again
    assert cloud.get('keypair', 'mykey')['public_key'] == made['public_key']
    assert cloud.find('keypair', _key(), {'name': 'mykey'})['id'] == 'mykey'
    assert _refused(409, cloud.create, 'keypair', {
        'name': 'mykey', 'public_key': other.create(
            'keypair', {'name': 'theirs'}, _key())['public_key']},
        _key()) == "Key pair 'mykey' already exists."
    given = cloud.create('keypair', {'name': 'given', 'public_key': made[
        'public_key']}, _key())
    assert 'private_key' not in given
    assert given['fingerprint'] == made['fingerprint']
    assert other.get('keypair', 'mykey') is None
    assert 'failed to generate fingerprint' in _refused(
        400, cloud.create, 'keypair', {'name': 'bad',
                                       'public_key': 'ssh-rsa nonsense'},
        _key())


def test_flavors_are_unique_by_name(cloud):
    body = {'name': 'm1.custom', 'ram': 1024, 'vcpus': 2, 'disk': 10}
    made = cloud.create('flavor', body, _key())
    assert cloud.create('flavor', body, _key())['id'] == made['id']
    assert _refused(409, cloud.create, 'flavor', dict(body, ram=2048),
                    _key()) == 'Flavor with name m1.custom already exists.'
    specs = cloud.update('flavor', made['id'], {'extra_specs': {'a': 'b'}})
    assert specs['extra_specs'] == {'a': 'b'}


def test_resolve(cloud):
    # the sim has every image, flavor and key pair
    assert cloud.resolve('image', 'cirros') == \
        cloud.list('image', name='cirros')[0]['id']
    anything = cloud.resolve('image', 'my-custom-image')
    assert anything == cloud.resolve('image', 'my-custom-image')
    assert cloud.resolve('flavor', 'm1.small') == '2'
    assert cloud.resolve('flavor', '2') == '2'
    assert cloud.resolve('flavor', 'huge')
    # other kinds must exist
    with pytest.raises(exception.CloudNotFound) as e:
        cloud.resolve('network', 'nowhere')
    assert str(e.value) == "Unable to find network with name or id 'nowhere'"
    # (and every key pair: templates name their own on the sim)
    assert cloud.resolve('keypair', 'nokey') == 'nokey'
    with pytest.raises(exception.CloudNotFound) as e:
        cloud.resolve('volume', 'novolume')
    assert str(e.value) == 'The Volume (novolume) could not be found.'
    _net(cloud)
    cloud.create('network', {'name': 'net'}, _key())
    assert 'Multiple network matches' in _refused(409, cloud.resolve,
                                                  'network', 'net')
    assert cloud.resolve('security_group', 'default')


def test_the_operator_sees_every_project(cloud, other):
    net, _ = _net(cloud)
    theirs = other.create('network', {'name': 'theirs'}, _key())
    seen = {e['view']['id']: e['project']
            for e in cloud.admin().inventory('network')}
    assert seen[net['id']] == 'project-a'
    assert seen[theirs['id']] == 'project-b'


def test_a_key_of_a_volume_being_deleted_makes_a_new_one(cloud, compute,
                                                         clock):
    key = _key()
    first = cloud.create('volume', {'size': 1}, key)
    compute.set_fault('volume.delete', latency=30)
    cloud.delete('volume', first['id'])
    assert cloud.find('volume', key)['status'] == 'deleting'
    second = cloud.create('volume', {'size': 1}, key)
    assert second['id'] != first['id']
    assert cloud.find('volume', key)['id'] == second['id']
    clock.advance(30)
    assert cloud.get('volume', first['id']) is None
