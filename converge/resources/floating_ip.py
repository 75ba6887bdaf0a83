"""OS::Neutron::FloatingIP and OS::Neutron::FloatingIPAssociation, as
Heat's (heat/engine/resources/openstack/neutron/floatingip.py), made
through ``clients.cloud``.

A floating IP's association (``port_id``, ``fixed_ip_address``) changes
in place; so does an association's floating IP or port (the old floating
IP is let go first). Heat allows ``dns_name`` and ``dns_domain`` to
change in place but does not send the change; neither does converge.
"""

from converge import exception
from converge.resources import base
from converge.resources import cloud_object as co
from converge.resources import constraints
from converge.resources import neutron
from converge.resources import none
from converge.resources import properties as p
from converge.resources import router


class FloatingIP(neutron.NeutronObject):
    """OS::Neutron::FloatingIP: an address on an external network."""

    kind = 'floating_ip'
    title = 'Floating IP'
    update_fields = ('port_id', 'fixed_ip_address')
    drift_fields = ('port_id', 'fixed_ip_address')
    cleared = {'port_id': None, 'fixed_ip_address': None}

    @classmethod
    def implied_requires(cls, props, others):
        # an address on an external network is reachable once a router
        # of the template has its gateway there (Heat's floating IP)
        network = props.get('floating_network') or \
            props.get('floating_network_id')
        if not network or neutron.has_unknown(network):
            return ()
        return [name for name, rprops in others.of(router.Router)
                if isinstance(rprops.get('external_gateway_info'), dict)
                and rprops.get('external_gateway_info').get('network') ==
                network]

    properties_schema = {
        'floating_network_id': p.Schema(
            p.STRING, 'ID of the network (deprecated: use '
            'floating_network).', constraint='neutron.network'),
        'floating_network': p.Schema(
            p.STRING, 'Network to allocate floating IP from.',
            constraint='neutron.network'),
        'floating_subnet': p.Schema(
            p.STRING, 'Subnet to allocate floating IP from.',
            constraint='neutron.subnet'),
        'value_specs': p.Schema(
            p.MAP, 'Extra parameters to include in the "floatingip" object '
            'in the creation request. Parameters are often specific to '
            'installed hardware or extensions.', default={}),
        'port_id': p.Schema(
            p.STRING, 'ID of an existing port with at least one IP address '
            'to associate with this floating IP.', update_allowed=True,
            constraint='neutron.port'),
        'fixed_ip_address': p.Schema(
            p.STRING, 'IP address to use if the port has multiple '
            'addresses.', update_allowed=True, constraint='ip_addr'),
        'floating_ip_address': p.Schema(
            p.STRING, 'IP address of the floating IP. NOTE: The default '
            'policy setting in Neutron restricts usage of this property to '
            'administrative users only.', constraint='ip_addr'),
        'dns_name': p.Schema(
            p.STRING, 'DNS name associated with floating ip.',
            update_allowed=True),
        'dns_domain': p.Schema(
            p.STRING, 'DNS domain associated with floating ip.',
            update_allowed=True),
    }

    attributes_schema = {
        'router_id': 'ID of the router used as gateway, set when associated '
                     'with a port.',
        'tenant_id': 'The tenant owning this floating IP.',
        'floating_network_id': 'ID of the network in which this IP is '
                               'allocated.',
        'fixed_ip_address': 'IP address of the associated port, if '
                            'specified.',
        'floating_ip_address': 'The allocated address of this IP.',
        'port_id': 'ID of the port associated with this IP.',
    }

    @classmethod
    def validate_neutron(cls, values, path):
        path = list(path)
        net, net_id = values.get('floating_network'), \
            values.get('floating_network_id')
        if net is not None and net_id is not None:
            raise co.conflict(path + ['floating_network'],
                              'floating_network', 'floating_network_id')
        if net is None and net_id is None:
            raise exception.InvalidTemplate(
                'Property floating_network not assigned',
                path=path + ['floating_network'])
        if values.get('port_id') is None and \
                values.get('fixed_ip_address') is not None:
            raise exception.InvalidTemplate(
                'fixed_ip_address specified without port_id.',
                path=path + ['fixed_ip_address'])
        return values

    def make_body(self):
        props = self.properties
        network = props.get('floating_network') or \
            props.get('floating_network_id')
        body = {'floating_network_id': self.resolve(
            'network', network, 'floating_network'),
            # always said, so that an association made behind converge's
            # back is seen (drift) and undone
            'port_id': self.resolve('port', props.get('port_id'),
                                    'port_id')}
        if props.get('floating_subnet'):
            body['subnet_id'] = self.resolve(
                'subnet', props['floating_subnet'], 'floating_subnet')
        return self.extras(body, ('fixed_ip_address', 'fixed_ip_address'),
                           ('floating_ip_address', 'floating_ip_address'),
                           ('dns_name', 'dns_name'),
                           ('dns_domain', 'dns_domain'))

    def changes(self, prior, obj, body):
        out = super().changes(prior, obj, body)
        if out:
            # Heat sends the association whole: the port, and the address
            # on it (None: Neutron takes the port's first)
            out = {'port_id': body.get('port_id'),
                   'fixed_ip_address': body.get('fixed_ip_address')}
        return out

    def attributes(self, obj):
        out = super().attributes(obj)
        out['tenant_id'] = self.tenant(obj)
        return out


class FloatingIPAssociation(base.Resource):
    """OS::Neutron::FloatingIPAssociation: a floating IP given to a port.
    It makes nothing of its own: its create and update set the floating
    IP's port, its delete takes the port off (if it is still ours)."""

    # setting the port again finds it set: a repeated create is harmless
    adopts_by_key = True

    properties_schema = {
        'floatingip_id': p.Schema(
            p.STRING, 'ID of the floating IP to associate.', required=True,
            update_allowed=True),
        'port_id': p.Schema(
            p.STRING, 'ID of an existing port with at least one IP address '
            'to associate with this floating IP.', required=True,
            update_allowed=True, constraint='neutron.port'),
        'fixed_ip_address': p.Schema(
            p.STRING, 'IP address to use if the port has multiple '
            'addresses.', update_allowed=True, constraint='ip_addr'),
    }
    attributes_schema = {}

    @classmethod
    def validate_more(cls, values, path):
        constraints.check_local(cls, values, path)
        return values

    @property
    def cloud(self):
        return self.clients.cloud

    @property
    def computes_locally(self):
        return co.CloudObject.computes_locally.fget(self)

    def _wanted(self):
        props = self.properties
        port = props.get('port_id')
        try:
            port = self.cloud.resolve('port', port)
        except exception.CloudTransient:
            raise
        except exception.CloudError as exc:
            raise exception.ResourceFailure('%s: property port_id: %s' % (
                self.name, exc))
        return {'floatingip_id': props.get('floatingip_id'),
                'port_id': port,
                'fixed_ip_address': props.get('fixed_ip_address')}

    def _fip(self, fip_id):
        try:
            return self.cloud.get('floating_ip', fip_id)
        except exception.CloudNotFound:
            return None

    def _associate(self, want):
        obj = self.cloud.update('floating_ip', want['floatingip_id'], {
            'port_id': want['port_id'],
            'fixed_ip_address': want['fixed_ip_address']})
        self.physical_id = none.derived_uuid(self.uuid, 'fip-association')
        self.data['applied'] = want
        self.seen = obj
        return None

    def _release(self, applied):
        """Take the port off the floating IP, if it is still ours."""
        fip = self._fip(applied['floatingip_id'])
        if fip is None or fip.get('port_id') != applied['port_id']:
            return
        try:
            self.cloud.update('floating_ip', applied['floatingip_id'],
                              {'port_id': None})
        except exception.CloudNotFound:
            pass

    def owned(self, shared=False):
        # its id is its own; the floating IP its data names is not
        fip = (self.data.get('applied') or {}).get('floatingip_id')
        return fip is None or self.cloud.owns('floating_ip', fip)

    def observe(self):
        applied = self.data.get('applied')
        if applied is None:
            try:
                applied = self._wanted()
            except exception.ResourceFailure:
                return None   # its port is gone: so is the association
        fip = self._fip(applied['floatingip_id'])
        if fip is None or fip.get('port_id') != applied['port_id']:
            return None
        if not self.physical_id:
            self.physical_id = none.derived_uuid(self.uuid,
                                                 'fip-association')
        return fip

    def create(self):
        return self._associate(self._wanted())

    def update(self, prior, observed):
        want = self._wanted()
        applied = self.data.get('applied')
        if applied and applied['floatingip_id'] != want['floatingip_id']:
            # Heat: the old floating IP lets go of the port first
            self._release(applied)
        return self._associate(want)

    def delete(self):
        applied = self.data.get('applied')
        if applied is None:
            if not self.physical_id:
                return None
            try:
                applied = self._wanted()
            except exception.ResourceFailure:
                return None
        self._release(applied)
        return None

    def drift(self, observed):
        applied = self.data.get('applied') or {}
        want_ip = applied.get('fixed_ip_address')
        if observed and want_ip and \
                observed.get('fixed_ip_address') != want_ip:
            return {'fixed_ip_address': (observed.get('fixed_ip_address'),
                                         want_ip)}
        return {}

    def check(self, observed):
        if observed is None:
            raise exception.ResourceFailure(
                'Floating IP association %s does not exist' % self.name)

    def get_attributes(self, observed):
        return {'show': dict(observed) if observed else None}
