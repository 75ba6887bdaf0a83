"""OS::Neutron::Router, OS::Neutron::RouterInterface and
OS::Neutron::ExtraRouteSet, as Heat's (heat/engine/resources/openstack/
neutron/router.py, extrarouteset.py), made through ``clients.cloud``.

A router's gateway is its ``external_gateway_info`` (set, changed and
removed in place); its interfaces are RouterInterface resources, each
found again by its router and subnet (or port), which is its identity.
"""

from converge import exception
from converge.resources import base
from converge.resources import cloud_object as co
from converge.resources import constraints
from converge.resources import neutron
from converge.resources import properties as p

_GATEWAY = {
    'network': p.Schema(
        p.STRING, 'ID or name of the external network for the gateway.',
        required=True, update_allowed=True, constraint='neutron.network'),
    'enable_snat': p.Schema(
        p.BOOLEAN, 'Enables Source NAT on the router gateway. NOTE: The '
        'default policy setting in Neutron restricts usage of this property '
        'to administrative users only.', update_allowed=True),
    'external_fixed_ips': p.Schema(
        p.LIST, 'External fixed IP addresses for the gateway.',
        update_allowed=True, schema={
            'ip_address': p.Schema(p.STRING, 'External fixed IP address.',
                                   constraint='ip_addr'),
            'subnet': p.Schema(
                p.STRING, 'Subnet of external fixed IP address.',
                constraint='neutron.subnet'),
        }),
}


class Router(neutron.NeutronObject):
    """OS::Neutron::Router: a router, with its external gateway."""

    kind = 'router'
    title = 'Router'
    update_fields = ('name', 'admin_state_up', 'external_gateway_info',
                     'tags')
    drift_fields = ('name', 'admin_state_up', 'tags')
    # a gateway taken out of the template is removed (Heat sends null)
    cleared = {'external_gateway_info': None, 'tags': []}

    properties_schema = {
        'name': p.Schema(p.STRING, 'The name of the router.',
                         update_allowed=True),
        'external_gateway_info': p.Schema(
            p.MAP, 'External network gateway configuration for a router.',
            schema=_GATEWAY, update_allowed=True),
        'value_specs': p.Schema(
            p.MAP, 'Extra parameters to include in the creation request.',
            default={}, update_allowed=True),
        'admin_state_up': p.Schema(
            p.BOOLEAN, 'The administrative state of the router.',
            default=True, update_allowed=True),
        'l3_agent_id': p.Schema(
            p.STRING, 'ID of the L3 agent (deprecated: use l3_agent_ids; '
            'not supported by converge).', update_allowed=True),
        'l3_agent_ids': p.Schema(
            p.LIST, 'ID list of the L3 agent (not supported by converge).',
            schema=p.Schema(p.STRING), update_allowed=True),
        'distributed': p.Schema(
            p.BOOLEAN, 'Indicates whether or not to create a distributed '
            'router. NOTE: The default policy setting in Neutron restricts '
            'usage of this property to administrative users only. This '
            'property can not be used in conjunction with the L3 agent '
            'ID.'),
        'ha': p.Schema(
            p.BOOLEAN, 'Indicates whether or not to create a highly '
            'available router. NOTE: The default policy setting in Neutron '
            'restricts usage of this property to administrative users only. '
            'And now neutron do not support distributed and ha at the same '
            'time.'),
        'availability_zone_hints': p.Schema(
            p.LIST, 'Availability zone candidates for the router. It '
            'requires the availability_zone extension to be available.',
            update_allowed=True),
        'tags': neutron.tags_schema('router'),
        'tenant_id': p.Schema(
            p.STRING, 'The ID of the tenant which will own the router. Only '
            'administrative users can set the tenant identifier; this '
            'cannot be changed using authorization policies.'),
    }

    attributes_schema = {
        'status': 'The status of the router.',
        'external_gateway_info': 'Gateway network for the router.',
        'name': 'Friendly name of the router.',
        'admin_state_up': 'Administrative state of the router.',
        'tenant_id': 'Tenant owning the router.',
    }

    @classmethod
    def validate_neutron(cls, values, path):
        path = list(path)
        agent, agents = values.get('l3_agent_id'), values.get('l3_agent_ids')
        if agent and agents:
            raise co.conflict(path + ['l3_agent_ids'], 'l3_agent_id',
                              'l3_agent_ids')
        if values.get('distributed') and (agent or agents):
            raise co.conflict(path + ['distributed'], 'distributed',
                              'l3_agent_id/l3_agent_ids')
        if values.get('ha') and values.get('distributed'):
            raise co.conflict(path + ['ha'], 'distributed', 'ha')
        if agent or agents:
            # scheduling a router on L3 agents is an admin API the cloud
            # interface does not carry
            raise exception.InvalidTemplate(
                'l3_agent_id and l3_agent_ids are not supported by '
                'converge', path=path + ['l3_agent_ids' if agents
                                         else 'l3_agent_id'])
        return values

    def make_body(self):
        props = self.properties
        body = {'name': self.physical_name(),
                'admin_state_up': props.get('admin_state_up', True)}
        gateway = self._gateway(props.get('external_gateway_info'))
        if gateway is not None:
            body['external_gateway_info'] = gateway
        return self.extras(body, ('distributed', 'distributed'),
                           ('ha', 'ha'), ('tenant_id', 'tenant_id'),
                           ('availability_zone_hints',
                            'availability_zone_hints'))

    def _gateway(self, info):
        if not info:
            return None
        where = 'external_gateway_info.'
        gateway = {'network_id': self.resolve('network', info.get('network'),
                                              where + 'network')}
        if info.get('enable_snat') is not None:
            gateway['enable_snat'] = info['enable_snat']
        if info.get('external_fixed_ips') is not None:
            ips = []
            for i, item in enumerate(info['external_fixed_ips']):
                ip = {}
                if item.get('subnet'):
                    ip['subnet_id'] = self.resolve(
                        'subnet', item['subnet'],
                        where + 'external_fixed_ips.%d.subnet' % i)
                if item.get('ip_address'):
                    ip['ip_address'] = item['ip_address']
                ips.append(ip)
            gateway['external_fixed_ips'] = ips
        return gateway

    def drift(self, observed):
        out = super().drift(observed)
        applied = (self.data.get('applied') or {}).get(
            'external_gateway_info')
        if observed and 'applied' in self.data:
            seen = observed.get('external_gateway_info') or None
            if not _same_gateway(seen, applied):
                out['external_gateway_info'] = (seen, applied)
        return out

    def changes(self, prior, obj, body):
        out = super().changes(prior, obj, body)
        want = body.get('external_gateway_info')
        if 'external_gateway_info' not in out and \
                'applied' in self.data and not _same_gateway(
                    obj.get('external_gateway_info') or None, want):
            out['external_gateway_info'] = want   # put back what was changed
        return out

    def attributes(self, obj):
        out = super().attributes(obj)
        out['tenant_id'] = self.tenant(obj)
        return out


def _same_gateway(seen, wanted):
    """Whether the observed gateway is the one wanted: the same network,
    and the snat and addresses asked for (Neutron fills in the rest)."""
    if not wanted:
        return not (seen or {}).get('network_id')
    seen = seen or {}
    if seen.get('network_id') != wanted.get('network_id'):
        return False
    if wanted.get('enable_snat') is not None and \
            seen.get('enable_snat') is not None and \
            seen['enable_snat'] != wanted['enable_snat']:
        return False
    for want in wanted.get('external_fixed_ips') or []:
        if not any(all(got.get(k) == v for k, v in want.items())
                   for got in seen.get('external_fixed_ips') or []):
            return False
    return True


class RouterInterface(neutron.NeutronObject):
    """OS::Neutron::RouterInterface: a router's port on a subnet (or a
    given port). Nothing of it changes in place: any change replaces
    it."""

    kind = 'router_interface'
    title = 'Router interface'
    natural_identity = True

    properties_schema = {
        'router': p.Schema(p.STRING, 'The router.',
                           constraint='neutron.router'),
        'router_id': p.Schema(
            p.STRING, 'ID of the router (deprecated: use router).',
            constraint='neutron.router'),
        'subnet_id': p.Schema(
            p.STRING, 'The subnet (deprecated: use subnet).',
            constraint='neutron.subnet'),
        'subnet': p.Schema(
            p.STRING, 'The subnet, either subnet or port should be '
            'specified.', constraint='neutron.subnet'),
        'port_id': p.Schema(
            p.STRING, 'The port id (deprecated: use port).',
            constraint='neutron.port'),
        'port': p.Schema(
            p.STRING, 'The port, either subnet or port should be '
            'specified.', constraint='neutron.port'),
    }
    attributes_schema = {}

    @classmethod
    def validate_neutron(cls, values, path):
        path = list(path)
        for new, old in (('router', 'router_id'), ('subnet', 'subnet_id'),
                         ('port', 'port_id')):
            if values.get(new) is not None and values.get(old) is not None:
                raise co.conflict(path + [new], new, old)
        if values.get('router') is None and values.get('router_id') is None:
            raise exception.InvalidTemplate('Property router not assigned',
                                            path=path + ['router'])
        subnet = values.get('subnet', values.get('subnet_id'))
        port = values.get('port', values.get('port_id'))
        if subnet is not None and port is not None:
            raise co.conflict(path + ['port'], 'subnet', 'port')
        if subnet is None and port is None:
            raise co.unspecified(path + ['subnet'], 'subnet', 'port')
        return values

    def make_body(self):
        props = self.properties
        body = {'router_id': self.resolve(
            'router', props.get('router') or props.get('router_id'),
            'router')}
        subnet = props.get('subnet') or props.get('subnet_id')
        if subnet:
            body['subnet_id'] = self.resolve('subnet', subnet, 'subnet')
        else:
            body['port_id'] = self.resolve(
                'port', props.get('port') or props.get('port_id'), 'port')
        return body

    def attributes(self, obj):
        return {}


class RouterGateway(neutron.NeutronObject):
    """OS::Neutron::RouterGateway: a router's external gateway as a
    resource of its own (Heat's, deprecated then hidden since 5.0.0 in
    favour of the router's ``external_gateway_info``, yet still run for
    the templates that use it). Made, the router has its gateway on the
    network; deleted, it has none. Nothing changes in place."""

    kind = 'router_gateway'
    title = 'Router gateway'
    natural_identity = True
    support_status = 'HIDDEN'   # engine/catalog.py

    properties_schema = {
        'router_id': p.Schema(p.STRING, 'ID of the router.', required=True,
                              constraint='neutron.router'),
        'network_id': p.Schema(
            p.STRING, 'The external network (deprecated: use network).',
            constraint='neutron.network'),
        'network': p.Schema(p.STRING, 'external network for the gateway.',
                            constraint='neutron.network'),
    }
    attributes_schema = {}

    @classmethod
    def validate_neutron(cls, values, path):
        if values.get('network') is not None and \
                values.get('network_id') is not None:
            raise co.conflict(list(path) + ['network'], 'network',
                              'network_id')
        return values

    def make_body(self):
        props = self.properties
        return {'router_id': self.resolve('router', props.get('router_id'),
                                          'router_id'),
                'network_id': self.resolve(
                    'network', props.get('network') or
                    props.get('network_id'), 'network')}

    def attributes(self, obj):
        return {}


def _routes(values):
    """The routes as Neutron keeps them: {destination, nexthop}."""
    return [{'destination': r['destination'], 'nexthop': r['nexthop']}
            for r in values or [] if isinstance(r, dict)]


class ExtraRouteSet(base.Resource):
    """OS::Neutron::ExtraRouteSet: extra routes of a router, as Heat's
    (heat/engine/resources/openstack/neutron/extrarouteset.py). The
    routes are added to those the router has and taken out again when
    the set changes or goes, with Neutron's atomic add_extraroutes and
    remove_extraroutes: several sets (and routes set by hand) share one
    router. Its physical id is the router's, as Heat's."""

    properties_schema = {
        'router': p.Schema(p.STRING, 'The router id.', required=True,
                           constraint='neutron.router'),
        'routes': p.Schema(
            p.LIST, 'A set of route dictionaries for the router.',
            default=[], update_allowed=True, schema=p.Schema(
                p.MAP, schema={
                    'destination': p.Schema(
                        p.STRING, 'The destination network in CIDR '
                        'notation.', required=True, constraint='net_cidr'),
                    'nexthop': p.Schema(
                        p.STRING, 'The next hop for the destination.',
                        required=True, constraint='ip_addr')})),
    }
    attributes_schema = {}

    @classmethod
    def validate_more(cls, values, path):
        constraints.check_local(cls, values, path)
        return values

    @classmethod
    def implied_requires(cls, props, others):
        # as Heat's: after every RouterInterface of the template on the
        # same router (Neutron takes a next hop only on a subnet the
        # router is connected to)
        router = props.get('router')
        if not router or neutron.has_unknown(router):
            return ()
        return [name for name, iprops in others.of(RouterInterface)
                if iprops.get('router') == router or
                iprops.get('router_id') == router]

    @property
    def cloud(self):
        return self.clients.cloud

    def owned(self, shared=False):
        return self.cloud.owns('router', self.physical_id)

    def observe(self):
        if not self.physical_id:
            return None
        router = self.cloud.get('router', self.physical_id)
        if router is None:
            return None
        return {'routes': _routes(router.get('routes'))}

    def create(self):
        router = self.properties['router']
        try:
            router = self.cloud.resolve('router', router)
        except exception.CloudTransient:
            raise
        except exception.CloudError as exc:
            raise exception.ResourceFailure('%s: property router: %s' % (
                self.name, exc))
        ours = _routes(self.properties.get('routes'))
        self.data['routes'] = ours
        self.cloud.add_routes(router, ours)
        self.physical_id = router

    def update(self, prior, observed):
        old = _routes(self.data.get('routes'))
        new = _routes(self.properties.get('routes'))
        gone = [r for r in old if r not in new]
        if gone:
            self.cloud.remove_routes(self.physical_id, gone)
        self.data['routes'] = new
        self.cloud.add_routes(self.physical_id, new)

    def delete(self):
        ours = _routes(self.data.get('routes'))
        if not self.physical_id or not ours:
            return None
        try:
            self.cloud.remove_routes(self.physical_id, ours)
        except exception.CloudNotFound:
            pass   # the router went: so did its routes
        return None

    def drift(self, observed):
        """A route of the set that the router no longer has."""
        have = (observed or {}).get('routes') or []
        if any(r not in have for r in _routes(self.data.get('routes'))):
            return {'routes'}
        return set()

    def get_attributes(self, observed):
        return {'show': observed}
