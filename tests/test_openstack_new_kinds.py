"""The OpenStack driver's calls for the kinds the devcloud cannot serve
(no neutron-vpnaas, Swift or Aodh there): router gateways, the VPN
objects, containers and alarms, against recorded fake services that
answer as the real APIs do (paths, bodies, headers, codes)."""

import json
import urllib.parse

import pytest

from converge import exception
from converge.drivers import openstack


class Resp:
    def __init__(self, code, body=None, headers=None):
        self.status_code = code
        self.content = b'' if body is None else json.dumps(body).encode()
        self.text = self.content.decode()
        self.headers = headers or {}
        self.reason = ''

    def json(self):
        if not self.content:
            raise ValueError('no body')
        return json.loads(self.content)


class Service:
    """A fake service: `routes(method, path, query, kw)` -> Resp; every
    call recorded as (method, url)."""

    def __init__(self, routes):
        self.routes = routes
        self.calls = []

    def request(self, url, method, **kw):
        self.calls.append((method, url))
        parsed = urllib.parse.urlsplit(url)
        return self.routes(method, parsed.path,
                           urllib.parse.parse_qs(parsed.query), kw)

    def get_endpoint(self):
        return 'https://swift.example.com:8080/v1/AUTH_p1'


class Absent:
    """openstacksdk's stand-in for a service the catalog lacks."""

    def request(self, url, method, **kw):
        raise type('ServiceDisabledException', (Exception,), {})(
            'The service is not present in the service catalog')


class Conn:
    current_project_id = 'p1'

    def __init__(self, network=None, object_store=None, alarm=None):
        self.network = network or Service(_nothing)
        self.block_storage = self.image = self.compute = Service(_nothing)
        self.object_store = object_store or Absent()
        self.alarm = alarm or Absent()


def _nothing(method, path, query, kw):
    return Resp(404, {'message': 'nothing here'})


@pytest.fixture
def neutron():
    """Neutron with one router and neutron-vpnaas, whose objects take
    tags in the create body."""
    state = {'router': {'id': 'r1', 'external_gateway_info': None},
             'vpn': {}}

    def routes(method, path, query, kw):
        body = kw.get('json')
        if path == '/routers/r1':
            if method == 'PUT':
                info = body['router']['external_gateway_info']
                state['router']['external_gateway_info'] = \
                    dict(info, enable_snat=True) if info else None
            return Resp(200, {'router': state['router']})
        if path.startswith('/vpn/'):
            coll = path.split('/')[2]
            item = {'vpnservices': 'vpnservice',
                    'ipsec-site-connections': 'ipsec_site_connection'}[coll]
            if method == 'POST':
                made = dict(body[item], id='%s-1' % item,
                            status='PENDING_CREATE')
                state['vpn'][made['id']] = made
                return Resp(201, {item: made})
            if method == 'GET' and 'tags' in query:
                found = [o for o in state['vpn'].values()
                         if query['tags'][0] in o.get('tags', [])]
                return Resp(200, {coll.replace('-', '_'): found})
        return Resp(404, {'NeutronError': {'message': 'not found'}})
    return Service(routes)


def test_router_gateway_is_the_routers_external_gateway(neutron):
    cloud = openstack.OpenStackCloud(Conn(network=neutron), 'c')
    made = cloud.create('router_gateway', {'router_id': 'r1',
                                           'network_id': 'pub'}, key='k')
    assert made['id'] == 'r1:pub'
    assert ('PUT', '/routers/r1') in neutron.calls
    assert cloud.get('router_gateway', 'r1:pub')['network_id'] == 'pub'
    # a gateway on another network is not this one
    assert cloud.get('router_gateway', 'r1:other') is None
    cloud.delete('router_gateway', 'r1:pub')
    assert cloud.get('router_gateway', 'r1:pub') is None
    # gone already: nothing asked
    puts = [c for c in neutron.calls if c[0] == 'PUT']
    cloud.delete('router_gateway', 'r1:pub')
    assert [c for c in neutron.calls if c[0] == 'PUT'] == puts


def test_vpn_objects_under_neutron_vpn_paths(neutron):
    cloud = openstack.OpenStackCloud(Conn(network=neutron), 'c')
    made = cloud.create('ipsec_site_connection', {'name': 'c1'}, key='k1')
    assert made['status'] == 'PENDING_CREATE'
    assert ('POST', '/vpn/ipsec-site-connections') in neutron.calls
    # found again by its key: the list answers under its own name
    assert cloud.find('ipsec_site_connection', 'k1')['id'] == made['id']
    again = cloud.create('ipsec_site_connection', {'name': 'c1'}, key='k1')
    assert again['id'] == made['id']
    assert [c for c in neutron.calls if c[0] == 'POST'] == [
        ('POST', '/vpn/ipsec-site-connections')]


def test_container_calls_and_purge():
    objects = {'box': ['a.txt', 'b.txt']}
    heads = {}

    def routes(method, path, query, kw):
        name = urllib.parse.unquote(path.strip('/'))
        if method == 'PUT':
            objects.setdefault(name, [])
            heads[name] = {k.lower(): v for k, v in
                           (kw.get('headers') or {}).items()}
            return Resp(201)
        if method == 'POST' and name == '':
            return Resp(204)
        if method == 'HEAD':
            if name not in objects:
                return Resp(404)
            return Resp(204, headers=dict(heads.get(name, {}), **{
                'X-Container-Object-Count': str(len(objects[name]))}))
        if method == 'GET' and query.get('format') == ['json']:
            if name not in objects:
                return Resp(404)
            return Resp(200, [{'name': n} for n in objects[name]])
        if method == 'DELETE':
            container, _, obj = name.partition('/')
            if obj:
                objects[container].remove(obj)
                return Resp(204)
            if objects.get(name):
                return Resp(409, {'message': 'Conflict'})
            objects.pop(name, None)
            return Resp(204)
        return Resp(405)

    swift = Service(routes)
    cloud = openstack.OpenStackCloud(Conn(object_store=swift), 'c')
    made = cloud.create('container', {
        'name': 'site', 'headers': {'X-Container-Read': '.r:*'},
        'account_headers': {'X-Account-Meta-Owner': 'me'}}, key='k')
    assert made['id'] == 'site'
    assert made['headers']['x-container-read'] == '.r:*'
    assert made['url'] == 'https://swift.example.com:8080/v1/AUTH_p1/site'
    assert ('POST', '') in swift.calls     # the account's headers
    # a container with objects: they go first
    assert cloud.get('container', 'box')['headers'][
        'x-container-object-count'] == '2'
    cloud.delete('container', 'box')
    assert 'box' not in objects
    assert cloud.get('container', 'box') is None


def test_alarm_calls():
    alarms = {}

    def routes(method, path, query, kw):
        body = kw.get('json')
        if path == '/v2/alarms' and method == 'POST':
            made = dict(body, alarm_id='a1', state='insufficient data')
            alarms['a1'] = made
            return Resp(201, made)
        if path == '/v2/alarms' and method == 'GET':
            return Resp(200, [a for a in alarms.values()
                              if a['name'] == query['q.value'][0]])
        if path == '/v2/alarms/a1' and method == 'GET':
            return Resp(200, alarms['a1']) if 'a1' in alarms else Resp(404)
        if path == '/v2/alarms/a1' and method == 'PUT':
            alarms['a1'] = dict(body, alarm_id='a1')
            return Resp(200, alarms['a1'])
        if path == '/v2/alarms/a1/state' and method == 'PUT':
            alarms['a1']['state'] = body
            return Resp(200, body)
        if path == '/v2/alarms/a1' and method == 'DELETE':
            alarms.pop('a1', None)
            return Resp(204)
        return Resp(404)

    aodh = Service(routes)
    cloud = openstack.OpenStackCloud(Conn(alarm=aodh), 'c')
    made = cloud.create('alarm', {'name': 'st-up-x', 'type': 'threshold',
                                  'threshold_rule': {'threshold': 50}},
                        key='k')
    assert made['id'] == 'a1'
    # found again by its name (Aodh's names are unique in a project)
    assert cloud.find('alarm', 'k', {'name': 'st-up-x'})['id'] == 'a1'
    # Aodh's PUT replaces the alarm: the whole of it is sent, changed
    changed = cloud.update('alarm', 'a1', {'enabled': False,
                                           'state': 'alarm'})
    assert changed['enabled'] is False and changed['state'] == 'alarm'
    assert changed['threshold_rule'] == {'threshold': 50}
    cloud.delete('alarm', 'a1')
    assert cloud.get('alarm', 'a1') is None


def test_a_service_the_cloud_lacks_is_refused_not_retried():
    cloud = openstack.OpenStackCloud(Conn(), 'c')
    with pytest.raises(exception.CloudError) as e:
        cloud.create('container', {'name': 'x'}, key='k')
    assert not isinstance(e.value, exception.CloudTransient)
    assert e.value.code == 400
    assert 'Service swift is not available' in str(e.value)


def test_a_cloud_without_the_service_refuses_the_type_at_validate(
        tmp_path):
    """Heat's ResourceTypeUnavailable, at validate, naming the service:
    Swift and Aodh absent from the catalog, Neutron without vpnaas."""
    from converge import template
    from converge.engine import stacks

    class Catalog(Conn):
        def endpoint_for(self, service_type):
            return 'https://neutron.example.com' \
                if service_type == 'network' else None

    cloud = openstack.OpenStackCloud(Catalog(), 'c')
    for rtype, props, said in (
            ('OS::Swift::Container', {},
             'Service swift is not available for resource type '
             'OS::Swift::Container, reason: Service endpoint not in '
             'service catalog.'),
            ('OS::Ceilometer::Alarm', {'meter_name': 'cpu',
                                       'threshold': 1},
             'Service aodh is not available for resource type '
             'OS::Ceilometer::Alarm'),
            ('OS::Neutron::IKEPolicy', {},
             'Service neutron is not available for resource type '
             'OS::Neutron::IKEPolicy, reason: Required extension vpnaas in '
             'network service is not available.')):
        path = tmp_path / 't.json'
        path.write_text(json.dumps({
            'heat_template_version': '2018-08-31',
            'resources': {'it': {'type': rtype, 'properties': props}}}))
        bundle = template.load_bundle(str(path))
        with pytest.raises(exception.InvalidTemplate) as e:
            stacks.validate(bundle, {}, cloud=cloud)
        assert 'ResourceTypeUnavailable' in str(e.value)
        assert said in str(e.value)
        assert e.value.path[-1] == 'type'
