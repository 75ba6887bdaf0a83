"""The Neutron types (OS::Neutron::Net, Subnet, Port, Router,
RouterInterface, SecurityGroup, SecurityGroupRule, FloatingIP,
FloatingIPAssociation) on the in-memory cloud and on the simulator:
create, observe, update in place and by replacement, delete, drift."""

import pytest

from converge import exception
from converge.resources import base
from converge.resources import floating_ip
from converge.resources import neutron
from converge.resources import port as port_mod
from converge.resources import router as router_mod
from converge.resources import security_group as sg_mod
from tests.cloud_fakes import FakeCloud, changed, gone, made, updated
from tests.cloud_fakes import clients, cloud  # noqa: F401 (fixtures)
from tests.resource_fakes import again, make


def ids(cloud, kind, **filters):
    return sorted(o['id'] for o in cloud.list(kind, **filters))


@pytest.fixture
def network(clients):
    net = made(neutron.Net, clients, 'net', name='n1')
    sub = made(neutron.Subnet, clients, 'sub', network='n1',
               cidr='10.11.0.0/24')
    return net, sub


# -- Net -----------------------------------------------------------------

def test_net_lifecycle(clients, cloud):
    net = made(neutron.Net, clients, 'net', name='n1')
    seen = net.observe()
    assert seen['name'] == 'n1' and seen['admin_state_up'] is True
    attrs = net.get_attributes(seen)
    assert attrs['name'] == 'n1' and attrs['show']['id'] == net.physical_id
    assert attrs['subnets'] == []
    # a repeated create (the same key) makes nothing more
    again(net).create()
    assert [n for n in ids(cloud, 'network') if n == net.physical_id] == \
        [net.physical_id]
    # in place
    net2 = updated(net, name='n2', admin_state_up=False)
    assert net2.physical_id == net.physical_id
    seen = net2.observe()
    assert seen['name'] == 'n2' and seen['admin_state_up'] is False
    # replaced
    net3, prior = changed(net2, tenant_id='other')
    assert net3.needs_replace(prior)
    gone(net2)


def test_net_drift_behind_our_back(clients, cloud):
    net = made(neutron.Net, clients, 'net', name='n1')
    assert net.drift(net.observe()) == {}
    cloud.update('network', net.physical_id, {'name': 'theirs'})
    assert net.drift(net.observe()) == {'name': ('theirs', 'n1')}
    assert net.update(net.properties, net.observe()) is None
    assert net.drift(net.observe()) == {}
    assert net.observe()['name'] == 'n1'


def test_net_default_name_is_heats():
    from tests.cloud_fakes import FakeClients
    clients = FakeClients()
    net = made(neutron.Net, clients, 'net')
    assert net.observe()['name'].startswith('mystack-net-')


def test_net_validation():
    with pytest.raises(exception.InvalidTemplate) as e:
        neutron.Net.validate_properties({'value_specs': {'shared': True}},
                                        path=['resources', 'n',
                                              'properties'])
    assert 'shared not allowed in value_specs' in str(e.value)
    assert e.value.path[-1] == 'value_specs'
    with pytest.raises(exception.InvalidTemplate) as e:
        neutron.Net.validate_properties({'dhcp_agent_ids': ['a']})
    assert 'not supported' in str(e.value)
    out = neutron.Net.validate_properties({})
    assert out['admin_state_up'] is True and out['shared'] is False


# -- Subnet --------------------------------------------------------------

def test_subnet_lifecycle(clients, cloud, network):
    net, sub = network
    seen = sub.observe()
    assert seen['network_id'] == net.physical_id    # 'n1' resolved
    assert seen['cidr'] == '10.11.0.0/24' and seen['enable_dhcp'] is True
    attrs = sub.get_attributes(seen)
    assert attrs['cidr'] == '10.11.0.0/24'
    assert attrs['network_id'] == net.physical_id
    assert sub.physical_id in net.get_attributes(net.observe())['subnets']
    sub2 = updated(sub, dns_nameservers=['8.8.8.8'], enable_dhcp=False,
                   name='s2')
    seen = sub2.observe()
    assert seen['dns_nameservers'] == ['8.8.8.8']
    assert seen['enable_dhcp'] is False and seen['name'] == 's2'
    assert sub2.physical_id == sub.physical_id
    sub3, prior = changed(sub2, cidr='10.12.0.0/24')
    assert sub3.needs_replace(prior)
    gone(sub2)


def test_subnet_without_gateway(clients, network):
    net, _ = network
    sub = made(neutron.Subnet, clients, 'nogw', network=net.physical_id,
               cidr='10.13.0.0/24', gateway_ip='')
    assert sub.observe()['gateway_ip'] is None


def test_subnet_gateway_auto_cannot_come_in_an_update(clients, network):
    _, sub = network
    new, prior = changed(sub, gateway_ip='auto')
    with pytest.raises(exception.ResourceFailure) as e:
        new.update(prior, new.observe())
    assert 'The value "auto" for gateway_ip cannot be used' in str(e.value)


def test_subnet_in_use_is_deleted_once_its_port_goes(clients, cloud,
                                                     network):
    net, sub = network
    port = made(port_mod.Port, clients, 'port', network=net.physical_id,
                fixed_ips=[{'subnet': sub.physical_id}])
    if isinstance(cloud, FakeCloud):
        cloud.in_use[sub.physical_id] = 1   # as Neutron answers
    first = sub.delete()
    assert isinstance(first, base.Wait) and 'in use' in first.reason
    gone(port)
    gone(again(sub))


@pytest.mark.parametrize('props,path,words', [
    ({'cidr': '10.0.0.0/24'}, ['network'], 'Property network not assigned'),
    ({'network': 'n', 'network_id': 'n', 'cidr': '10.0.0.0/24'},
     ['network'], 'network, network_id'),
    ({'network': 'n'}, ['cidr'], 'At least one of the following'),
    ({'network': 'n', 'cidr': '10.0.0.0/24', 'subnetpool': 'p'}, ['cidr'],
     'subnetpool, cidr'),
    ({'network': 'n', 'cidr': '10.0.0.0/24', 'ipv6_ra_mode': 'slaac'},
     ['ip_version'], 'not supported for ipv4'),
    ({'network': 'n', 'cidr': '10.0.0.0/24', 'gateway_ip': 'x'},
     ['gateway_ip'], 'invalid format'),
    ({'network': 'n', 'cidr': '10.0.0.300/24'}, ['cidr'],
     'is not a valid IP subnet'),
    ({'network': 'n', 'cidr': '10.0.0.0/24',
      'allocation_pools': [{'start': '10.0.0.2', 'end': 'x'}]},
     ['allocation_pools', 0, 'end'], 'Invalid IP address'),
])
def test_subnet_validation(props, path, words):
    with pytest.raises(exception.InvalidTemplate) as e:
        neutron.Subnet.validate_properties(props, path=['p'])
    assert words in str(e.value)
    assert e.value.path == ['p'] + path


# -- Port ----------------------------------------------------------------

def test_port_lifecycle(clients, cloud, network):
    net, sub = network
    group = made(sg_mod.SecurityGroup, clients, 'sg')
    port = made(port_mod.Port, clients, 'port', network='n1',
                fixed_ips=[{'subnet': sub.physical_id}],
                security_groups=[group.physical_id])
    seen = port.observe()
    assert seen['network_id'] == net.physical_id
    assert seen['security_groups'] == [group.physical_id]
    ip, = seen['fixed_ips']
    assert ip['subnet_id'] == sub.physical_id and ip['ip_address']
    attrs = port.get_attributes(seen)
    assert attrs['fixed_ips'] == seen['fixed_ips']
    assert [s['id'] for s in attrs['subnets']] == [sub.physical_id]
    assert attrs['network']['id'] == net.physical_id
    assert attrs['mac_address']
    port2 = updated(port, name='p2', admin_state_up=False)
    seen = port2.observe()
    assert seen['name'] == 'p2' and seen['admin_state_up'] is False
    assert port2.physical_id == port.physical_id
    # a network change replaces, as does REPLACE_ALWAYS
    new, prior = changed(port2, network=sub.physical_id)
    assert new.needs_replace(prior)
    new, prior = changed(port2, replacement_policy='REPLACE_ALWAYS',
                         name='p3')
    assert new.needs_replace(prior)
    # security groups taken out: the default group, as Heat does (one
    # the project has: Neutron makes it on first need, here for a port
    # that names none)
    made(port_mod.Port, clients, 'plain', network=net.physical_id)
    port3 = updated(port2, security_groups=None)
    default = cloud.resolve('security_group', 'default')
    assert port3.observe()['security_groups'] == [default]
    gone(port3)


def test_port_security_groups_drift(clients, cloud, network):
    net, sub = network
    group = made(sg_mod.SecurityGroup, clients, 'sg')
    port = made(port_mod.Port, clients, 'port', network=net.physical_id,
                security_groups=[group.physical_id])
    cloud.update('port', port.physical_id, {'security_groups': []})
    assert set(port.drift(port.observe())) == {'security_groups'}
    port.update(port.properties, port.observe())
    assert port.observe()['security_groups'] == [group.physical_id]


def test_port_validation():
    with pytest.raises(exception.InvalidTemplate) as e:
        port_mod.Port.validate_properties({
            'network': 'n', 'fixed_ips': [{'ip_address': '10.0.0.5'}],
            'no_fixed_ips': True})
    assert 'fixed_ips, no_fixed_ips' in str(e.value)
    with pytest.raises(exception.InvalidTemplate) as e:
        port_mod.Port.validate_properties({'network': 'n',
                                           'mac_address': 'zz'})
    assert 'Invalid MAC address.' in str(e.value)
    out = port_mod.Port.validate_properties({'network': 'n'})
    assert out['binding:vnic_type'] == 'normal'
    assert out['replacement_policy'] == 'AUTO'


# -- Router and its interfaces -------------------------------------------

def test_router_gateway_and_interface(clients, cloud, network):
    net, sub = network
    public = cloud.resolve('network', 'public')
    router = made(router_mod.Router, clients, 'router',
                  external_gateway_info={'network': 'public'})
    seen = router.observe()
    assert seen['external_gateway_info']['network_id'] == public
    attrs = router.get_attributes(seen)
    assert attrs['external_gateway_info']['network_id'] == public
    iface = made(router_mod.RouterInterface, clients, 'iface',
                 router=router.physical_id, subnet='%s' % sub.physical_id)
    assert iface.physical_id == '%s:%s' % (router.physical_id,
                                            sub.physical_id)
    assert iface.observe()['id'] == iface.physical_id
    # found again by its identity: no second interface
    lost = again(iface)
    lost.physical_id = None
    lost.create()
    assert lost.physical_id == iface.physical_id
    # the gateway removed in place
    router2 = updated(router, external_gateway_info=None)
    assert not (router2.observe().get('external_gateway_info') or {})
    new, prior = changed(router2, distributed=True)
    assert new.needs_replace(prior)
    gone(iface)
    gone(router2)


def test_router_gateway_drift(clients, cloud):
    router = made(router_mod.Router, clients, 'router',
                  external_gateway_info={'network': 'public'})
    cloud.update('router', router.physical_id,
                 {'external_gateway_info': None})
    assert 'external_gateway_info' in router.drift(router.observe())
    router.update(router.properties, router.observe())
    assert router.drift(router.observe()) == {}


def test_router_interface_validation():
    cls = router_mod.RouterInterface
    with pytest.raises(exception.InvalidTemplate) as e:
        cls.validate_properties({'router': 'r'})
    assert 'At least one of the following properties must be specified: ' \
        'subnet, port' in str(e.value)
    with pytest.raises(exception.InvalidTemplate) as e:
        cls.validate_properties({'router': 'r', 'subnet': 's', 'port': 'p'})
    assert 'subnet, port' in str(e.value)
    assert not any(s.update_allowed for s in cls.properties_schema.values())


def test_router_validation():
    with pytest.raises(exception.InvalidTemplate) as e:
        router_mod.Router.validate_properties({'ha': True,
                                               'distributed': True})
    assert 'distributed, ha' in str(e.value)


# -- Security groups -----------------------------------------------------

SSH = {'protocol': 'tcp', 'port_range_min': 22, 'port_range_max': 22,
       'remote_ip_prefix': '0.0.0.0/0'}
HTTP = dict(SSH, port_range_min=80, port_range_max=80)
PING = {'protocol': 'icmp', 'remote_ip_prefix': '10.0.0.0/8'}


def rules_of(cloud, group):
    return sorted(sg_mod.rule_key(r) for r in cloud.list(
        'security_group_rule', security_group_id=group.physical_id))


def test_security_group_rules_made_and_replaced_in_place(clients, cloud):
    group = made(sg_mod.SecurityGroup, clients, 'sg', rules=[SSH, HTTP],
                 description='web')
    keys = rules_of(cloud, group)
    assert len(keys) == 4        # ours and Neutron's default egress
    assert {k[0] for k in keys} == {'ingress', 'egress'}
    assert group.observe()['description'] == 'web'
    # a repeated create makes no rule twice
    again(group).create()
    assert rules_of(cloud, group) == keys
    group2 = updated(group, rules=[SSH, PING], description='ssh')
    assert group2.physical_id == group.physical_id
    after = rules_of(cloud, group2)
    assert len(after) == 4
    assert sg_mod.rule_key(dict(HTTP, direction='ingress',
                                ethertype='IPv4')) not in after
    assert group2.observe()['description'] == 'ssh'
    # an egress rule of its own: the default ones go
    out = {'direction': 'egress', 'protocol': 'tcp', 'port_range_min': 443,
           'port_range_max': 443, 'remote_ip_prefix': '10.0.0.0/8'}
    group3 = updated(group2, rules=[out])
    assert [k[0] for k in rules_of(cloud, group3)] == ['egress']
    gone(group3)
    assert cloud.list('security_group_rule',
                      security_group_id=group.physical_id) == []


def test_security_group_rule_deleted_behind_our_back_is_drift(clients,
                                                              cloud):
    group = made(sg_mod.SecurityGroup, clients, 'sg', rules=[SSH])
    ssh, = [r for r in cloud.list('security_group_rule',
                                  security_group_id=group.physical_id)
            if r['direction'] == 'ingress']
    cloud.delete('security_group_rule', ssh['id'])
    assert 'rules' in group.drift(group.observe())
    assert group.update(group.properties, group.observe()) is None
    assert group.drift(group.observe()) == {}
    assert len(rules_of(cloud, group)) == 3


def test_security_group_leaves_the_rules_of_other_resources(clients,
                                                            cloud):
    """A rule an OS::Neutron::SecurityGroupRule added to the group is
    not the group's to remove (Heat's update would remove it)."""
    group = made(sg_mod.SecurityGroup, clients, 'sg', rules=[SSH])
    rule = made(sg_mod.SecurityGroupRule, clients, 'web',
                security_group=group.physical_id, port_range_min=80,
                port_range_max=80)
    assert group.drift(group.observe()) == {}
    group2 = updated(group, rules=[SSH, PING])
    assert rule.observe() is not None
    assert len(rules_of(cloud, group2)) == 5
    # one added by hand is the group's: drift, and removed
    cloud.create('security_group_rule', {
        'security_group_id': group.physical_id, 'direction': 'ingress',
        'protocol': 'udp', 'port_range_min': 53, 'port_range_max': 53},
        key=None)
    assert 'rules' in group2.drift(group2.observe())
    group2.update(group2.properties, group2.observe())
    assert len(rules_of(cloud, group2)) == 5
    assert rule.observe() is not None


def test_security_group_remote_group_defaults_to_itself(clients, cloud):
    group = made(sg_mod.SecurityGroup, clients, 'sg', rules=[
        {'remote_mode': 'remote_group_id', 'protocol': 'tcp'}])
    mine, = [r for r in cloud.list('security_group_rule',
                                   security_group_id=group.physical_id)
             if r['direction'] == 'ingress']
    assert mine['remote_group_id'] == group.physical_id


def test_security_group_validation():
    cls = sg_mod.SecurityGroup
    with pytest.raises(exception.InvalidTemplate) as e:
        cls.validate_properties({'name': 'default'})
    assert 'cannot be assigned the name "default"' in str(e.value)
    with pytest.raises(exception.InvalidTemplate) as e:
        cls.validate_properties({'rules': [{'protocol': 'nope'}]})
    assert e.value.path == ['rules', 0, 'protocol']
    out = cls.validate_properties({'rules': [{'protocol': 6}]})
    assert out['rules'][0]['protocol'] == '6'
    assert out['rules'][0]['direction'] == 'ingress'
    with pytest.raises(exception.InvalidTemplate) as e:
        cls.validate_properties({'rules': [{'port_range_min': 30,
                                            'port_range_max': 20}]})
    assert 'minimum port number must be less' in str(e.value)


def test_security_group_rule_lifecycle(clients, cloud):
    group = made(sg_mod.SecurityGroup, clients, 'sg', name='g1')
    rule = made(sg_mod.SecurityGroupRule, clients, 'rule',
                security_group='g1', port_range_min=8080,
                port_range_max=8080, remote_group='g1')
    seen = rule.observe()
    assert seen['security_group_id'] == group.physical_id
    assert seen['remote_group_id'] == group.physical_id
    assert seen['protocol'] == 'tcp' and seen['direction'] == 'ingress'
    lost = again(rule)
    lost.physical_id = None
    lost.create()
    assert lost.physical_id == rule.physical_id
    new, prior = changed(rule, port_range_max=8081)
    assert new.needs_replace(prior)
    gone(rule)
    assert rule.physical_id not in ids(cloud, 'security_group_rule')


# -- Floating IPs --------------------------------------------------------

@pytest.fixture
def routed(clients, network):
    """A port on a subnet a router with a gateway reaches."""
    net, sub = network
    router = made(router_mod.Router, clients, 'router',
                  external_gateway_info={'network': 'public'})
    made(router_mod.RouterInterface, clients, 'iface',
         router=router.physical_id, subnet=sub.physical_id)
    port = made(port_mod.Port, clients, 'port', network=net.physical_id,
                fixed_ips=[{'subnet': sub.physical_id}])
    other = made(port_mod.Port, clients, 'other', network=net.physical_id,
                 fixed_ips=[{'subnet': sub.physical_id}])
    return port, other


def test_floating_ip_association_in_place(clients, cloud, routed):
    port, other = routed
    fip = made(floating_ip.FloatingIP, clients, 'fip',
               floating_network='public', port_id=port.physical_id)
    seen = fip.observe()
    assert seen['port_id'] == port.physical_id
    assert seen['floating_network_id'] == cloud.resolve('network', 'public')
    attrs = fip.get_attributes(seen)
    assert attrs['floating_ip_address'] and \
        attrs['port_id'] == port.physical_id
    fip2 = updated(fip, port_id=other.physical_id)
    assert fip2.physical_id == fip.physical_id
    assert fip2.observe()['port_id'] == other.physical_id
    fip3 = updated(fip2, port_id=None)
    assert fip3.observe()['port_id'] is None
    new, prior = changed(fip3, floating_network=cloud.resolve(
        'network', 'public'))
    assert new.needs_replace(prior)
    gone(fip3)


def test_floating_ip_associated_behind_our_back_is_drift(clients, cloud,
                                                         routed):
    port, _ = routed
    fip = made(floating_ip.FloatingIP, clients, 'fip',
               floating_network='public')
    cloud.update('floating_ip', fip.physical_id,
                 {'port_id': port.physical_id})
    assert set(fip.drift(fip.observe())) == {'port_id'}
    fip.update(fip.properties, fip.observe())
    assert fip.observe()['port_id'] is None


def test_floating_ip_association_resource(clients, cloud, routed):
    port, other = routed
    fip = made(floating_ip.FloatingIP, clients, 'fip',
               floating_network='public')
    assoc = made(floating_ip.FloatingIPAssociation, clients, 'assoc',
                 floatingip_id=fip.physical_id, port_id=port.physical_id)
    assert assoc.physical_id
    assert assoc.observe()['port_id'] == port.physical_id
    assert fip.observe()['port_id'] == port.physical_id
    assoc.create()   # again: harmless
    assoc2, prior = changed(assoc, port_id=other.physical_id)
    assert not assoc2.needs_replace(prior)
    assert assoc2.update(prior, assoc2.observe()) is None
    assert fip.observe()['port_id'] == other.physical_id
    # another floating IP: the old one lets go of the port first
    fip_b = made(floating_ip.FloatingIP, clients, 'fip_b',
                 floating_network='public')
    assoc3, prior = changed(assoc2, floatingip_id=fip_b.physical_id)
    assoc3.update(prior, assoc3.observe())
    assert fip.observe()['port_id'] is None
    assert fip_b.observe()['port_id'] == other.physical_id
    assert assoc3.delete() is None
    assert fip_b.observe()['port_id'] is None
    assert assoc3.observe() is None


def test_floating_ip_validation():
    with pytest.raises(exception.InvalidTemplate) as e:
        floating_ip.FloatingIP.validate_properties({
            'floating_network': 'public', 'fixed_ip_address': '10.0.0.3'})
    assert 'fixed_ip_address specified without port_id.' in str(e.value)
    with pytest.raises(exception.InvalidTemplate) as e:
        floating_ip.FloatingIP.validate_properties({})
    assert 'Property floating_network not assigned' in str(e.value)


def test_heat_update_allowed():
    """What changes in place is what Heat says."""
    def allowed(cls):
        return {k for k, s in cls.properties_schema.items()
                if s.update_allowed}
    assert allowed(neutron.Net) == {
        'name', 'value_specs', 'admin_state_up', 'shared', 'dhcp_agent_ids',
        'port_security_enabled', 'qos_policy', 'dns_domain', 'tags'}
    assert allowed(neutron.Subnet) == {
        'value_specs', 'name', 'dns_nameservers', 'gateway_ip',
        'enable_dhcp', 'allocation_pools', 'host_routes', 'segment', 'tags'}
    assert allowed(port_mod.Port) == {
        'name', 'device_id', 'device_owner', 'fixed_ips', 'security_groups',
        'replacement_policy', 'dns_name', 'tags', 'value_specs',
        'admin_state_up', 'allowed_address_pairs', 'binding:vnic_type',
        'port_security_enabled', 'qos_policy', 'propagate_uplink_status',
        'no_fixed_ips'}
    assert allowed(router_mod.Router) == {
        'name', 'external_gateway_info', 'value_specs', 'admin_state_up',
        'l3_agent_id', 'l3_agent_ids', 'availability_zone_hints', 'tags'}
    assert allowed(sg_mod.SecurityGroup) == {'name', 'description', 'rules',
                                             'stateful'}
    assert allowed(sg_mod.SecurityGroupRule) == set()
    assert allowed(floating_ip.FloatingIP) == {
        'port_id', 'fixed_ip_address', 'dns_name', 'dns_domain'}
    assert allowed(floating_ip.FloatingIPAssociation) == {
        'floatingip_id', 'port_id', 'fixed_ip_address'}


# -- exactly once, and the cloud's own refusals ---------------------------

def test_a_create_repeated_after_a_crash_makes_nothing_twice(clients, cloud,
                                                            routed):
    """The engine died between the cloud's answer and its record: the
    create runs again without the physical id, with the same key."""
    port, _ = routed
    net = cloud.resolve('network', 'n1')
    made_ = [
        made(neutron.Subnet, clients, 'sub2', network=net,
             cidr='10.21.0.0/24'),
        made(port_mod.Port, clients, 'port2', network=net),
        made(router_mod.Router, clients, 'router2'),
        made(floating_ip.FloatingIP, clients, 'fip2',
             floating_network='public', port_id=port.physical_id),
    ]
    for res in made_:
        lost = again(res)
        lost.physical_id = None
        lost.data = {}
        assert lost.create() is None
        assert lost.physical_id == res.physical_id, res.name
        assert [o for o in cloud.list(res.kind)
                if o['id'] == res.physical_id], res.name


def test_the_clouds_refusal_reaches_the_caller(clients, cloud, network):
    net, sub = network
    # an address range the network has already
    twin = make(neutron.Subnet, 'twin', {'network': net.physical_id,
                                         'cidr': '10.11.0.0/24'},
                clients=clients)
    if isinstance(cloud, FakeCloud):
        cloud.fail_next['create'] = exception.CloudError(
            'Invalid input for operation: Requested subnet with cidr: '
            '10.11.0.0/24 for network: x overlaps with another subnet.',
            400)
    with pytest.raises(exception.CloudError) as e:
        twin.create()
    assert 'overlaps with another subnet' in str(e.value)
    assert e.value.code == 400


def test_a_floating_ip_no_router_reaches_is_refused_with_neutrons_words(
        clients, cloud, network):
    net, sub = network
    port = made(port_mod.Port, clients, 'port', network=net.physical_id,
                fixed_ips=[{'subnet': sub.physical_id}])
    fip = make(floating_ip.FloatingIP, 'fip', {
        'floating_network': 'public', 'port_id': port.physical_id},
        clients=clients)
    if isinstance(cloud, FakeCloud):
        cloud.fail_next['create'] = exception.CloudError(
            'External network x is not reachable from subnet y.', 404)
    with pytest.raises(exception.CloudError) as e:
        fip.create()
    assert 'is not reachable from subnet' in str(e.value)
