"""The resource type list leaves out the types whose service or Neutron
extension the request's cloud lacks, as Heat's does (its
`is_service_available`; Heat's functional tests skip by that list:
"OS::Neutron::Trunk resource type not available, skipping test"), and
such a type is refused at validate, naming why. The cloud is asked once
per service, not per type nor per listing (issue 39).

On the simulator configured without Swift and Neutron's trunk extension
([sim] absent_services), through converge-api as heatclient (Heat's
functional tests' client) reaches it; the in-process service for the cost."""

import http.server
import json
import threading

import pytest
from heatclient import exc

from converge import conf
from converge.drivers.sim import objects
from converge.engine import availability
from converge.engine import request
from converge.engine import service
from tests import test_devcloud_guests_service as fakes
from tests import test_heat_api

SMALLER = ('OS::Swift::Container', 'AWS::S3::Bucket', 'OS::Neutron::Trunk')
KEPT = ('OS::Nova::Server', 'OS::Neutron::Port', 'OS::Aodh::Alarm',
        'OS::Neutron::VPNService')

TRUNK = {
    'heat_template_version': '2018-08-31',
    'resources': {
        'net': {'type': 'OS::Neutron::Net'},
        'port': {'type': 'OS::Neutron::Port',
                 'properties': {'network': {'get_resource': 'net'}}},
        'trunk': {'type': 'OS::Neutron::Trunk',
                  'properties': {'port': {'get_resource': 'port'}}}}}


@pytest.fixture(scope='module')
def smaller(tmp_path_factory):
    """converge-api on a simulated cloud without Swift and without
    Neutron's trunk extension."""
    d = tmp_path_factory.mktemp('smaller')
    cfg = str(d / 'converge.conf')
    with open(cfg, 'w') as f:
        f.write('[DEFAULT]\nhome = %s\n[sim]\nabsent_services = '
                'object-store, network:trunk\n' % (d / 'home'))
    proc, url = test_heat_api._start_api(cfg, str(d / 'api.log'))
    yield test_heat_api.API(cfg, url)
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(autouse=True)
def _fresh():
    availability.forget()
    yield
    availability.forget()
    conf.CONF.clear_override('absent_services', 'sim')


def test_types_of_absent_services_are_not_listed(smaller):
    token = smaller.token('demo')['token']
    client = smaller.client('demo', token)
    listed = {t.resource_type for t in client.resource_types.list()}
    assert not set(SMALLER) & listed, set(SMALLER) & listed
    assert set(KEPT) <= listed
    # with descriptions, and by name, the same
    described = {t.resource_type for t in client.resource_types.list(
        with_description=True)}
    assert described == listed
    assert [t.resource_type for t in client.resource_types.list(
        filters={'name': 'Trunk'})] == []
    # and what is not listed is refused, naming why, nothing stored
    with pytest.raises(exc.HTTPBadRequest) as err:
        client.stacks.create(stack_name='trunk', template=TRUNK)
    message = err.value.message.decode('utf-8')
    assert 'ResourceTypeUnavailable: HEAT-E99001 Service neutron is not ' \
        'available for resource type OS::Neutron::Trunk, reason: Required ' \
        'extension trunk in network service is not available.' in message
    assert list(client.stacks.list()) == []


def _listing(engine):
    return set(service.Service(engine).resource_types(request.make()))


def test_the_cloud_is_asked_once_per_service_not_per_type(
        engine, monkeypatch):
    asked = []
    real = objects.SimCloud.available

    def counted(cloud, service_type, extension=None):
        asked.append((service_type, extension))
        return real(cloud, service_type, extension)
    monkeypatch.setattr(objects.SimCloud, 'available', counted)
    # the simulator has every service: every type listed
    full = _listing(engine)
    assert set(SMALLER + KEPT) <= full
    # two types need Swift, four vpnaas: each asked once; a second
    # listing asks nothing (kept for [cloud] availability_cache_time)
    assert sorted(asked) == [('alarming', None), ('network', 'trunk'),
                             ('network', 'vpnaas'), ('object-store', None)]
    assert _listing(engine) == full
    assert len(asked) == 4
    # not kept: asked again, and the cloud's answer now is the list's
    conf.CONF.set_override('absent_services', ['alarming'], 'sim')
    conf.CONF.set_override('availability_cache_time', 0, 'cloud')
    try:
        smaller = _listing(engine)
    finally:
        conf.CONF.clear_override('availability_cache_time', 'cloud')
    assert len(asked) == 8
    assert full - smaller == {'OS::Aodh::Alarm', 'OS::Ceilometer::Alarm'}


class _Keystone(http.server.ThreadingHTTPServer):
    """Keystone's token call (a catalog of Nova and Neutron only) and
    Neutron's versions and extensions (vpnaas, no trunk); `requests`:
    (method, path, the token authenticated with) of each."""

    daemon_threads = True

    def __init__(self):
        super().__init__(('127.0.0.1', 0), _KeystoneHandler)
        self.url = 'http://127.0.0.1:%d' % self.server_address[1]
        self.requests = []


class _KeystoneHandler(fakes.Handler):
    """Keystone's and Neutron's answers, in JSON as the guests
    service's stand-in cloud gives them."""

    def do_POST(self):
        body = json.loads(self.rfile.read(
            int(self.headers.get('Content-Length') or 0)))
        ks = self.server
        ks.requests.append(('POST', self.path, body['auth']['identity'].get(
            'token', {}).get('id')))
        catalog = [{'type': kind, 'name': kind, 'id': kind, 'endpoints': [{
            'interface': 'public', 'region': 'RegionOne', 'id': kind,
            'region_id': 'RegionOne', 'url': '%s/%s' % (ks.url, kind)}]}
            for kind in ('compute', 'network')]
        self._answer(201, {'token': {
            'methods': ['token'], 'expires_at': '2099-01-01T00:00:00Z',
            'issued_at': '2026-01-01T00:00:00Z',
            'user': {'id': 'u1', 'name': 'demo',
                     'domain': {'id': 'default', 'name': 'Default'}},
            'project': {'id': 'p1', 'name': 'demo',
                        'domain': {'id': 'default', 'name': 'Default'}},
            'roles': [{'id': 'r1', 'name': 'member'}],
            'catalog': catalog}}, [('X-Subject-Token', 'scoped')])

    def do_GET(self):
        ks = self.server
        ks.requests.append(('GET', self.path, self.headers['X-Auth-Token']))
        path = self.path.rstrip('/')
        if path == '/network':
            return self._answer(200, {'versions': [{
                'id': 'v2.0', 'status': 'CURRENT', 'links': [{
                    'rel': 'self', 'href': ks.url + '/network/v2.0/'}]}]})
        if path == '/compute':
            return self._answer(200, {'versions': [{
                'id': 'v2.1', 'status': 'CURRENT', 'version': '2.90',
                'min_version': '2.1', 'links': [{
                    'rel': 'self', 'href': ks.url + '/compute/v2.1/'}]}]})
        if path == '/network/v2.0/extensions/vpnaas':
            return self._answer(200, {'extension': {'alias': 'vpnaas'}})
        self._answer(404, {'NeutronError': {'message': 'not found'}})


@pytest.fixture
def keystone():
    server = _Keystone()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    conf.CONF.set_override('auth_strategy', 'keystone', 'api')
    conf.CONF.set_override('use_trusts', True, 'cloud')
    conf.CONF.set_override('region_name', 'RegionOne', 'cloud')
    conf.CONF.set_override('auth_url', server.url + '/v3', 'trustee')
    yield server
    for name, group in (('auth_strategy', 'api'), ('use_trusts', 'cloud'),
                        ('region_name', 'cloud'), ('auth_url', 'trustee')):
        conf.CONF.clear_override(name, group)
    server.shutdown()
    server.server_close()


def test_with_keystone_trusts_the_users_own_catalog_decides(
        engine, keystone):
    """Through a Keystone-authenticated API with trusts, the list is the
    user's project's catalog (the user's own token: a listing makes no
    trust): no Swift, no Aodh, Neutron without trunk."""
    ctx = request.make(project_id='p1', user_id='u1', roles=['member'],
                       auth_token='user-token')
    listed = set(service.Service(engine).resource_types(ctx))
    gone = {'OS::Swift::Container', 'AWS::S3::Bucket', 'OS::Aodh::Alarm',
            'OS::Neutron::Trunk'}
    assert not gone & listed, gone & listed
    assert {'OS::Neutron::VPNService', 'OS::Nova::Server'} <= listed
    assert [r for r in keystone.requests if r[0] == 'POST'] == [
        ('POST', '/v3/auth/tokens', 'user-token')]
    asked = len(keystone.requests)
    # kept: the next listing asks nothing
    assert set(service.Service(engine).resource_types(ctx)) == listed
    assert len(keystone.requests) == asked
