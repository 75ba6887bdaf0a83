"""A real OpenStack behind drivers/cloud.py, through openstacksdk.

openstacksdk does what it is good at: clouds.yaml and the ``OS_*``
variables, Keystone authentication and token renewal, the service
catalog, version discovery and microversions. The calls themselves are
made on its service proxies as plain REST (``conn.network.post(...)``):
the plug-ins speak the APIs' own field names (drivers/cloud.py), so a
body goes to the service as it is and an answer comes back as the
service wrote it, with no resource class between them to rename or drop
fields.

Exactly once: Neutron objects and Nova servers carry the resource's key
as a tag (``converge-key=<uuid>``), Cinder volumes and Glance images as
metadata / a property; a create looks for the key first. Kinds a service
cannot tag are found by their natural identity (drivers/cloud.py).

Every refusal reaches the plug-in, and so the user, with the service's
own message: 404 -> CloudNotFound, 429 and 5xx -> CloudTransient (with
the ``Retry-After`` the service sent: the engine waits that long before
the step runs again, holding no thread), other 4xx -> CloudError.

Servers being built are watched together (`ServerWatch`): a look at one
server is answered from one ``GET /servers/detail?changes-since=...``
per interval for every server this process watches, not a GET per
server per look.
"""

import base64
import collections
import json
import logging
import threading
import time
import urllib.parse
import uuid as uuid_mod

from converge import exception
from converge.drivers import cloud as cloud_mod

LOG = logging.getLogger(__name__)

#: Nova's microversion: tags at create (2.52), server groups' single
#: policy (2.64), the flavor embedded in a server (2.47), volume types
#: in block_device_mapping_v2 (2.67)
COMPUTE_MICROVERSION = '2.72'
#: Cinder's microversion whose backups have metadata (converge's key)
VOLUME_BACKUP_METADATA = '3.43'
#: Cinder's microversion that extends a volume in use
VOLUME_EXTEND_IN_USE = '3.42'
#: seconds a server's state read by the shared list is good for
WATCH_INTERVAL = 1.0

_CONNECT_LOCK = threading.Lock()


def connect(cloud_name, project_id=None):
    """The driver for `cloud_name` (a clouds.yaml entry), acting in
    `project_id` when given (else the project its credentials name)."""
    try:
        return OpenStackCloud(_connection(cloud_name, project_id),
                              cloud_name)
    except exception.ConvergeError:
        raise
    except Exception as e:
        if getattr(e, 'http_status', None) in (401, 403):
            raise exception.CloudError(
                'Keystone refused the credentials of cloud %s: %s' % (
                    cloud_name, e), e.http_status)
        raise exception.CloudTransient(
            'Cannot reach cloud %s: %s' % (cloud_name, e))


def _connection(cloud_name, project_id=None):
    import openstack
    from converge.drivers import trusts
    trust_id = trusts.trust_of(cloud_name)
    if trust_id is not None:
        # a stack made through a Keystone-authenticated API: the trustee
        # acting for the user who created it (engine/trusts.py)
        from converge import conf as conf_mod
        from openstack import connection
        return connection.Connection(
            session=trusts.session(trust_id),
            region_name=conf_mod.CONF.cloud.region_name)
    with _CONNECT_LOCK:
        try:
            conn = openstack.connect(cloud=cloud_name)
        except Exception as e:   # openstacksdk's config errors vary
            raise exception.CloudError(
                'Cannot use cloud %r (clouds.yaml, OS_CLIENT_CONFIG_FILE): '
                '%s' % (cloud_name, e), 400)
        if project_id and conn.current_project_id != project_id:
            conn = openstack.connect(cloud=cloud_name, project_id=project_id)
    return conn


def project_of(cloud_name):
    """The project id the cloud's credentials are scoped to (a token is
    asked for: the CLI calls this once, for a command naming a cloud)."""
    try:
        return _connection(cloud_name).current_project_id
    except exception.ConvergeError:
        raise
    except Exception as e:
        raise exception.CloudError(
            'Cannot authenticate to cloud %r: %s' % (cloud_name, e), 401)


def _is_uuid(value):
    try:
        uuid_mod.UUID(str(value))
        return True
    except ValueError:
        return False


def _message(resp):
    """The service's own words from an error response."""
    try:
        body = resp.json()
    except ValueError:
        text = (resp.text or '').strip()
        return text[:500] or resp.reason or 'HTTP %d' % resp.status_code
    if isinstance(body, dict):
        # Neutron: {"NeutronError": {"message": ...}}; Nova and Cinder:
        # {"badRequest": {"message": ...}}; Glance: {"message": ...}
        for value in body.values():
            if isinstance(value, dict) and value.get('message'):
                return value['message']
        if body.get('message'):
            return body['message']
        if body.get('error'):
            err = body['error']
            return err.get('message') if isinstance(err, dict) else str(err)
    return json.dumps(body)[:500]


def _retry_after(resp):
    value = resp.headers.get('Retry-After')
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class Calls:
    """API calls made, by service and method (the bench reads them)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.counts = collections.Counter()

    def add(self, service, method):
        with self._lock:
            self.counts[(service, method)] += 1

    def total(self):
        return sum(self.counts.values())


class Rest:
    """One service's REST calls, errors turned into converge's."""

    def __init__(self, proxy, service, calls, microversion=None,
                 cloud_name=None, lazy=False):
        # lazy: `proxy` is a function giving it at the first call (asking
        # openstacksdk for a proxy looks its endpoint up)
        self._proxy = None if lazy else proxy
        self._get_proxy = proxy if lazy else None
        self._cloud_name = cloud_name
        self.service = service
        self._calls = calls
        self._microversion = microversion

    def call(self, method, url, body=None, ok404=False, headers=None,
             microversion=None, answer_headers=False):
        """The answer's JSON (None when it has none), or with
        `answer_headers` its headers, lower-case (Swift answers in
        headers)."""
        kwargs = {'raise_exc': False}
        if body is not None:
            kwargs['json'] = body
        if headers:
            kwargs['headers'] = headers
        if microversion or self._microversion:
            kwargs['microversion'] = microversion or self._microversion
        self._calls.add(self.service, method)
        try:
            if self._proxy is None:
                self._proxy = self._get_proxy()
            resp = self._proxy.request(url, method, **kwargs)
        except Exception as e:
            if type(e).__name__ in ('EndpointNotFound',
                                    'ServiceDisabledException'):
                # the cloud has no such service: no retry brings it
                raise exception.CloudError(
                    'Service %s is not available on cloud %s: %s' % (
                        self.service, self._cloud_name, e), 400)
            status = getattr(e, 'http_status', None)
            if status in (401, 403):
                # Keystone refused the credentials (a trust deleted, a
                # password changed): no retry makes them good
                raise exception.CloudError(
                    'Keystone refused the credentials of cloud %s: %s' % (
                        self._cloud_name, e), status)
            # connection refused, reset, timed out; Keystone away
            raise exception.CloudTransient(
                '%s %s %s: %s' % (self.service, method, url, e))
        code = resp.status_code
        if code < 400 and answer_headers:
            return {k.lower(): v for k, v in resp.headers.items()}
        if code < 400:
            if code == 204 or not resp.content:
                return None
            try:
                return resp.json()
            except ValueError:
                return None
        message = _message(resp)
        if code == 404:
            if ok404:
                return None
            raise exception.CloudNotFound(message)
        if code == 429 or code >= 500:
            raise exception.CloudTransient(message, code,
                                           retry_after=_retry_after(resp))
        raise exception.CloudError(message, code)

    def get(self, url, **kw):
        return self.call('GET', url, **kw)

    def post(self, url, body=None, **kw):
        return self.call('POST', url, body=body, **kw)

    def put(self, url, body=None, **kw):
        return self.call('PUT', url, body=body, **kw)

    def delete(self, url, **kw):
        return self.call('DELETE', url, ok404=True, **kw)

    def patch(self, url, body=None, **kw):
        return self.call('PATCH', url, body=body, **kw)


def _query(**filters):
    return urllib.parse.urlencode(
        [(k, v) for k, v in filters.items() if v is not None])


# -- Neutron ---------------------------------------------------------------
#: kind -> (path, body key); every one of them carries tags. A list
#: answers under the path's name with underscores
NEUTRON = {
    'network': ('networks', 'network'),
    'subnet': ('subnets', 'subnet'),
    'port': ('ports', 'port'),
    'router': ('routers', 'router'),
    'security_group': ('security-groups', 'security_group'),
    'floating_ip': ('floatingips', 'floatingip'),
    'security_group_rule': ('security-group-rules', 'security_group_rule'),
    # neutron-vpnaas
    'vpnservice': ('vpn/vpnservices', 'vpnservice'),
    'ikepolicy': ('vpn/ikepolicies', 'ikepolicy'),
    'ipsecpolicy': ('vpn/ipsecpolicies', 'ipsecpolicy'),
    'ipsec_site_connection': ('vpn/ipsec-site-connections',
                              'ipsec_site_connection'),
    # the trunk extension
    'trunk': ('trunks', 'trunk'),
}


#: Keystone's kinds -> (path, body key)
KEYSTONE = {'domain': ('domains', 'domain'),
            'project': ('projects', 'project'),
            'user': ('users', 'user'), 'role': ('roles', 'role')}


def _listed(answer, path):
    return answer[path.rsplit('/', 1)[-1].replace('-', '_')]


#: fields of a rule that make it the same rule (Neutron refuses a twin)
RULE_FIELDS = ('direction', 'ethertype', 'protocol', 'port_range_min',
               'port_range_max', 'remote_ip_prefix', 'remote_group_id')
ROUTER_INTERFACE_OWNERS = ('network:router_interface',
                           'network:router_interface_distributed',
                           'network:ha_router_replicated_interface')


class OpenStackCloud(cloud_mod.Cloud):
    def __init__(self, conn, name):
        self.conn = conn
        self.name = name
        self.project_id = conn.current_project_id
        self.calls = Calls()
        self.network = Rest(conn.network, 'network', self.calls,
                            cloud_name=name)
        self.volume = Rest(conn.block_storage, 'volume', self.calls,
                           cloud_name=name)
        self.image = Rest(conn.image, 'image', self.calls, cloud_name=name)
        self.nova = Rest(conn.compute, 'compute', self.calls,
                         COMPUTE_MICROVERSION, cloud_name=name)
        # Swift and Aodh, which a cloud may not have: a call to one it
        # lacks is refused (Rest.call), the others are unaffected
        self.swift = Rest(lambda: conn.object_store, 'swift', self.calls,
                          cloud_name=name, lazy=True)
        self.aodh = Rest(lambda: conn.alarm, 'aodh', self.calls,
                         cloud_name=name, lazy=True)
        self.keystone = Rest(lambda: conn.identity, 'identity', self.calls,
                             cloud_name=name, lazy=True)
        self.compute = OpenStackCompute(self)
        #: the compute the plug-ins get ([compute] limits around it, set
        #: by drivers/clients.py)
        self.limited = None
        self._resolved = {}
        self._available = {}   # (service type, extension) -> available()
        self._recent = {}   # (kind, id) -> (when, object): recent()
        #: one look-up of a name at a time: the units that start together
        #: (a port per server) name the same network, asked once
        self._resolving = collections.defaultdict(threading.Lock)
        #: kind -> whether Neutron takes tags in its create's body (ports
        #: on any Neutron, every kind on newer ones); unknown until the
        #: kind's first create tells
        self._tags_in_body = {}

    def __repr__(self):
        return 'OpenStackCloud(%r, project %s)' % (self.name,
                                                   self.project_id)

    # -- the contract --------------------------------------------------------
    def create(self, kind, body, key, fresh=False):
        found = None if fresh else self.find(kind, key, body)
        if found is not None:
            return found
        if kind in KEYSTONE:
            return self._identity_create(kind, body)
        creator = getattr(self, '_create_' + kind, None)
        if creator is not None:
            return creator(body, key)
        return self._neutron_create(kind, body, key)

    def find(self, kind, key, body=None):
        if kind in KEYSTONE:
            return self._identity_find(kind, body or {})
        finder = getattr(self, '_find_' + kind, None)
        if finder is not None:
            return finder(key, body or {})
        coll, item = NEUTRON[kind]
        found = _listed(self.network.get('/%s?%s' % (coll, _query(
            tags=cloud_mod.key_tag(key)))), coll)
        return found[0] if found else None

    def recent(self, kind, id, max_age):
        now = time.monotonic()
        seen = self._recent.get((kind, id))
        if seen is not None and now - seen[0] <= max_age:
            return seen[1]
        obj = self.get(kind, id)
        if len(self._recent) > 1000:
            self._recent.clear()
        self._recent[(kind, id)] = (now, obj)
        return obj

    def get(self, kind, id):
        if kind in KEYSTONE:
            return self._identity_get(kind, id)
        getter = getattr(self, '_get_' + kind, None)
        if getter is not None:
            return getter(id)
        coll, item = NEUTRON[kind]
        found = self.network.get('/%s/%s' % (coll, id), ok404=True)
        return found[item] if found else None

    def update(self, kind, id, body):
        if kind in KEYSTONE:
            return self._identity_update(kind, id, body)
        updater = getattr(self, '_update_' + kind, None)
        if updater is not None:
            return updater(id, body)
        return self._neutron_update(kind, id, body)

    def _neutron_update(self, kind, id, body):
        coll, item = NEUTRON[kind]
        body = dict(body)
        tags = body.pop('tags', None)
        if body:
            found = self.network.put('/%s/%s' % (coll, id), {item: body})[item]
        else:
            found = self.get(kind, id)
        if tags is not None and found is not None:
            # a resource's PUT takes no tags: the tags' own call, keeping
            # converge's key
            keys = [t for t in found.get('tags') or []
                    if t.startswith(cloud_mod.KEY_NAME + '=')]
            found['tags'] = self.network.put('/%s/%s/tags' % (coll, id), {
                'tags': list(tags) + keys})['tags']
        return found

    def delete(self, kind, id):
        deleter = getattr(self, '_delete_' + kind, None)
        if deleter is not None:
            return deleter(id)
        if kind in KEYSTONE:
            return self.keystone.delete('/%s/%s' % (KEYSTONE[kind][0], id))
        coll, _ = NEUTRON[kind]
        self.network.delete('/%s/%s' % (coll, id))

    def list(self, kind, **filters):
        if kind in KEYSTONE:
            return self._identity_list(kind, **filters)
        lister = getattr(self, '_list_' + kind, None)
        if lister is not None:
            return lister(**filters)
        coll, _ = NEUTRON[kind]
        return _listed(self.network.get('/%s?%s' % (
            coll, _query(**filters))), coll)

    def resolve(self, kind, name_or_id):
        """An id from a name or id (kept: ids of what a template names
        do not change under a stack)."""
        cache_key = (kind, name_or_id)
        found = self._resolved.get(cache_key)
        if found is None:
            with self._resolving[cache_key]:
                found = self._resolved.get(cache_key)
                if found is None:
                    found = self._resolved[cache_key] = self._resolve(
                        kind, name_or_id)
        return found

    def available(self, service_type, extension=None):
        """The catalog has the service; Neutron the extension (asked
        once per cloud)."""
        cache_key = (service_type, extension)
        found = self._available.get(cache_key)
        if found is None:
            try:
                endpoint = self.conn.endpoint_for(service_type)
            except Exception as e:   # keystoneauth's: no such service
                LOG.debug('no %s endpoint: %s', service_type, e)
                endpoint = None
            if not endpoint:
                found = (False, 'Service endpoint not in service catalog.')
            elif extension and not self.network.get(
                    '/extensions/%s' % extension, ok404=True):
                found = (False, 'Required extension %s in %s service is '
                         'not available.' % (extension, service_type))
            else:
                found = (True, None)
            self._available[cache_key] = found
        return found

    # -- resolving names -----------------------------------------------------
    def _resolve(self, kind, ref):
        ref = str(ref)
        title = {'image': 'Image', 'flavor': 'Flavor', 'keypair': 'Keypair',
                 'volume': 'Volume', 'server': 'Server',
                 'volume_backup': 'Backup'}.get(kind)
        if kind == 'keypair':
            if self._get_keypair(ref) is None:
                raise exception.CloudNotFound(
                    'The Key (%s) could not be found.' % ref)
            return ref
        if kind == 'server':
            if _is_uuid(ref) and self.nova.get('/servers/%s' % ref,
                                               ok404=True):
                return ref
            matches = [s['id'] for s in self.nova.get(
                '/servers?%s' % _query(name='^%s$' % ref))['servers']]
        elif kind == 'image':
            if _is_uuid(ref) and self.image.get('/images/%s' % ref,
                                                ok404=True):
                return ref
            matches = [i['id'] for i in self.image.get(
                '/images?%s' % _query(name=ref))['images']]
        elif kind == 'flavor':
            flavors = self.nova.get('/flavors/detail?is_public=None')[
                'flavors']
            if any(f['id'] == ref for f in flavors):
                return ref
            matches = [f['id'] for f in flavors if f['name'] == ref]
        elif kind == 'volume':
            if _is_uuid(ref) and self.volume.get('/volumes/%s' % ref,
                                                 ok404=True):
                return ref
            matches = [v['id'] for v in self.volume.get(
                '/volumes?%s' % _query(name=ref))['volumes']]
        elif kind in KEYSTONE:
            return self._resolve_identity(kind, ref)
        elif kind == 'volume_backup':
            if _is_uuid(ref) and self._get_volume_backup(ref):
                return ref
            matches = [b['id'] for b in self.volume.get(
                '/backups?%s' % _query(name=ref))['backups']]
        elif kind == 'volume_type':
            types = self._list_volume_type()
            if any(t['id'] == ref for t in types):
                return ref
            matches = [t['id'] for t in types if t['name'] == ref]
            title = None
        elif kind in NEUTRON:
            coll, item = NEUTRON[kind]
            if _is_uuid(ref) and self.network.get(
                    '/%s/%s' % (coll, ref), ok404=True):
                return ref
            matches = [o['id'] for o in _listed(self.network.get(
                '/%s?%s' % (coll, _query(name=ref))), coll)]
            title = None
        else:
            raise exception.CloudError('Cannot look up a %s by name' % kind,
                                       400)
        if not matches:
            if title is None:
                raise exception.CloudNotFound(
                    'Unable to find %s with name or id \'%s\'' % (
                        kind.replace('_', ' '), ref))
            raise exception.CloudNotFound(
                'The %s (%s) could not be found.' % (title, ref))
        if len(matches) > 1:
            raise exception.CloudError(
                'Multiple %s matches found for name \'%s\', use an ID to be '
                'more specific.' % (kind.replace('_', ' '), ref), 409)
        return matches[0]

    # -- Neutron ---------------------------------------------------------------
    def _neutron_create(self, kind, body, key):
        coll, item = NEUTRON[kind]
        if kind == 'security_group_rule':
            # rules take no tags (the tag extension covers rules on newer
            # Neutron only): a rule is found by its fields, as Neutron
            # refuses a twin (_find_security_group_rule)
            return self.network.post('/%s' % coll, {item: body})[item]
        tag = cloud_mod.key_tag(key)
        if self._tags_in_body.get(kind) is not False:
            try:
                made = self.network.post('/%s' % coll, {
                    item: dict(body, tags=list(body.get('tags') or [])
                               + [tag])})[item]
                self._tags_in_body[kind] = True
                return made
            except exception.CloudError as e:
                if e.code != 400 or 'tags' not in str(e):
                    raise
                self._tags_in_body[kind] = False
        # an older Neutron: tag it right after. An engine killed between
        # the two calls leaves an object its key does not find (one
        # orphan at most per crash, named as the resource)
        made = self.network.post('/%s' % coll, {item: body})[item]
        try:
            self.network.put('/%s/%s/tags/%s' % (
                coll, made['id'], urllib.parse.quote(tag, safe='')))
        except exception.CloudError as e:
            if e.code not in (400, 404) or isinstance(
                    e, exception.CloudTransient):
                raise
            # a kind the tag extension does not cover (neutron-vpnaas's
            # on some clouds): left untagged, found by its id only
            return made
        made.setdefault('tags', []).append(tag)
        return made

    def _update_trunk(self, id, body):
        """A trunk's fields by PUT; its ``sub_ports``, the whole list
        wanted, by Neutron's remove_subports (those not wanted, or wanted
        with another segmentation) then add_subports (those missing), as
        Heat's trunk does: a port cannot be two sub-ports at once."""
        body = dict(body)
        wanted = body.pop('sub_ports', None)
        found = self._neutron_update('trunk', id, body) if body else None
        if wanted is None:
            return found or self.get('trunk', id)
        have = (found or self.get('trunk', id) or {}).get('sub_ports') or []

        def triple(sp):
            return (sp.get('port_id'), sp.get('segmentation_type'),
                    int(sp.get('segmentation_id')))
        wanted_set = {triple(sp) for sp in wanted}
        have_set = {triple(sp) for sp in have}
        going = [{'port_id': sp['port_id']} for sp in have
                 if triple(sp) not in wanted_set]
        coming = [{'port_id': sp['port_id'],
                   'segmentation_type': sp['segmentation_type'],
                   'segmentation_id': int(sp['segmentation_id'])}
                  for sp in wanted if triple(sp) not in have_set]
        if going:
            self.network.put('/trunks/%s/remove_subports' % id,
                             {'sub_ports': going})
        if coming:
            self.network.put('/trunks/%s/add_subports' % id,
                             {'sub_ports': coming})
        return self.get('trunk', id)

    def _find_security_group_rule(self, key, body):
        rules = self.network.get('/security-group-rules?%s' % _query(
            security_group_id=body.get('security_group_id'),
            direction=body.get('direction')))['security_group_rules']
        for rule in rules:
            if cloud_mod.key_tag(key) in (rule.get('tags') or []):
                return rule
        for rule in rules:   # its twin: Neutron would refuse another
            if all(_same(rule.get(f), body.get(f, _DEFAULT_RULE.get(f)))
                   for f in RULE_FIELDS):
                return rule
        return None

    # router interfaces: the router's port on the subnet (or the port)
    def _create_router_interface(self, body, key):
        router = body['router_id']
        ask = {k: body[k] for k in ('subnet_id', 'port_id') if body.get(k)}
        self.network.put('/routers/%s/add_router_interface' % router, ask)
        return self._find_router_interface(key, body)

    def _interface_id(self, body):
        if body.get('subnet_id'):
            return '%s:%s' % (body['router_id'], body['subnet_id'])
        return '%s:port=%s' % (body['router_id'], body['port_id'])

    def _find_router_interface(self, key, body):
        return self._get_router_interface(self._interface_id(body))

    def _get_router_interface(self, id):
        router, _, rest = id.partition(':')
        ports = self.network.get('/ports?%s' % _query(
            device_id=router))['ports']
        for port in ports:
            if port.get('device_owner') not in ROUTER_INTERFACE_OWNERS:
                continue
            subnets = [ip.get('subnet_id') for ip in port.get('fixed_ips')
                       or []]
            if rest == 'port=%s' % port['id'] or rest in subnets:
                return {'id': id, 'router_id': router,
                        'port_id': port['id'],
                        'subnet_id': subnets[0] if subnets else None}
        return None

    def _delete_router_interface(self, id):
        router, _, rest = id.partition(':')
        ask = {'port_id': rest[5:]} if rest.startswith('port=') \
            else {'subnet_id': rest}
        self.network.call('PUT', '/routers/%s/remove_router_interface'
                          % router, body=ask, ok404=True)

    def _list_router_interface(self, **filters):
        raise exception.CloudError('router interfaces are not listed', 400)

    # a router's gateway set on its own (add_gateway_router): the router's
    # external_gateway_info, named ROUTER:NETWORK
    def _create_router_gateway(self, body, key):
        self.network.put('/routers/%s' % body['router_id'], {'router': {
            'external_gateway_info': {'network_id': body['network_id']}}})
        return self._find_router_gateway(key, body)

    def _find_router_gateway(self, key, body):
        return self._get_router_gateway('%s:%s' % (body.get('router_id'),
                                                   body.get('network_id')))

    def _get_router_gateway(self, id):
        router_id, _, network_id = id.partition(':')
        found = self.network.get('/routers/%s' % router_id, ok404=True)
        info = (found or {}).get('router', {}).get('external_gateway_info')
        if not info or info.get('network_id') != network_id:
            return None
        return {'id': id, 'router_id': router_id, 'network_id': network_id,
                'external_gateway_info': info}

    def _delete_router_gateway(self, id):
        if self._get_router_gateway(id) is not None:
            self.network.put('/routers/%s' % id.partition(':')[0], {
                'router': {'external_gateway_info': {}}})

    def _list_router_gateway(self, **filters):
        raise exception.CloudError('router gateways are not listed', 400)

    # -- Swift ----------------------------------------------------------------
    # a container is its name; its view is what HEAD answers
    def _container_path(self, name):
        return '/%s' % urllib.parse.quote(name, safe='')

    def _create_container(self, body, key):
        self.swift.call('PUT', self._container_path(body['name']),
                        headers=dict(body.get('headers') or {}))
        if body.get('account_headers'):
            self.swift.call('POST', '', headers=dict(body['account_headers']))
        return self._get_container(body['name'])

    def _find_container(self, key, body):
        return self._get_container(body['name']) if body.get('name') \
            else None

    def _get_container(self, id):
        headers = self.swift.call('HEAD', self._container_path(id),
                                  ok404=True, answer_headers=True)
        if headers is None:
            return None
        return {'id': id, 'name': id, 'headers': headers,
                'url': self.conn.object_store.get_endpoint().rstrip('/') +
                self._container_path(id)}

    def _update_container(self, id, body):
        self.swift.call('POST', self._container_path(id),
                        headers=dict(body.get('headers') or {}))
        return self._get_container(id)

    def _delete_container(self, id):
        # Swift refuses a container with objects: the plug-in lets only a
        # PurgeOnDelete one get here with objects, which go first
        path = self._container_path(id)
        while True:
            names = [o['name'] for o in self.swift.get(
                '%s?format=json' % path, ok404=True) or []]
            if not names:
                break
            for name in names:
                self.swift.delete('%s/%s' % (path, urllib.parse.quote(name)))
        self.swift.delete(path)

    def _list_container(self, **filters):
        return [dict(c, id=c['name']) for c in
                self.swift.get('/?format=json') or []]

    # -- Aodh -----------------------------------------------------------------
    # an alarm is found by its name, unique in its project (Aodh's rule)
    def _create_alarm(self, body, key):
        return _alarm(self.aodh.post('/v2/alarms', body))

    def _find_alarm(self, key, body):
        if not body.get('name'):
            return None
        query = 'q.field=name&q.op=eq&q.value=%s' % urllib.parse.quote(
            body['name'])
        found = self.aodh.get('/v2/alarms?%s' % query)
        return _alarm(found[0]) if found else None

    def _get_alarm(self, id):
        return _alarm(self.aodh.get('/v2/alarms/%s' % id, ok404=True))

    def _update_alarm(self, id, body):
        body = dict(body)
        state = body.pop('state', None)
        if body:
            current = self._get_alarm(id)
            if current is None:
                raise exception.CloudNotFound('Alarm %s not found' % id)
            # Aodh's PUT replaces the alarm: the whole of it, changed
            whole = {k: v for k, v in current.items()
                     if k not in ('id', 'state_timestamp', 'timestamp')}
            whole.update(body)
            self.aodh.put('/v2/alarms/%s' % id, whole)
        if state is not None:
            self.aodh.put('/v2/alarms/%s/state' % id, state)
        return self._get_alarm(id)

    def _delete_alarm(self, id):
        self.aodh.delete('/v2/alarms/%s' % id)

    def _list_alarm(self, **filters):
        return [_alarm(a) for a in self.aodh.get('/v2/alarms') or []]

    # -- Cinder ---------------------------------------------------------------
    def _create_volume(self, body, key):
        body = dict(body)
        body['metadata'] = dict(body.get('metadata') or {},
                                **{cloud_mod.KEY_NAME: key})
        return self.volume.post('/volumes', {'volume': body})['volume']

    def _find_volume(self, key, body):
        found = self.volume.get('/volumes/detail?%s' % _query(
            metadata=json.dumps({cloud_mod.KEY_NAME: key})))['volumes']
        return found[0] if found else None

    def _get_volume(self, id):
        found = self.volume.get('/volumes/%s' % id, ok404=True)
        return found['volume'] if found else None

    def _update_volume(self, id, body):
        body = dict(body)
        size = body.pop('size', None)
        metadata = body.pop('metadata', None)
        if body:
            self.volume.put('/volumes/%s' % id, {'volume': body})
        if metadata is not None:
            current = self._get_volume(id) or {}
            kept = {k: v for k, v in (current.get('metadata') or {}).items()
                    if k == cloud_mod.KEY_NAME}
            self.volume.put('/volumes/%s/metadata' % id,
                            {'metadata': dict(metadata, **kept)})
        if size is not None:
            # 3.42: a volume attached to a server is extended where it is
            # (Heat's rule when the cloud has it; Cinder has since Pike)
            self.volume.post('/volumes/%s/action' % id,
                             {'os-extend': {'new_size': size}},
                             microversion=VOLUME_EXTEND_IN_USE)
        return self._get_volume(id)

    def _delete_volume(self, id):
        self.volume.delete('/volumes/%s' % id)

    def _list_volume(self, **filters):
        return self.volume.get('/volumes/detail?%s' % _query(
            **filters))['volumes']

    # attachments: Nova's, found through the volume
    def _create_volume_attachment(self, body, key):
        self.nova.post('/servers/%s/os-volume_attachments' % body[
            'server_id'], {'volumeAttachment': {
                k: v for k, v in (('volumeId', body['volume_id']),
                                  ('device', body.get('device')))
                if v}})
        return self._get_volume_attachment(body['volume_id']) or {
            'id': body['volume_id'], 'volume_id': body['volume_id'],
            'server_id': body['server_id'], 'status': 'attaching'}

    def _find_volume_attachment(self, key, body):
        found = self._get_volume_attachment(body.get('volume_id'))
        if found and found.get('server_id') == body.get('server_id'):
            return found
        return None

    def _get_volume_attachment(self, id):
        volume = self._get_volume(id) if id else None
        if volume is None:
            return None
        status = volume.get('status')
        for att in volume.get('attachments') or []:
            return {'id': id, 'volume_id': id,
                    'server_id': att.get('server_id'),
                    'device': att.get('device'),
                    'status': 'detaching' if status == 'detaching'
                    else 'attached' if status == 'in-use' else 'attaching'}
        if status in ('attaching', 'reserved'):
            return {'id': id, 'volume_id': id, 'server_id': None,
                    'device': None, 'status': 'attaching'}
        return None

    def _delete_volume_attachment(self, id):
        found = self._get_volume_attachment(id)
        if found is None or not found.get('server_id'):
            return
        self.nova.delete('/servers/%s/os-volume_attachments/%s' % (
            found['server_id'], id))

    # -- Cinder's backups ----------------------------------------------------
    def _create_volume_backup(self, body, key):
        body = dict(body, metadata=dict(body.get('metadata') or {},
                                        **{cloud_mod.KEY_NAME: key}))
        made = self.volume.post('/backups', {'backup': body},
                                microversion=VOLUME_BACKUP_METADATA)
        return self._get_volume_backup(made['backup']['id'])

    def _find_volume_backup(self, key, body):
        # the list filters by volume, not by metadata: the key is matched
        # here
        query = {'volume_id': body['volume_id']} if body.get('volume_id') \
            else {}
        for backup in self.volume.get(
                '/backups/detail?%s' % _query(**query),
                microversion=VOLUME_BACKUP_METADATA)['backups']:
            if (backup.get('metadata') or {}).get(cloud_mod.KEY_NAME) == key:
                return backup
        return None

    def _get_volume_backup(self, id):
        found = self.volume.get('/backups/%s' % id, ok404=True,
                                microversion=VOLUME_BACKUP_METADATA)
        return found['backup'] if found else None

    def _delete_volume_backup(self, id):
        self.volume.delete('/backups/%s' % id)

    # -- Nova's createImage --------------------------------------------------
    def _create_server_image(self, body, key):
        metadata = dict(body.get('metadata') or {},
                        **{cloud_mod.KEY_NAME: key})
        made = self.nova.post('/servers/%s/action' % body['server_id'], {
            'createImage': {'name': body.get('name') or 'snapshot',
                            'metadata': metadata}})
        # 2.45 and later answer the image's id in the body
        return self._get_image(made['image_id'])

    def _find_server_image(self, key, body):
        return self._find_image(key, body)

    def _get_server_image(self, id):
        return self._get_image(id)

    def _delete_server_image(self, id):
        return self._delete_image(id)

    # -- Glance ---------------------------------------------------------------
    def _create_image(self, body, key):
        body = dict(body)
        location = body.pop('location', None)
        body[cloud_mod.KEY_NAME] = key
        made = self.image.post('/images', body)
        if location:
            self.image.post('/images/%s/import' % made['id'], {
                'method': {'name': 'web-download', 'uri': location}})
        return made

    def _find_image(self, key, body):
        # Glance filters by any property of the image
        found = self.image.get('/images?%s' % _query(
            **{cloud_mod.KEY_NAME: key}))['images']
        return found[0] if found else None

    def _get_image(self, id):
        found = self.image.get('/images/%s' % id, ok404=True)
        if found and found.get('status') == 'deleted':
            return None
        return found

    def _update_image(self, id, body):
        # JSON patch: 'add' sets a property whether or not it is there;
        # None takes one away
        current = self._get_image(id) or {}
        patch = [{'op': 'remove', 'path': '/' + k} if v is None else
                 {'op': 'add', 'path': '/' + k, 'value': v}
                 for k, v in body.items() if v is not None or k in current]
        self.image.call('PATCH', '/images/%s' % id, body=patch, headers={
            'Content-Type': 'application/openstack-images-v2.1-json-patch'})
        return self._get_image(id)

    def _delete_image(self, id):
        self.image.delete('/images/%s' % id)

    def _list_image(self, **filters):
        return self.image.get('/images?%s' % _query(**filters))['images']

    # -- Nova: key pairs, server groups, flavors ------------------------------
    def _create_keypair(self, body, key):
        pair = self.nova.post('/os-keypairs', {'keypair': body})['keypair']
        pair['id'] = pair.get('name')   # Nova names a key pair by its name
        return pair

    def _find_keypair(self, key, body):
        return self._get_keypair(body.get('name'))

    def _get_keypair(self, id):
        if not id:
            return None
        found = self.nova.get('/os-keypairs/%s' % urllib.parse.quote(id),
                              ok404=True)
        if not found:
            return None
        pair = found['keypair']
        pair['id'] = pair.get('name')
        return pair

    def _delete_keypair(self, id):
        self.nova.delete('/os-keypairs/%s' % urllib.parse.quote(id))

    def _list_keypair(self, **filters):
        return [dict(k['keypair'], id=k['keypair'].get('name'))
                for k in self.nova.get('/os-keypairs')['keypairs']]

    def _create_server_group(self, body, key):
        return self.nova.post('/os-server-groups',
                              {'server_group': body})['server_group']

    def _find_server_group(self, key, body):
        for group in self._list_server_group():
            if group.get('name') == body.get('name'):
                return group
        return None

    def _get_server_group(self, id):
        found = self.nova.get('/os-server-groups/%s' % id, ok404=True)
        return found['server_group'] if found else None

    def _delete_server_group(self, id):
        self.nova.delete('/os-server-groups/%s' % id)

    def _list_server_group(self, **filters):
        return self.nova.get('/os-server-groups')['server_groups']

    def _create_flavor(self, body, key):
        body = dict(body)
        specs = body.pop('extra_specs', None) or {}
        tenants = body.pop('tenants', None) or []
        if 'ephemeral' in body:
            body['OS-FLV-EXT-DATA:ephemeral'] = body.pop('ephemeral')
        made = self.nova.post('/flavors', {'flavor': body})['flavor']
        self._flavor_extras(made['id'], specs, tenants)
        return self._get_flavor(made['id'])

    def _flavor_extras(self, id, specs, tenants):
        if specs:
            self.nova.post('/flavors/%s/os-extra_specs' % id,
                           {'extra_specs': specs})
        for tenant in tenants:
            try:
                self.nova.post('/flavors/%s/action' % id,
                               {'addTenantAccess': {'tenant': tenant}})
            except exception.CloudError as e:
                if e.code != 409:   # granted already
                    raise

    def _find_flavor(self, key, body):
        return _named(self._list_flavor(), body.get('name'))

    def _get_flavor(self, id):
        found = self.nova.get('/flavors/%s' % id, ok404=True)
        return found['flavor'] if found else None

    def _update_flavor(self, id, body):
        specs = body.get('extra_specs')
        if specs is not None:
            current = self.nova.get('/flavors/%s/os-extra_specs' % id)[
                'extra_specs']
            for gone in set(current) - set(specs):
                self.nova.delete('/flavors/%s/os-extra_specs/%s' % (
                    id, gone))
        self._flavor_extras(id, specs or {}, body.get('tenants') or [])
        return self._get_flavor(id)

    def _delete_flavor(self, id):
        self.nova.delete('/flavors/%s' % id)

    def _list_flavor(self, **filters):
        return self.nova.get('/flavors/detail?is_public=None')['flavors']


    # -- Nova: host aggregates (an admin's) -----------------------------------
    def _create_host_aggregate(self, body, key):
        made = self.nova.post('/os-aggregates', {'aggregate': {
            'name': body['name'],
            'availability_zone': body.get('availability_zone')}})[
            'aggregate']
        return self._aggregate_extras(made, body)

    def _aggregate_extras(self, agg, body):
        """The hosts and metadata `body` asks for, on the aggregate
        `agg` (Nova's actions, one host at a time)."""
        base = '/os-aggregates/%s/action' % agg['id']
        wanted = set(body.get('hosts') or [])
        for host in sorted(set(agg.get('hosts') or []) - wanted):
            agg = self.nova.post(base, {'remove_host': {'host': host}})[
                'aggregate']
        for host in sorted(wanted - set(agg.get('hosts') or [])):
            agg = self.nova.post(base, {'add_host': {'host': host}})[
                'aggregate']
        meta = body.get('metadata')
        if meta is not None:
            have = dict(agg.get('metadata') or {})
            change = {k: None for k in have
                      if k not in meta and k != 'availability_zone'}
            change.update({k: v for k, v in meta.items()
                           if have.get(k) != v})
            if change:
                agg = self.nova.post(base, {'set_metadata': {
                    'metadata': change}})['aggregate']
        return agg

    def _find_host_aggregate(self, key, body):
        return _named(self._list_host_aggregate(), body.get('name'))

    def _get_host_aggregate(self, id):
        found = self.nova.get('/os-aggregates/%s' % id, ok404=True)
        return found['aggregate'] if found else None

    def _update_host_aggregate(self, id, body):
        top = {k: body[k] for k in ('name', 'availability_zone')
               if k in body}
        if top:
            self.nova.put('/os-aggregates/%s' % id, {'aggregate': top})
        return self._aggregate_extras(self._get_host_aggregate(id), body)

    def _delete_host_aggregate(self, id):
        agg = self._get_host_aggregate(id)
        if agg is None:
            return
        # Nova refuses to delete an aggregate that has hosts
        self._aggregate_extras(agg, {'hosts': []})
        self.nova.delete('/os-aggregates/%s' % id)

    def _list_host_aggregate(self, **filters):
        return self.nova.get('/os-aggregates')['aggregates']

    # -- Cinder: volume types and their encryption (an admin's) --------------
    def _create_volume_type(self, body, key):
        body = dict(body)
        projects = body.pop('projects', None) or []
        made = self.volume.post('/types', {'volume_type': body})[
            'volume_type']
        self._type_access(made['id'], projects)
        return self._get_volume_type(made['id'])

    def _type_access(self, id, projects, had=()):
        for project in sorted(set(projects) - set(had)):
            self.volume.post('/types/%s/action' % id, {
                'addProjectAccess': {'project': project}})
        for project in sorted(set(had) - set(projects)):
            self.volume.post('/types/%s/action' % id, {
                'removeProjectAccess': {'project': project}})

    def _find_volume_type(self, key, body):
        return _named(self._list_volume_type(), body.get('name'))

    def _get_volume_type(self, id):
        found = self.volume.get('/types/%s' % id, ok404=True)
        return found['volume_type'] if found else None

    def _update_volume_type(self, id, body):
        body = dict(body)
        projects = body.pop('projects', None)
        specs = body.pop('extra_specs', None)
        if body:
            self.volume.put('/types/%s' % id, {'volume_type': body})
        if specs is not None:
            have = self.volume.get('/types/%s/extra_specs' % id)[
                'extra_specs']
            for gone in set(have) - set(specs):
                self.volume.delete('/types/%s/extra_specs/%s' % (id, gone))
            if specs:
                self.volume.post('/types/%s/extra_specs' % id,
                                 {'extra_specs': specs})
        if projects is not None:
            access = self.volume.get(
                '/types/%s/os-volume-type-access' % id, ok404=True) or {}
            had = [a['project_id'] for a in
                   access.get('volume_type_access', [])]
            self._type_access(id, projects, had)
        return self._get_volume_type(id)

    def _delete_volume_type(self, id):
        self.volume.delete('/types/%s' % id)

    def _list_volume_type(self, **filters):
        return self.volume.get('/types?is_public=None')['volume_types']

    def _create_volume_encryption_type(self, body, key):
        body = dict(body)
        vtype = body.pop('volume_type_id')
        self.volume.post('/types/%s/encryption' % vtype,
                         {'encryption': body})
        return self._get_volume_encryption_type(vtype)

    def _find_volume_encryption_type(self, key, body):
        return self._get_volume_encryption_type(body.get('volume_type_id'))

    def _get_volume_encryption_type(self, id):
        if not id:
            return None
        found = self.volume.get('/types/%s/encryption' % id, ok404=True)
        if not found or not found.get('encryption_id'):
            return None   # Cinder answers {} for a type without one
        return dict(found, id=id)

    def _update_volume_encryption_type(self, id, body):
        found = self._get_volume_encryption_type(id)
        if found is None:
            raise exception.CloudNotFound(
                'Volume type encryption for type %s does not exist.' % id)
        self.volume.put('/types/%s/encryption/%s' % (
            id, found['encryption_id']), {'encryption': dict(body)})
        return self._get_volume_encryption_type(id)

    def _delete_volume_encryption_type(self, id):
        found = self._get_volume_encryption_type(id)
        if found is not None:
            self.volume.delete('/types/%s/encryption/%s' % (
                id, found['encryption_id']))

    def _list_volume_encryption_type(self, **filters):
        return [e for e in (self._get_volume_encryption_type(t['id'])
                            for t in self._list_volume_type()) if e]


    # -- Neutron's extra routes (extraroute-atomic) ----------------------------
    def add_routes(self, router_id, routes):
        return self.network.put('/routers/%s/add_extraroutes' % router_id, {
            'router': {'routes': list(routes)}})['router'].get('routes') or []

    def remove_routes(self, router_id, routes):
        return self.network.put(
            '/routers/%s/remove_extraroutes' % router_id,
            {'router': {'routes': list(routes)}})['router'].get(
                'routes') or []

    # -- Keystone (an admin's) ----------------------------------------------
    def _resolve_identity(self, kind, ref):
        coll, item = KEYSTONE[kind]
        if kind == 'domain' and ref == 'default':
            return ref
        found = self.keystone.get('/%s/%s' % (coll, ref), ok404=True)
        if found:
            return found[item]['id']
        name, domain = cloud_mod.split_domain(ref) \
            if kind in cloud_mod.DOMAIN_SCOPED else (ref, None)
        filters = {'name': name}
        if domain is not None:
            filters['domain_id'] = self._resolve_identity('domain', domain)
        matches = [o['id'] for o in self.keystone.get('/%s?%s' % (
            coll, _query(**filters)))[coll]]
        if not matches:
            raise exception.CloudNotFound(
                'The Keystone %s (%s) could not be found.' % (kind, ref))
        if len(matches) > 1:
            raise exception.CloudError(
                'Multiple %s matches found for name \'%s\', use an ID to be '
                'more specific.' % (kind, ref), 409)
        return matches[0]

    def _identity_create(self, kind, body):
        coll, item = KEYSTONE[kind]
        return self.keystone.post('/%s' % coll, {item: body})[item]

    def _identity_find(self, kind, body):
        coll, item = KEYSTONE[kind]
        if not body.get('name'):
            return None
        filters = {'name': body['name']}
        if kind in cloud_mod.DOMAIN_SCOPED:
            filters['domain_id'] = body.get('domain_id') or 'default'
        found = self.keystone.get('/%s?%s' % (coll, _query(**filters)))[
            coll]
        return found[0] if found else None

    def _identity_get(self, kind, id):
        coll, item = KEYSTONE[kind]
        found = self.keystone.get('/%s/%s' % (coll, id), ok404=True)
        return found[item] if found else None

    def _identity_update(self, kind, id, body):
        coll, item = KEYSTONE[kind]
        return self.keystone.patch('/%s/%s' % (coll, id), {item: body})[item]

    def _identity_list(self, kind, **filters):
        coll, _ = KEYSTONE[kind]
        return self.keystone.get('/%s?%s' % (coll, _query(**filters)))[coll]

    def _delete_domain(self, id):
        # Keystone deletes only a disabled domain
        if self._identity_get('domain', id) is None:
            return
        self._identity_update('domain', id, {'enabled': False})
        self.keystone.delete('/domains/%s' % id)

    @staticmethod
    def _grant_path(body):
        scope = ('projects/%s' % body['project_id']) if body.get(
            'project_id') else 'domains/%s' % body['domain_id']
        return '/%s/users/%s/roles/%s' % (scope, body['user_id'],
                                           body['role_id'])

    @staticmethod
    def _grant_of(id):
        """A role assignment's id (USER:ROLE:project=ID) as its body."""
        user, role, scope = str(id).split(':', 2)
        where, _, target = scope.partition('=')
        return {'user_id': user, 'role_id': role,
                '%s_id' % where: target, 'id': id}

    def _create_role_assignment(self, body, key):
        self.keystone.put(self._grant_path(body))
        return self._get_role_assignment(cloud_mod.role_assignment_id(body))

    def _find_role_assignment(self, key, body):
        return self._get_role_assignment(cloud_mod.role_assignment_id(body))

    def _get_role_assignment(self, id):
        try:
            body = self._grant_of(id)
        except ValueError:
            return None
        scope = 'scope.project.id' if body.get('project_id') else \
            'scope.domain.id'
        found = self.keystone.get('/role_assignments?%s' % _query(**{
            'user.id': body['user_id'], 'role.id': body['role_id'],
            scope: body.get('project_id') or body.get('domain_id')}),
            ok404=True)
        return body if found and found.get('role_assignments') else None

    def _delete_role_assignment(self, id):
        self.keystone.delete(self._grant_path(self._grant_of(id)))

    def _list_role_assignment(self, **filters):
        return []   # only a user's own are looked at (by id)


_DEFAULT_RULE = {'ethertype': 'IPv4'}


def _alarm(raw):
    """Aodh's alarm with the ``id`` every kind has (its alarm_id)."""
    if raw is None:
        return None
    return dict(raw, id=raw.get('alarm_id'))


def _named(objects, name):
    """The first of `objects` named `name` (a kind whose names are the
    cloud's, unique: its natural identity), or None."""
    for obj in objects:
        if obj.get('name') == name:
            return obj
    return None


def _same(a, b):
    return (a in (None, '') and b in (None, '')) or a == b


# -- servers ----------------------------------------------------------------
def _server(raw):
    """A Nova server as the Server plug-in reads one (the simulator's
    shape): ``image`` its id, ``flavor`` its name, ``task_state`` Nova's
    OS-EXT-STS:task_state."""
    out = dict(raw)
    image = raw.get('image')
    out['image'] = image.get('id') if isinstance(image, dict) else (
        image or None)
    flavor = raw.get('flavor')
    if isinstance(flavor, dict):
        out['flavor'] = flavor.get('original_name') or flavor.get('id')
    out['task_state'] = raw.get('OS-EXT-STS:task_state')
    out.setdefault('progress', raw.get('progress') or 0)
    return out


def _later(a, b):
    """Whether Nova's `a` shows a later change than `b` (its ``updated``,
    to the second; a server only assumed from our own call has none)."""
    return bool(a.get('updated')) and (a.get('updated') or '') > (
        b.get('updated') or '')


class ServerWatch:
    """What this process knows of the servers it watches, refreshed for
    all of them by one list call per `WATCH_INTERVAL` (Nova's
    ``changes-since``: only the servers that changed since the last list,
    deleted ones included), instead of a GET per server per look.

    One looker lists, outside the lock; the others answer at once from
    what is known meanwhile (a look is a poll: the next one sees the
    list). Lists waited for under the lock had every worker thread queue
    behind them: on a loaded cloud a list took 4 s, each look found the
    last one stale and listed again, and the deletes of 10 servers on 8
    threads waited 9 s for a thread."""

    def __init__(self, nova, interval=WATCH_INTERVAL):
        self._nova = nova
        self.interval = interval
        self._lock = threading.Lock()
        self._known = {}        # id -> server (raw)
        self._assumed = {}      # id -> when: known from our own call only
        self._listed_at = None  # the cloud's time of the last list
        self._local_at = 0.0
        self._listing = False   # a looker is listing now

    def look(self, server_id):
        """The server as of the last list (at most `interval` ago, unless
        a list is under way), or None when this watch has not seen it
        yet (the caller GETs it once)."""
        with self._lock:
            due = not self._listing and \
                time.monotonic() - self._local_at > self.interval
            if due:
                self._listing = True
        if due:
            self._refresh()
        with self._lock:
            assumed = self._assumed.get(server_id)
            if assumed is not None and \
                    self._local_at - assumed > 3 * self.interval:
                # a list begun well after our call did not show it (as it
                # shows every change since): seen for real, once. Counted
                # from when a list began, not from now: lists of seconds
                # on a loaded cloud had each server GET after a delete
                return None
            return self._known.get(server_id)

    def remember(self, server):
        """A server as a GET just showed it. A list that ran meanwhile may
        know it better: a GET answered before the list must not undo it
        (no later list would show the server again if it changes no
        more), so the GET is kept only where it is newer."""
        with self._lock:
            sid = server['id']
            known = self._known.get(sid)
            if known is None or sid in self._assumed or \
                    _later(server, known):
                self._known[sid] = server
                self._assumed.pop(sid, None)

    def assume(self, server):
        """What our own call just did to `server` (made it, asked it to
        go), until a list shows it: no GET to learn what we know."""
        with self._lock:
            self._known[server['id']] = server
            self._assumed[server['id']] = time.monotonic()

    def forget(self, server_id):
        with self._lock:
            self._known.pop(server_id, None)
            self._assumed.pop(server_id, None)

    def _refresh(self):
        started = time.monotonic()
        now = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(
            time.time() - 2 * self.interval - 1))
        query = 'changes-since=%s' % self._listed_at if self._listed_at \
            else ''
        try:
            found = self._nova.get('/servers/detail?%s' % query)['servers']
        except BaseException:
            with self._lock:
                self._listing = False
            raise
        with self._lock:
            for server in found:
                sid = server['id']
                known = self._known.get(sid)
                if known is not None and _later(known, server):
                    # our own call's news, or a GET answered while the
                    # list ran: newer than this list
                    continue
                self._known[sid] = server
                self._assumed.pop(sid, None)
            # the next list asks for changes since a little before this
            # one (the cloud's and this host's clocks may differ by a
            # second)
            self._listed_at = now
            self._local_at = started
            self._listing = False


class OpenStackCompute:
    """The Server plug-in's calls (as drivers/sim's SimCompute answers
    them) on Nova, with the key as a server tag."""

    in_process = False

    def __init__(self, cloud):
        self._cloud = cloud
        self._nova = cloud.nova
        self.watch = ServerWatch(self._nova)

    @property
    def look_interval(self):
        """A look at a server costs no call of its own (the watch lists
        them all once per interval): the Server plug-in looks this often
        at most, not at its backoff's five seconds."""
        return self.watch.interval

    def image_ref(self, image):
        """What a server's ``image`` reads for the image a template names
        (its id)."""
        return self._cloud.resolve('image', image) if image else image

    def flavor_ref(self, flavor):
        """What a server's ``flavor`` reads for the flavor a template
        names (its name, as Nova shows it since 2.47)."""
        if not flavor:
            return flavor
        flavor_id = self._cloud.resolve('flavor', flavor)
        if flavor_id == flavor:
            found = self._cloud._get_flavor(flavor_id) or {}
            return found.get('name', flavor)
        return flavor

    def _nics(self, networks, key, fresh=False, security_groups=None):
        if networks in ('none', 'auto'):
            return networks
        nics = []
        for i, nic in enumerate(networks or []):
            if nic.get('port'):
                # a port's id (get_resource, mostly) goes as it is: Nova
                # refuses one that does not exist in its own words
                port = nic['port'] if _is_uuid(nic['port']) else \
                    self._cloud.resolve('port', nic['port'])
                nics.append({'port': port})
                continue
            if nic.get('subnet'):
                # Nova cannot pick a subnet: a port on it (as Heat makes
                # one), found again by its key on a retried create
                port = self._subnet_port(nic, '%s-nic%d' % (key, i), fresh,
                                         security_groups)
                nics.append({'port': port['id']})
                continue
            entry = {'uuid': self._cloud.resolve('network', nic['network'])}
            if nic.get('fixed_ip'):
                entry['fixed_ip'] = nic['fixed_ip']
            if nic.get('tag'):
                entry['tag'] = nic['tag']
            nics.append(entry)
        return nics or 'auto'

    def _subnet_port(self, nic, key, fresh=False, security_groups=None):
        """The port converge makes for a nic on a subnet, tagged with
        `key` (the server's idempotency key and the nic's suffix), in the
        server's security groups (Nova gives a port it is handed none):
        the Server plug-in deletes it with the server, or when it
        detaches it."""
        subnet = self._cloud.resolve('subnet', nic['subnet'])
        fixed = {'subnet_id': subnet}
        if nic.get('fixed_ip'):
            fixed['ip_address'] = nic['fixed_ip']
        net = self._cloud.resolve('network', nic['network']) \
            if nic.get('network') else \
            self._cloud.get('subnet', subnet)['network_id']
        body = {'network_id': net, 'fixed_ips': [fixed]}
        if security_groups:
            body['security_groups'] = [
                self._cloud.resolve('security_group', g)
                for g in security_groups]
        return self._cloud.create('port', body, key, fresh=fresh)

    def attach_interface(self, server_id, nic, key, security_groups=None):
        """Attach a nic (Nova's os-interface: synchronous, the port is
        the server's when it answers) and return its port. A nic on a
        subnet gets a port of converge's, tagged with `key`; one on a
        network, Nova's own (which Nova deletes when it is detached)."""
        if nic.get('port'):
            body = {'port_id': self._cloud.resolve('port', nic['port'])}
        elif nic.get('subnet'):
            body = {'port_id': self._subnet_port(
                nic, key, security_groups=security_groups)['id']}
        else:
            body = {'net_id': self._cloud.resolve('network', nic['network'])}
            if nic.get('fixed_ip'):
                body['fixed_ips'] = [{'ip_address': nic['fixed_ip']}]
        made = self._nova.post('/servers/%s/os-interface' % server_id,
                               {'interfaceAttachment': body})
        port_id = made['interfaceAttachment']['port_id']
        # its addresses changed: the next look reads the server again
        self.watch.forget(server_id)
        return self._cloud.get('port', port_id)

    def detach_interface(self, server_id, port_id):
        """Ask Nova to detach the port (asynchronous: the port shows
        the server as its device until Nova is done)."""
        self._nova.call('DELETE', '/servers/%s/os-interface/%s' % (
            server_id, port_id))
        self.watch.forget(server_id)

    def create_server(self, name, image, flavor, networks=None,
                      metadata=None, user_data=None, key_name=None,
                      idempotency_key=None, resource=None, tags=None,
                      security_groups=None, block_device_mapping_v2=None,
                      block_device_mapping=None, scheduler_hints=None,
                      availability_zone=None, config_drive=None,
                      admin_pass=None, disk_config=None,
                      user_data_format=None, fresh=False, **ignored):
        if idempotency_key and not fresh:
            found = self.find_server_by_key(idempotency_key)
            if found is not None:
                return found
        server = {'name': name,
                  'flavorRef': self._cloud.resolve('flavor', flavor),
                  'networks': self._nics(networks, idempotency_key, fresh,
                                         security_groups),
                  'metadata': metadata or {},
                  'tags': list(tags or [])}
        if idempotency_key:
            server['tags'].append(cloud_mod.key_tag(idempotency_key))
        if image:
            server['imageRef'] = self._cloud.resolve('image', image)
        if user_data:
            server['user_data'] = base64.b64encode(
                user_data.encode()).decode()
        if key_name:
            server['key_name'] = key_name
        if security_groups:
            server['security_groups'] = [{'name': g}
                                         for g in security_groups]
        if availability_zone:
            server['availability_zone'] = availability_zone
        if config_drive is not None:
            server['config_drive'] = bool(config_drive)
        if admin_pass:
            server['adminPass'] = admin_pass
        if disk_config:
            server['OS-DCF:diskConfig'] = disk_config
        bdm = self._bdm(block_device_mapping_v2, block_device_mapping)
        if bdm:
            server['block_device_mapping_v2'] = bdm
        body = {'server': server}
        if scheduler_hints:
            body['os:scheduler_hints'] = scheduler_hints
        made = self._nova.post('/servers', body)['server']
        # building, as Nova answers a create (it returns only the id): the
        # watch's next list tells the rest, no GET of its own
        raw = dict(server, id=made['id'], status='BUILD', progress=0,
                   **{'OS-EXT-STS:task_state': 'scheduling'})
        raw.pop('user_data', None)
        raw.pop('adminPass', None)
        self.watch.assume(raw)
        return _server(raw)

    def _bdm(self, v2, v1):
        out = []
        for m in v1 or []:
            out.append({k: v for k, v in (
                ('device_name', m.get('device_name')),
                ('source_type', 'snapshot' if m.get('snapshot_id')
                 else 'volume'),
                ('destination_type', 'volume'),
                ('uuid', m.get('volume_id') or m.get('snapshot_id')),
                ('volume_size', m.get('volume_size')),
                ('delete_on_termination', m.get('delete_on_termination')),
                ('boot_index', 0 if m.get('device_name') == 'vda' else None),
            ) if v is not None})
        for m in v2 or []:
            entry = {k: m[k] for k in (
                'device_name', 'device_type', 'disk_bus', 'boot_index',
                'volume_size', 'delete_on_termination', 'guest_format')
                if m.get(k) is not None}
            image = m.get('image') or m.get('image_id')
            if m.get('volume_id'):
                entry.update(source_type='volume', destination_type='volume',
                             uuid=m['volume_id'])
            elif m.get('snapshot_id'):
                entry.update(source_type='snapshot',
                             destination_type='volume',
                             uuid=m['snapshot_id'])
            elif image:
                entry.update(source_type='image', destination_type='volume',
                             uuid=self._cloud.resolve('image', image))
            elif m.get('swap_size'):
                entry.update(source_type='blank', destination_type='local',
                             guest_format='swap',
                             volume_size=m['swap_size'] // 1024 or 1)
            else:
                entry.update(source_type='blank', destination_type='local',
                             volume_size=m.get('ephemeral_size'))
                if m.get('ephemeral_format'):
                    entry['guest_format'] = m['ephemeral_format']
            if m.get('volume_size') is not None:
                entry['volume_size'] = m['volume_size']
            out.append(entry)
        return out

    def find_server_by_key(self, idempotency_key):
        found = self._nova.get('/servers/detail?%s' % _query(
            tags=cloud_mod.key_tag(idempotency_key)))['servers']
        live = [s for s in found if s.get('status') not in ('DELETED',
                                                            'SOFT_DELETED')]
        return _server(live[0]) if live else None

    def interfaces(self, server_id):
        """The server's ports (Nova's interface list)."""
        return self._cloud.list('port', device_id=server_id)

    def get_server(self, server_id):
        raw = self.watch.look(server_id)
        if raw is None:
            raw = self._nova.get('/servers/%s' % server_id)['server']
            self.watch.remember(raw)
        if raw.get('status') == 'DELETED':
            raise exception.CloudNotFound(
                'Instance %s could not be found.' % server_id)
        return _server(raw)

    def owns_server(self, server_id):
        """Whether the server is this project's own: Nova finds it with
        the project's token (a GET of another project's 404s), and it is
        not another project's that an admin's token sees."""
        try:
            raw = self._nova.get('/servers/%s' % server_id)['server']
        except exception.CloudNotFound:
            return False
        return raw.get('status') != 'DELETED' and cloud_mod.owned_by(
            raw, self._cloud.project_id)

    def list_servers(self):
        return [_server(s) for s in self._nova.get('/servers/detail')[
            'servers']]

    def delete_server(self, server_id):
        self._nova.call('DELETE', '/servers/%s' % server_id)
        known = self.watch.look(server_id)
        if known is None:
            self.watch.forget(server_id)
        else:
            # going, as Nova shows it once asked: the watch's lists tell
            # when it is gone, no GET of its own
            self.watch.assume(dict(known, **{
                'OS-EXT-STS:task_state': 'deleting'}))

    def _action(self, server_id, action):
        self._nova.post('/servers/%s/action' % server_id, action)
        return self._reread(server_id)

    def _reread(self, server_id):
        """The server right after our own call changed it: read, and held
        by the watch over any list that does not show a later change."""
        raw = self._nova.get('/servers/%s' % server_id)['server']
        self.watch.assume(raw)
        return _server(raw)

    def rebuild_server(self, server_id, image):
        return self._action(server_id, {'rebuild': {
            'imageRef': self._cloud.resolve('image', image)}})

    def resize_server(self, server_id, flavor):
        return self._action(server_id, {'resize': {
            'flavorRef': self._cloud.resolve('flavor', flavor)}})

    def confirm_resize(self, server_id):
        return self._action(server_id, {'confirmResize': None})

    def update_server(self, server_id, name=None, metadata=None):
        if name is not None:
            self._nova.put('/servers/%s' % server_id,
                           {'server': {'name': name}})
        if metadata is not None:
            self._nova.put('/servers/%s/metadata' % server_id,
                           {'metadata': metadata})
        return self._reread(server_id)

    def stop_server(self, server_id):
        return self._action(server_id, {'os-stop': None})

    def start_server(self, server_id):
        return self._action(server_id, {'os-start': None})

    def reboot_server(self, server_id):
        return self._action(server_id, {'reboot': {'type': 'SOFT'}})
