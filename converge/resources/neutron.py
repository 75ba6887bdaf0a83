"""OS::Neutron::Net and OS::Neutron::Subnet, and what Neutron types share.

Properties, defaults and what changes in place are Heat's
(heat/engine/resources/openstack/neutron/net.py, subnet.py); the objects
are made through ``clients.cloud`` (drivers/cloud.py), marked with the
resource's key as a Neutron tag by the driver.
"""

import ipaddress

from converge import exception
from converge.resources import cloud_object as co
from converge.resources import constraints
from converge.resources import properties as p


def tags_schema(what):
    return p.Schema(p.LIST, 'The tags to be added to the %s.' % what,
                    schema=p.Schema(p.STRING), update_allowed=True)


VALUE_SPECS = p.Schema(
    p.MAP, 'Extra parameters to include in the request. Parameters are '
    'often specific to installed hardware or extensions.',
    default={}, update_allowed=True)


class NeutronObject(co.CloudObject):
    """What every Neutron type here does alike: value_specs sent as extra
    fields (and checked as Heat does), tags, Heat's own checks that need
    no cloud."""

    @classmethod
    def validate_more(cls, values, path):
        co.check_value_specs(cls, values, path)
        constraints.check_local(cls, values, path)
        return cls.validate_neutron(values, path)

    @classmethod
    def validate_neutron(cls, values, path):
        return values

    def extras(self, body, *pairs):
        """Copy the properties of `pairs` (property, field) that are set
        into `body`; then value_specs and tags. Returns `body`."""
        props = self.properties
        for prop, field in pairs:
            if props.get(prop) is not None:
                body[field] = props[prop]
        if props.get('tags'):
            body['tags'] = list(props['tags'])
        return co.merge_value_specs(body, props.get('value_specs'))

    def tenant(self, obj):
        return obj.get('tenant_id') or obj.get('project_id')


class Net(NeutronObject):
    """OS::Neutron::Net: a Neutron network."""

    kind = 'network'
    title = 'Network'
    update_fields = ('name', 'admin_state_up', 'shared',
                     'port_security_enabled', 'qos_policy_id', 'dns_domain',
                     'tags')
    drift_fields = ('name', 'admin_state_up', 'shared',
                    'port_security_enabled', 'qos_policy_id', 'dns_domain',
                    'tags')
    cleared = {'qos_policy_id': None, 'dns_domain': '', 'tags': []}

    properties_schema = {
        'name': p.Schema(
            p.STRING, 'A string specifying a symbolic name for the network, '
            'which is not required to be unique.', update_allowed=True),
        'value_specs': VALUE_SPECS,
        'admin_state_up': p.Schema(
            p.BOOLEAN, 'A boolean value specifying the administrative '
            'status of the network.', default=True, update_allowed=True),
        'tenant_id': p.Schema(
            p.STRING, 'The ID of the tenant which will own the network. '
            'Only administrative users can set the tenant identifier; this '
            'cannot be changed using authorization policies.'),
        'shared': p.Schema(
            p.BOOLEAN, 'Whether this network should be shared across all '
            'tenants. Note that the default policy setting restricts usage '
            'of this attribute to administrative users only.',
            default=False, update_allowed=True),
        'dhcp_agent_ids': p.Schema(
            p.LIST, 'The IDs of the DHCP agent to schedule the network '
            '(not supported by converge).', update_allowed=True),
        'port_security_enabled': p.Schema(
            p.BOOLEAN, 'Flag to enable/disable port security on the '
            'network. It provides the default value for the attribute of '
            'the ports created on this network.', update_allowed=True),
        'qos_policy': p.Schema(
            p.STRING, 'The name or ID of QoS policy to attach to this '
            'network.', update_allowed=True,
            constraint='neutron.qos_policy'),
        'dns_domain': p.Schema(
            p.STRING, 'DNS domain associated with this network.',
            update_allowed=True),
        'availability_zone_hints': p.Schema(
            p.LIST, 'Availability zone candidates for the network. It '
            'requires the availability_zone extension to be available.'),
        'tags': tags_schema('network'),
    }

    attributes_schema = {
        'status': 'The status of the network.',
        'name': 'The name of the network.',
        'subnets': 'Subnets of this network.',
        'admin_state_up': 'The administrative status of the network.',
        'tenant_id': 'The tenant owning this network.',
        'port_security_enabled': 'Port security enabled of the network.',
        'mtu': 'The maximum transmission unit size(in bytes) for the '
               'network.',
        'qos_policy_id': 'The QoS policy ID attached to this network.',
        'l2_adjacency': 'A boolean value for L2 adjacency, True means that '
                        'you can expect L2 connectivity throughout the '
                        'Network.',
        'segments': 'The segments of this network.',
    }

    @classmethod
    def validate_neutron(cls, values, path):
        if values.get('dhcp_agent_ids'):
            # the DHCP agent scheduler is an admin API the cloud interface
            # does not carry
            raise exception.InvalidTemplate(
                'dhcp_agent_ids is not supported by converge',
                path=list(path) + ['dhcp_agent_ids'])
        return values

    def make_body(self):
        props = self.properties
        body = {'name': self.physical_name(),
                'admin_state_up': props.get('admin_state_up', True),
                'shared': props.get('shared', False)}
        if props.get('qos_policy'):
            body['qos_policy_id'] = self.resolve(
                'qos_policy', props['qos_policy'], 'qos_policy')
        return self.extras(body, ('tenant_id', 'tenant_id'),
                           ('port_security_enabled',
                            'port_security_enabled'),
                           ('dns_domain', 'dns_domain'),
                           ('availability_zone_hints',
                            'availability_zone_hints'))

    def attributes(self, obj):
        out = super().attributes(obj)
        out['tenant_id'] = self.tenant(obj)
        out['subnets'] = list(obj.get('subnets') or [])
        out['segments'] = list(obj.get('segments') or [])
        return out


def _known(value):
    return value is not None and value != '' and not has_unknown(value)


def has_unknown(value):
    if value is p.UNKNOWN:
        return True
    if isinstance(value, (dict, list)):
        return any(has_unknown(x) for x in (
            value.values() if isinstance(value, dict) else value))
    return False


def subnets_on(networks, others, unknown_counts=True):
    """The template's subnets on any of `networks` (the values of a
    server's or port's network properties before anything is made: a
    get_resource stands as the network resource's name): Neutron picks
    any subnet of a network for an address, so a server or port is made
    after all of them (Heat's rule). With `unknown_counts`, as Heat does
    for a server, a network or a subnet's network not known yet counts
    as a match."""
    found = []
    for name, props in others.of(Subnet):
        net = props.get('network') or props.get('network_id')
        if unknown_counts and (not _known(net) or
                               any(not _known(n) for n in networks)):
            found.append(name)
        elif _known(net) and net in networks:
            found.append(name)
    return found


IPV6_MODES = ('dhcpv6-stateful', 'dhcpv6-stateless', 'slaac')


class Subnet(NeutronObject):
    """OS::Neutron::Subnet: an IP address block on a network."""

    kind = 'subnet'
    title = 'Subnet'
    update_fields = ('name', 'dns_nameservers', 'gateway_ip', 'enable_dhcp',
                     'allocation_pools', 'host_routes', 'segment_id',
                     'tags')
    drift_fields = ('name', 'dns_nameservers', 'gateway_ip', 'enable_dhcp',
                    'allocation_pools', 'host_routes', 'tags')
    unordered_fields = ('tags', 'host_routes', 'allocation_pools')
    # Heat: a gateway_ip left out on update detaches the gateway; pools
    # and routes left out are emptied
    cleared = {'gateway_ip': None, 'allocation_pools': [],
               'host_routes': [], 'tags': []}

    properties_schema = {
        'network_id': p.Schema(
            p.STRING, 'The ID of the attached network (deprecated: use '
            'network).', constraint='neutron.network'),
        'network': p.Schema(
            p.STRING, 'The ID of the attached network.',
            constraint='neutron.network'),
        'subnetpool': p.Schema(
            p.STRING, 'The name or ID of the subnet pool.',
            constraint='neutron.subnetpool'),
        'prefixlen': p.Schema(
            p.INTEGER, 'Prefix length for subnet allocation from subnet '
            'pool.', min=0),
        'cidr': p.Schema(p.STRING, 'The CIDR.', constraint='net_cidr'),
        'value_specs': VALUE_SPECS,
        'name': p.Schema(p.STRING, 'The name of the subnet.',
                         update_allowed=True),
        'ip_version': p.Schema(
            p.INTEGER, 'The IP version, which is 4 or 6.', default=4,
            allowed_values=(4, 6)),
        'dns_nameservers': p.Schema(
            p.LIST, 'A specified set of DNS name servers to be used.',
            default=[], update_allowed=True),
        'gateway_ip': p.Schema(
            p.STRING, 'The gateway IP address. Set to "" or "~" to '
            'create/update a subnet without a gateway. If omitted when '
            'creation, neutron will assign the first free IP address within '
            'the subnet to the gateway automatically. If remove this from '
            'template when update, the old gateway IP address will be '
            'detached.', update_allowed=True),
        'enable_dhcp': p.Schema(
            p.BOOLEAN, 'Set to true if DHCP is enabled and false if DHCP is '
            'disabled.', default=True, update_allowed=True),
        'allocation_pools': p.Schema(
            p.LIST, 'The start and end addresses for the allocation pools.',
            update_allowed=True, schema={
                'start': p.Schema(
                    p.STRING, 'Start address for the allocation pool.',
                    required=True, constraint='ip_addr'),
                'end': p.Schema(
                    p.STRING, 'End address for the allocation pool.',
                    required=True, constraint='ip_addr'),
            }),
        'tenant_id': p.Schema(
            p.STRING, 'The ID of the tenant who owns the network. Only '
            'administrative users can specify a tenant ID other than their '
            'own.'),
        'host_routes': p.Schema(
            p.LIST, 'A list of host route dictionaries for the subnet.',
            update_allowed=True, schema={
                'destination': p.Schema(
                    p.STRING, 'The destination for static route.',
                    required=True, constraint='net_cidr'),
                'nexthop': p.Schema(
                    p.STRING, 'The next hop for the destination.',
                    required=True, constraint='ip_addr'),
            }),
        'ipv6_ra_mode': p.Schema(
            p.STRING, 'IPv6 RA (Router Advertisement) mode.',
            allowed_values=IPV6_MODES),
        'ipv6_address_mode': p.Schema(
            p.STRING, 'IPv6 address mode.', allowed_values=IPV6_MODES),
        'segment': p.Schema(
            p.STRING, 'The name/ID of the segment to associate.',
            update_allowed=True, constraint='neutron.segment'),
        'tags': tags_schema('subnet'),
    }

    attributes_schema = {
        'name': 'Friendly name of the subnet.',
        'network_id': 'Parent network of the subnet.',
        'tenant_id': 'Tenant owning the subnet.',
        'allocation_pools': 'Ip allocation pools and their ranges.',
        'gateway_ip': "Ip of the subnet's gateway.",
        'host_routes': 'Additional routes for this subnet.',
        'ip_version': 'Ip version for the subnet.',
        'cidr': 'CIDR block notation for this subnet.',
        'dns_nameservers': 'List of dns nameservers.',
        'enable_dhcp': "'true' if DHCP is enabled for this subnet; 'false' "
                       "otherwise.",
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
        pool, cidr = values.get('subnetpool'), values.get('cidr')
        if pool is not None and cidr:
            raise co.conflict(path + ['cidr'], 'subnetpool', 'cidr')
        if pool is None and cidr is None:
            raise co.unspecified(path + ['cidr'], 'subnetpool', 'cidr')
        if values.get('prefixlen') and cidr:
            raise co.conflict(path + ['prefixlen'], 'prefixlen', 'cidr')
        ra, address = values.get('ipv6_ra_mode'), \
            values.get('ipv6_address_mode')
        if values.get('ip_version') == 4 and (ra or address):
            raise exception.InvalidTemplate(
                'ipv6_ra_mode and ipv6_address_mode are not supported for '
                'ipv4.', path=path + ['ip_version'])
        if ra and address and ra != address:
            raise exception.InvalidTemplate(
                'When both ipv6_ra_mode and ipv6_address_mode are set, they '
                'must be equal.', path=path + ['ipv6_ra_mode'])
        gateway = values.get('gateway_ip')
        if co.known(gateway) and gateway not in ('', '~', 'auto'):
            try:
                ipaddress.ip_address(gateway)
            except ValueError:
                raise exception.InvalidTemplate(
                    'Gateway IP address "%s" is in invalid format.' %
                    gateway, path=path + ['gateway_ip'])
        return values

    def make_body(self):
        props = self.properties
        network = props.get('network') or props.get('network_id')
        body = {'network_id': self.resolve('network', network, 'network'),
                'name': self.physical_name(),
                'ip_version': props.get('ip_version', 4),
                'enable_dhcp': props.get('enable_dhcp', True),
                'dns_nameservers': list(props.get('dns_nameservers') or [])}
        gateway = props.get('gateway_ip')
        if gateway in ('', '~'):
            body['gateway_ip'] = None   # no gateway (Heat's null)
        elif gateway is not None and gateway != 'auto':
            body['gateway_ip'] = gateway
        if props.get('subnetpool'):
            body['subnetpool_id'] = self.resolve(
                'subnetpool', props['subnetpool'], 'subnetpool')
        if props.get('segment'):
            body['segment_id'] = self.resolve('segment', props['segment'],
                                              'segment')
        for key in ('allocation_pools', 'host_routes'):
            if props.get(key) is not None:
                body[key] = [dict(item) for item in props[key]]
        return self.extras(body, ('cidr', 'cidr'), ('prefixlen', 'prefixlen'),
                           ('tenant_id', 'tenant_id'),
                           ('ipv6_ra_mode', 'ipv6_ra_mode'),
                           ('ipv6_address_mode', 'ipv6_address_mode'))

    def check_update(self, prior, obj):
        props = self.properties
        if props.get('gateway_ip') == 'auto' and \
                prior.get('gateway_ip') != 'auto':
            raise exception.ResourceFailure(
                '%s: The value "auto" for gateway_ip cannot be used to '
                'update an existing subnet. It is only supported during '
                'subnet creation.' % self.name)
        if props.get('segment') != prior.get('segment') and \
                obj.get('segment_id'):
            raise exception.ResourceFailure(
                '%s: Updating the subnet segment association is only '
                'allowed when the current segment_id is None.' % self.name)

    def attributes(self, obj):
        out = super().attributes(obj)
        out['tenant_id'] = self.tenant(obj)
        return out
