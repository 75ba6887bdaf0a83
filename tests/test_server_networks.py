"""A server's networks on the simulated cloud, with the `converge` command:
a change of its nics is made in place (interfaces detached and attached,
the server and the ports it keeps the same), as Heat's server makes it; a
server replaced gives the template's ports to its replacement, and a
rollback gives them back; a subnet whose last port belonged to a deleted
server is deleted once the cloud lets go of that port (Neutron refuses it
meanwhile: 409, asked again)."""

import os

import pytest

TEMPLATE = '''
heat_template_version: 2018-08-31
parameters:
  flavor: {type: string, default: m1.tiny}
  fail: {type: boolean, default: false}
resources:
  net:
    type: OS::Neutron::Net
    properties: {name: the_net}
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 11.11.11.0/24}
  subnet_b:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 12.12.12.0/24}
  port:
    type: OS::Neutron::Port
    properties:
      network: {get_resource: net}
      fixed_ips: [{subnet: {get_resource: subnet}}]
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: {get_param: flavor}
      flavor_update_policy: REPLACE
      networks: NETWORKS
  after:
    type: OS::Heat::TestResource
    depends_on: server
    properties: {value: {get_param: flavor}, fail: {get_param: fail}}
outputs:
  networks: {value: {get_attr: [server, networks]}}
  port0: {value: {get_attr: [server, addresses, the_net, 0, port]}}
'''


def _template(write, networks):
    return write('server.yaml', TEMPLATE.replace('NETWORKS', networks))


def _cloud(cli):
    from converge.drivers.sim import objects
    url = 'sqlite:///%s' % os.path.join(cli.home, 'sim.db')
    return objects.SimCloud(url, 'admin').admin()


def _ids(cli):
    return {r['resource_name']: r['physical_resource_id']
            for r in cli.json('stack', 'resource', 'list', 's')}


def _ports(cli, server_id):
    return sorted(p['id'] for p in _cloud(cli).list('port',
                                                    device_id=server_id))


def _update(cli, tmpl, *params):
    args = ['stack', 'update', 's', '-t', tmpl, '--wait', '--rollback',
            'enabled']
    for param in params:
        args += ['--parameter', param]
    cli.run(*args, check=False)   # its status is the test's to read
    return cli.json('stack', 'show', 's')


@pytest.mark.long
def test_a_change_of_networks_keeps_the_server_and_its_ports(cli, write):
    cli.run('stack', 'create', 's', '-t',
            _template(write, '[{network: {get_resource: net}}]'), '--wait')
    ids = _ids(cli)
    server = ids['server']
    first = _ports(cli, server)
    assert len(first) == 1

    # the same interface, named by its subnet: nothing changes
    stack = _update(cli, _template(
        write, '[{subnet: {get_resource: subnet}}]'))
    assert stack['stack_status'] == 'UPDATE_COMPLETE', \
        stack['stack_status_reason']
    assert _ids(cli)['server'] == server
    assert _ports(cli, server) == first
    # each address names its port, as Heat's attribute does
    assert cli.json('stack', 'output', 'show', 's', 'port0')[
        'output_value'] == first[0]

    # another subnet: its port detached (Nova's: gone), a new one attached
    stack = _update(cli, _template(
        write, '[{subnet: {get_resource: subnet_b}}]'))
    assert stack['stack_status'] == 'UPDATE_COMPLETE', \
        stack['stack_status_reason']
    assert _ids(cli)['server'] == server
    now = _ports(cli, server)
    assert len(now) == 1 and now != first
    assert _cloud(cli).get('port', first[0]) is None
    nets = cli.json('stack', 'output', 'show', 's', 'networks')[
        'output_value']
    assert [a.rsplit('.', 1)[0] for a in nets['the_net']] == ['12.12.12']

    # the template's port added: attached, the other kept
    stack = _update(cli, _template(
        write, '[{subnet: {get_resource: subnet_b}}, '
               '{port: {get_resource: port}}]'))
    assert stack['stack_status'] == 'UPDATE_COMPLETE', \
        stack['stack_status_reason']
    assert _ids(cli)['server'] == server
    assert _ports(cli, server) == sorted(now + [ids['port']])
    attaches = cli.json('sim', 'log', '--op', 'attach')
    assert len(attaches) == 2

    # and dropped again: detached, not deleted (the stack's own)
    stack = _update(cli, _template(
        write, '[{subnet: {get_resource: subnet_b}}]'))
    assert stack['stack_status'] == 'UPDATE_COMPLETE'
    assert _ports(cli, server) == now
    assert _cloud(cli).get('port', ids['port'])['device_id'] == ''

    cli.run('stack', 'delete', 's', '--yes', '--wait')
    assert cli.json('stack', 'list') == []


def test_a_subnet_waits_for_the_port_of_a_deleted_server(cli, write):
    cli.run('stack', 'create', 's', '-t',
            _template(write, '[{network: {get_resource: net}}]'), '--wait')
    subnet = _ids(cli)['subnet']
    cli.run('stack', 'delete', 's', '--yes', '--wait')
    assert cli.json('stack', 'list') == []
    # Neutron refused while Nova's port of the deleted server was still
    # there; asked again, the subnet went
    tries = cli.json('sim', 'log', '--object', subnet, '--op',
                     'subnet.delete')
    assert [t['OK'] for t in tries][0] is False
    assert tries[-1]['OK'] is True
    assert _cloud(cli).get('subnet', subnet) is None


@pytest.mark.parametrize('fail', [False, True])
def test_a_replaced_server_gives_its_port_to_the_new_one(cli, write, fail):
    tmpl = _template(write, '[{port: {get_resource: port}}]')
    cli.run('stack', 'create', 's', '-t', tmpl, '--wait')
    ids = _ids(cli)
    stack = _update(cli, tmpl, 'flavor=m1.small',
                    'fail=%s' % str(fail).lower())
    if not fail:
        assert stack['stack_status'] == 'UPDATE_COMPLETE', \
            stack['stack_status_reason']
        new = _ids(cli)['server']
        assert new != ids['server']
        assert _ports(cli, new) == [ids['port']]
    else:
        # the update failed after the replacement booted on the port: the
        # rollback keeps the old server, which gets its port back
        assert stack['stack_status'] == 'ROLLBACK_COMPLETE', \
            stack['stack_status_reason']
        assert _ids(cli)['server'] == ids['server']
        assert _ports(cli, ids['server']) == [ids['port']]
