"""Custom constraints (converge/resources/constraints.py): a value that
names something in the cloud is looked up at validate, with Heat's words
when it is not there; the ones that need no cloud are checked by the
plug-ins' schema checks."""

import pytest

from converge import exception
from converge.resources import constraints
from converge.resources import neutron
from converge.resources import port as port_mod
from converge.resources import properties as p
from converge.resources import router as router_mod
from converge.resources import volume
from tests.cloud_fakes import FakeCloud
from tests.cloud_fakes import cloud  # noqa: F401 (fixture)

PATH = ['resources', 'r', 'properties']


def check(cls, props, cloud, cache=None):
    values = cls.validate_properties(props, path=PATH)
    constraints.check(cls, values, cloud, PATH, cache=cache)


def refused(cls, props, cloud):
    with pytest.raises(exception.InvalidTemplate) as e:
        check(cls, props, cloud)
    return e.value


def group(cloud, name='web'):
    return cloud.create('security_group', {'name': name}, key='k-' + name)


def test_names_that_exist_pass(cloud):
    group(cloud)
    check(volume.Volume, {'size': 1, 'image': 'cirros'}, cloud)
    check(neutron.Subnet, {'network': 'public', 'cidr': '10.0.0.0/24'},
          cloud)
    check(router_mod.Router, {'external_gateway_info': {
        'network': 'public'}}, cloud)
    check(port_mod.Port, {'network': 'public',
                          'security_groups': ['web']}, cloud)


def test_an_image_not_there_in_heats_words():
    # (the simulator has every image a template names)
    err = refused(volume.Volume, {'size': 1, 'image': 'nope'}, FakeCloud())
    assert err.path == PATH + ['image']
    assert err.reason == "Error validating value 'nope': The Image (nope) " \
        "could not be found."
    assert str(err).startswith('resources.r.properties.image: ')


def test_a_volume_not_there_in_heats_words(cloud):
    err = refused(volume.VolumeAttachment, {'instance_uuid': 'srv',
                                            'volume_id': 'nope'}, cloud)
    assert err.path == PATH + ['volume_id']
    assert err.reason == "Error validating value 'nope': The Volume " \
        "(nope) could not be found."


def test_a_network_not_there_in_heats_words(cloud):
    err = refused(neutron.Subnet, {'network': 'nope',
                                   'cidr': '10.0.0.0/24'}, cloud)
    assert err.path == PATH + ['network']
    assert err.reason == "Error validating value 'nope': Unable to find " \
        "network with name or id 'nope'"


def test_nested_values_name_their_path(cloud):
    err = refused(router_mod.Router, {'external_gateway_info': {
        'network': 'nowhere'}}, cloud)
    assert err.path == PATH + ['external_gateway_info', 'network']
    err = refused(port_mod.Port, {'network': 'public', 'fixed_ips': [
        {'ip_address': '10.0.0.5'}, {'subnet': 'gone'}]}, cloud)
    assert err.path == PATH + ['fixed_ips', 1, 'subnet']
    assert "Unable to find subnet with name or id 'gone'" in err.reason
    group(cloud)
    err = refused(port_mod.Port, {'network': 'public',
                                  'security_groups': ['web', 'x']},
                  cloud)
    assert err.path == PATH + ['security_groups', 1]
    assert "Unable to find security_group with name or id 'x'" in \
        err.reason


def test_values_not_known_yet_are_not_looked_up():
    cloud = FakeCloud()
    check(neutron.Subnet, {'network': p.UNKNOWN, 'cidr': '10.0.0.0/24'},
          cloud)
    check(port_mod.Port, {'network': 'public', 'fixed_ips': [
        {'subnet': p.UNKNOWN}]}, cloud)
    assert cloud.ops('resolve') == [('resolve', 'network', 'public')]
    constraints.check(neutron.Subnet, p.UNKNOWN, cloud, PATH)


def test_one_look_up_per_name_with_a_shared_cache():
    cloud = FakeCloud()
    cache = {}
    for _ in range(3):
        check(volume.Volume, {'size': 1, 'image': 'cirros'}, cloud,
              cache=cache)
    assert len(cloud.ops('resolve')) == 1


def test_an_ambiguous_name_is_the_clouds_conflict():
    cloud = FakeCloud()
    cloud.seed('network', name='twin')
    cloud.seed('network', name='twin')
    err = refused(neutron.Subnet, {'network': 'twin',
                                   'cidr': '10.0.0.0/24'}, cloud)
    assert 'Multiple network matches' in err.reason


def test_a_cloud_that_cannot_answer_is_not_the_templates_fault():
    cloud = FakeCloud()
    cloud.fail_next['resolve'] = exception.CloudTransient('503')
    with pytest.raises(exception.CloudTransient):
        check(volume.Volume, {'size': 1, 'image': 'cirros'}, cloud)


def test_kinds_the_cloud_cannot_look_up_are_left_to_the_create():
    cloud = FakeCloud()
    check(volume.Volume, {'size': 1, 'snapshot_id': 'snap'}, cloud)
    assert cloud.ops('resolve') == []
    cloud.resolvable_kinds = ('volume_snapshot',)
    err = refused(volume.Volume, {'size': 1, 'snapshot_id': 'snap'}, cloud)
    assert err.reason == "Error validating value 'snap': The " \
        "VolumeSnapshot (snap) could not be found."


def test_every_constraint_named_in_a_schema_is_known():
    from converge.resources import floating_ip, image, keystone, nova
    from converge.resources import security_group, volume_type
    names = set()

    def walk(schemas):
        for schema in schemas.values():
            if schema.constraint:
                names.add(schema.constraint)
            inner = schema.schema
            if isinstance(inner, dict):
                walk(inner)
            elif isinstance(inner, p.Schema):
                walk({'item': inner})

    for mod in (neutron, port_mod, router_mod, volume, floating_ip, image,
                nova, security_group, keystone, volume_type):
        for cls in vars(mod).values():
            if isinstance(cls, type) and hasattr(cls, 'properties_schema'):
                walk(cls.properties_schema)
    assert names <= set(constraints.CONSTRAINTS) | set(constraints.LOCAL)
    assert {'neutron.network', 'neutron.subnet', 'neutron.port',
            'neutron.router', 'neutron.security_group', 'glance.image',
            'cinder.volume', 'cinder.vtype', 'ip_addr', 'net_cidr',
            'mac_addr', 'keystone.domain', 'keystone.user',
            'keystone.role'} <= names


@pytest.mark.parametrize('name,good,bad', [
    ('ip_addr', ['10.0.0.1', 'fe80::1'], ['10.0.0.300', 'x']),
    ('net_cidr', ['10.0.0.0/24', '2001:db8::/64'], ['10.0.0.0', '1/2']),
    ('ip_or_cidr', ['10.0.0.1', '10.0.0.0/8'], ['10.0.0.0/99', 'y']),
    ('mac_addr', ['fa:16:3e:00:00:01'], ['fa:16:3e', 'zz:zz:zz:zz:zz:zz']),
])
def test_local_constraints(name, good, bad):
    test = constraints.LOCAL[name]
    assert [test(v) for v in good] == [None] * len(good)
    assert all(test(v) for v in bad)


def test_a_parameters_custom_constraint(cloud):
    path = ['parameters', 'net']
    constraints.check_value('neutron.network', 'public', cloud, path)
    with pytest.raises(exception.InvalidTemplate) as e:
        constraints.check_value('neutron.network', 'nope', cloud, path)
    assert str(e.value) == "parameters.net: Error validating value 'nope'" \
        ": Unable to find network with name or id 'nope'"
    with pytest.raises(exception.InvalidTemplate) as e:
        constraints.check_value('neutron.network', ['public', 'nope'], cloud,
                                path)
    assert e.value.path == path + [1]
    with pytest.raises(exception.InvalidTemplate) as e:
        constraints.check_value('ip_addr', '10.0.0.x', None, path)
    assert 'Invalid IP address' in str(e.value)
    constraints.check_value('no.such.constraint', 'x', cloud, path)
    constraints.check_value('neutron.network', p.UNKNOWN, cloud, path)
