"""OS::Neutron::VPNService, IKEPolicy, IPsecPolicy and IPsecSiteConnection,
as Heat's (heat/engine/resources/openstack/neutron/vpnservice.py): the
objects of neutron-vpnaas, made through ``clients.cloud`` (kinds
vpnservice, ikepolicy, ipsecpolicy, ipsec_site_connection).

Properties, defaults, allowed values and what changes in place are
Heat's. A VPN service is complete as soon as it is made (Neutron keeps
it PENDING_CREATE until a site connection uses it, and the connection
needs the service complete first); a site connection waits until it is
ACTIVE. A name left out is Heat's physical name.
"""

from converge import exception
from converge.drivers import cloud
from converge.resources import cloud_object as co
from converge.resources import neutron
from converge.resources import properties as p

AUTH_ALGORITHMS = cloud.VPN_AUTH_ALGORITHMS
ENCRYPTION_ALGORITHMS = cloud.VPN_ENCRYPTION_ALGORITHMS
PFS_GROUPS = cloud.VPN_PFS_GROUPS


def _name(what):
    return p.Schema(p.STRING, 'Name for the %s.' % what,
                    update_allowed=True)


def _description(what):
    return p.Schema(p.STRING, 'Description for the %s.' % what,
                    update_allowed=True)


def _lifetime(what, update_allowed):
    return p.Schema(
        p.MAP, 'Safety assessment lifetime configuration for the %s.' % what,
        update_allowed=update_allowed, schema={
            'units': p.Schema(p.STRING, 'Safety assessment lifetime units.',
                              default='seconds',
                              allowed_values=('seconds', 'kilobytes')),
            'value': p.Schema(p.INTEGER, 'Safety assessment lifetime value '
                              'in specified units.', default=3600),
        })


def _auth(what, update_allowed):
    return p.Schema(
        p.STRING, 'Authentication hash algorithm for the %s. Defaults to '
        'sha256 when the vpn-no-sha1-3des Neutron extension is enabled, '
        'otherwise sha1.' % what, default='sha1',
        allowed_values=AUTH_ALGORITHMS, update_allowed=update_allowed)


def _encryption(what, update_allowed):
    return p.Schema(p.STRING, 'Encryption algorithm for the %s.' % what,
                    default='aes-128', allowed_values=ENCRYPTION_ALGORITHMS,
                    update_allowed=update_allowed)


def _lifetime_body(value):
    value = value or {}
    return {'units': value.get('units') or 'seconds',
            'value': value.get('value') if value.get('value') is not None
            else 3600}


class _VPNObject(neutron.NeutronObject):
    """What the four share: the name Heat gives one without, the
    attributes read as the object shows them, and Neutron's vpnaas
    extension (a cloud without it refuses the type at validate:
    engine/stacks.py)."""

    #: (Heat's client name, catalog type, Neutron extension)
    required_service = ('neutron', 'network', 'vpnaas')

    def attributes(self, obj):
        out = super().attributes(obj)
        if 'tenant_id' in self.attributes_schema:
            out['tenant_id'] = self.tenant(obj)
        return out

    def make_body(self):
        props = self.properties
        body = {'name': self.physical_name()}
        for prop in self.sent:
            if props.get(prop) is not None:
                body[prop] = props[prop]
        if 'lifetime' in self.properties_schema:
            body['lifetime'] = _lifetime_body(props.get('lifetime'))
        return body

    #: properties sent as they are, under the same name
    sent = ()


class VPNService(_VPNObject):
    """OS::Neutron::VPNService: a VPN on a router, for a subnet."""

    kind = 'vpnservice'
    title = 'VPNService'
    update_fields = ('name', 'description', 'admin_state_up')
    drift_fields = update_fields
    sent = ('description', 'admin_state_up')

    properties_schema = {
        'name': _name('vpn service'),
        'description': _description('vpn service'),
        'admin_state_up': p.Schema(
            p.BOOLEAN, 'Administrative state for the vpn service.',
            default=True, update_allowed=True),
        'subnet_id': p.Schema(
            p.STRING, 'The subnet (deprecated: use subnet).',
            constraint='neutron.subnet'),
        'subnet': p.Schema(
            p.STRING, 'Subnet in which the vpn service will be created.',
            constraint='neutron.subnet'),
        'router_id': p.Schema(
            p.STRING, 'Unique identifier for the router to which the vpn '
            'service will be inserted (deprecated: use router).',
            constraint='neutron.router'),
        'router': p.Schema(
            p.STRING, 'The router to which the vpn service will be '
            'inserted.', constraint='neutron.router'),
    }

    attributes_schema = {
        'admin_state_up': 'The administrative state of the vpn service.',
        'description': 'The description of the vpn service.',
        'name': 'The name of the vpn service.',
        'router_id': 'The unique identifier of the router to which the vpn '
                     'service was inserted.',
        'status': 'The status of the vpn service.',
        'subnet_id': 'The unique identifier of the subnet in which the vpn '
                     'service was created.',
        'tenant_id': 'The unique identifier of the tenant owning the vpn '
                     'service.',
    }

    @classmethod
    def validate_neutron(cls, values, path):
        # Heat's translation: the deprecated name is the new one; both is
        # a conflict, neither a required property missing
        path = list(path)
        for new, old in (('subnet', 'subnet_id'), ('router', 'router_id')):
            if values.get(new) is not None and values.get(old) is not None:
                raise co.conflict(path + [new], new, old)
            if values.get(new) is None and values.get(old) is None:
                raise exception.InvalidTemplate(
                    'Property %s not assigned' % new, path=path + [new])
        return values

    def make_body(self):
        props = self.properties
        body = super().make_body()
        body['subnet_id'] = self.resolve(
            'subnet', props.get('subnet') or props.get('subnet_id'),
            'subnet')
        body['router_id'] = self.resolve(
            'router', props.get('router') or props.get('router_id'),
            'router')
        return body


class IKEPolicy(_VPNObject):
    """OS::Neutron::IKEPolicy: phase one of a VPN's negotiation."""

    kind = 'ikepolicy'
    title = 'IKEPolicy'
    update_fields = ('name', 'description', 'auth_algorithm',
                     'encryption_algorithm', 'lifetime', 'pfs',
                     'ike_version')
    drift_fields = update_fields
    sent = ('description', 'auth_algorithm', 'encryption_algorithm',
            'phase1_negotiation_mode', 'pfs', 'ike_version')

    properties_schema = {
        'name': _name('ike policy'),
        'description': _description('ike policy'),
        'auth_algorithm': _auth('ike policy', True),
        'encryption_algorithm': _encryption('ike policy', True),
        'phase1_negotiation_mode': p.Schema(
            p.STRING, 'Negotiation mode for the ike policy.',
            default='main', allowed_values=('main',)),
        'lifetime': _lifetime('ike policy', True),
        'pfs': p.Schema(
            p.STRING, 'Perfect forward secrecy in lowercase for the ike '
            'policy.', default='group5', allowed_values=PFS_GROUPS,
            update_allowed=True),
        'ike_version': p.Schema(
            p.STRING, 'Version for the ike policy.', default='v1',
            allowed_values=('v1', 'v2'), update_allowed=True),
    }

    attributes_schema = {
        'auth_algorithm': 'The authentication hash algorithm used by the '
                          'ike policy.',
        'description': 'The description of the ike policy.',
        'encryption_algorithm': 'The encryption algorithm used by the ike '
                                'policy.',
        'ike_version': 'The version of the ike policy.',
        'lifetime': 'The safety assessment lifetime configuration for the '
                    'ike policy.',
        'name': 'The name of the ike policy.',
        'pfs': 'The perfect forward secrecy of the ike policy.',
        'phase1_negotiation_mode': 'The negotiation mode of the ike policy.',
        'tenant_id': 'The unique identifier of the tenant owning the ike '
                     'policy.',
    }


class IPsecPolicy(_VPNObject):
    """OS::Neutron::IPsecPolicy: phase two of a VPN's negotiation."""

    kind = 'ipsecpolicy'
    title = 'IPsecPolicy'
    update_fields = ('name', 'description')
    drift_fields = update_fields
    sent = ('description', 'transform_protocol', 'encapsulation_mode',
            'auth_algorithm', 'encryption_algorithm', 'pfs')

    properties_schema = {
        'name': _name('ipsec policy'),
        'description': _description('ipsec policy'),
        'transform_protocol': p.Schema(
            p.STRING, 'Transform protocol for the ipsec policy.',
            default='esp', allowed_values=('esp', 'ah', 'ah-esp')),
        'encapsulation_mode': p.Schema(
            p.STRING, 'Encapsulation mode for the ipsec policy.',
            default='tunnel', allowed_values=('tunnel', 'transport')),
        'auth_algorithm': _auth('ipsec policy', False),
        'encryption_algorithm': _encryption('ipsec policy', False),
        'lifetime': _lifetime('ipsec policy', False),
        'pfs': p.Schema(
            p.STRING, 'Perfect forward secrecy for the ipsec policy.',
            default='group5', allowed_values=PFS_GROUPS),
    }

    attributes_schema = {
        'auth_algorithm': 'The authentication hash algorithm of the ipsec '
                          'policy.',
        'description': 'The description of the ipsec policy.',
        'encapsulation_mode': 'The encapsulation mode of the ipsec policy.',
        'encryption_algorithm': 'The encryption algorithm of the ipsec '
                                'policy.',
        'lifetime': 'The safety assessment lifetime configuration of the '
                    'ipsec policy.',
        'name': 'The name of the ipsec policy.',
        'pfs': 'The perfect forward secrecy of the ipsec policy.',
        'tenant_id': 'The unique identifier of the tenant owning the ipsec '
                     'policy.',
        'transform_protocol': 'The transform protocol of the ipsec policy.',
    }


class IPsecSiteConnection(_VPNObject):
    """OS::Neutron::IPsecSiteConnection: the tunnel to a peer, over a VPN
    service with an IKE and an IPsec policy. Its create waits until the
    connection is ACTIVE."""

    kind = 'ipsec_site_connection'
    title = 'IPsecSiteConnection'
    update_fields = ('name', 'description', 'admin_state_up')
    drift_fields = update_fields
    sent = ('description', 'peer_address', 'peer_id', 'peer_cidrs', 'mtu',
            'psk', 'initiator', 'admin_state_up', 'ikepolicy_id',
            'ipsecpolicy_id', 'vpnservice_id')

    properties_schema = {
        'name': _name('ipsec site connection'),
        'description': _description('ipsec site connection'),
        'peer_address': p.Schema(
            p.STRING, 'Remote branch router public IPv4 address or IPv6 '
            'address or FQDN.', required=True),
        'peer_id': p.Schema(p.STRING, 'Remote branch router identity.',
                            required=True),
        'peer_cidrs': p.Schema(
            p.LIST, 'Remote subnet(s) in CIDR format.', required=True,
            schema=p.Schema(p.STRING, constraint='net_cidr')),
        'mtu': p.Schema(
            p.INTEGER, 'Maximum transmission unit size (in bytes) for the '
            'ipsec site connection.', default=1500),
        'dpd': p.Schema(
            p.MAP, 'Dead Peer Detection protocol configuration for the '
            'ipsec site connection.', schema={
                'actions': p.Schema(
                    p.STRING, 'Controls DPD protocol mode.', default='hold',
                    allowed_values=('clear', 'disabled', 'hold', 'restart',
                                    'restart-by-peer')),
                'interval': p.Schema(
                    p.INTEGER, 'Number of seconds for the DPD delay.',
                    default=30),
                'timeout': p.Schema(
                    p.INTEGER, 'Number of seconds for the DPD timeout.',
                    default=120),
            }),
        'psk': p.Schema(
            p.STRING, 'Pre-shared key string for the ipsec site '
            'connection.', required=True),
        'initiator': p.Schema(
            p.STRING, 'Initiator state in lowercase for the ipsec site '
            'connection.', default='bi-directional',
            allowed_values=('bi-directional', 'response-only')),
        'admin_state_up': p.Schema(
            p.BOOLEAN, 'Administrative state for the ipsec site connection.',
            default=True, update_allowed=True),
        'ikepolicy_id': p.Schema(
            p.STRING, 'Unique identifier for the ike policy associated with '
            'the ipsec site connection.', required=True),
        'ipsecpolicy_id': p.Schema(
            p.STRING, 'Unique identifier for the ipsec policy associated '
            'with the ipsec site connection.', required=True),
        'vpnservice_id': p.Schema(
            p.STRING, 'Unique identifier for the vpn service associated '
            'with the ipsec site connection.', required=True),
    }

    attributes_schema = {
        'admin_state_up': 'The administrative state of the ipsec site '
                          'connection.',
        'auth_mode': 'The authentication mode of the ipsec site connection.',
        'description': 'The description of the ipsec site connection.',
        'dpd': 'The dead peer detection protocol configuration of the ipsec '
               'site connection.',
        'ikepolicy_id': 'The unique identifier of ike policy associated '
                        'with the ipsec site connection.',
        'initiator': 'The initiator of the ipsec site connection.',
        'ipsecpolicy_id': 'The unique identifier of ipsec policy associated '
                          'with the ipsec site connection.',
        'mtu': 'The maximum transmission unit size (in bytes) of the ipsec '
               'site connection.',
        'name': 'The name of the ipsec site connection.',
        'peer_address': 'The remote branch router public IPv4 address or '
                        'IPv6 address or FQDN.',
        'peer_cidrs': 'The remote subnet(s) in CIDR format of the ipsec '
                      'site connection.',
        'peer_id': 'The remote branch router identity of the ipsec site '
                   'connection.',
        'psk': 'The pre-shared key string of the ipsec site connection.',
        'route_mode': 'The route mode of the ipsec site connection.',
        'status': 'The status of the ipsec site connection.',
        'tenant_id': 'The unique identifier of the tenant owning the ipsec '
                     'site connection.',
        'vpnservice_id': 'The unique identifier of vpn service associated '
                         'with the ipsec site connection.',
    }

    def make_body(self):
        body = super().make_body()
        dpd = self.properties.get('dpd')
        if dpd is not None:
            # Neutron's field is "action" (Heat's property "actions")
            body['dpd'] = {'action': dpd.get('actions') or 'hold',
                           'interval': dpd.get('interval') or 30,
                           'timeout': dpd.get('timeout') or 120}
        return body
