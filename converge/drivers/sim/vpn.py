"""Neutron's VPNaaS kinds on the sim: VPN services, IKE and IPsec policies
and IPsec site connections (neutron-vpnaas's API, its defaults and
refusals as a template sees them).

A VPN service sits on a router and a subnet; it shows PENDING_CREATE
until a site connection uses it, ACTIVE after (as neutron-vpnaas does
once a connection is up: the sim has no peer to wait for, so a
connection is ACTIVE when made). A service or policy a connection uses
is not deleted (409), nor a router a service sits on.

Every object carries its key as a tag, like the sim's other Neutron
kinds.
"""

import ipaddress

from converge.drivers import cloud
from converge.drivers.sim.neutron import (
    COMMON, NeutronKind, boolean, required, subnet_or_404)
from converge.drivers.sim.rows import bad, conflict, missing

AUTH_ALGORITHMS = cloud.VPN_AUTH_ALGORITHMS
ENCRYPTION_ALGORITHMS = cloud.VPN_ENCRYPTION_ALGORITHMS
PFS_GROUPS = cloud.VPN_PFS_GROUPS
DPD_ACTIONS = ('clear', 'disabled', 'hold', 'restart', 'restart-by-peer')


def _one_of(body, field, allowed, default):
    value = body.get(field, default)
    if value not in allowed:
        raise bad("Invalid input for %s. Reason: '%s' is not in %s." % (
            field, value, list(allowed)))
    return value


def _lifetime(value, old=None):
    value = dict(old or {'units': 'seconds', 'value': 3600},
                 **(value or {}))
    if value['units'] not in ('seconds', 'kilobytes'):
        raise bad("Invalid input for lifetime. Reason: '%s' is not in "
                  "['seconds', 'kilobytes']." % value['units'])
    try:
        value['value'] = int(value['value'])
    except (TypeError, ValueError):
        value['value'] = -1
    if value['value'] < 60:
        raise bad('Invalid input for lifetime. Reason: the value must be '
                  'an integer of at least 60.')
    return value


class _Policy(NeutronKind):
    """What IKE and IPsec policies share: their algorithms, checked and
    defaulted as neutron-vpnaas does, all changeable in place."""

    #: field -> (allowed values, default)
    choices = {}

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        stored = self.base(body)
        for field, (allowed, default) in self.choices.items():
            stored[field] = _one_of(body, field, allowed, default)
        stored['lifetime'] = _lifetime(body.get('lifetime'))
        return ctx.insert(self.new(ctx, stored, key))

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        self.set_common(obj, body)
        for field, (allowed, _) in self.choices.items():
            if field in body:
                obj.body[field] = _one_of(body, field, allowed, None)
        if 'lifetime' in body:
            obj.body['lifetime'] = _lifetime(body['lifetime'],
                                             obj.body['lifetime'])
        self.revised(obj)
        return ctx.save(obj)

    def delete(self, ctx, obj, latency):
        field = self.name + '_id'
        for conn in ctx.all('ipsec_site_connection', visible_only=False):
            if conn.body.get(field) == obj.id:
                raise conflict('%s %s in use by %s' % (
                    self.title, obj.id, conn.id))
        ctx.remove(obj)


class IKEPolicy(_Policy):
    name = 'ikepolicy'
    title = 'IKEPolicy'
    fields = COMMON + ('auth_algorithm', 'encryption_algorithm',
                       'phase1_negotiation_mode', 'lifetime', 'pfs',
                       'ike_version')
    updatable = fields
    choices = {
        'auth_algorithm': (AUTH_ALGORITHMS, 'sha1'),
        'encryption_algorithm': (ENCRYPTION_ALGORITHMS, 'aes-128'),
        'phase1_negotiation_mode': (('main', 'aggressive'), 'main'),
        'pfs': (PFS_GROUPS, 'group5'),
        'ike_version': (('v1', 'v2'), 'v1'),
    }


class IPsecPolicy(_Policy):
    name = 'ipsecpolicy'
    title = 'IPsecPolicy'
    fields = COMMON + ('transform_protocol', 'encapsulation_mode',
                       'auth_algorithm', 'encryption_algorithm', 'lifetime',
                       'pfs')
    updatable = fields
    choices = {
        'transform_protocol': (('esp', 'ah', 'ah-esp'), 'esp'),
        'encapsulation_mode': (('tunnel', 'transport'), 'tunnel'),
        'auth_algorithm': (AUTH_ALGORITHMS, 'sha1'),
        'encryption_algorithm': (ENCRYPTION_ALGORITHMS, 'aes-128'),
        'pfs': (PFS_GROUPS, 'group5'),
    }


class VPNService(NeutronKind):
    name = 'vpnservice'
    title = 'VPNService'
    fields = COMMON + ('admin_state_up', 'subnet_id', 'router_id',
                       'flavor_id')
    updatable = COMMON + ('admin_state_up',)

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        router = ctx.visible('router', required(body, 'router_id',
                                                self.name))
        if router is None:
            raise missing('Router %s could not be found' % body['router_id'])
        subnet = subnet_or_404(ctx, body['subnet_id']) \
            if body.get('subnet_id') else None
        stored = dict(self.base(body), **{
            'admin_state_up': boolean(body.get('admin_state_up', True),
                                      'admin_state_up'),
            'router_id': router.id,
            'subnet_id': subnet.id if subnet is not None else None,
            'flavor_id': body.get('flavor_id'),
            'external_v4_ip': _gateway_ip(router, 4),
            'external_v6_ip': _gateway_ip(router, 6)})
        return ctx.insert(self.new(ctx, stored, key, parent=router.id,
                                   status='PENDING_CREATE'))

    def show(self, ctx, obj):
        view = super().show(ctx, obj)
        used = any(c.body.get('vpnservice_id') == obj.id for c in ctx.all(
            'ipsec_site_connection', visible_only=False))
        view['status'] = 'ACTIVE' if used else 'PENDING_CREATE'
        return view

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        self.set_common(obj, body)
        if 'admin_state_up' in body:
            obj.body['admin_state_up'] = boolean(body['admin_state_up'],
                                                 'admin_state_up')
        self.revised(obj)
        return ctx.save(obj)

    def delete(self, ctx, obj, latency):
        for conn in ctx.all('ipsec_site_connection', visible_only=False):
            if conn.body.get('vpnservice_id') == obj.id:
                raise conflict('VPNService %s is still in use' % obj.id)
        ctx.remove(obj)


def _gateway_ip(router, version):
    info = router.body.get('external_gateway_info') or {}
    for fixed in info.get('external_fixed_ips') or []:
        address = fixed.get('ip_address')
        if address and ipaddress.ip_address(address).version == version:
            return address
    return None


def in_use_by_vpn(ctx, router):
    """The refusal of a router's delete while a VPN service sits on it."""
    for service in ctx.all('vpnservice', parent=router.id,
                           visible_only=False):
        raise conflict('Router %s is used by VPNService %s' % (
            router.id, service.id))


class IPsecSiteConnection(NeutronKind):
    name = 'ipsec_site_connection'
    title = 'IPsecSiteConnection'
    fields = COMMON + ('peer_address', 'peer_id', 'peer_cidrs',
                       'local_ep_group_id', 'peer_ep_group_id', 'route_mode',
                       'mtu', 'initiator', 'auth_mode', 'psk', 'dpd',
                       'admin_state_up', 'vpnservice_id', 'ikepolicy_id',
                       'ipsecpolicy_id', 'local_id')
    updatable = COMMON + ('peer_address', 'peer_id', 'peer_cidrs', 'mtu',
                          'initiator', 'psk', 'dpd', 'admin_state_up',
                          'local_id', 'local_ep_group_id',
                          'peer_ep_group_id')

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        found = {}
        for kind in ('vpnservice', 'ikepolicy', 'ipsecpolicy'):
            ref = required(body, kind + '_id', self.name)
            obj = ctx.visible(kind, ref)
            if obj is None:
                raise missing('%s %s could not be found' % (
                    KINDS[kind].title, ref))
            found[kind] = obj
        for field in ('peer_address', 'peer_id', 'psk'):
            required(body, field, self.name)
        stored = dict(self.base(body), **{
            'peer_address': body['peer_address'],
            'peer_id': body['peer_id'], 'psk': body['psk'],
            'local_id': body.get('local_id') or '',
            'peer_cidrs': _cidrs(body.get('peer_cidrs')),
            'local_ep_group_id': body.get('local_ep_group_id'),
            'peer_ep_group_id': body.get('peer_ep_group_id'),
            'route_mode': 'static', 'auth_mode': 'psk',
            'mtu': _mtu(body.get('mtu', 1500)),
            'initiator': _one_of(body, 'initiator',
                                 ('bi-directional', 'response-only'),
                                 'bi-directional'),
            'dpd': _dpd(body.get('dpd')),
            'admin_state_up': boolean(body.get('admin_state_up', True),
                                      'admin_state_up'),
            'vpnservice_id': found['vpnservice'].id,
            'ikepolicy_id': found['ikepolicy'].id,
            'ipsecpolicy_id': found['ipsecpolicy'].id})
        return ctx.insert(self.new(ctx, stored, key,
                                   parent=found['vpnservice'].id,
                                   status='ACTIVE'))

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        self.set_common(obj, body)
        for field in ('peer_address', 'peer_id', 'psk', 'local_id',
                      'local_ep_group_id', 'peer_ep_group_id'):
            if field in body:
                obj.body[field] = body[field]
        if 'peer_cidrs' in body:
            obj.body['peer_cidrs'] = _cidrs(body['peer_cidrs'])
        if 'mtu' in body:
            obj.body['mtu'] = _mtu(body['mtu'])
        if 'initiator' in body:
            obj.body['initiator'] = _one_of(
                body, 'initiator', ('bi-directional', 'response-only'), None)
        if 'dpd' in body:
            obj.body['dpd'] = _dpd(body['dpd'], obj.body['dpd'])
        if 'admin_state_up' in body:
            obj.body['admin_state_up'] = boolean(body['admin_state_up'],
                                                 'admin_state_up')
        self.revised(obj)
        return ctx.save(obj)


def _cidrs(value):
    out = []
    for cidr in value or []:
        try:
            out.append(str(ipaddress.ip_network(cidr, strict=False)))
        except ValueError:
            raise bad("Invalid input for peer_cidrs. Reason: '%s' is not a "
                      "valid IP subnet." % cidr)
    return out


def _mtu(value):
    try:
        mtu = int(value)
    except (TypeError, ValueError):
        mtu = 0
    if mtu < 68:
        raise bad('Invalid input for mtu. Reason: %r is not a valid MTU '
                  '(at least 68).' % (value,))
    return mtu


def _dpd(value, old=None):
    dpd = dict(old or {'action': 'hold', 'interval': 30, 'timeout': 120})
    value = dict(value or {})
    if 'actions' in value:   # the key Heat's property has
        value['action'] = value.pop('actions')
    unknown = sorted(set(value) - {'action', 'interval', 'timeout'})
    if unknown:
        raise bad('Invalid input for dpd. Reason: Unexpected keys supplied: '
                  '%s' % ', '.join(unknown))
    dpd.update(value)
    if dpd['action'] not in DPD_ACTIONS:
        raise bad("Invalid input for dpd. Reason: '%s' is not in %s." % (
            dpd['action'], list(DPD_ACTIONS)))
    for field in ('interval', 'timeout'):
        try:
            dpd[field] = int(dpd[field])
        except (TypeError, ValueError):
            dpd[field] = -1
        if dpd[field] <= 0:
            raise bad('Invalid input for dpd. Reason: %s must be a positive '
                      'integer.' % field)
    if dpd['timeout'] <= dpd['interval']:
        raise bad('Invalid input for dpd. Reason: DPD timeout must be '
                  'greater than its interval.')
    return dpd


KINDS = {k.name: k for k in (VPNService(), IKEPolicy(), IPsecPolicy(),
                             IPsecSiteConnection())}
