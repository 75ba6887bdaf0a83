"""A port replaced (its mac_address changed) keeps its address: the old
port gives its fixed IPs up before the new one asks for them (Heat's
prepare_for_replace; heat-tempest-plugin's test_update_with_mac_address),
and gets them back when a rollback keeps it after all."""

from converge.engine import stacks
from tests import enginetools as et

PORT = '''heat_template_version: 2018-08-31
parameters:
  mac: {type: string, default: '00:00:00:00:bb:bb'}
  fail: {type: boolean, default: false}
resources:
  net: {type: OS::Neutron::Net}
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 11.11.11.0/24}
  port:
    type: OS::Neutron::Port
    properties:
      network: {get_resource: net}
      mac_address: {get_param: mac}
      fixed_ips: [{subnet: {get_resource: subnet}, ip_address: 11.11.11.11}]
  after:
    type: OS::Heat::TestResource
    depends_on: port
    properties: {value: {get_param: mac}, fail: {get_param: fail}}
'''


def _port(engine, stack):
    row = et.resources(engine, stack)['port']
    return row.physical_id, row.attributes['mac_address'], [
        ip['ip_address'] for ip in row.attributes['fixed_ips']]


def _sim_port(engine, port_id):
    """The port as the cloud has it now."""
    return engine.clients.for_stack(None, 'converge').cloud.get(
        'port', port_id)


def test_a_replaced_port_keeps_its_fixed_ip(engine, tmp_path):
    bundle = et.bundle(tmp_path, PORT)
    stack = et.run(engine, stacks.create, 'p', bundle, {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    old_id, old_mac, old_ips = _port(engine, stack)
    assert old_ips == ['11.11.11.11']
    stack = et.run(engine, stacks.update, 'p', bundle,
                   {'mac': '00:00:00:00:aa:aa'})
    assert et.status(stack) == 'UPDATE_COMPLETE', stack.status_reason
    new_id, new_mac, new_ips = _port(engine, stack)
    assert new_id != old_id and new_mac == '00:00:00:00:aa:aa'
    assert new_ips == old_ips


def test_a_rollback_gives_the_kept_port_its_address_back(engine, tmp_path):
    bundle = et.bundle(tmp_path, PORT)
    stack = et.run(engine, stacks.create, 'p', bundle, {},
                   disable_rollback=False)
    old_id, _mac, old_ips = _port(engine, stack)
    # the port is replaced, then a later resource fails: the rollback
    # keeps the original port, which had given its address up
    stack = et.run(engine, stacks.update, 'p', bundle,
                   {'mac': '00:00:00:00:aa:aa', 'fail': True},
                   rollback=True)
    assert et.status(stack) == 'ROLLBACK_COMPLETE', stack.status_reason
    # the replacement was made (it had the address), then deleted
    made = {e.physical_id for e in et.events(engine, stack.id)
            if e.resource_name == 'port' and e.action == 'CREATE' and
            e.status == 'COMPLETE'}
    assert len(made - {old_id}) == 1, made
    port_id, mac, ips = _port(engine, stack)
    assert (port_id, mac) == (old_id, '00:00:00:00:bb:bb')
    assert [ip['ip_address'] for ip in _sim_port(engine, port_id)[
        'fixed_ips']] == old_ips
