"""Neutron's core kinds on the sim: networks, subnets and ports (routers,
their interfaces and floating IPs are in l3.py, security groups in
secgroups.py).

They behave as Neutron (ML2, no agents) does as far as a template sees
it: the defaults Neutron fills in, the addresses ports are given
(ipam.py), and the refusals with Neutron's own words and codes (a
network or subnet still in use, an address taken, a MAC in use).

Every object carries its key as a tag (``converge-key=<uuid>``).
"""

import ipaddress
import random

from converge.drivers.sim import ipam
from converge.drivers.sim import rows
from converge.drivers.sim.rows import bad, conflict, forbidden, missing

#: ports a network's delete removes itself (Neutron's
#: AUTO_DELETE_PORT_OWNERS); any other port keeps the network in use
AUTO_DELETE = ('network:dhcp', 'network:distributed',
               'network:floatingip_agent_gateway')
ROUTER_INTERFACE = 'network:router_interface'
ROUTER_GATEWAY = 'network:router_gateway'
FLOATING_IP = 'network:floatingip'
#: ports only their owner's API may delete (the port API refuses)
SERVICE_OWNERS = (ROUTER_INTERFACE, ROUTER_GATEWAY, FLOATING_IP)
#: the project of the ports Neutron owns itself
NO_PROJECT = ''

COMMON = ('name', 'description', 'tags')


def boolean(value, field):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ('true', 'false'):
        return value.lower() == 'true'
    if value in (0, 1):
        return bool(value)
    raise bad("Invalid input for %s. Reason: '%s' is not a valid boolean "
              "value." % (field, value))


def required(body, field, kind):
    value = body.get(field)
    if value in (None, ''):
        raise bad("Failed to parse request. Required attribute '%s' not "
                  "specified" % field)
    return value


class NeutronKind(rows.Kind):
    key_in = 'tags'
    fields = ()

    def show(self, ctx, obj):
        status, body = obj.state(ctx.now)
        view = rows.public(body)
        view.update(id=obj.id, status=status, project_id=obj.project_id,
                    tenant_id=obj.project_id, created_at=obj.created,
                    updated_at=obj.updated)
        view.setdefault('tags', [])
        return self.with_key(obj, view)

    @staticmethod
    def revised(obj):
        obj.body['revision_number'] = obj.body.get('revision_number', 0) + 1

    def base(self, body):
        return {'name': body.get('name') or '',
                'description': body.get('description') or '',
                'tags': list(body.get('tags') or []),
                'revision_number': 1}

    def set_common(self, obj, body):
        for field in COMMON:
            if field in body:
                obj.body[field] = list(body[field] or []) \
                    if field == 'tags' else (body[field] or '')
        if 'name' in body:
            obj.name = obj.body['name']


def network_or_404(ctx, network_id):
    net = ctx.visible('network', network_id)
    if net is None:
        raise missing('Network %s could not be found.' % network_id)
    return net


def port_or_404(ctx, port_id):
    port = ctx.visible('port', port_id)
    if port is None:
        raise missing('Port %s could not be found.' % port_id)
    return port


def subnet_or_404(ctx, subnet_id):
    subnet = ctx.visible('subnet', subnet_id)
    if subnet is None:
        raise missing('Subnet %s could not be found.' % subnet_id)
    return subnet


# -- networks ---------------------------------------------------------------

class Network(NeutronKind):
    name = 'network'
    title = 'Network'
    fields = COMMON + (
        'admin_state_up', 'shared', 'port_security_enabled', 'mtu',
        'dns_domain', 'qos_policy_id', 'router:external',
        'provider:network_type', 'provider:physical_network',
        'provider:segmentation_id', 'availability_zone_hints',
        'is_default')
    updatable = COMMON + (
        'admin_state_up', 'shared', 'port_security_enabled', 'mtu',
        'dns_domain', 'qos_policy_id', 'router:external', 'is_default')

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        seg = random.randint(1, 65535)
        stored = dict(self.base(body), **{
            'admin_state_up': boolean(body.get('admin_state_up', True),
                                      'admin_state_up'),
            'shared': boolean(body.get('shared', False), 'shared'),
            'router:external': boolean(body.get('router:external', False),
                                       'router:external'),
            'port_security_enabled': boolean(
                body.get('port_security_enabled', True),
                'port_security_enabled'),
            'mtu': _mtu(body.get('mtu', 1450)),
            'dns_domain': body.get('dns_domain') or '',
            'qos_policy_id': body.get('qos_policy_id'),
            'provider:network_type': body.get('provider:network_type')
            or 'geneve',
            'provider:physical_network': body.get(
                'provider:physical_network'),
            'provider:segmentation_id': body.get('provider:segmentation_id',
                                                 seg),
            'availability_zone_hints': list(
                body.get('availability_zone_hints') or []),
            'availability_zones': ['nova'],
            'ipv4_address_scope': None, 'ipv6_address_scope': None,
            'is_default': boolean(body.get('is_default', False),
                                  'is_default'),
            'l2_adjacency': True, 'subnets': []})
        obj = self.new(ctx, stored, key, status='ACTIVE',
                       shared=stored['shared'] or stored['router:external'])
        return ctx.insert(obj)

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        self.set_common(obj, body)
        for field in ('admin_state_up', 'shared', 'port_security_enabled',
                      'router:external', 'is_default'):
            if field in body:
                obj.body[field] = boolean(body[field], field)
        if 'mtu' in body:
            obj.body['mtu'] = _mtu(body['mtu'])
        for field in ('dns_domain', 'qos_policy_id'):
            if field in body:
                obj.body[field] = body[field]
        shared = obj.body['shared'] or obj.body['router:external']
        if obj.shared and not shared:
            others = [p for p in ctx.all('port', parent=obj.id,
                                         visible_only=False)
                      if p.project_id not in (obj.project_id, NO_PROJECT)]
            if others:
                raise conflict('Unable to reconfigure sharing settings for '
                               'network %s. Multiple tenants are using it.'
                               % obj.id)
        if not obj.body['router:external'] and any(
                p.body.get('device_owner') in (ROUTER_GATEWAY, FLOATING_IP)
                for p in ctx.all('port', parent=obj.id,
                                 visible_only=False)):
            raise conflict('External network %s cannot be updated to be '
                           'made non-external, since it has existing '
                           'gateway ports.' % obj.id)
        if shared != obj.shared:
            obj.shared = shared
            for subnet in ctx.all('subnet', parent=obj.id,
                                  visible_only=False):
                subnet.shared = shared
                ctx.save(subnet, touch=False)
        self.revised(obj)
        return ctx.save(obj)

    def delete(self, ctx, obj, latency):
        ports = ctx.all('port', parent=obj.id, visible_only=False)
        if any(p.body.get('device_owner') not in AUTO_DELETE
               for p in ports):
            raise conflict('Unable to complete operation on network %s. '
                           'There are one or more ports still in use on '
                           'the network.' % obj.id)
        for port in ports:
            PORT.remove(ctx, port)
        for subnet in ctx.all('subnet', parent=obj.id, visible_only=False):
            ctx.remove(subnet)
        ctx.remove(obj)


def _mtu(value):
    try:
        mtu = int(value)
    except (TypeError, ValueError):
        mtu = 0
    if not 68 <= mtu <= 9216:
        raise bad("Invalid input for mtu. Reason: '%s' is not in range "
                  "68 through 9216." % value)
    return mtu


# -- subnets ----------------------------------------------------------------

IPV6_MODES = ('slaac', 'dhcpv6-stateful', 'dhcpv6-stateless')


class Subnet(NeutronKind):
    name = 'subnet'
    title = 'Subnet'
    fields = COMMON + (
        'network_id', 'cidr', 'ip_version', 'gateway_ip', 'enable_dhcp',
        'allocation_pools', 'dns_nameservers', 'host_routes',
        'ipv6_address_mode', 'ipv6_ra_mode', 'subnetpool_id', 'prefixlen',
        'segment_id', 'service_types', 'use_default_subnetpool',
        'dns_publish_fixed_ip')
    updatable = COMMON + (
        'gateway_ip', 'enable_dhcp', 'allocation_pools', 'dns_nameservers',
        'host_routes', 'service_types', 'segment_id',
        'dns_publish_fixed_ip')

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        net = network_or_404(ctx, required(body, 'network_id', self.name))
        if not ctx.owns(net):
            raise forbidden('(rule:create_subnet) is disallowed by policy: '
                            'network %s is not this project\'s' % net.id)
        if body.get('subnetpool_id') or body.get('use_default_subnetpool'):
            raise missing('Subnet pool %s could not be found.' % (
                body.get('subnetpool_id') or 'default'))
        if not body.get('cidr'):
            raise bad('Bad subnets request: a subnetpool must be specified '
                      'in the absence of a cidr.')
        cidr = ipam.network(body['cidr'])
        version = body.get('ip_version', cidr.version)
        if int(version) != cidr.version:
            raise bad('Invalid input for operation: ip_version %s does not '
                      'match the cidr %s.' % (version, cidr))
        for other in ctx.all('subnet', parent=net.id, visible_only=False):
            if ipaddress.ip_network(other.body['cidr']).overlaps(cidr):
                raise bad('Invalid input for operation: Requested subnet '
                          'with cidr: %s for network: %s overlaps with '
                          'another subnet.' % (cidr, net.id))
        gateway = self._gateway(cidr, body)
        pools = body.get('allocation_pools')
        pools = ipam.check_pools(cidr, pools, gateway) if pools \
            else ipam.default_pools(cidr, gateway)
        modes = self._v6_modes(cidr, body)
        stored = dict(self.base(body), **{
            'network_id': net.id, 'cidr': str(cidr),
            'ip_version': cidr.version, 'gateway_ip': gateway,
            'enable_dhcp': boolean(body.get('enable_dhcp', True),
                                   'enable_dhcp'),
            'allocation_pools': pools,
            'dns_nameservers': _nameservers(body.get('dns_nameservers')),
            'host_routes': _routes(body.get('host_routes')),
            'subnetpool_id': None, 'segment_id': body.get('segment_id'),
            'service_types': list(body.get('service_types') or []),
            'dns_publish_fixed_ip': body.get('dns_publish_fixed_ip', False),
        }, **modes)
        obj = self.new(ctx, stored, key, parent=net.id, status=None,
                       shared=net.shared)
        ctx.insert(obj)
        net.body['subnets'] = net.body.get('subnets', []) + [obj.id]
        self.revised(net)
        ctx.save(net)
        return obj

    def show(self, ctx, obj):
        view = super().show(ctx, obj)
        view.pop('status')   # a subnet has none
        return view

    @staticmethod
    def _gateway(cidr, body):
        if 'gateway_ip' not in body:
            return ipam.default_gateway(cidr)
        if body['gateway_ip'] in (None, ''):
            return None
        gateway = ipam.address(body['gateway_ip'], 'gateway_ip')
        if gateway not in cidr or gateway in (cidr.network_address,
                                              cidr.broadcast_address):
            raise bad('Invalid input for operation: Gateway is not valid on '
                      'subnet.')
        return str(gateway)

    @staticmethod
    def _v6_modes(cidr, body):
        modes = {'ipv6_address_mode': body.get('ipv6_address_mode'),
                 'ipv6_ra_mode': body.get('ipv6_ra_mode')}
        for field, mode in modes.items():
            if mode is None:
                continue
            if cidr.version != 6:
                raise bad('Invalid input for operation: %s cannot be set '
                          'on an IPv4 subnet.' % field)
            if mode not in IPV6_MODES:
                raise bad("Invalid input for %s. Reason: '%s' is not in "
                          "%s." % (field, mode, list(IPV6_MODES)))
        return modes

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        self.set_common(obj, body)
        cidr = ipaddress.ip_network(obj.body['cidr'])
        if 'gateway_ip' in body:
            gateway = self._gateway(cidr, body)
            if gateway and ipam.holder(ctx, obj.id, gateway) is not None:
                raise conflict('Gateway ip %s conflicts with allocation '
                               'pool or a port of subnet %s.'
                               % (gateway, obj.id))
            obj.body['gateway_ip'] = gateway
        if 'allocation_pools' in body:
            obj.body['allocation_pools'] = ipam.check_pools(
                cidr, body['allocation_pools'] or [],
                obj.body['gateway_ip']) if body['allocation_pools'] \
                else ipam.default_pools(cidr, obj.body['gateway_ip'])
        if 'enable_dhcp' in body:
            obj.body['enable_dhcp'] = boolean(body['enable_dhcp'],
                                              'enable_dhcp')
        if 'dns_nameservers' in body:
            obj.body['dns_nameservers'] = _nameservers(
                body['dns_nameservers'])
        if 'host_routes' in body:
            obj.body['host_routes'] = _routes(body['host_routes'])
        for field in ('service_types', 'segment_id', 'dns_publish_fixed_ip'):
            if field in body:
                obj.body[field] = body[field]
        self.revised(obj)
        return ctx.save(obj)

    def delete(self, ctx, obj, latency):
        ports = [ctx.live('port', p) for p in ipam.allocated(ctx, obj.id)]
        # and a port a deleted server's Nova has not let go of yet
        # (wiring.PORT_LINGER): its addresses are free, it is not gone
        lingering = [p for p in ctx.all('port', parent=obj.parent,
                                        visible_only=False)
                     if p.gone_at is not None and any(
                         f.get('subnet_id') == obj.id
                         for f in p.body.get('fixed_ips') or [])]
        if lingering or any(p is not None and p.body.get('device_owner')
                            not in AUTO_DELETE for p in ports):
            raise conflict('Unable to complete operation on subnet %s: One '
                           'or more ports have an IP allocation from this '
                           'subnet.' % obj.id)
        for port in ports:
            if port is not None:
                PORT.remove(ctx, port)
        net = ctx.live('network', obj.parent)
        if net is not None:
            net.body['subnets'] = [s for s in net.body.get('subnets', [])
                                   if s != obj.id]
            self.revised(net)
            ctx.save(net)
        ctx.remove(obj)


def _nameservers(value):
    servers = list(value or [])
    for server in servers:
        ipam.address(server, 'dns_nameservers')
    if len(set(servers)) != len(servers):
        raise bad("Invalid input for dns_nameservers. Reason: Duplicate "
                  "nameserver in %s." % servers)
    return servers


def _routes(value):
    routes = []
    for route in value or []:
        try:
            routes.append({'destination': str(ipam.network(
                route['destination'], 'host_routes')),
                'nexthop': str(ipam.address(route['nexthop'],
                                            'host_routes'))})
        except (KeyError, TypeError):
            raise bad('Invalid input for host_routes. Reason: a route needs '
                      'a destination and a nexthop.')
    return routes


# -- ports ------------------------------------------------------------------

def new_mac():
    return 'fa:16:3e:%02x:%02x:%02x' % tuple(random.randbytes(3))


def _mac(value):
    parts = str(value).lower().split(':')
    if len(parts) != 6 or not all(len(p) == 2 and all(
            c in '0123456789abcdef' for c in p) for p in parts):
        raise bad("Invalid input for mac_address. Reason: '%s' is not a "
                  "valid MAC address." % value)
    return ':'.join(parts)


class Port(NeutronKind):
    name = 'port'
    title = 'Port'
    fields = COMMON + (
        'network_id', 'fixed_ips', 'mac_address', 'security_groups',
        'admin_state_up', 'device_id', 'device_owner',
        'port_security_enabled', 'allowed_address_pairs',
        'binding:vnic_type', 'binding:host_id', 'binding:profile',
        'qos_policy_id', 'dns_name', 'extra_dhcp_opts',
        'propagate_uplink_status')
    updatable = COMMON + (
        'fixed_ips', 'mac_address', 'security_groups', 'admin_state_up',
        'device_id', 'device_owner', 'port_security_enabled',
        'allowed_address_pairs', 'binding:vnic_type', 'binding:host_id',
        'binding:profile', 'qos_policy_id', 'dns_name', 'extra_dhcp_opts',
        'propagate_uplink_status')

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        net = network_or_404(ctx, required(body, 'network_id', self.name))
        return self.make(ctx, net, body, key)

    def make(self, ctx, net, body, key=None, project_id=None):
        """A port on `net` (an Obj) as `body` asks, owned by
        `project_id` (default: the caller's project)."""
        project = ctx.project_id if project_id is None else project_id
        port_id = ctx.new_id(self.name, body.get('name'))
        if body.get('mac_address'):
            mac = _mac(body['mac_address'])
            if any(p.body.get('mac_address') == mac for p in ctx.all(
                    'port', parent=net.id, visible_only=False)):
                raise conflict('Unable to complete operation for network %s. '
                               'The mac address %s is in use.'
                               % (net.id, mac))
        else:
            mac = new_mac()
        secure = boolean(body.get('port_security_enabled', net.body.get(
            'port_security_enabled', True)), 'port_security_enabled')
        owner = body.get('device_owner') or ''
        fixed = self._allocate(ctx, net, port_id, body.get('fixed_ips'),
                               mac, 'fixed_ips' in body)
        groups = self._groups(ctx, project, body, secure, owner, fixed)
        stored = dict(self.base(body), **{
            'network_id': net.id, 'mac_address': mac, 'fixed_ips': fixed,
            'device_id': body.get('device_id') or '',
            'device_owner': owner,
            'admin_state_up': boolean(body.get('admin_state_up', True),
                                      'admin_state_up'),
            'security_groups': groups,
            'port_security_enabled': secure,
            'allowed_address_pairs': list(
                body.get('allowed_address_pairs') or []),
            'binding:vnic_type': body.get('binding:vnic_type') or 'normal',
            'binding:host_id': body.get('binding:host_id') or '',
            'binding:profile': dict(body.get('binding:profile') or {}),
            'binding:vif_type': 'unbound', 'binding:vif_details': {},
            'qos_policy_id': body.get('qos_policy_id'),
            'dns_name': body.get('dns_name') or '',
            'dns_assignment': [], 'extra_dhcp_opts': list(
                body.get('extra_dhcp_opts') or []),
            'propagate_uplink_status': bool(
                body.get('propagate_uplink_status', False)),
        })
        for field in ('_nova_made',):
            if body.get(field):
                stored[field] = body[field]
        status = 'ACTIVE' if owner.startswith('network:') else 'DOWN'
        if owner.startswith('network:'):
            stored['binding:vif_type'] = 'ovs'
        obj = self.new(ctx, stored, key, id=port_id, project_id=project,
                       parent=net.id, device=stored['device_id'] or None,
                       status=status)
        return ctx.insert(obj)

    @staticmethod
    def _allocate(ctx, net, port_id, asked, mac, given):
        """Addresses for a new port: those asked for, or one of the
        network's first subnet of each IP version."""
        subnets = ctx.all('subnet', parent=net.id, visible_only=False)
        fixed = []
        if given:
            for entry in asked or []:
                fixed.append(_one_address(ctx, net, subnets, port_id,
                                          entry, mac))
            return fixed
        for version in (4, 6):
            for subnet in subnets:
                if subnet.body['ip_version'] == version:
                    fixed.append({'subnet_id': subnet.id,
                                  'ip_address': ipam.allocate(
                                      ctx, subnet, port_id,
                                      net.body.get('name'), mac=mac)})
                    break
        return fixed

    @staticmethod
    def _groups(ctx, project, body, secure, owner, fixed):
        if owner.startswith('network:'):
            return []
        if 'security_groups' in body and body['security_groups'] is not None:
            asked = list(body['security_groups'])
        else:
            asked = None
        if not secure:
            if asked:
                raise bad('Port security must be enabled and port must have '
                          'an IP address in order to use security groups.')
            return []
        from converge.drivers.sim import secgroups   # it needs ports
        if asked is None:
            return [secgroups.default_group(ctx, project).id]
        found = []
        for ref in asked:
            group = ctx.visible('security_group', ref)
            if group is None:
                named = [g for g in ctx.all('security_group', name=ref,
                                            project=project)]
                if ref == 'default' and not named:
                    named = [secgroups.default_group(ctx, project)]
                if len(named) != 1:
                    raise missing('Security group %s does not exist' % ref)
                group = named[0]
            found.append(group.id)
        return found

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        self.set_common(obj, body)
        net = ctx.live('network', obj.parent)
        if 'mac_address' in body and body['mac_address'] != \
                obj.body['mac_address']:
            if obj.body.get('binding:host_id'):
                raise conflict('Unable to complete operation on port %s, '
                               'port is already bound, port type: ovs, '
                               'old_mac %s, new_mac %s.' % (
                                   obj.id, obj.body['mac_address'],
                                   body['mac_address']))
            obj.body['mac_address'] = _mac(body['mac_address'])
        old_fixed = None
        if 'fixed_ips' in body:
            old_fixed = list(obj.body['fixed_ips'])
            subnets = ctx.all('subnet', parent=obj.parent,
                              visible_only=False)
            # as Neutron: an entry the port has an address for (its
            # address, or just its subnet) keeps that address; the others
            # go, and new entries get new ones
            current = list(obj.body['fixed_ips'])
            fixed, asked = [], []
            for entry in body['fixed_ips'] or []:
                match = next((f for f in current if holds(f, entry)), None)
                if match is None:
                    asked.append(entry)
                else:
                    current.remove(match)
                    fixed.append(dict(match))
            ipam.release(ctx, obj.id, [(f['subnet_id'], f['ip_address'])
                                       for f in fixed])
            for entry in asked:
                fixed.append(_one_address(ctx, net, subnets, obj.id, entry,
                                          obj.body['mac_address']))
            obj.body['fixed_ips'] = fixed
        if 'port_security_enabled' in body:
            obj.body['port_security_enabled'] = boolean(
                body['port_security_enabled'], 'port_security_enabled')
        if 'security_groups' in body:
            obj.body['security_groups'] = self._groups(
                ctx, obj.project_id, body,
                obj.body['port_security_enabled'],
                obj.body['device_owner'], obj.body['fixed_ips'])
        elif not obj.body['port_security_enabled'] and \
                obj.body['security_groups']:
            raise conflict('Port has security group associated. Cannot '
                           'disable port security or ip address until '
                           'security group is removed')
        for field in ('admin_state_up',):
            if field in body:
                obj.body[field] = boolean(body[field], field)
        for field in ('allowed_address_pairs', 'binding:vnic_type',
                      'binding:profile', 'qos_policy_id', 'dns_name',
                      'extra_dhcp_opts', 'propagate_uplink_status',
                      'binding:host_id', 'device_owner'):
            if field in body:
                obj.body[field] = body[field]
        if 'device_id' in body:
            obj.body['device_id'] = body['device_id'] or ''
            obj.device = obj.body['device_id'] or None
            if not obj.body['device_id'] and not \
                    obj.body['device_owner'].startswith('network:'):
                obj.status = 'DOWN'
                obj.body['binding:host_id'] = ''
                obj.body['binding:vif_type'] = 'unbound'
        self.revised(obj)
        ctx.save(obj)
        if old_fixed is not None and obj.body['device_id'] and \
                obj.body['device_owner'].startswith('compute:'):
            from converge.drivers.sim import wiring   # servers' side
            wiring.readdress(ctx, obj, old_fixed)
        return obj

    def show(self, ctx, obj):
        view = super().show(ctx, obj)
        if obj.body.get('_trunk'):
            from converge.drivers.sim import trunk   # it needs ports
            details = trunk.trunk_details(ctx, obj)
            if details is not None:
                view['trunk_details'] = details
        return view

    def delete(self, ctx, obj, latency):
        owner = obj.body.get('device_owner') or ''
        if owner in SERVICE_OWNERS and not ctx.admin:
            raise conflict('Port %s cannot be deleted directly via the port '
                           'API: has device owner %s.' % (obj.id, owner))
        if obj.body.get('_trunk') or obj.body.get('_subport_of'):
            from converge.drivers.sim import trunk   # it needs ports
            refused = trunk.port_in_use(ctx, obj)
            if refused is not None:
                raise refused
        self.remove(ctx, obj)

    def remove(self, ctx, obj):
        """The port goes (whatever owns it): its addresses are free, the
        floating IPs on it let go of it, the server it served loses
        it."""
        from converge.drivers.sim import l3   # it needs ports
        for fip in ctx.all('floating_ip', device=obj.id, visible_only=False):
            l3.FloatingIP.dissociate(ctx, fip)
            ctx.save(fip)
        ipam.release(ctx, obj.id)
        ctx.remove(obj)
        if (obj.body.get('device_owner') or '').startswith('compute:') \
                and obj.body.get('device_id'):
            from converge.drivers.sim import wiring   # servers' side
            wiring.port_gone(ctx, obj)


def holds(fixed, entry):
    """Whether a port's address `fixed` is what a fixed_ips `entry`
    asks for (its address, or an address of its subnet)."""
    if not isinstance(entry, dict) or not (entry.get('ip_address') or
                                           entry.get('subnet_id')):
        return False
    return entry.get('ip_address') in (None, '', fixed['ip_address']) and \
        entry.get('subnet_id') in (None, '', fixed['subnet_id'])


def _one_address(ctx, net, subnets, port_id, entry, mac):
    """One entry of a port's fixed_ips: {subnet_id, ip_address}."""
    if not isinstance(entry, dict):
        raise bad('Invalid input for fixed_ips. Reason: %r is not a '
                  'dictionary.' % (entry,))
    subnet_id, addr = entry.get('subnet_id'), entry.get('ip_address')
    subnet = None
    if subnet_id:
        subnet = next((s for s in subnets if s.id == subnet_id), None)
        if subnet is None:
            raise bad('Invalid input for operation: Failed to create port on '
                      'network %s, because fixed_ips included invalid '
                      'subnet %s.' % (net.id, subnet_id))
    elif addr:
        ip = ipam.address(addr)
        subnet = next((s for s in subnets
                       if ip in ipaddress.ip_network(s.body['cidr'])), None)
        if subnet is None:
            raise bad('IP address %s is not a valid IP for any of the '
                      'subnets on the specified network.' % addr)
    elif subnets:
        subnet = subnets[0]
    else:
        raise bad('Invalid input for operation: Failed to create port on '
                  'network %s: it has no subnet.' % net.id)
    return {'subnet_id': subnet.id,
            'ip_address': ipam.allocate(ctx, subnet, port_id,
                                        net.body.get('name'), addr, mac)}


PORT = Port()

KINDS = {k.name: k for k in (Network(), Subnet(), PORT)}
