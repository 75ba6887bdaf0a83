"""converge against a real OpenStack (tools/devcloud): the CLI with
--os-cloud, every object checked through openstacksdk directly."""

import os
import signal

import pytest
import yaml

from tests import conftest
from tests import realcloud

pytestmark = [pytest.mark.realcloud, pytest.mark.slow,
              pytest.mark.xdist_group('realcloud')]

NETWORK = os.path.join(conftest.EXAMPLES, 'network.yaml')


@pytest.fixture(scope='module')
def cloud_env():
    env = realcloud.up('--with-converge')
    for cloud in ('devcloud-alice', 'devcloud-bob'):
        # what a run that died left in the devcloud is not this run's
        realcloud.purge(realcloud.connect(env, cloud))
    return env


@pytest.fixture
def cli(tmp_path, cloud_env):
    return realcloud.CloudCLI(str(tmp_path / 'home'), cloud_env)


@pytest.fixture(scope='module')
def alice(cloud_env):
    return realcloud.connect(cloud_env, 'devcloud-alice')


def _mine(conn, stack):
    """What the stack made in each service (by name prefix or tag)."""
    return {
        'servers': [s for s in conn.compute.servers()
                    if s.name.startswith(stack + '-')],
        'networks': [n for n in conn.network.networks(
            project_id=conn.current_project_id) if n.name == stack + '-net'],
        'volumes': [v for v in conn.block_storage.volumes()
                    if (v.metadata or {}).get('converge-key')],
        'ports': [p for p in conn.network.ports(
            project_id=conn.current_project_id)
            if any(t.startswith('converge-key=') for t in p.tags or [])],
        'floating_ips': [f for f in conn.network.ips(
            project_id=conn.current_project_id)],
        'routers': [r for r in conn.network.routers(
            project_id=conn.current_project_id)
            if any(t.startswith('converge-key=') for t in r.tags or [])],
    }


def test_network_stack_lives_in_the_cloud(cli, alice, tmp_path):
    """The example's network, router, security group, two servers on
    ports, a volume attached to one, a key pair and a floating IP are
    made in Nova, Neutron and Cinder; updated in place and by
    replacement; a port deleted behind converge's back comes back with
    `stack converge`; delete leaves nothing."""
    cli.run('--os-cloud', 'devcloud-alice', 'stack', 'create', 'net',
            '-t', NETWORK, '--wait', timeout=600)
    stack = cli.json('--os-cloud', 'devcloud-alice', 'stack', 'show', 'net')
    assert stack['stack_status'] == 'CREATE_COMPLETE', stack

    made = _mine(alice, 'net')
    servers = {s.name: s for s in made['servers']}
    assert len(servers) == 2, servers
    assert all(s.status == 'ACTIVE' for s in servers.values())
    [net] = made['networks']
    subnets = list(alice.network.subnets(network_id=net.id))
    assert [s.cidr for s in subnets] == ['10.42.0.0/24']
    [volume] = made['volumes']
    volume = alice.block_storage.get_volume(volume.id)
    assert volume.status == 'in-use'
    db = alice.compute.get_server(volume.attachments[0]['server_id'])
    assert db.metadata.get('role') == 'db'
    [fip] = made['floating_ips']
    assert fip.port_id is not None
    assert alice.compute.find_keypair('net-key') is not None

    def output(name):
        return cli.json('--os-cloud', 'devcloud-alice', 'stack', 'output',
                        'show', 'net', name)['output_value']
    assert output('web_public_ip') == fip.floating_ip_address
    assert output('db_volume') == volume.id
    assert output('private_key').startswith('-----BEGIN')

    # in place: a rule of the security group, the servers resized, the
    # attached volume extended where it is (Heat's test_create_update
    # test_stack_update_flavor_volume)
    with open(NETWORK) as f:
        doc = yaml.safe_load(f)
    rules = doc['resources']['secgroup']['properties']['rules']
    rules.append({'protocol': 'tcp', 'port_range_min': 443,
                  'port_range_max': 443, 'remote_ip_prefix': '0.0.0.0/0'})
    changed = tmp_path / 'network2.yaml'
    changed.write_text(yaml.safe_dump(doc))
    cli.run('--os-cloud', 'devcloud-alice', 'stack', 'update', 'net',
            '-t', str(changed), '--parameter', 'flavor=m1.small',
            '--parameter', 'volume_size=2', '--wait', timeout=600)
    assert cli.json('--os-cloud', 'devcloud-alice', 'stack', 'show', 'net')[
        'stack_status'] == 'UPDATE_COMPLETE'
    grown = alice.block_storage.get_volume(volume.id)
    assert (grown.size, grown.status) == (2, 'in-use')
    after = {s.name: s for s in _mine(alice, 'net')['servers']}
    assert {s.id for s in after.values()} == \
        {s.id for s in servers.values()}, 'resized in place, not replaced'
    assert all(s.flavor.original_name == 'm1.small'
               for s in after.values())
    groups = [g for g in alice.network.security_groups(
        project_id=alice.current_project_id)
        if any(t.startswith('converge-key=') for t in g.tags or [])]
    [group] = groups
    ports443 = [r for r in alice.network.security_group_rules(
        security_group_id=group.id) if r.port_range_min == 443]
    assert len(ports443) == 1

    # behind converge's back: an operator deletes the web server's port
    # (Neutron's policy keeps a member from deleting a bound port)
    res = cli.json('--os-cloud', 'devcloud-alice', 'stack', 'resource',
                   'show', 'net', 'web_port')
    admin = realcloud.connect(cli._extra, 'devcloud-admin')
    admin.network.delete_port(res['physical_resource_id'])
    cli.run('--os-cloud', 'devcloud-alice', 'stack', 'converge', 'net',
            '--wait', timeout=600)
    again = cli.json('--os-cloud', 'devcloud-alice', 'stack', 'resource',
                     'show', 'net', 'web_port')
    assert again['physical_resource_id'] != res['physical_resource_id']
    port = alice.network.get_port(again['physical_resource_id'])
    assert port.device_id, 'the new port is on a server'
    fip = alice.network.get_ip(fip.id)
    assert fip.port_id == port.id

    cli.run('--os-cloud', 'devcloud-alice', 'stack', 'delete', 'net',
            '--yes', '--wait', timeout=600)
    left = _mine(alice, 'net')
    assert not any(left.values()), left


ONE_SERVER = '''
heat_template_version: 2018-08-31
resources:
  only:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.tiny
      networks: [{allocate_network: none}]
'''


def test_killed_after_nova_accepted_leaves_one_server(cli, alice,
                                                      tmp_path):
    """kill -9 of the engine just after Nova accepted the create: the
    stack converges with exactly one server, found by its key."""
    template = tmp_path / 'one.yaml'
    template.write_text(ONE_SERVER)
    proc = cli.popen('--os-cloud', 'devcloud-alice', 'stack', 'create',
                     'k9', '-t', str(template), '--wait')

    def accepted():
        return [s for s in alice.compute.servers()
                if s.name.startswith('k9-only-')]
    try:
        realcloud.wait_for(accepted, timeout=300, interval=0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    cli.run('--os-cloud', 'devcloud-alice', 'stack', 'converge', 'k9',
            '--wait', timeout=600)
    servers = accepted()
    assert len(servers) == 1, servers
    shown = cli.json('--os-cloud', 'devcloud-alice', 'stack', 'resource',
                     'show', 'k9', 'only')
    assert shown['physical_resource_id'] == servers[0].id
    cli.run('--os-cloud', 'devcloud-alice', 'stack', 'delete', 'k9',
            '--yes', '--wait', timeout=600)
    assert accepted() == []


def test_projects_are_isolated(cli, alice, tmp_path):
    """alice's stack is hers: bob's credentials neither see it nor can
    use her network by id."""
    template = tmp_path / 'net.yaml'
    template.write_text('''
heat_template_version: 2018-08-31
resources:
  net:
    type: OS::Neutron::Net
outputs:
  id:
    value: {get_resource: net}
''')
    cli.run('--os-cloud', 'devcloud-alice', 'stack', 'create', 'iso',
            '-t', str(template), '--wait', timeout=300)
    net_id = cli.json('--os-cloud', 'devcloud-alice', 'stack', 'output',
                      'show', 'iso', 'id')['output_value']
    shown = cli.run('--os-cloud', 'devcloud-bob', 'stack', 'show', 'iso',
                    check=False)
    assert shown.returncode != 0
    assert 'not found' in (shown.stderr + shown.stdout).lower()
    uses = tmp_path / 'uses.yaml'
    uses.write_text('''
heat_template_version: 2018-08-31
resources:
  port:
    type: OS::Neutron::Port
    properties:
      network: %s
''' % net_id)
    stolen = cli.run('--os-cloud', 'devcloud-bob', 'stack', 'create',
                     'steal', '-t', str(uses), '--wait', check=False,
                     timeout=300)
    assert stolen.returncode != 0
    assert net_id in stolen.stderr + stolen.stdout
    cli.run('--os-cloud', 'devcloud-alice', 'stack', 'delete', 'iso',
            '--yes', '--wait', timeout=300)
    cli.run('--os-cloud', 'devcloud-bob', 'stack', 'delete', 'steal',
            '--yes', '--wait', check=False, timeout=300)


def test_adopt_takes_only_the_projects_own_objects(cli, alice, tmp_path):
    """bob's adopt file naming alice's network and server is refused: a
    GET with bob's credentials 404s (and an external_id of hers too);
    nothing is stored and alice's objects are as they were."""
    import json
    template = tmp_path / 'mine.yaml'
    template.write_text('''
heat_template_version: 2018-08-31
resources:
  net:
    type: OS::Neutron::Net
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 10.77.0.0/24}
  server:
    type: OS::Nova::Server
    depends_on: subnet
    properties:
      image: cirros
      flavor: m1.tiny
      networks: [{network: {get_resource: net}}]
''')
    cli.run('--os-cloud', 'devcloud-alice', 'stack', 'create', 'mine',
            '-t', str(template), '--wait', timeout=300)
    ids = {r['resource_name']: r['physical_resource_id'] for r in cli.json(
        '--os-cloud', 'devcloud-alice', 'stack', 'resource', 'list', 'mine')}
    doc = {'template': yaml.safe_load(template.read_text().replace(
        '2018-08-31', '"2018-08-31"')), 'resources': {
        n: {'resource_id': ids[n]} for n in ('net', 'server')}}
    steal = tmp_path / 'steal.json'
    steal.write_text(json.dumps(doc))
    proc = cli.run('--os-cloud', 'devcloud-bob', 'stack', 'adopt', 'theirs',
                   '--adopt-file', str(steal), check=False)
    assert proc.returncode == 2, proc.stderr
    assert 'resources.net.resource_id: OS::Neutron::Net %s could not be ' \
        'found' % ids['net'] in proc.stderr
    ext = tmp_path / 'ext.yaml'
    ext.write_text('''
heat_template_version: 2018-08-31
resources:
  server:
    type: OS::Nova::Server
    external_id: %s
''' % ids['server'])
    proc = cli.run('--os-cloud', 'devcloud-bob', 'stack', 'create', 'ext',
                   '-t', str(ext), check=False)
    assert proc.returncode == 2, proc.stderr
    assert 'resources.server.external_id: OS::Nova::Server %s could not ' \
        'be found' % ids['server'] in proc.stderr
    assert cli.json('--os-cloud', 'devcloud-bob', 'stack', 'list') == []
    assert alice.compute.get_server(ids['server']).status == 'ACTIVE'
    cli.run('--os-cloud', 'devcloud-alice', 'stack', 'delete', 'mine',
            '--yes', '--wait', timeout=300)


def test_openstack_client_cannot_reach_a_missing_cloud(cli):
    """A cloud name clouds.yaml does not have is refused, naming it."""
    proc = cli.run('--os-cloud', 'no-such-cloud', 'stack', 'list',
                   check=False)
    assert proc.returncode != 0
    assert 'no-such-cloud' in proc.stderr


def _openstack(env, *args, check=True, timeout=600):
    """python-openstackclient (with heatclient's commands) as a user runs
    it, on the devcloud's clouds.yaml."""
    import subprocess
    import sys
    exe = os.path.join(os.path.dirname(sys.executable), 'openstack')
    full = dict(os.environ)
    full.pop('OS_CLOUD', None)
    full.update(env)
    proc = subprocess.run([exe] + list(args), capture_output=True,
                          text=True, env=full, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError('openstack %s failed (%d):\n%s\n%s' % (
            ' '.join(args), proc.returncode, proc.stdout, proc.stderr))
    return proc


def test_openstack_client_reaches_converge_api_through_the_catalog(
        cloud_env, alice):
    """converge-api with Keystone auth, in the catalog as `orchestration`:
    `openstack stack create` with plain password auth makes the stack,
    the engine acts through a trust of alice's, and bob cannot see it."""
    _openstack(cloud_env, '--os-cloud', 'devcloud-alice', 'stack', 'create',
               '-t', NETWORK, '--wait', 'n2')
    shown = _openstack(cloud_env, '--os-cloud', 'devcloud-alice', 'stack',
                       'show', 'n2', '-f', 'json')
    import json
    assert json.loads(shown.stdout)['stack_status'] == 'CREATE_COMPLETE'
    servers = [s for s in alice.compute.servers()
               if s.name.startswith('n2-')]
    assert len(servers) == 2 and all(s.status == 'ACTIVE' for s in servers)
    bob = _openstack(cloud_env, '--os-cloud', 'devcloud-bob', 'stack',
                     'show', 'n2', check=False)
    assert bob.returncode != 0
    assert 'not found' in (bob.stderr + bob.stdout).lower()
    _openstack(cloud_env, '--os-cloud', 'devcloud-alice', 'stack', 'delete',
               '--yes', '--wait', 'n2')
    assert not [s for s in alice.compute.servers()
                if s.name.startswith('n2-')]
