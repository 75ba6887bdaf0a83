"""Neutron's L3 kinds on the sim: routers, their interfaces and
floating IPs.

A router's gateway and a floating IP hold a port of their own on the
external network, owned by no project, as in Neutron; a router interface
is the router's port on a subnet (its gateway address), named
ROUTER:SUBNET. A floating IP reaches a port only through a router with a
gateway on the floating IP's network and an interface on the port's
subnet, else Neutron's 404. A router with interfaces is not deleted, nor
an interface a floating IP goes through (409).

Routers and floating IPs carry their key as a tag; an interface is found
by its router and subnet.
"""

import ipaddress

from converge.drivers.sim import rows
from converge.drivers.sim import vpn
from converge.drivers.sim.neutron import (
    COMMON, FLOATING_IP, NO_PROJECT, PORT, ROUTER_GATEWAY, ROUTER_INTERFACE,
    NeutronKind, boolean, holds, network_or_404, required, subnet_or_404)
from converge.drivers.sim.rows import bad, conflict, missing


# -- routers ----------------------------------------------------------------

class Router(NeutronKind):
    name = 'router'
    title = 'Router'
    fields = COMMON + ('admin_state_up', 'external_gateway_info',
                       'distributed', 'ha', 'availability_zone_hints',
                       'routes', 'flavor_id')
    updatable = COMMON + ('admin_state_up', 'external_gateway_info',
                          'distributed', 'ha', 'routes')

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        stored = dict(self.base(body), **{
            'admin_state_up': boolean(body.get('admin_state_up', True),
                                      'admin_state_up'),
            'external_gateway_info': None,
            'distributed': boolean(body.get('distributed', False),
                                   'distributed'),
            'ha': boolean(body.get('ha', False), 'ha'),
            'routes': list(body.get('routes') or []),
            'availability_zone_hints': list(
                body.get('availability_zone_hints') or []),
            'availability_zones': ['nova'], 'flavor_id': None})
        obj = self.new(ctx, stored, key, status='ACTIVE')
        if body.get('external_gateway_info'):
            self._set_gateway(ctx, obj, body['external_gateway_info'])
        return ctx.insert(obj)

    def _set_gateway(self, ctx, obj, info):
        if not isinstance(info, dict) or not info.get('network_id'):
            raise bad('Invalid input for external_gateway_info. Reason: '
                      'network_id is missing.')
        net = network_or_404(ctx, info['network_id'])
        if not net.body.get('router:external'):
            raise bad('Bad router request: Network %s is not an external '
                      'network.' % net.id)
        asked = info.get('external_fixed_ips')
        port = PORT.make(ctx, net, {
            'device_owner': ROUTER_GATEWAY, 'device_id': obj.id,
            **({'fixed_ips': asked} if asked else {})},
            project_id=NO_PROJECT)
        obj.body['_gw_port'] = port.id
        obj.body['external_gateway_info'] = {
            'network_id': net.id,
            'enable_snat': boolean(info.get('enable_snat', True),
                                   'enable_snat'),
            'external_fixed_ips': [dict(f) for f in port.body['fixed_ips']]}

    def _clear_gateway(self, ctx, obj):
        info = obj.body.get('external_gateway_info')
        if not info:
            return
        if ctx.all('floating_ip', parent=obj.id, visible_only=False):
            raise conflict('Gateway cannot be updated for router %s, since a '
                           'gateway to external network %s is required by '
                           'one or more floating IPs.'
                           % (obj.id, info['network_id']))
        port = ctx.live('port', obj.body.pop('_gw_port', None))
        if port is not None:
            PORT.remove(ctx, port)
        obj.body['external_gateway_info'] = None

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        self.set_common(obj, body)
        for field in ('admin_state_up', 'distributed', 'ha'):
            if field in body:
                obj.body[field] = boolean(body[field], field)
        if 'routes' in body:
            obj.body['routes'] = list(body['routes'] or [])
        if 'external_gateway_info' in body:
            info = body['external_gateway_info'] or None
            old = obj.body.get('external_gateway_info')
            if info and old and info.get('network_id') == old['network_id'] \
                    and _same_addresses(info.get('external_fixed_ips'),
                                        old['external_fixed_ips']):
                old['enable_snat'] = boolean(info.get(
                    'enable_snat', old['enable_snat']), 'enable_snat')
            else:
                self._clear_gateway(ctx, obj)
                if info:
                    self._set_gateway(ctx, obj, info)
        self.revised(obj)
        return ctx.save(obj)

    def delete(self, ctx, obj, latency):
        if ctx.all('router_interface', parent=obj.id, visible_only=False):
            raise conflict('Router %s still has ports' % obj.id)
        vpn.in_use_by_vpn(ctx, obj)
        self._clear_gateway(ctx, obj)
        ctx.remove(obj)


def _same_addresses(asked, held):
    """Whether a gateway's `asked` external_fixed_ips are those it holds
    (none asked: any)."""
    if not asked:
        return True
    held = list(held)
    for entry in asked:
        match = next((f for f in held if holds(f, entry)), None)
        if match is None:
            return False
        held.remove(match)
    return not held


def own_router(ctx, body, kind):
    """The router `body` names, the caller's own, or Neutron's 404."""
    router = ctx.visible('router', required(body, 'router_id', kind))
    if router is None or not ctx.owns(router):
        raise missing('Router %s could not be found' % body['router_id'])
    return router


def interface_id(body):
    if body.get('subnet_id'):
        return '%s:%s' % (body.get('router_id'), body['subnet_id'])
    return '%s:port=%s' % (body.get('router_id'), body.get('port_id'))


class RouterInterface(NeutronKind):
    """A router's port on a subnet (Neutron's add_router_interface),
    named ROUTER:SUBNET (or ROUTER:port=PORT)."""

    name = 'router_interface'
    title = 'Router interface'
    key_in = None
    fields = ('router_id', 'subnet_id', 'port_id')

    def identity(self, ctx, body):
        if not body.get('router_id') or not (body.get('subnet_id') or
                                             body.get('port_id')):
            return None
        return 'router_interface:' + interface_id(body)

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        router = own_router(ctx, body, self.name)
        if bool(body.get('subnet_id')) == bool(body.get('port_id')):
            raise bad('Bad router request: Either subnet_id or port_id must '
                      'be specified.')
        if body.get('subnet_id'):
            subnet = subnet_or_404(ctx, body['subnet_id'])
            gateway = subnet.body.get('gateway_ip')
            if not gateway:
                raise bad('Bad router request: Subnet for router interface '
                          'must have a gateway IP.')
            self._no_overlap(ctx, router, subnet)
            net = ctx.live('network', subnet.parent)
            port = PORT.make(ctx, net, {
                'device_owner': ROUTER_INTERFACE, 'device_id': router.id,
                'fixed_ips': [{'subnet_id': subnet.id,
                               'ip_address': gateway}]},
                project_id=router.project_id)
        else:
            port = ctx.visible('port', body['port_id'])
            if port is None or not ctx.owns(port):
                raise missing('Port %s could not be found.'
                              % body['port_id'])
            if port.body.get('device_id'):
                raise conflict('Unable to complete operation on port %s for '
                               'network %s. Port already has an attached '
                               'device %s.' % (port.id, port.parent,
                                               port.body['device_id']))
            if not port.body.get('fixed_ips'):
                raise bad('Bad router request: Router port must have at '
                          'least one fixed IP.')
            subnet = ctx.live('subnet', port.body['fixed_ips'][0][
                'subnet_id'])
            self._no_overlap(ctx, router, subnet)
            port.body.update(device_owner=ROUTER_INTERFACE,
                             device_id=router.id, security_groups=[])
            port.body['binding:vif_type'] = 'ovs'
            port.device, port.status = router.id, 'ACTIVE'
            ctx.save(port)
        stored = {'router_id': router.id, 'subnet_id': subnet.id,
                  'port_id': port.id, 'network_id': port.parent}
        obj = self.new(ctx, stored, key, id=interface_id(body),
                       project_id=router.project_id, name='',
                       ident=self.identity(ctx, body), parent=router.id,
                       device=subnet.id, status='ACTIVE')
        return ctx.insert(obj)

    @staticmethod
    def _no_overlap(ctx, router, subnet):
        cidr = ipaddress.ip_network(subnet.body['cidr'])
        for other in ctx.all('router_interface', parent=router.id,
                             visible_only=False):
            theirs = ctx.live('subnet', other.device)
            if theirs is None:
                continue
            if theirs.id == subnet.id:
                raise bad('Bad router request: Router already has a port on '
                          'subnet %s.' % subnet.id)
            if ipaddress.ip_network(theirs.body['cidr']).overlaps(cidr):
                raise bad('Bad router request: Cidr %s of subnet %s overlaps '
                          'with cidr %s of subnet %s.' % (
                              cidr, subnet.id, theirs.body['cidr'],
                              theirs.id))

    def show(self, ctx, obj):
        view = rows.public(obj.body)
        view.update(id=obj.id, project_id=obj.project_id,
                    tenant_id=obj.project_id)
        return view

    def delete(self, ctx, obj, latency):
        port = ctx.live('port', obj.body['port_id'])
        for fip in ctx.all('floating_ip', parent=obj.parent,
                           visible_only=False):
            if _subnet_of(ctx, fip) == obj.device:
                raise conflict('Router interface for subnet %s on router %s '
                               'cannot be deleted, as it is required by one '
                               'or more floating IPs.'
                               % (obj.device, obj.parent))
        if port is not None:
            PORT.remove(ctx, port)
        ctx.remove(obj)


class RouterGateway(NeutronKind):
    """A router's external gateway set on its own (Neutron's
    add_gateway_router, what Heat's deprecated OS::Neutron::RouterGateway
    calls), named ROUTER:NETWORK. It is the router's gateway: made, the
    router has it; deleted, the router has none (if it is still the one
    it made)."""

    name = 'router_gateway'
    title = 'Router gateway'
    key_in = None
    fields = ('router_id', 'network_id')

    def identity(self, ctx, body):
        if not body.get('router_id') or not body.get('network_id'):
            return None
        return 'router_gateway:%s:%s' % (body['router_id'],
                                          body['network_id'])

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        router = own_router(ctx, body, self.name)
        net = network_or_404(ctx, required(body, 'network_id', self.name))
        ctx.settle(router)
        ROUTER.update(ctx, router, {'external_gateway_info': {
            'network_id': net.id}}, latency)
        obj = self.new(ctx, {'router_id': router.id, 'network_id': net.id},
                       key, id='%s:%s' % (router.id, net.id),
                       project_id=router.project_id, name='',
                       ident=self.identity(ctx, body), parent=router.id,
                       device=net.id, status='ACTIVE')
        return ctx.insert(obj)

    def show(self, ctx, obj):
        view = rows.public(obj.body)
        router = ctx.live('router', obj.parent)
        info = router.body.get('external_gateway_info') \
            if router is not None else None
        view.update(id=obj.id, project_id=obj.project_id,
                    tenant_id=obj.project_id,
                    external_gateway_info=info if info and info.get(
                        'network_id') == obj.device else None)
        return view

    def delete(self, ctx, obj, latency):
        router = ctx.live('router', obj.parent)
        if router is not None and (router.body.get(
                'external_gateway_info') or {}).get('network_id') == \
                obj.device:
            ctx.settle(router)
            ROUTER.update(ctx, router, {'external_gateway_info': None},
                          latency)
        ctx.remove(obj)


# -- floating IPs -----------------------------------------------------------

def _subnet_of(ctx, fip):
    """The subnet of the fixed address a floating IP is associated
    with."""
    port = ctx.live('port', fip.device)
    if port is None:
        return None
    for entry in port.body.get('fixed_ips') or []:
        if entry['ip_address'] == fip.body.get('fixed_ip_address'):
            return entry['subnet_id']
    return None


class FloatingIP(NeutronKind):
    name = 'floating_ip'
    title = 'Floating IP'
    fields = ('floating_network_id', 'port_id', 'fixed_ip_address',
              'floating_ip_address', 'subnet_id', 'dns_name', 'dns_domain',
              'description', 'tags', 'qos_policy_id')
    updatable = ('port_id', 'fixed_ip_address', 'description', 'tags',
                 'qos_policy_id')

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        net = network_or_404(ctx, required(body, 'floating_network_id',
                                            self.name))
        if not net.body.get('router:external'):
            raise bad('Bad floatingip request: Network %s is not a valid '
                      'external network.' % net.id)
        fip_id = ctx.new_id(self.name, None)
        asked = {}
        if body.get('subnet_id'):
            asked['subnet_id'] = body['subnet_id']
        if body.get('floating_ip_address'):
            asked['ip_address'] = body['floating_ip_address']
        port = PORT.make(ctx, net, {
            'device_owner': FLOATING_IP, 'device_id': fip_id,
            **({'fixed_ips': [asked]} if asked else {})},
            project_id=NO_PROJECT)
        if not port.body['fixed_ips']:
            raise bad('Unable to find any IP address on external network '
                      '%s.' % net.id)
        stored = {'floating_ip_address': port.body['fixed_ips'][0][
            'ip_address'], 'floating_network_id': net.id,
            'router_id': None, 'port_id': None, 'fixed_ip_address': None,
            'port_details': None, 'description': body.get('description')
            or '', 'dns_name': body.get('dns_name') or '',
            'dns_domain': body.get('dns_domain') or '',
            'qos_policy_id': body.get('qos_policy_id'),
            'port_forwardings': [], 'tags': list(body.get('tags') or []),
            'revision_number': 1, '_port': port.id}
        obj = self.new(ctx, stored, key, id=fip_id, name='', status='DOWN')
        if body.get('port_id'):
            self.associate(ctx, obj, body['port_id'],
                           body.get('fixed_ip_address'))
        return ctx.insert(obj)

    def associate(self, ctx, obj, port_id, fixed_ip=None):
        port = ctx.visible('port', port_id)
        if port is None or not ctx.owns(port):
            raise missing('Port %s could not be found.' % port_id)
        v4 = [f for f in port.body.get('fixed_ips') or []
              if ipaddress.ip_address(f['ip_address']).version == 4]
        if fixed_ip:
            chosen = [f for f in v4 if f['ip_address'] == fixed_ip]
            if not chosen:
                raise bad('Bad floatingip request: Port %s does not have '
                          'fixed ip %s.' % (port.id, fixed_ip))
        elif not v4:
            raise bad('Bad floatingip request: Port %s does not have any '
                      'IPv4 address to associate with a floating IP.'
                      % port.id)
        else:
            chosen = v4[:1]
        entry = chosen[0]
        network_id = obj.body['floating_network_id']
        router = self._router(ctx, network_id, entry['subnet_id'])
        if router is None:
            raise missing('External network %s is not reachable from subnet '
                          '%s.  Therefore, cannot associate Port %s with a '
                          'Floating IP.' % (network_id, entry['subnet_id'],
                                            port.id))
        for other in ctx.all('floating_ip', device=port.id,
                             visible_only=False):
            if other.id != obj.id and \
                    other.body['fixed_ip_address'] == entry['ip_address'] \
                    and other.body['floating_network_id'] == network_id:
                raise conflict(
                    'Cannot associate floating IP %s (%s) with port %s '
                    'using fixed IP %s, as that fixed IP already has a '
                    'floating IP on external network %s.' % (
                        obj.body['floating_ip_address'], obj.id, port.id,
                        entry['ip_address'], network_id))
        obj.body.update(port_id=port.id, fixed_ip_address=entry['ip_address'],
                        router_id=router.id, port_details={
                            k: port.body.get(k) for k in (
                                'name', 'network_id', 'mac_address',
                                'admin_state_up', 'device_id',
                                'device_owner')})
        obj.body['port_details']['status'] = port.status
        obj.parent, obj.device, obj.status = router.id, port.id, 'ACTIVE'

    @staticmethod
    def _router(ctx, network_id, subnet_id):
        """A router with a gateway on the external network and an
        interface on the subnet."""
        for interface in ctx.all('router_interface', visible_only=False,
                                 where=rows.C.device == subnet_id):
            router = ctx.live('router', interface.parent)
            info = router.body.get('external_gateway_info') if router \
                else None
            if info and info.get('network_id') == network_id:
                return router
        return None

    @staticmethod
    def dissociate(ctx, obj):
        obj.body.update(port_id=None, fixed_ip_address=None, router_id=None,
                        port_details=None)
        obj.parent = obj.device = None
        obj.status = 'DOWN'

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        self.set_common(obj, body)
        if 'qos_policy_id' in body:
            obj.body['qos_policy_id'] = body['qos_policy_id']
        if 'port_id' in body:
            if body['port_id']:
                self.associate(ctx, obj, body['port_id'],
                               body.get('fixed_ip_address'))
            else:
                self.dissociate(ctx, obj)
        elif body.get('fixed_ip_address') and obj.body['port_id']:
            self.associate(ctx, obj, obj.body['port_id'],
                           body['fixed_ip_address'])
        self.revised(obj)
        return ctx.save(obj)

    def delete(self, ctx, obj, latency):
        port = ctx.live('port', obj.body.get('_port'))
        if port is not None:
            PORT.remove(ctx, port)
        ctx.remove(obj)


ROUTER = Router()
KINDS = {k.name: k for k in (ROUTER, RouterInterface(), RouterGateway(),
                             FloatingIP())}
