"""Orders a template does not write but the cloud needs, as Heat adds
them (its resources' add_dependencies): a server or port after the
subnets of its network (Nova boots on a network only where Neutron can
give an address), a floating IP after the router whose gateway is on its
network. Heat's functional tests make networks, subnets and servers
without depends_on (test_nova_server_networks)."""

from converge.engine import stacks
from tests import enginetools as et

NET = {'type': 'OS::Neutron::Net'}
SUBNET = {'type': 'OS::Neutron::Subnet',
          'properties': {'network': {'get_resource': 'net'},
                         'cidr': '10.20.0.0/24'}}
SERVER = {'type': 'OS::Nova::Server',
          'properties': {'image': 'cirros', 'flavor': 'm1.tiny',
                         'networks': [{'network': {'get_resource': 'net'}}]}}


def _order(engine, stack):
    """Resource name -> (the index of its CREATE IN_PROGRESS event, the
    index of its CREATE COMPLETE)."""
    out = {}
    for i, e in enumerate(et.events(engine, stack.id)):
        if e.action == 'CREATE' and e.resource_name:
            out.setdefault(e.resource_name, {})[e.status] = i
    return out


def test_a_server_on_a_network_waits_for_its_subnet(engine, tmp_path):
    stack = et.run(engine, stacks.create, 's', et.bundle(tmp_path, et.hot(
        {'net': NET, 'subnet': SUBNET, 'server': SERVER})), {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    seen = _order(engine, stack)
    assert seen['subnet']['COMPLETE'] < seen['server']['IN_PROGRESS']
    # the order is the stack's, as a client sees it
    rows = et.resources(engine, stack)
    assert rows['subnet'].id in rows['server'].requires


def test_a_port_waits_for_the_subnets_of_its_network(engine, tmp_path):
    port = {'type': 'OS::Neutron::Port',
            'properties': {'network': {'get_resource': 'net'}}}
    stack = et.run(engine, stacks.create, 's', et.bundle(tmp_path, et.hot(
        {'net': NET, 'subnet': SUBNET, 'port': port})), {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    seen = _order(engine, stack)
    assert seen['subnet']['COMPLETE'] < seen['port']['IN_PROGRESS']
    # the port got its address from that subnet
    fixed = et.resources(engine, stack)['port'].attributes['fixed_ips']
    assert fixed[0]['ip_address'].startswith('10.20.0.')


def test_a_subnet_of_another_network_is_not_waited_for(engine, tmp_path):
    other = {'type': 'OS::Neutron::Subnet',
             'properties': {'network': {'get_resource': 'net2'},
                            'cidr': '10.30.0.0/24'}}
    stack = et.run(engine, stacks.create, 's', et.bundle(tmp_path, et.hot(
        {'net': NET, 'subnet': SUBNET, 'server': SERVER, 'net2': NET,
         'other': other})), {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    rows = et.resources(engine, stack)
    assert rows['other'].id not in rows['server'].requires


def test_an_order_that_would_close_a_cycle_is_not_added(engine, tmp_path):
    # the subnet reads the server (its name): the server cannot wait for
    # it, and the template is not refused for an order it never wrote
    subnet = {'type': 'OS::Neutron::Subnet',
              'properties': {'network': {'get_resource': 'net'},
                             'cidr': '10.20.0.0/24',
                             'name': {'get_attr': ['server', 'name']}}}
    server = dict(SERVER, properties=dict(
        SERVER['properties'], networks=[{'network': 'public'}]))
    stack = et.run(engine, stacks.create, 's', et.bundle(tmp_path, et.hot(
        {'net': NET, 'subnet': subnet, 'server': server})), {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason


def test_a_server_on_a_network_without_a_subnet_fails_as_nova_says(
        engine, tmp_path):
    stack = et.run(engine, stacks.create, 's', et.bundle(tmp_path, et.hot(
        {'net': NET, 'server': SERVER})), {})
    assert et.status(stack) == 'CREATE_FAILED'
    assert 'requires a subnet in order to boot instances on' in \
        stack.status_reason
