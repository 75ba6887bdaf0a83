"""The cloud types end to end: a stack of a network, a subnet, a router
with its gateway and an interface, a security group with rules, a port,
a server on that port, a key pair, a volume attached to the server and a
floating IP, made with the `converge` command on the simulated cloud,
changed in place, and deleted leaving nothing behind."""

import os

from converge.drivers import cloud as cloud_mod

TEMPLATE = '''
heat_template_version: 2018-08-31
parameters:
  size: {type: number, default: 1}
  ports: {type: comma_delimited_list, default: "22"}
resources:
  net:
    type: OS::Neutron::Net
  subnet:
    type: OS::Neutron::Subnet
    properties:
      network: {get_resource: net}
      cidr: 10.50.0.0/24
      dns_nameservers: [8.8.8.8]
  router:
    type: OS::Neutron::Router
    properties:
      external_gateway_info: {network: public}
  router_interface:
    type: OS::Neutron::RouterInterface
    properties:
      router: {get_resource: router}
      subnet: {get_resource: subnet}
  secgroup:
    type: OS::Neutron::SecurityGroup
    properties:
      description: ssh and ping
      rules:
        repeat:
          for_each: {<%port%>: {get_param: ports}}
          template: {protocol: tcp, port_range_min: <%port%>,
                     port_range_max: <%port%>,
                     remote_ip_prefix: 0.0.0.0/0}
  ping:
    type: OS::Neutron::SecurityGroupRule
    properties:
      security_group: {get_resource: secgroup}
      protocol: icmp
  port:
    type: OS::Neutron::Port
    properties:
      network: {get_resource: net}
      fixed_ips: [{subnet: {get_resource: subnet}}]
      security_groups: [{get_resource: secgroup}]
  keypair:
    type: OS::Nova::KeyPair
    properties:
      name: {list_join: ['-', [{get_param: OS::stack_name}, key]]}
      save_private_key: true
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.tiny
      key_name: {get_resource: keypair}
      networks: [{port: {get_resource: port}}]
  volume:
    type: OS::Cinder::Volume
    properties:
      size: {get_param: size}
  attachment:
    type: OS::Cinder::VolumeAttachment
    properties:
      instance_uuid: {get_resource: server}
      volume_id: {get_resource: volume}
  floating_ip:
    type: OS::Neutron::FloatingIP
    depends_on: router_interface
    properties:
      floating_network: public
      port_id: {get_resource: port}
outputs:
  floating: {value: {get_attr: [floating_ip, floating_ip_address]}}
  fixed: {value: {get_attr: [port, fixed_ips, 0, ip_address]}}
  private_key: {value: {get_attr: [keypair, private_key]}}
  size: {value: {get_attr: [volume, size]}}
'''

#: what the sim starts with (drivers/sim/seed.py: IMAGES...): not the stack's
SEEDED = {'network': 2, 'subnet': 2, 'image': 4, 'flavor': 5}


def _cloud(cli):
    """The CLI's simulated cloud, as its operator sees it (every
    project's objects)."""
    from converge.drivers.sim import objects
    url = 'sqlite:///%s' % os.path.join(cli.home, 'sim.db')
    return objects.SimCloud(url, 'admin').admin()


def _counts(cli):
    cloud = _cloud(cli)
    return {kind: len(cloud.list(kind)) for kind in cloud_mod.KINDS}


def test_a_network_stack_made_changed_and_deleted(cli, write):
    tmpl = write('net.yaml', TEMPLATE)
    proc = cli.run('stack', 'create', 'web', '-t', tmpl, '--wait')
    assert 'CREATE_COMPLETE' in proc.stdout
    resources = cli.json('stack', 'resource', 'list', 'web')
    assert {r['resource_status'] for r in resources} == {'CREATE_COMPLETE'}
    ids = {r['resource_name']: r['physical_resource_id'] for r in resources}
    out = cli.json('stack', 'output', 'show', 'web', '--all')
    assert out['fixed'].startswith('10.50.0.')
    assert out['floating'].startswith('172.24.4.')
    assert out['private_key'].startswith('-----BEGIN')
    assert out['size'] == '1'
    assert ids['keypair'] == 'web-key'
    assert ids['attachment'] == ids['volume']
    cloud = _cloud(cli)
    assert cloud.get('floating_ip', ids['floating_ip'])['port_id'] == \
        ids['port']
    assert cloud.get('volume', ids['volume'])['status'] == 'in-use'
    rules = cloud.list('security_group_rule',
                       security_group_id=ids['secgroup'])
    assert len(rules) == 4   # ssh, ping, Neutron's default egress twice
    servers = cli.json('sim', 'server', 'list')
    assert [s['ID'] for s in servers] == [ids['server']]

    # in place: the volume grows, the group's rules change
    cli.run('stack', 'update', 'web', '-t', tmpl, '--parameter', 'size=2',
            '--parameter', 'ports=22,80', '--wait')
    after = {r['resource_name']: r['physical_resource_id']
             for r in cli.json('stack', 'resource', 'list', 'web')}
    assert after == ids
    assert cloud.get('volume', ids['volume'])['size'] == 2
    assert cli.json('stack', 'output', 'show', 'web', 'size')[
        'output_value'] == '2'
    assert len(cloud.list('security_group_rule',
                          security_group_id=ids['secgroup'])) == 5

    cli.run('stack', 'delete', 'web', '--yes', '--wait')
    assert cli.json('stack', 'list') == []
    assert cli.json('sim', 'server', 'list') == []
    left = {k: n for k, n in _counts(cli).items() if n != SEEDED.get(k, 0)}
    assert left == {}
