"""A server's networks on a real OpenStack (tools/devcloud): a change of
nics made in place through Nova's interface attach and detach (the
server kept), a server replaced hands the template's port to its
replacement, and a delete leaves no port behind (Neutron refuses the
subnet while Nova still holds the deleted server's port: asked again)."""

import pytest

from tests import realcloud

pytestmark = [pytest.mark.realcloud, pytest.mark.soak, pytest.mark.slow,
              pytest.mark.xdist_group('realcloud')]

CLOUD = ('--os-cloud', 'devcloud-alice')

TEMPLATE = '''
heat_template_version: 2018-08-31
parameters:
  flavor: {type: string, default: m1.tiny}
resources:
  net:
    type: OS::Neutron::Net
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 11.11.11.0/24}
  subnet_b:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 12.12.12.0/24}
  port:
    type: OS::Neutron::Port
    properties: {network: {get_resource: net}}
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: {get_param: flavor}
      flavor_update_policy: REPLACE
      networks: NETWORKS
'''


@pytest.fixture(scope='module')
def cloud_env():
    env = realcloud.up('--with-converge')
    realcloud.purge(realcloud.connect(env, 'devcloud-alice'))
    return env


@pytest.fixture
def cli(tmp_path, cloud_env):
    return realcloud.CloudCLI(str(tmp_path / 'home'), cloud_env)


@pytest.fixture(scope='module')
def alice(cloud_env):
    return realcloud.connect(cloud_env, 'devcloud-alice')


def _write(tmp_path, networks):
    path = tmp_path / 'server.yaml'
    path.write_text(TEMPLATE.replace('NETWORKS', networks))
    return str(path)


def _ids(cli, stack):
    return {r['resource_name']: r['physical_resource_id'] for r in
            cli.json(*CLOUD, 'stack', 'resource', 'list', stack)}


def _status(cli, stack):
    shown = cli.json(*CLOUD, 'stack', 'show', stack)
    return shown['stack_status'], shown['stack_status_reason']


def _ports(alice, server_id):
    return {p.id: {f['subnet_id'] for f in p.fixed_ips}
            for p in alice.network.ports(device_id=server_id)}


def test_networks_change_in_place_and_nothing_is_left(cli, alice, tmp_path):
    cli.run(*CLOUD, 'stack', 'create', 'nets', '-t',
            _write(tmp_path, '[{subnet: {get_resource: subnet}}]'), '--wait',
            timeout=600)
    assert _status(cli, 'nets')[0] == 'CREATE_COMPLETE'
    ids = _ids(cli, 'nets')
    server = ids['server']
    [first] = _ports(alice, server)

    # the same interface, by its network and subnet: kept
    cli.run(*CLOUD, 'stack', 'update', 'nets', '-t',
            _write(tmp_path, '[{network: {get_resource: net}, '
                             'subnet: {get_resource: subnet}}]'),
            '--wait', timeout=600)
    assert _status(cli, 'nets')[0] == 'UPDATE_COMPLETE'
    assert _ids(cli, 'nets')['server'] == server
    assert list(_ports(alice, server)) == [first]

    # another subnet: detached, a port of converge's attached on it
    cli.run(*CLOUD, 'stack', 'update', 'nets', '-t',
            _write(tmp_path, '[{subnet: {get_resource: subnet_b}}]'),
            '--wait', timeout=600)
    assert _status(cli, 'nets')[0] == 'UPDATE_COMPLETE'
    assert _ids(cli, 'nets')['server'] == server
    now = _ports(alice, server)
    assert list(now.values()) == [{ids['subnet_b']}]

    # the template's port, and a new flavor that replaces the server:
    # the replacement boots on the port the old server gave up
    tmpl = _write(tmp_path, '[{port: {get_resource: port}}]')
    cli.run(*CLOUD, 'stack', 'update', 'nets', '-t', tmpl, '--wait',
            timeout=600)
    assert _status(cli, 'nets')[0] == 'UPDATE_COMPLETE'
    assert list(_ports(alice, server)) == [ids['port']]
    cli.run(*CLOUD, 'stack', 'update', 'nets', '-t', tmpl, '--parameter',
            'flavor=m1.small', '--wait', timeout=600)
    assert _status(cli, 'nets')[0] == 'UPDATE_COMPLETE', \
        _status(cli, 'nets')
    new = _ids(cli, 'nets')['server']
    assert new != server
    assert list(_ports(alice, new)) == [ids['port']]

    cli.run(*CLOUD, 'stack', 'delete', 'nets', '--yes', '--wait',
            timeout=600)
    left = [p for p in alice.network.ports(
        project_id=alice.current_project_id)
        if p.network_id == ids['net']]
    assert left == []
    assert alice.network.find_network(ids['net']) is None
