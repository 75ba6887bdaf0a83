"""The one interface a plug-in sees of a cloud: ``self.clients.cloud``.

Two drivers implement it as peers: the simulated cloud (drivers/sim/) and
a real OpenStack through openstacksdk (drivers/openstack.py). A plug-in
never imports either; it names a *kind* of object and speaks the
OpenStack API's own field names (Neutron's, Cinder's, Glance's, Nova's),
so a type written once runs on both.

Every object converge creates is made with the resource's key (its
idempotency key, a uuid): the driver stores it where the service lets
it (a Neutron tag, Cinder or Glance metadata, a Nova server tag) or,
where a service has nothing of the kind, relies on a natural identity
the plug-in gives in the body (a key pair's or flavor's name, a router
interface's router and subnet, a volume attachment's server and
volume, a security group rule's fields). ``create`` looks for the key
first, so a create repeated after the engine died between the cloud's
answer and its record finds what it made instead of making it twice
(Crossplane's external clients: observe, create, update, delete, and
the external name that finds a create again).

Objects are plain dicts in the shape the service's API returns them
(``id``, ``name``, ``status``, ... as the REST API names them). Errors
are converge.exception's: CloudNotFound (404), CloudTransient (5xx, 429,
a dropped connection: worth retrying; ``retry_after`` when the service
said), CloudError (any other refusal, with the service's own message
and HTTP code).

Kinds and what their bodies hold (the API's field names; a driver passes
unknown fields through to the service):

network              name, admin_state_up, shared, port_security_enabled,
                     mtu, dns_domain, qos_policy_id, router:external,
                     provider:network_type, provider:physical_network,
                     provider:segmentation_id
subnet               network_id, name, cidr, ip_version, gateway_ip,
                     enable_dhcp, allocation_pools, dns_nameservers,
                     host_routes, ipv6_address_mode, ipv6_ra_mode,
                     subnetpool_id, prefixlen, segment_id
port                 network_id, name, fixed_ips [{subnet_id, ip_address}],
                     mac_address, security_groups [ids], admin_state_up,
                     device_id, device_owner, port_security_enabled,
                     allowed_address_pairs, binding:vnic_type,
                     qos_policy_id
router               name, admin_state_up, external_gateway_info
                     {network_id, enable_snat, external_fixed_ips},
                     distributed, ha
router_interface     router_id and one of subnet_id, port_id; its id is
                     ``ROUTER_ID:SUBNET_ID`` (or ``ROUTER_ID:port=PORT_ID``)
                     and it has no update
security_group       name, description (a new group's default egress
                     rules come with it, as in Neutron)
security_group_rule  security_group_id, direction, ethertype, protocol,
                     port_range_min, port_range_max, remote_ip_prefix,
                     remote_group_id, description; no update
floating_ip          floating_network_id, port_id, fixed_ip_address,
                     floating_ip_address, subnet_id, dns_name, dns_domain;
                     update sets port_id / fixed_ip_address (associate,
                     or None to dissociate)
volume               size, name, description, volume_type,
                     availability_zone, imageRef, snapshot_id,
                     source_volid, metadata, multiattach; update:
                     name, description, metadata, size (extend only);
                     status creating -> available, in-use when attached
volume_attachment    server_id, volume_id, device; its id is the volume's
                     (as Nova's attachment); no update; deleting detaches
image                name, container_format, disk_format, min_disk,
                     min_ram, protected, visibility, tags, architecture,
                     os_distro, os_version, kernel_id, ramdisk_id,
                     location (a URL the cloud downloads: web-download);
                     update: name, min_disk, min_ram, protected,
                     visibility, tags and the os_* properties
server_image         server_id, name: an image of the server's disk
                     (Nova's createImage); what it makes is an ``image``
                     (get and delete it as one), found by key here
volume_backup        volume_id, name, description, force (of a volume in
                     use); status creating -> available; no update; a
                     volume made with ``backup_id`` is restored from it
keypair              name, public_key (absent: the cloud makes the pair
                     and returns private_key once), type; its id is its
                     name; no update
server_group         name, policy (one of affinity, anti-affinity,
                     soft-affinity, soft-anti-affinity), rules; no update
flavor               name, ram, vcpus, disk, swap, ephemeral,
                     rxtx_factor, os-flavor-access:is_public,
                     extra_specs {}, tenants []; update: extra_specs,
                     tenants
router_gateway       router_id, network_id: the router's external gateway
                     set on its own (add_gateway_router); its id is
                     ``ROUTER_ID:NETWORK_ID``; no update; deleting removes
                     the router's gateway
vpnservice           name, description, admin_state_up, router_id,
                     subnet_id (neutron-vpnaas); update: name,
                     description, admin_state_up
ikepolicy            name, description, auth_algorithm,
                     encryption_algorithm, phase1_negotiation_mode,
                     lifetime {units, value}, pfs, ike_version; all but
                     the mode change in place
ipsecpolicy          name, description, transform_protocol,
                     encapsulation_mode, auth_algorithm,
                     encryption_algorithm, lifetime, pfs
ipsec_site_connection  name, description, peer_address, peer_id,
                     peer_cidrs, mtu, dpd {action, interval, timeout}, psk,
                     initiator, admin_state_up, vpnservice_id,
                     ikepolicy_id, ipsecpolicy_id; update: all but the
                     service and policies
trunk                name, description, port_id (the parent port),
                     admin_state_up, sub_ports [{port_id,
                     segmentation_type, segmentation_id}] (Neutron's trunk
                     extension); update: name, description,
                     admin_state_up and sub_ports, the whole list wanted:
                     the driver removes the sub-ports not in it, then adds
                     those missing (Neutron's remove_subports and
                     add_subports); status DOWN or ACTIVE, BUILD while it
                     settles
container            name, headers {X-Container-Read, -Write,
                     X-Container-Meta-*}, account_headers
                     {X-Account-Meta-*} (Swift); its id is its name; the
                     view is HEAD's ``headers`` (lower-case) and ``url``;
                     update: headers
alarm                Aodh's: name, description, type (threshold),
                     threshold_rule {meter_name, threshold, statistic,
                     comparison_operator, period, evaluation_periods,
                     query}, enabled, repeat_actions, severity,
                     alarm_actions, ok_actions, insufficient_data_actions,
                     time_constraints; found by its name (unique in the
                     project); update: all but name and type, and
                     ``state``
host_aggregate       name, availability_zone, hosts [], metadata {}; found
                     by its name; update: every field
volume_type          name, description, extra_specs {},
                     os-volume-type-access:is_public, projects []; found
                     by its name; update: every field
volume_encryption_type
                     volume_type_id, provider, control_location, cipher,
                     key_size; its id is its volume type's (one per
                     type); update: all but volume_type_id
domain               name, description, enabled; found by its name;
                     update: every field (an enabled domain is not
                     deleted: the driver disables it first)
project              name, domain_id, description, enabled, parent_id,
                     tags; found by its domain and name; update: name,
                     description, enabled, tags
user                 name, domain_id, description, enabled, email,
                     password, default_project_id; found by its domain
                     and name; update: all but domain_id
role                 name (Keystone's roles: looked up, never made by a
                     template)
role_assignment      user_id, role_id and one of project_id, domain_id;
                     its id is USER:ROLE:project=ID (or domain=ID); no
                     update

A project or user is named ``NAME{DOMAIN}`` to ``resolve`` in a domain
other than the default, as Heat's keystone constraints take them.

``resolve(kind, name_or_id)`` turns what a template names (an image's or
network's name, a flavor's) into the id the cloud uses, or raises
CloudNotFound naming it (custom constraints such as ``glance.image``
check a name this way at validate); an ambiguous name is a CloudError
with code 409.
"""

#: every kind a driver serves (besides servers, which keep their own
#: calls: ``clients.compute``)
KINDS = ('network', 'subnet', 'port', 'router', 'router_interface',
         'security_group', 'security_group_rule', 'floating_ip', 'volume',
         'volume_attachment', 'image', 'keypair', 'server_group', 'flavor',
         'router_gateway', 'vpnservice', 'ikepolicy', 'ipsecpolicy',
         'ipsec_site_connection', 'trunk', 'container', 'alarm',
         'host_aggregate', 'volume_type', 'volume_encryption_type',
         'domain', 'project', 'user', 'role', 'role_assignment',
         'server_image', 'volume_backup')

#: kinds whose names are unique within a Keystone domain: ``resolve``
#: takes ``NAME{DOMAIN}`` for one in another domain than the default
DOMAIN_SCOPED = ('project', 'user')


def role_assignment_id(body):
    """A role_assignment's id: USER:ROLE:project=ID (or domain=ID)."""
    scope = ('project=%s' % body['project_id']) if body.get('project_id') \
        else 'domain=%s' % body.get('domain_id')
    return '%s:%s:%s' % (body.get('user_id'), body.get('role_id'), scope)


def split_domain(ref):
    """``NAME{DOMAIN}`` -> (NAME, DOMAIN); any other ref -> (ref, None)."""
    ref = str(ref)
    if ref.endswith('}') and '{' in ref:
        name, _, domain = ref[:-1].rpartition('{')
        if name and domain:
            return name, domain
    return ref, None


#: the kinds whose objects carry a status that settles (others are done
#: when the create call returns): status -> settled?
SETTLING = {
    'volume': {'creating': False, 'available': True, 'in-use': True,
               'error': True, 'extending': False, 'deleting': False,
               'attaching': False, 'detaching': False, 'reserved': False,
               'downloading': False, 'restoring-backup': False,
               'error_deleting': True, 'error_restoring': True,
               'error_extending': True, 'maintenance': False},
    'image': {'queued': False, 'saving': False, 'importing': False,
              'uploading': False, 'active': True, 'killed': True,
              'deleted': True, 'pending_delete': False,
              'deactivated': True},
    'volume_attachment': {'attaching': False, 'attached': True,
                          'detaching': False, 'error': True},
    'volume_backup': {'creating': False, 'available': True, 'error': True,
                      'deleting': False, 'restoring': False,
                      'error_deleting': True},
    # neutron-vpnaas's: a connection is up once its peer answers
    'ipsec_site_connection': {'PENDING_CREATE': False, 'ACTIVE': True,
                              'DOWN': True, 'ERROR': True,
                              'PENDING_UPDATE': False,
                              'PENDING_DELETE': False},
    # Neutron's trunk: BUILD while its driver wires the sub-ports
    'trunk': {'BUILD': False, 'ACTIVE': True, 'DOWN': True,
              'DEGRADED': True, 'ERROR': True},
}

#: neutron-vpnaas's allowed values (neutron-lib's vpn and vpn_aes_ctr
#: lists): what Heat's schemas take and Neutron checks
VPN_AUTH_ALGORITHMS = ('sha1', 'sha256', 'sha384', 'sha512', 'aes-xcbc',
                       'aes-cmac')
VPN_ENCRYPTION_ALGORITHMS = (
    ('3des', 'aes-128', 'aes-192', 'aes-256') +
    tuple('aes-%d-%s-%d' % (bits, mode, icv) for mode in ('ccm', 'gcm')
          for icv in (8, 12, 16) for bits in (128, 192, 256)) +
    ('aes-128-ctr', 'aes-192-ctr', 'aes-256-ctr'))
VPN_PFS_GROUPS = ('group2', 'group5') + tuple('group%d' % n
                                              for n in range(14, 32))

#: the tag / metadata key converge keeps its key under (``converge-key``
#: as a Neutron or Nova tag is ``converge-key=<uuid>``)
KEY_NAME = 'converge-key'


#: where a service's view of an object names the project that owns it
#: (Neutron, Nova's servers; Glance; Cinder to an admin)
PROJECT_FIELDS = ('project_id', 'tenant_id', 'owner',
                  'os-vol-tenant-attr:tenant_id')


def owned_by(obj, project_id):
    """Whether `obj` (a service's view) is `project_id`'s: no field of
    it names another project. A view that names none is taken as the
    caller's (it was found with the caller's credentials)."""
    for field in PROJECT_FIELDS:
        value = obj.get(field)
        if value and project_id and str(value) != str(project_id):
            return False
    return True


def key_tag(key):
    """The tag that carries `key` (Neutron and Nova tags are strings of
    at most 60 characters)."""
    return '%s=%s' % (KEY_NAME, key)


class Cloud:
    """The calls a driver implements (drivers/sim/objects.py and
    drivers/openstack.py). ``name`` is the cloud's name (clouds.yaml)
    or 'sim'; ``project_id`` the project it acts in."""

    name = None
    project_id = None

    def create(self, kind, body, key, fresh=False):
        """Create an object of `kind` from `body`, marked with `key`; an
        object made before with the same key (or the same natural
        identity, see the top) is returned instead. Returns the object
        as the service shows it right after the call (its status may
        not have settled yet). ``fresh``: the caller knows no earlier
        try with this key can have reached the cloud (the engine claimed
        this first try before it), so a driver whose look-up is a call
        of its own may skip it."""
        raise NotImplementedError

    def find(self, kind, key, body=None):
        """The object made with `key` (or `body`'s natural identity), or
        None."""
        raise NotImplementedError

    def get(self, kind, id):
        """The object, or None when the service no longer has it."""
        raise NotImplementedError

    def recent(self, kind, id, max_age):
        """The object as seen at most `max_age` seconds ago (what an
        attribute shows of another object: the network every port of a
        stack names is asked for once, not once per port). A driver whose
        get costs no call just gets it."""
        return self.get(kind, id)

    def update(self, kind, id, body):
        """Change the fields in `body` in place; returns the object."""
        raise NotImplementedError

    def add_routes(self, router_id, routes):
        """Add `routes` ([{destination, nexthop}]) to a router's extra
        routes, keeping those it has; returns its routes now. Neutron's
        add_extraroutes is one atomic call (the OpenStack driver's);
        this default reads the router and writes it back."""
        have = self._routes(router_id)
        return self.update('router', router_id, {'routes': have + [
            r for r in routes if r not in have]}).get('routes') or []

    def remove_routes(self, router_id, routes):
        """Take `routes` out of a router's extra routes (those it does
        not have are no error); returns its routes now."""
        have = self._routes(router_id)
        return self.update('router', router_id, {'routes': [
            r for r in have if r not in routes]}).get('routes') or []

    def _routes(self, router_id):
        router = self.get('router', router_id)
        if router is None:
            from converge import exception
            raise exception.CloudNotFound('Router %s could not be found.'
                                          % router_id)
        return [{'destination': r['destination'], 'nexthop': r['nexthop']}
                for r in router.get('routes') or []]

    def owns(self, kind, id):
        """Whether the object is this project's own to take over (stack
        adopt, a template's external_id): found with the project's own
        credentials (another project's is not found), and not another
        project's that it only sees (a shared network, a public
        image)."""
        obj = self.get(kind, id)
        return obj is not None and owned_by(obj, self.project_id)

    def delete(self, kind, id):
        """Ask for the object to go; one already gone is success. Some
        kinds (volumes, images) take a while: ``get`` shows it until it
        is gone."""
        raise NotImplementedError

    def list(self, kind, **filters):
        """Objects of `kind` this project sees, filtered by API fields."""
        raise NotImplementedError

    def resolve(self, kind, name_or_id):
        """The id of the object of `kind` named or numbered so."""
        raise NotImplementedError

    def available(self, service_type, extension=None):
        """(True, None) when the cloud has the service (its catalog type:
        ``object-store``, ``alarming``, ``network``) and, given, the
        service's API extension (``vpnaas``); else (False, why). A
        driver whose cloud has every service keeps this."""
        return True, None
