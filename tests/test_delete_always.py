"""A stack can always be deleted: whatever state its resources were left
in by a create that failed, is still under way, or died half-recorded,
deleting the stack ends DELETE_COMPLETE and leaves nothing of it in the
cloud.

One case per registered type that makes cloud objects or deployments
(the list is checked against the entry points, so a new type comes with
its case), on the simulated cloud with its fault injection; then the
SoftwareDeployment whose run failed and the one whose agent never
answers; then every type's delete from what a half-recorded row holds
(no properties).
"""

import time

import pytest

from converge import conf
from converge import userdata
from converge.drivers import cloud as cloud_mod
from converge.engine import service
from converge.engine import request
from converge.resources import base
from converge.resources import cloud_object
from converge.resources import floating_ip
from converge.resources import registry
from converge.resources import server as server_mod
from converge.resources import software_deployment as sd
from tests import enginetools as et
# converge-api on loopback; the test plays the agents (or none answers)
from tests.test_software_deployment import api  # noqa: F401

NET = {'net': {'type': 'OS::Neutron::Net'},
       'subnet': {'type': 'OS::Neutron::Subnet', 'properties': {
           'network': {'get_resource': 'net'}, 'cidr': '10.60.0.0/24'}}}
#: a port on a network routed to the public one (a floating IP's)
ROUTED_PORT = dict(
    NET, router={'type': 'OS::Neutron::Router', 'properties': {
        'external_gateway_info': {'network': 'public'}}},
    interface={'type': 'OS::Neutron::RouterInterface', 'properties': {
        'router': {'get_resource': 'router'},
        'subnet': {'get_resource': 'subnet'}}},
    port={'type': 'OS::Neutron::Port', 'properties': {
        'network': {'get_resource': 'net'},
        'fixed_ips': [{'subnet': {'get_resource': 'subnet'}}]}})
SERVER = {'type': 'OS::Nova::Server',
          'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}}

VPN_BASE = dict(NET, router={'type': 'OS::Neutron::Router'})
VPN_SERVICE = {'type': 'OS::Neutron::VPNService', 'properties': {
    'router': {'get_resource': 'router'},
    'subnet': {'get_resource': 'subnet'}}}
ALARM = {'it': {'type': 'OS::Aodh::Alarm', 'properties': {
    'meter_name': 'cpu_util', 'threshold': 50}}}

#: type -> (the stack's resources, 'it' of that type; the sim op whose
#: injected failure fails it)
CASES = {
    'OS::Nova::Server': ({'it': SERVER}, 'create'),
    'OS::Neutron::Net': ({'it': {'type': 'OS::Neutron::Net'}},
                         'network.create'),
    'OS::Neutron::Subnet': ({'net': NET['net'], 'it': dict(
        NET['subnet'])}, 'subnet.create'),
    'OS::Neutron::Port': (dict(NET, it={
        'type': 'OS::Neutron::Port', 'properties': {
            'network': {'get_resource': 'net'},
            'fixed_ips': [{'subnet': {'get_resource': 'subnet'}}]}}),
        'port.create'),
    'OS::Neutron::Router': ({'it': {'type': 'OS::Neutron::Router'}},
                            'router.create'),
    'OS::Neutron::RouterInterface': (dict(NET, router={
        'type': 'OS::Neutron::Router'}, it={
        'type': 'OS::Neutron::RouterInterface', 'properties': {
            'router': {'get_resource': 'router'},
            'subnet': {'get_resource': 'subnet'}}}),
        'router_interface.create'),
    'OS::Neutron::SecurityGroup': (
        {'it': {'type': 'OS::Neutron::SecurityGroup'}},
        'security_group.create'),
    'OS::Neutron::SecurityGroupRule': (
        {'group': {'type': 'OS::Neutron::SecurityGroup'},
         'it': {'type': 'OS::Neutron::SecurityGroupRule', 'properties': {
             'security_group': {'get_resource': 'group'},
             'protocol': 'icmp'}}}, 'security_group_rule.create'),
    'OS::Neutron::FloatingIP': (
        {'it': {'type': 'OS::Neutron::FloatingIP',
                'properties': {'floating_network': 'public'}}},
        'floating_ip.create'),
    'OS::Neutron::FloatingIPAssociation': (dict(
        ROUTED_PORT,
        fip={'type': 'OS::Neutron::FloatingIP', 'depends_on': 'interface',
             'properties': {'floating_network': 'public'}},
        it={'type': 'OS::Neutron::FloatingIPAssociation', 'properties': {
            'floatingip_id': {'get_resource': 'fip'},
            'port_id': {'get_resource': 'port'}}}), 'floating_ip.update'),
    'OS::Cinder::Volume': ({'it': {'type': 'OS::Cinder::Volume',
                                   'properties': {'size': 1}}},
                           'volume.create'),
    'OS::Cinder::VolumeAttachment': (
        {'server': SERVER,
         'volume': {'type': 'OS::Cinder::Volume', 'properties': {'size': 1}},
         'it': {'type': 'OS::Cinder::VolumeAttachment', 'properties': {
             'instance_uuid': {'get_resource': 'server'},
             'volume_id': {'get_resource': 'volume'}}}},
        'volume_attachment.create'),
    'OS::Glance::WebImage': ({'it': {'type': 'OS::Glance::WebImage',
                                     'properties': {
                                         'location': 'http://example.com/i',
                                         'container_format': 'bare',
                                         'disk_format': 'qcow2'}}},
                             'image.create'),
    'OS::Nova::KeyPair': ({'it': {'type': 'OS::Nova::KeyPair',
                                  'properties': {'name': 'k'}}},
                          'keypair.create'),
    'OS::Nova::ServerGroup': ({'it': {'type': 'OS::Nova::ServerGroup',
                                      'properties': {
                                          'policies': ['anti-affinity']}}},
                              'server_group.create'),
    'OS::Nova::Flavor': ({'it': {'type': 'OS::Nova::Flavor', 'properties': {
        'ram': 512, 'vcpus': 1, 'disk': 1}}}, 'flavor.create'),
    'OS::Nova::HostAggregate': ({'it': {
        'type': 'OS::Nova::HostAggregate', 'properties': {
            'name': 'agg', 'availability_zone': 'nova'}}},
        'host_aggregate.create'),
    'OS::Cinder::VolumeType': ({'it': {
        'type': 'OS::Cinder::VolumeType', 'properties': {'name': 'vt'}}},
        'volume_type.create'),
    'OS::Cinder::EncryptedVolumeType': (
        {'vt': {'type': 'OS::Cinder::VolumeType',
                'properties': {'name': 'vt'}},
         'it': {'type': 'OS::Cinder::EncryptedVolumeType', 'properties': {
             'provider': 'luks', 'volume_type': {'get_resource': 'vt'}}}},
        'volume_encryption_type.create'),
    'OS::Keystone::Domain': ({'it': {
        'type': 'OS::Keystone::Domain', 'properties': {'name': 'dom'}}},
        'domain.create'),
    'OS::Keystone::Project': ({'it': {
        'type': 'OS::Keystone::Project', 'properties': {'name': 'proj'}}},
        'project.create'),
    'OS::Keystone::User': ({'it': {
        'type': 'OS::Keystone::User', 'properties': {'name': 'usr'}}},
        'user.create'),
    # CloudFormation's types, on the same plug-ins
    'AWS::EC2::Instance': ({'it': {'type': 'AWS::EC2::Instance',
                                   'properties': {
                                       'ImageId': 'cirros',
                                       'InstanceType': 'm1.tiny'}}},
                           'create'),
    'AWS::EC2::SecurityGroup': (
        {'it': {'type': 'AWS::EC2::SecurityGroup',
                'properties': {'GroupDescription': 'web'}}},
        'security_group.create'),
    'AWS::EC2::Volume': ({'it': {'type': 'AWS::EC2::Volume', 'properties': {
        'AvailabilityZone': 'nova', 'Size': 1}}}, 'volume.create'),
    'AWS::EC2::VolumeAttachment': (
        {'server': SERVER,
         'volume': {'type': 'OS::Cinder::Volume', 'properties': {'size': 1}},
         'it': {'type': 'AWS::EC2::VolumeAttachment', 'properties': {
             'InstanceId': {'get_resource': 'server'},
             'VolumeId': {'get_resource': 'volume'},
             'Device': '/dev/vdb'}}},
        'volume_attachment.create'),
    'OS::Neutron::RouterGateway': ({'router': {
        'type': 'OS::Neutron::Router'}, 'it': {
        'type': 'OS::Neutron::RouterGateway', 'properties': {
            'router_id': {'get_resource': 'router'}, 'network': 'public'}}},
        'router_gateway.create'),
    'OS::Neutron::VPNService': (dict(VPN_BASE, it=VPN_SERVICE),
                                'vpnservice.create'),
    'OS::Neutron::IKEPolicy': ({'it': {'type': 'OS::Neutron::IKEPolicy'}},
                               'ikepolicy.create'),
    'OS::Neutron::IPsecPolicy': (
        {'it': {'type': 'OS::Neutron::IPsecPolicy'}}, 'ipsecpolicy.create'),
    'OS::Neutron::IPsecSiteConnection': (dict(
        VPN_BASE, vpn=VPN_SERVICE,
        ike={'type': 'OS::Neutron::IKEPolicy'},
        ipsec={'type': 'OS::Neutron::IPsecPolicy'},
        it={'type': 'OS::Neutron::IPsecSiteConnection', 'properties': {
            'peer_address': '172.24.4.233', 'peer_id': '172.24.4.233',
            'peer_cidrs': ['10.2.0.0/24'], 'psk': 'secret',
            'ikepolicy_id': {'get_resource': 'ike'},
            'ipsecpolicy_id': {'get_resource': 'ipsec'},
            'vpnservice_id': {'get_resource': 'vpn'}}}),
        'ipsec_site_connection.create'),
    'OS::Neutron::Trunk': (dict(
        NET, parent={'type': 'OS::Neutron::Port', 'properties': {
            'network': {'get_resource': 'net'}}},
        sub={'type': 'OS::Neutron::Port', 'properties': {
            'network': {'get_resource': 'net'}}},
        it={'type': 'OS::Neutron::Trunk', 'properties': {
            'port': {'get_resource': 'parent'},
            'sub_ports': [{'port': {'get_resource': 'sub'},
                           'segmentation_type': 'vlan',
                           'segmentation_id': 10}]}}),
        'trunk.create'),
    'OS::Swift::Container': ({'it': {'type': 'OS::Swift::Container'}},
                             'container.create'),
    'OS::Aodh::Alarm': (ALARM, 'alarm.create'),
    'OS::Ceilometer::Alarm': ({'it': dict(ALARM['it'],
                                          type='OS::Ceilometer::Alarm')},
                              'alarm.create'),
    'AWS::EC2::EIP': ({'it': {'type': 'AWS::EC2::EIP'}}, 'floating_ip.create'),
    'AWS::EC2::EIPAssociation': (dict(
        ROUTED_PORT,
        fip={'type': 'AWS::EC2::EIP', 'depends_on': 'interface'},
        it={'type': 'AWS::EC2::EIPAssociation', 'properties': {
            'AllocationId': {'get_attr': ['fip', 'AllocationId']},
            'NetworkInterfaceId': {'get_resource': 'port'}}}),
        'floating_ip.update'),
    'AWS::S3::Bucket': ({'it': {'type': 'AWS::S3::Bucket'}},
                        'container.create'),
}

#: the deployment types: their cases are below (an agent's doing)
DEPLOYMENTS = ('OS::Heat::SoftwareDeployment',
               'OS::Heat::StructuredDeployment',
               'OS::Heat::SoftwareDeploymentGroup',
               'OS::Heat::SoftwareDeployments',
               'OS::Heat::StructuredDeploymentGroup',
               'OS::Heat::StructuredDeployments')


def _makes_things(cls):
    return issubclass(cls, (cloud_object.CloudObject, server_mod.Server,
                            sd.SoftwareDeployment)) or \
        issubclass(cls, floating_ip.FloatingIPAssociation)


def test_every_type_that_makes_things_has_its_case():
    making = {name for name in registry.names()
              if _makes_things(registry.get(name))}
    assert making == set(CASES) | set(DEPLOYMENTS)


@pytest.fixture
def sim(engine):
    compute = engine.clients.compute
    yield compute
    compute.clear_faults()


def _inventory(engine):
    """What stacks made in the cloud, every project's (the operator's
    view): the objects that carry a key (not a project's default
    security group, which Neutron makes on its first look)."""
    cloud = engine.clients.cloud.admin()
    held = {kind: sorted(o['view']['id'] for o in cloud.inventory(kind)
                         if o['key'] is not None)
            for kind in cloud_mod.KINDS}
    held['server'] = sorted(s['id'] for s in
                            engine.clients.compute.admin().list_servers())
    return held


def _create(engine, tmp_path, name, doc):
    """(service, request, the create's start) of a stack of the default
    project."""
    svc, ctx = service.Service(engine), request.make()
    return svc, ctx, svc.stack_create(ctx, name, et.bundle(tmp_path, doc),
                                      {})


def _delete(engine, svc, ctx, name):
    started = svc.stack_delete(ctx, name)
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    return et.status(stack), stack.status_reason


@pytest.mark.parametrize('rtype', sorted(CASES))
def test_a_stack_whose_resource_failed_to_create_is_deleted(
        engine, sim, tmp_path, rtype):
    resources, op = CASES[rtype]
    before = _inventory(engine)
    sim.set_fault(op, fail_count=1, code=400, message='injected: no')
    svc, ctx, started = _create(engine, tmp_path, 'failing',
                                et.hot(resources))
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    assert et.status(stack) == 'CREATE_FAILED'
    rows = {r['resource_name']: r for r in svc.resource_list(ctx, 'failing')}
    assert rows['it']['resource_status'] == 'CREATE_FAILED', rows['it']
    assert 'injected: no' in rows['it']['resource_status_reason']
    assert _delete(engine, svc, ctx, 'failing')[0] == 'DELETE_COMPLETE'
    assert svc.stack_list(ctx) == []
    assert _inventory(engine) == before


#: the types whose create leaves something being made for a while
SETTLING = {'OS::Nova::Server': 'create', 'OS::Cinder::Volume':
            'volume.create', 'OS::Glance::WebImage': 'image.create'}


@pytest.mark.parametrize('rtype', sorted(SETTLING))
def test_a_stack_whose_resource_is_being_made_is_deleted(
        engine, sim, tmp_path, rtype):
    before = _inventory(engine)
    # it stays BUILD / creating / importing for a while
    sim.set_fault(SETTLING[rtype], latency=8)
    svc, ctx, _ = _create(engine, tmp_path, 'making',
                          et.hot(CASES[rtype][0]))
    _until(lambda: svc.resource_list(ctx, 'making')[0][
        'physical_resource_id'])
    [row] = svc.resource_list(ctx, 'making')
    assert row['resource_status'] == 'CREATE_IN_PROGRESS'
    sim.clear_faults()
    assert _delete(engine, svc, ctx, 'making') == (
        'DELETE_COMPLETE', 'Stack DELETE completed successfully')
    assert _inventory(engine) == before


def _until(test, timeout=60):
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, 'not reached in %ss' % timeout
        time.sleep(0.05)   # polling the engine's state, not synchronising


# -- deployments: the agent's doing --------------------------------------------

def _deployment_stack(rtype):
    group = 'Group' in rtype or rtype.endswith('Deployments')
    props = {'config': {'get_resource': 'config'}}
    if group:
        props['servers'] = {'one': {'get_resource': 'server'}}
    else:
        props['server'] = {'get_resource': 'server'}
    config_type = 'OS::Heat::StructuredConfig' if 'Structured' in rtype \
        else 'OS::Heat::SoftwareConfig'
    config = {'group': 'script', 'config': 'exit 1'} \
        if config_type == 'OS::Heat::SoftwareConfig' \
        else {'group': 'script', 'config': {'a': 1}}
    return et.hot({
        'config': {'type': config_type, 'properties': config},
        'server': {'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.tiny',
            'user_data_format': 'SOFTWARE_CONFIG'}},
        'it': {'type': rtype, 'properties': props}})


def _running(engine):
    """The deployment the server's agent is asked to run, once it is."""
    from converge.engine import software
    found = []

    def asked():
        servers = engine.clients.compute.list_servers()
        if not servers:
            return False
        creds = userdata.decode(servers[0]['user_data'])
        _, docs = software.deployments(engine, creds['agent_id'],
                                    creds['token'])
        found[:] = [(d, creds) for d in docs
                    if d['status'] == 'IN_PROGRESS']
        return found
    _until(asked)
    return found[0]


@pytest.mark.parametrize('rtype', DEPLOYMENTS)
def test_a_stack_whose_deployment_failed_is_deleted(engine, api, tmp_path,
                                                    rtype):
    from converge.engine import software
    svc, ctx, started = _create(engine, tmp_path, 'dep',
                                _deployment_stack(rtype))
    doc, creds = _running(engine)
    software.signal(engine, doc['id'], creds['agent_id'], creds['token'],
                    doc['run'], {'deploy_status_code': 1,
                                 'deploy_stderr': 'it broke'})
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    assert et.status(stack) == 'CREATE_FAILED'
    assert _delete(engine, svc, ctx, 'dep') == ('DELETE_COMPLETE',
                                                 'Stack DELETE completed '
                                                 'successfully')
    assert engine.clients.deployments.get(doc['id']) is None
    assert engine.clients.compute.list_servers() == []


@pytest.mark.parametrize('rtype', DEPLOYMENTS)
def test_a_stack_whose_deployment_no_agent_answers_is_deleted(
        engine, api, tmp_path, rtype):
    svc, ctx, _ = _create(engine, tmp_path, 'dep', _deployment_stack(rtype))
    doc, _ = _running(engine)   # and no agent will ever answer it
    it = [r for r in svc.resource_list(ctx, 'dep')
          if r['resource_name'] == 'it']
    assert it[0]['resource_status'] == 'CREATE_IN_PROGRESS'
    assert _delete(engine, svc, ctx, 'dep')[0] == 'DELETE_COMPLETE'
    assert engine.clients.deployments.get(doc['id']) is None
    assert engine.clients.compute.list_servers() == []


# -- half-recorded rows: a plug-in's delete from its id and key alone ----------

@pytest.mark.parametrize('rtype', sorted(CASES) + list(DEPLOYMENTS))
@pytest.mark.parametrize('physical', [None, 'gone-0000'])
def test_a_delete_needs_no_properties(engine, rtype, physical):
    """What a row left by a unit that died before recording holds: its
    key (uuid), maybe a physical id, no properties, no data. Its delete
    finds the thing by its key or takes it as gone; it never fails."""
    cls = registry.get(rtype)
    stack = base.StackInfo('s-id', 's', project_id=conf.CONF.project_id)
    plugin = cls('it', {}, stack=stack, uuid='0f4e2a70-half-recorded',
                 physical_id=physical,
                 clients=engine.clients.for_stack(None,
                                                  conf.CONF.project_id))
    for _ in range(3):
        if plugin.delete() is None:
            break
    else:
        raise AssertionError('%s kept waiting' % rtype)


def test_the_cli_deletes_a_stack_whose_deployment_no_agent_answers(
        cli, write):
    """As an operator meets it: the create waits for an agent that never
    answers (no agent boots); given up on (killed), the stack is deleted
    all the same."""
    import signal
    import json as json_mod
    conf_file = write('c.conf', '[sim]\nboot_agents = false\n')
    tmpl = write('dep.json', json_mod.dumps(
        _deployment_stack('OS::Heat::SoftwareDeployment')))
    proc = cli.popen('--config-file', conf_file, 'stack', 'create', 'dep',
                     '-t', tmpl, '--wait')
    def waiting():
        shown = cli.run('--config-file', conf_file, 'stack', 'resource',
                        'show', 'dep', 'it', '-f', 'json', check=False)
        return shown.returncode == 0 and json_mod.loads(shown.stdout)[
            'resource_status'] == 'CREATE_IN_PROGRESS'
    try:
        _until(waiting, timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = cli.run('--config-file', conf_file, 'stack', 'delete', 'dep',
                   '--yes', '--wait', check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'DELETE_FAILED' not in done.stdout
    assert cli.json('stack', 'list') == []
    assert cli.json('sim', 'server', 'list') == []
