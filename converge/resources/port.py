"""OS::Neutron::Port, as Heat's (heat/engine/resources/openstack/neutron/
port.py), made through ``clients.cloud``.

A port without ``security_groups`` gets the project's default group (as
Neutron gives it); one whose ``security_groups`` are taken out of the
template goes back to the default group, as Heat does. ``fixed_ips`` left
empty (or taken out) lets Neutron choose the addresses and keeps those it
chose. A change of ``network`` or ``mac_address`` replaces the port, as
does any change with ``replacement_policy: REPLACE_ALWAYS``.
"""

from converge import exception
from converge.resources import cloud_object as co
from converge.resources import neutron
from converge.resources import properties as p

#: how old a port's network and subnets, as its attributes show them, may
#: be (seconds): the ports made together share one look at each
LOOK_UP_AGE = 5.0

VNIC_TYPES = ('normal', 'direct', 'macvtap', 'direct-physical', 'baremetal',
              'virtio-forwarder', 'smart-nic')


class Port(neutron.NeutronObject):
    """OS::Neutron::Port: a port on a network."""

    kind = 'port'
    title = 'Port'
    update_fields = ('name', 'device_id', 'device_owner', 'fixed_ips',
                     'security_groups', 'dns_name', 'tags', 'admin_state_up',
                     'allowed_address_pairs', 'binding:vnic_type',
                     'port_security_enabled', 'qos_policy_id',
                     'propagate_uplink_status')
    # not device_id / device_owner: Nova sets them when a server takes the
    # port; nor fixed_ips: Neutron fills in the addresses it chose
    drift_fields = ('name', 'admin_state_up', 'security_groups',
                    'port_security_enabled', 'qos_policy_id', 'tags',
                    'allowed_address_pairs')
    unordered_fields = ('tags', 'security_groups', 'allowed_address_pairs')
    cleared = {'device_id': '', 'device_owner': '', 'fixed_ips': co.KEEP,
               'dns_name': '', 'tags': [], 'allowed_address_pairs': [],
               'qos_policy_id': None, 'binding:vnic_type': 'normal'}

    @classmethod
    def implied_requires(cls, props, others):
        # Neutron gives a port an address from any subnet of its network:
        # the template's subnets of that network first (Heat's port)
        network = props.get('network') or props.get('network_id')
        return neutron.subnets_on([network], others, unknown_counts=False)

    properties_schema = {
        'name': p.Schema(p.STRING, 'A symbolic name for this port.',
                         update_allowed=True),
        'network_id': p.Schema(
            p.STRING, 'ID of the network (deprecated: use network).',
            constraint='neutron.network'),
        'network': p.Schema(
            p.STRING, 'Network this port belongs to. If you plan to use '
            'current port to assign Floating IP, you should specify '
            'fixed_ips with subnet. Note if this changes to a different '
            'network update, the port will be replaced.',
            constraint='neutron.network'),
        'device_id': p.Schema(p.STRING, 'Device ID of this port.',
                              default='', update_allowed=True),
        'device_owner': p.Schema(
            p.STRING, 'Name of the network owning the port. The value is '
            'typically network:floatingip or network:router_interface or '
            'network:dhcp.', default='', update_allowed=True),
        'fixed_ips': p.Schema(
            p.LIST, 'Desired IPs for this port.', update_allowed=True,
            schema={
                'subnet_id': p.Schema(
                    p.STRING, 'Subnet (deprecated: use subnet).',
                    constraint='neutron.subnet'),
                'subnet': p.Schema(
                    p.STRING, 'Subnet in which to allocate the IP address '
                    'for this port.', constraint='neutron.subnet'),
                'ip_address': p.Schema(
                    p.STRING, 'IP address desired in the subnet for this '
                    'port.', constraint='ip_addr'),
            }),
        'security_groups': p.Schema(
            p.LIST, 'Security group IDs to associate with this port.',
            update_allowed=True,
            schema=p.Schema(p.STRING, constraint='neutron.security_group')),
        'replacement_policy': p.Schema(
            p.STRING, 'Policy on how to respond to a stack-update for this '
            'resource. REPLACE_ALWAYS will replace the port regardless of '
            'any property changes. AUTO will update the existing port for '
            'any changed update-allowed property (deprecated).',
            default='AUTO', allowed_values=('REPLACE_ALWAYS', 'AUTO'),
            update_allowed=True),
        'dns_name': p.Schema(
            p.STRING, 'DNS name associated with the port.',
            update_allowed=True),
        'tags': neutron.tags_schema('port'),
        'value_specs': neutron.VALUE_SPECS,
        'admin_state_up': p.Schema(
            p.BOOLEAN, 'The administrative state of this port.',
            default=True, update_allowed=True),
        'mac_address': p.Schema(
            p.STRING, 'MAC address to give to this port. The default update '
            'policy of this property in neutron is that allow admin role '
            'only.', constraint='mac_addr'),
        'allowed_address_pairs': p.Schema(
            p.LIST, 'Additional MAC/IP address pairs allowed to pass '
            'through the port.', update_allowed=True, schema={
                'mac_address': p.Schema(
                    p.STRING, 'MAC address to allow through this port.',
                    constraint='mac_addr'),
                'ip_address': p.Schema(
                    p.STRING, 'IP address to allow through this port.',
                    required=True, constraint='ip_or_cidr'),
            }),
        'binding:vnic_type': p.Schema(
            p.STRING, 'The vnic type to be bound on the neutron port. To '
            'support SR-IOV PCI passthrough networking, you can request '
            'that the neutron port to be realized as normal (virtual nic), '
            'direct (pci passthrough), or macvtap (virtual interface with a '
            'tap-like software interface). Note that this only works for '
            'Neutron deployments that support the bindings extension.',
            default='normal', allowed_values=VNIC_TYPES,
            update_allowed=True),
        'port_security_enabled': p.Schema(
            p.BOOLEAN, 'Flag to enable/disable port security on the port. '
            'When disable this feature(set it to False), there will be no '
            'packages filtering, like security-group and address-pairs.',
            update_allowed=True),
        'qos_policy': p.Schema(
            p.STRING, 'The name or ID of QoS policy to attach to this port.',
            update_allowed=True, constraint='neutron.qos_policy'),
        'propagate_uplink_status': p.Schema(
            p.BOOLEAN, 'Flag to enable/disable propagate uplink status on '
            'the port.', update_allowed=True),
        'no_fixed_ips': p.Schema(
            p.BOOLEAN, 'Flag to disable all fixed ips on the port.',
            default=False, update_allowed=True),
    }

    attributes_schema = {
        'admin_state_up': 'The administrative state of this port.',
        'device_id': 'Unique identifier for the device.',
        'device_owner': 'Name of the network owning the port.',
        'fixed_ips': 'Fixed IP addresses.',
        'mac_address': 'MAC address of the port.',
        'name': 'Friendly name of the port.',
        'network_id': 'Unique identifier for the network owning the port.',
        'security_groups': 'A list of security groups for the port.',
        'status': 'The status of the port.',
        'tenant_id': 'Tenant owning the port.',
        'allowed_address_pairs': 'Additional MAC/IP address pairs allowed '
                                 'to pass through a port.',
        'subnets': 'A list of all subnet attributes for the port.',
        'port_security_enabled': 'Port security enabled of the port.',
        'qos_policy_id': 'The QoS policy ID attached to this port.',
        'dns_assignment': 'The DNS assigned to this port.',
        'network': 'The attributes of the network owning the port.',
        'propagate_uplink_status': 'Enable/Disable propagate uplink status '
                                   'for the port.',
    }

    @classmethod
    def validate_neutron(cls, values, path):
        path = list(path)
        net, net_id = values.get('network'), values.get('network_id')
        if net is not None and net_id is not None:
            raise co.conflict(path + ['network'], 'network', 'network_id')
        if net is None and net_id is None:
            raise exception.InvalidTemplate('Property network not assigned',
                                            path=path + ['network'])
        fixed = values.get('fixed_ips')
        if fixed and values.get('no_fixed_ips'):
            raise co.conflict(path + ['no_fixed_ips'], 'fixed_ips',
                              'no_fixed_ips')
        for i, ip in enumerate(fixed if isinstance(fixed, list) else []):
            if isinstance(ip, dict) and ip.get('subnet') is not None and \
                    ip.get('subnet_id') is not None:
                raise co.conflict(path + ['fixed_ips', i], 'subnet',
                                  'subnet_id')
        return values

    def needs_replace(self, prior):
        if self.properties.get('replacement_policy') == 'REPLACE_ALWAYS':
            return True
        return super().needs_replace(prior)

    # -- replacement: the new port may want the old one's addresses --------
    #: data key: the fixed IPs this port gave up for its replacement
    RELEASED = 'released_fixed_ips'

    def prepare_for_replace(self):
        """Give up the fixed IPs before the replacement is made (it may ask
        for the same address: Heat's rule), remembering them: a rollback
        that keeps this port gives them back (restore_after_replace)."""
        obj = self._current()
        if obj is None or not obj.get('fixed_ips'):
            return False
        self.data.setdefault(self.RELEASED, [
            {k: ip[k] for k in ('subnet_id', 'ip_address') if ip.get(k)}
            for ip in obj['fixed_ips']])
        self.cloud.update(self.kind, self.physical_id, {'fixed_ips': []})
        return True

    def restore_after_replace(self):
        """The replacement is gone and this port stays (a rollback kept
        it): its fixed IPs back."""
        released = self.data.pop(self.RELEASED, None)
        if not released or not self.physical_id:
            return released is not None
        obj = self._current()
        if obj is not None and not obj.get('fixed_ips'):
            self.cloud.update(self.kind, self.physical_id,
                              {'fixed_ips': released})
        return True

    def make_body(self):
        props = self.properties
        network = props.get('network') or props.get('network_id')
        body = {'network_id': self.resolve('network', network, 'network'),
                'name': self.physical_name(),
                'admin_state_up': props.get('admin_state_up', True)}
        for key in ('device_id', 'device_owner'):
            if props.get(key):
                body[key] = props[key]
        if props.get('no_fixed_ips'):
            body['fixed_ips'] = []
        elif props.get('fixed_ips'):
            body['fixed_ips'] = [self._fixed_ip(ip, i) for i, ip in
                                 enumerate(props['fixed_ips'])]
        if props.get('security_groups') is not None:
            body['security_groups'] = self._groups(props['security_groups'])
        if props.get('allowed_address_pairs'):
            body['allowed_address_pairs'] = [
                {k: v for k, v in pair.items() if v is not None}
                for pair in props['allowed_address_pairs']]
        if props.get('qos_policy'):
            body['qos_policy_id'] = self.resolve(
                'qos_policy', props['qos_policy'], 'qos_policy')
        return self.extras(body, ('mac_address', 'mac_address'),
                           ('binding:vnic_type', 'binding:vnic_type'),
                           ('port_security_enabled',
                            'port_security_enabled'),
                           ('propagate_uplink_status',
                            'propagate_uplink_status'),
                           ('dns_name', 'dns_name'))

    def _fixed_ip(self, ip, i):
        out = {}
        subnet = ip.get('subnet') or ip.get('subnet_id')
        if subnet:
            out['subnet_id'] = self.resolve('subnet', subnet,
                                            'fixed_ips.%d.subnet' % i)
        if ip.get('ip_address'):
            out['ip_address'] = ip['ip_address']
        return out

    def _groups(self, groups):
        return [self.resolve('security_group', g, 'security_groups')
                for g in groups]

    def cleared_value(self, field):
        if field == 'security_groups':
            # Heat: a port whose groups are taken out gets the default
            return self._groups(['default'])
        return super().cleared_value(field)

    def attributes(self, obj):
        out = super().attributes(obj)
        out['tenant_id'] = self.tenant(obj)
        out['subnets'] = self._look_up(
            'subnet', [ip.get('subnet_id') for ip in obj.get('fixed_ips')
                       or [] if ip.get('subnet_id')])
        network = self._look_up('network', [obj.get('network_id')])
        out['network'] = network[0] if network else None
        return out

    def _look_up(self, kind, ids):
        """The objects of `ids` (Heat shows them whole); None when the
        cloud could not say."""
        try:
            return [o for o in (self.cloud.recent(kind, i, LOOK_UP_AGE)
                                for i in ids if i) if o is not None]
        except exception.CloudError:
            return None
