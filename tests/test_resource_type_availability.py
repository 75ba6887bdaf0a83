"""The resource type list leaves out the types whose service or Neutron
extension the request's cloud lacks, as Heat's does (its
`is_service_available`; Heat's functional tests skip by that list:
"OS::Neutron::Trunk resource type not available, skipping test"), and
such a type is refused at validate, naming why. The cloud is asked once
per service, not per type nor per listing (issue 39).

On the simulator configured without Swift and Neutron's trunk extension
([sim] absent_services), through converge-api as heatclient (Heat's
functional tests' client) reaches it; the in-process service for the cost."""

import pytest
from heatclient import exc

from converge import conf
from converge.drivers.sim import objects
from converge.engine import availability
from converge.engine import request
from converge.engine import service
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
