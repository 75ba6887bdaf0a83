"""OS::Neutron::Trunk as a user sees it through the CLI on the simulator
(Heat's heat_tempest_plugin test_create_update_neutron_trunk, in
converge's own terms): a trunk made on a parent port with its sub-ports,
sub-ports added, removed and re-segmented in place, the parent port
refused as a change (Heat's immutable property), the ports a trunk uses
kept from deletion; and the OpenStack driver's calls for it (Neutron's
trunks, add_subports and remove_subports) against a recorded fake
Neutron."""

import json

import pytest

from converge import exception
from converge.drivers import openstack
from tests.test_openstack_new_kinds import Conn, Resp, Service


def _template(sub_ports=None, **trunk_props):
    """Heat's test template: three networks, a parent port and two
    ports to be sub-ports, and the trunk (its sub_ports null when
    none, as Heat's template has them)."""
    resources = {
        'parent_net': {'type': 'OS::Neutron::Net'},
        'net_one': {'type': 'OS::Neutron::Net'},
        'net_two': {'type': 'OS::Neutron::Net'},
        'parent_port': {'type': 'OS::Neutron::Port', 'properties': {
            'network': {'get_resource': 'parent_net'},
            'name': 'trunk_parent_port'}},
        'trunk': {'type': 'OS::Neutron::Trunk', 'properties': dict(
            {'name': 'test_trunk', 'port': {'get_resource': 'parent_port'},
             'sub_ports': sub_ports}, **trunk_props)},
    }
    for net, cidr in (('parent_net', '10.0.0.0/16'),
                      ('net_one', '10.10.0.0/16'),
                      ('net_two', '10.20.0.0/16')):
        resources[net + '_subnet'] = {
            'type': 'OS::Neutron::Subnet', 'properties': {
                'network': {'get_resource': net}, 'cidr': cidr}}
    for port, net in (('sub_port_one', 'net_one'),
                      ('sub_port_two', 'net_two')):
        resources[port] = {'type': 'OS::Neutron::Port', 'properties': {
            'network': {'get_resource': net}}}
    return {'heat_template_version': 'pike', 'resources': resources,
            'outputs': {
                'parent': {'value': {'get_attr': ['trunk', 'port_id']}},
                'trunk': {'value': {'get_attr': ['trunk', 'show']}}}}


def _sub(port, seg_id):
    return {'port': {'get_resource': port}, 'segmentation_type': 'vlan',
            'segmentation_id': seg_id}


def _ids(cli, stack):
    return {r['resource_name']: r['physical_resource_id']
            for r in cli.json('stack', 'resource', 'list', stack)}


def _trunk_details(cli, stack):
    """The parent port's trunk_details, as Neutron shows the port (what
    Heat's test reads), with the sub-ports as a set of (port, type,
    id)."""
    parent = cli.json('stack', 'output', 'show', stack, 'parent')[
        'output_value']
    details = cli.json('sim', 'object', 'show', 'port', parent)[
        'trunk_details']
    return details['trunk_id'], {
        (sp['port_id'], sp['segmentation_type'], sp['segmentation_id'])
        for sp in details['sub_ports']}


@pytest.mark.long  # a dozen resources made, updated four times, deleted
def test_trunk_sub_ports_change_in_place(cli, write):
    cli.run('stack', 'create', 'tr', '-t',
            write('t0.json', json.dumps(_template())), '--wait')
    ids = _ids(cli, 'tr')
    one, two = ids['sub_port_one'], ids['sub_port_two']
    trunk_id, subs = _trunk_details(cli, 'tr')
    assert trunk_id == ids['trunk'] and subs == set()
    shown = cli.json('stack', 'output', 'show', 'tr', 'trunk')[
        'output_value']
    assert (shown['name'], shown['port_id'], shown['status']) == (
        'test_trunk', ids['parent_port'], 'DOWN')

    # the first two sub-ports added; then one re-segmented and the other
    # removed, with a new name and a description: the same trunk
    cli.run('stack', 'update', 'tr', '-t', write('t1.json', json.dumps(
        _template([_sub('sub_port_one', 10), _sub('sub_port_two', 20)]))),
        '--wait')
    assert _trunk_details(cli, 'tr') == (trunk_id, {
        (one, 'vlan', 10), (two, 'vlan', 20)})
    cli.run('stack', 'update', 'tr', '-t', write('t2.json', json.dumps(
        _template([_sub('sub_port_one', 99)], name='pineapple',
                  description='This is a test trunk'))), '--wait')
    assert _trunk_details(cli, 'tr') == (trunk_id, {(one, 'vlan', 99)})
    trunk = cli.json('sim', 'object', 'show', 'trunk', trunk_id)
    assert (trunk['name'], trunk['description']) == (
        'pineapple', 'This is a test trunk')

    # a port the trunk uses is not deleted behind its back
    proc = cli.run('sim', 'object', 'delete', 'port', one, check=False)
    assert proc.returncode != 0
    assert 'is currently a subport for trunk %s' % trunk_id in proc.stderr
    proc = cli.run('sim', 'object', 'delete', 'port', ids['parent_port'],
                   check=False)
    assert 'is currently a parent port for trunk %s' % trunk_id in \
        proc.stderr

    # the last sub-port removed
    cli.run('stack', 'update', 'tr', '-t',
            write('t3.json', json.dumps(_template([]))), '--wait')
    assert _trunk_details(cli, 'tr') == (trunk_id, set())
    assert _ids(cli, 'tr')['trunk'] == trunk_id

    cli.run('stack', 'delete', 'tr', '--wait', '-y')
    for kind in ('trunk', 'port'):
        assert cli.json('sim', 'object', 'list', kind) == [], kind


@pytest.mark.long  # two stack updates
def test_trunk_parent_port_is_immutable(cli, write):
    """Heat's port is immutable: a new parent port fails the update with
    Heat's NotSupported, and the trunk stays as it was."""
    cli.run('stack', 'create', 'tr', '-t', write('t0.json', json.dumps(
        _template([_sub('sub_port_one', 10)]))), '--wait')
    before = _ids(cli, 'tr')
    doc = _template([_sub('sub_port_one', 10)])
    doc['resources']['trunk']['properties']['port'] = {
        'get_resource': 'sub_port_two'}
    proc = cli.run('stack', 'update', 'tr', '-t',
                   write('t1.json', json.dumps(doc)), '--wait', check=False)
    assert proc.returncode != 0
    stack = cli.json('stack', 'show', 'tr')
    assert stack['stack_status'] == 'UPDATE_FAILED'
    assert 'Update to properties port of trunk (OS::Neutron::Trunk) is ' \
        'not supported.' in stack['stack_status_reason']
    assert _ids(cli, 'tr')['trunk'] == before['trunk']
    assert _trunk_details(cli, 'tr') == (before['trunk'], {
        (before['sub_port_one'], 'vlan', 10)})


def test_trunk_schema_and_bad_sub_ports(cli, write):
    shown = cli.json('orchestration', 'resource', 'type', 'show',
                     'OS::Neutron::Trunk')
    assert shown['properties']['port']['immutable'] is True
    assert shown['properties']['sub_ports']['update_allowed'] is True
    assert set(shown['attributes']) == {'port_id', 'show'}
    for bad, said in (
            ({'segmentation_type': 'vxlan'}, 'vxlan'),
            ({'segmentation_id': 4095}, '4095')):
        sub = dict({'port': 'p1', 'segmentation_type': 'vlan',
                    'segmentation_id': 10}, **bad)
        path = write('bad.json', json.dumps({
            'heat_template_version': '2018-08-31',
            'resources': {'trunk': {'type': 'OS::Neutron::Trunk',
                                    'properties': {'port': 'p0',
                                                   'sub_ports': [sub]}}}}))
        proc = cli.run('template', 'validate', '-t', path, check=False)
        assert proc.returncode != 0
        assert said in proc.stderr and 'trunk' in proc.stderr


@pytest.fixture
def neutron():
    """Neutron with the trunk extension: one trunk's worth of state, its
    sub-port calls recorded with their bodies."""
    state = {'trunk': None, 'bodies': []}

    def routes(method, path, query, kw):
        body = kw.get('json')
        trunk = state['trunk']
        if path == '/trunks' and method == 'POST':
            state['trunk'] = dict(body['trunk'], id='t1', status='DOWN')
            return Resp(201, {'trunk': state['trunk']})
        if path == '/trunks/t1' and method == 'GET':
            return Resp(200, {'trunk': trunk})
        if path == '/trunks/t1' and method == 'PUT':
            trunk.update(body['trunk'])
            return Resp(200, {'trunk': trunk})
        if path.startswith('/trunks/t1/'):
            state['bodies'].append((path.rsplit('/', 1)[1], body))
            given = body['sub_ports']
            if path.endswith('/remove_subports'):
                gone = {sp['port_id'] for sp in given}
                trunk['sub_ports'] = [sp for sp in trunk['sub_ports']
                                      if sp['port_id'] not in gone]
            else:
                trunk['sub_ports'] = trunk['sub_ports'] + given
            return Resp(200, trunk)
        return Resp(404, {'NeutronError': {'message': 'not found'}})
    service = Service(routes)
    service.state = state
    return service


def test_openstack_driver_removes_then_adds_sub_ports(neutron):
    cloud = openstack.OpenStackCloud(Conn(network=neutron), 'c')
    made = cloud.create('trunk', {
        'name': 'tr', 'port_id': 'p0', 'sub_ports': [
            {'port_id': 'p1', 'segmentation_type': 'vlan',
             'segmentation_id': 10},
            {'port_id': 'p2', 'segmentation_type': 'vlan',
             'segmentation_id': 20}]}, key='k', fresh=True)
    assert made['id'] == 't1'
    # p1 re-segmented, p2 kept, p3 new, the name changed: the name by
    # PUT, then p1 removed, then p1 and p3 added (Heat's order)
    after = cloud.update('trunk', 't1', {'name': 'tr2', 'sub_ports': [
        {'port_id': 'p1', 'segmentation_type': 'vlan',
         'segmentation_id': 99},
        {'port_id': 'p2', 'segmentation_type': 'vlan',
         'segmentation_id': 20},
        {'port_id': 'p3', 'segmentation_type': 'vlan',
         'segmentation_id': 30}]})
    assert neutron.state['bodies'] == [
        ('remove_subports', {'sub_ports': [{'port_id': 'p1'}]}),
        ('add_subports', {'sub_ports': [
            {'port_id': 'p1', 'segmentation_type': 'vlan',
             'segmentation_id': 99},
            {'port_id': 'p3', 'segmentation_type': 'vlan',
             'segmentation_id': 30}]})]
    assert after['name'] == 'tr2'
    assert {(sp['port_id'], sp['segmentation_id'])
            for sp in after['sub_ports']} == {('p1', 99), ('p2', 20),
                                              ('p3', 30)}
    # the list as it is: no sub-port call at all
    calls = len(neutron.calls)
    cloud.update('trunk', 't1', {'sub_ports': after['sub_ports']})
    assert [c for c in neutron.calls[calls:] if c[0] == 'PUT'] == []


def test_a_cloud_without_the_trunk_extension_refuses_the_type(tmp_path):
    """Heat's ResourceTypeUnavailable at validate, naming the extension;
    the sim (every extension) takes it."""
    from converge import template
    from converge.engine import stacks

    class Catalog(Conn):
        def endpoint_for(self, service_type):
            return 'https://neutron.example.com'

    cloud = openstack.OpenStackCloud(Catalog(), 'c')
    path = tmp_path / 't.json'
    path.write_text(json.dumps({
        'heat_template_version': '2018-08-31',
        'resources': {'it': {'type': 'OS::Neutron::Trunk',
                             'properties': {'port': 'p0'}}}}))
    bundle = template.load_bundle(str(path))
    with pytest.raises(exception.InvalidTemplate) as e:
        stacks.validate(bundle, {}, cloud=cloud)
    assert 'ResourceTypeUnavailable: HEAT-E99001 Service neutron is not ' \
        'available for resource type OS::Neutron::Trunk, reason: Required ' \
        'extension trunk in network service is not available.' in \
        str(e.value)
    assert e.value.path[-1] == 'type'
