"""AWS::EC2::EIP and AWS::EC2::EIPAssociation, as Heat runs them
(heat/engine/resources/aws/ec2/eip.py): a Neutron floating IP on the
cloud's external network, and its association with an instance's first
interface (or a port), made by the OS::Neutron floating IP plug-ins
(floating_ip.py) through ``clients.cloud``.

An EIP's Ref is its address, its AllocationId the floating IP's id. An
association names the address (EIP, with InstanceId) or the floating
IP's id (AllocationId, with InstanceId or NetworkInterfaceId); an
instance's interface is its first port, as Nova lists them (a server
with none cannot be given an address: Heat's InterfaceNotFound).
"""

from converge import exception
from converge.resources import floating_ip
from converge.resources import none
from converge.resources import properties as p


def _first_port(resource, server, prop):
    """The id of the first port of the server `server` (property
    `prop`), as Heat's nova plug-in takes the first of its interfaces."""
    try:
        ports = resource.clients.compute.interfaces(server)
    except exception.CloudTransient:
        raise
    except exception.CloudError as exc:
        raise exception.ResourceFailure('%s: property %s: %s' % (
            resource.name, prop, exc))
    if not ports:
        raise exception.ResourceFailure(
            '%s: property %s: No network interface found for server %s'
            % (resource.name, prop, server))
    return ports[0]['id']


class ElasticIp(floating_ip.FloatingIP):
    """A floating IP on the one external network, given to InstanceId's
    first interface when that is set."""

    title = 'Elastic IP'
    update_fields = ('port_id',)
    # the association is InstanceId's, or an EIPAssociation's: neither
    # is put back by an update of this resource
    drift_fields = ()
    cleared = {'port_id': None}

    properties_schema = {
        'Domain': p.Schema(p.STRING, 'Set to "vpc" to have IP address '
                           'allocation associated to your VPC (deprecated: '
                           'every address is).', allowed_values=('vpc',)),
        'InstanceId': p.Schema(p.STRING, 'Instance ID to associate with '
                               'EIP.', update_allowed=True,
                               constraint='nova.server'),
    }
    attributes_schema = {
        'AllocationId': 'ID that AWS assigns to represent the allocation '
                        'of the address for use with Amazon VPC. Returned '
                        'only for VPC elastic IP addresses.',
    }

    @classmethod
    def validate_neutron(cls, values, path):
        return values

    def _external_network(self):
        nets = self.cloud.list('network', **{'router:external': True})
        if len(nets) != 1:
            raise exception.ResourceFailure(
                '%s: Expected 1 external network, found %d' % (
                    self.name, len(nets)))
        return nets[0]['id']

    def make_body(self):
        network = self.data.get('network') or self._external_network()
        # kept: the external network is looked up once
        self.data['network'] = network
        body = {'floating_network_id': network}
        server = self.properties.get('InstanceId')
        if server:
            body['port_id'] = _first_port(self, server, 'InstanceId')
        return body

    def changes(self, prior, obj, body):
        out = super().changes(prior, obj, body)
        if out and not out.get('port_id'):
            # Heat dissociates: neither port nor its address
            out = {'port_id': None, 'fixed_ip_address': None}
        return out

    def after_create_call(self, obj):
        self.data['address'] = obj.get('floating_ip_address')

    def reference_id(self):
        # Heat's Ref of an EIP is its address
        return self.data.get('address') or self.name

    def attributes(self, obj):
        if obj.get('floating_ip_address'):
            self.data['address'] = obj['floating_ip_address']
        return {'AllocationId': self.physical_id}


class ElasticIpAssociation(floating_ip.FloatingIPAssociation):
    """An EIP (by address or AllocationId) given to an instance's first
    interface or to a port."""

    properties_schema = {
        'InstanceId': p.Schema(p.STRING, 'Instance ID to associate with EIP '
                               'specified by EIP property.',
                               update_allowed=True,
                               constraint='nova.server'),
        # no ip_addr check at validate: its Ref is the EIP's name until
        # the address is allocated (Heat checks it when it is resolved)
        'EIP': p.Schema(p.STRING, 'EIP address to associate with instance.',
                        update_allowed=True),
        'AllocationId': p.Schema(p.STRING, 'Allocation ID for VPC EIP '
                                 'address.', update_allowed=True),
        'NetworkInterfaceId': p.Schema(p.STRING, 'Network interface ID to '
                                       'associate with EIP.',
                                       update_allowed=True),
    }
    attributes_schema = {}

    @classmethod
    def validate_more(cls, values, path):
        values = super().validate_more(values, path)
        path = list(path)

        def given(name):
            return values.get(name) not in (None, '')

        if given('EIP') == given('AllocationId'):
            raise exception.InvalidTemplate(
                "Either 'EIP' or 'AllocationId' must be provided.",
                path=path + ['EIP'])
        if given('EIP') and not given('InstanceId'):
            raise exception.InvalidTemplate(
                "Must specify 'InstanceId' if you specify 'EIP'.",
                path=path + ['InstanceId'])
        if not given('InstanceId') and not given('NetworkInterfaceId'):
            raise exception.InvalidTemplate(
                'At least one of the following properties must be '
                'specified: InstanceId, NetworkInterfaceId.',
                path=path + ['InstanceId'])
        return values

    def _floating_ip(self):
        props = self.properties
        if props.get('AllocationId'):
            return props['AllocationId']
        if not props.get('EIP'):
            # (a row recorded before its properties: nothing to find)
            raise exception.ResourceFailure('%s: no EIP or AllocationId'
                                            % self.name)
        found = self.cloud.list('floating_ip',
                                floating_ip_address=props['EIP'])
        if not found:
            raise exception.ResourceFailure(
                '%s: property EIP: No floating IP with address %s' % (
                    self.name, props['EIP']))
        return found[0]['id']

    def _wanted(self):
        props = self.properties
        if props.get('NetworkInterfaceId'):
            try:
                port = self.cloud.resolve('port',
                                          props['NetworkInterfaceId'])
            except exception.CloudTransient:
                raise
            except exception.CloudError as exc:
                raise exception.ResourceFailure(
                    '%s: property NetworkInterfaceId: %s' % (self.name, exc))
        elif props.get('InstanceId'):
            port = _first_port(self, props['InstanceId'], 'InstanceId')
        else:
            raise exception.ResourceFailure(
                '%s: no InstanceId or NetworkInterfaceId' % self.name)
        return {'floatingip_id': self._floating_ip(), 'port_id': port,
                'fixed_ip_address': None}

    def reference_id(self):
        # Heat: the association's physical name
        if not self.physical_id:
            return self.name
        return none.physical_resource_name(self)
