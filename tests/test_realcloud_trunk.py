"""OS::Neutron::Trunk against a real Neutron (tools/devcloud, with the
trunk service plugin): a trunk made on a parent port that a server then
boots on, its sub-ports changed in place, a sub-port removed behind
converge's back put back by `stack converge`, nothing left after
delete; each checked through openstacksdk directly."""

import json

import pytest

from tests import realcloud

pytestmark = [pytest.mark.realcloud, pytest.mark.soak, pytest.mark.slow,
              pytest.mark.xdist_group('realcloud')]

TEMPLATE = '''
heat_template_version: 2018-08-31
parameters:
  sub_ports: {type: json, default: []}
resources:
  net0: {type: OS::Neutron::Net}
  net1: {type: OS::Neutron::Net}
  net2: {type: OS::Neutron::Net}
  subnet0:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net0}, cidr: 10.60.0.0/24}
  subnet1:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net1}, cidr: 10.61.0.0/24}
  subnet2:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net2}, cidr: 10.62.0.0/24}
  parent:
    type: OS::Neutron::Port
    properties: {network: {get_resource: net0}}
  one: {type: OS::Neutron::Port, properties: {network: {get_resource: net1}}}
  two: {type: OS::Neutron::Port, properties: {network: {get_resource: net2}}}
  trunk:
    type: OS::Neutron::Trunk
    properties:
      port: {get_resource: parent}
      sub_ports: {get_param: sub_ports}
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.tiny
      networks: [{port: {get_attr: [trunk, port_id]}}]
outputs:
  parent: {value: {get_attr: [trunk, port_id]}}
'''


@pytest.fixture(scope='module')
def cloud_env():
    env = realcloud.up('--with-converge')
    realcloud.purge(realcloud.connect(env, 'devcloud-alice'))
    return env


def _subs(conn, trunk_id, ids):
    names = {v: k for k, v in ids.items()}
    return {(names[sp['port_id']], sp['segmentation_id'])
            for sp in conn.network.get_trunk(trunk_id).sub_ports}


def test_trunk_in_neutron(cloud_env, tmp_path):
    cli = realcloud.CloudCLI(str(tmp_path / 'home'), cloud_env)
    alice = realcloud.connect(cloud_env, 'devcloud-alice')
    path = tmp_path / 'trunk.yaml'
    path.write_text(TEMPLATE)

    def run(*args):
        cli.run('--os-cloud', 'devcloud-alice', *args, timeout=600)

    def subs_param(*pairs):
        return 'sub_ports=' + json.dumps(
            [{'port': ids[name], 'segmentation_type': 'vlan',
              'segmentation_id': seg} for name, seg in pairs])

    run('stack', 'create', 'tr', '-t', str(path), '--wait')
    ids = {r['resource_name']: r['physical_resource_id'] for r in cli.json(
        '--os-cloud', 'devcloud-alice', 'stack', 'resource', 'list', 'tr')}
    trunk = alice.network.get_trunk(ids['trunk'])
    assert trunk.port_id == ids['parent']
    assert trunk.sub_ports == []
    assert trunk.name.startswith('tr-trunk-')
    # the server booted on the parent port (get_attr [trunk, port_id]):
    # bound, and the devcloud's trunk driver follows it
    server = alice.compute.get_server(ids['server'])
    assert server.status == 'ACTIVE'
    realcloud.wait_for(
        lambda: alice.network.get_trunk(ids['trunk']).status == 'ACTIVE',
        timeout=60)

    # two sub-ports added, then one re-segmented and the other removed:
    # the same trunk, on the same server
    run('stack', 'update', 'tr', '-t', str(path), '--wait', '--parameter',
        subs_param(('one', 10), ('two', 20)))
    assert _subs(alice, ids['trunk'], ids) == {('one', 10), ('two', 20)}
    details = alice.network.get_port(ids['parent']).trunk_details
    assert details['trunk_id'] == ids['trunk']
    run('stack', 'update', 'tr', '-t', str(path), '--wait', '--parameter',
        subs_param(('one', 99)))
    assert _subs(alice, ids['trunk'], ids) == {('one', 99)}
    after = {r['resource_name']: r['physical_resource_id'] for r in cli.json(
        '--os-cloud', 'devcloud-alice', 'stack', 'resource', 'list', 'tr')}
    assert after == ids

    # a sub-port taken off behind converge's back is put back
    alice.network.delete_trunk_subports(ids['trunk'],
                                        [{'port_id': ids['one']}])
    assert _subs(alice, ids['trunk'], ids) == set()
    run('stack', 'converge', 'tr', '--wait')
    assert _subs(alice, ids['trunk'], ids) == {('one', 99)}

    run('stack', 'delete', 'tr', '--yes', '--wait')
    assert list(alice.network.trunks(
        project_id=alice.current_project_id)) == []
    for name in ('parent', 'one', 'two'):
        assert alice.network.find_port(ids[name]) is None, name
