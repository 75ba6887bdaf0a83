"""OS::Nova::KeyPair, OS::Nova::ServerGroup, OS::Nova::Flavor and
OS::Nova::HostAggregate, as Heat's (heat/engine/resources/openstack/nova/
keypair.py, server_group.py, flavor.py, host_aggregate.py), made through
``clients.cloud``.

Nova keeps no tag on these: the cloud finds one again by its name (its
natural identity, drivers/cloud.py). So a key pair whose name stays is
never "replaced" by a second one of that name, which Nova would refuse:
it is deleted and made again in place (Heat's replacement, which deletes
the old pair first, ends the same: a new pair under the same name). A
flavor or server group found by name that is not what the template asks
for is another's, and the create fails, as Nova's would.
"""

from converge import exception
from converge.resources import cloud_object as co
from converge.resources import properties as p


class KeyPair(co.CloudObject):
    """OS::Nova::KeyPair: an ssh key pair, made by Nova (its private key
    kept in the resource's data when ``save_private_key``) or from a
    given public key. Its id, and what get_resource returns, is its
    name."""

    kind = 'keypair'
    title = 'Key pair'
    natural_identity = True
    drift_fields = ('public_key',)

    properties_schema = {
        'name': p.Schema(p.STRING, 'The name of the key pair.',
                         required=True, min_length=1, max_length=255),
        'save_private_key': p.Schema(
            p.BOOLEAN, 'True if the system should remember a generated '
            'private key; False otherwise.', default=False),
        'public_key': p.Schema(
            p.STRING, 'The public key. This allows users to supply the '
            'public key from a pre-existing key pair. If not supplied, a '
            'new key pair will be generated.'),
        'type': p.Schema(p.STRING, 'Keypair type. Supported since Nova api '
                         'version 2.2.', allowed_values=('ssh', 'x509')),
        'user': p.Schema(
            p.STRING, 'ID or name of user to whom to add key-pair. The usage '
            'of this property is limited to being used by administrators '
            'only. Supported since Nova api version 2.10.'),
    }

    attributes_schema = {
        'public_key': 'The public key.',
        'private_key': 'The private key if it has been saved.',
    }

    def make_body(self):
        props = self.properties
        body = {'name': props.get('name')}
        if props.get('public_key'):
            body['public_key'] = props['public_key']
        if props.get('type'):
            body['type'] = props['type']
        if props.get('user'):
            body['user_id'] = props['user']
        return body

    def identity_conflict(self, obj, body):
        given = body.get('public_key')
        if given and _key_text(obj.get('public_key')) != _key_text(given):
            return "Key pair '%s' already exists." % body['name']
        return None

    def after_create_call(self, obj):
        # Nova shows a generated private key in this answer only
        if self.properties.get('save_private_key') and \
                obj.get('private_key'):
            self.data['private_key'] = obj['private_key']
        else:
            self.data.pop('private_key', None)

    def needs_replace(self, prior):
        # another name is another pair; the same name is made again in
        # place (update)
        return prior.get('name') != self.properties.get('name')

    def update(self, prior, observed):
        if self.needs_replace(prior):
            raise exception.UpdateReplace(self.name)
        obj = observed if observed else self._current()
        if obj is None:
            raise exception.UpdateReplace(self.name)
        changed = any(prior.get(k) != self.properties.get(k) for k in
                      ('public_key', 'type', 'user', 'save_private_key'))
        given = self.properties.get('public_key')
        if given and _key_text(obj.get('public_key')) != _key_text(given):
            changed = True   # changed behind our back
        if not changed:
            return None
        # Heat replaces it (deleting the old pair first, the name being
        # Nova's key): the same, in place
        try:
            self.cloud.delete(self.kind, obj['id'])
        except exception.CloudNotFound:
            pass
        body = self.make_body()
        obj = self.cloud.create(self.kind, body, key=self.idempotency_key,
                                fresh=self.fresh)
        self.physical_id = obj['id']
        self.data['applied'] = body
        self.after_create_call(obj)
        self.seen = obj
        return None

    def attributes(self, obj):
        return {'public_key': self.properties.get('public_key') or
                obj.get('public_key'),
                'private_key': self._private_key()}

    def get_attributes(self, observed):
        out = super().get_attributes(observed)
        out['private_key'] = self._private_key()
        if observed:
            # the private key is an attribute of its own, and only that
            out['show'].pop('private_key', None)
        return out

    def _private_key(self):
        if self.properties.get('save_private_key'):
            return self.data.get('private_key', '')
        return ''


def _key_text(key):
    """A public key's type and key material (its comment aside)."""
    return ' '.join((key or '').split()[:2])


POLICIES = ('anti-affinity', 'affinity', 'soft-anti-affinity',
            'soft-affinity')


class ServerGroup(co.CloudObject):
    """OS::Nova::ServerGroup: servers placed together or apart. Nothing of
    it changes in place: any change replaces it."""

    kind = 'server_group'
    title = 'Server group'
    natural_identity = True

    properties_schema = {
        'name': p.Schema(p.STRING, 'Server Group name.'),
        'policies': p.Schema(
            p.LIST, 'A list of exactly one policy to apply. Defaults to '
            'anti-affinity.', default=['anti-affinity'],
            schema=p.Schema(p.STRING, allowed_values=POLICIES)),
        'rules': p.Schema(p.MAP, 'Rules for a policy.', schema={
            'max_server_per_host': p.Schema(
                p.NUMBER, 'Maximum servers in a group on a given host. Rule '
                'for anti-affinity policy.'),
        }),
    }
    attributes_schema = {}

    @classmethod
    def validate_more(cls, values, path):
        # (a list's items are coerced, not checked, by the schema)
        policies = values.get('policies')
        for i, policy in enumerate(policies if isinstance(policies, list)
                                   else []):
            if isinstance(policy, str) and policy not in POLICIES:
                raise exception.InvalidTemplate(
                    '"%s" is not an allowed value %s' % (
                        policy, list(POLICIES)),
                    path=list(path) + ['policies', i])
        return values

    def make_body(self):
        props = self.properties
        body = {'name': self.physical_name(),
                'policy': (props.get('policies') or ['anti-affinity'])[0]}
        rules = {k: v for k, v in (props.get('rules') or {}).items()
                 if v is not None}
        if rules:
            body['rules'] = rules
        return body

    def identity_conflict(self, obj, body):
        seen = obj.get('policy') or (obj.get('policies') or [None])[0]
        if seen != body['policy'] or \
                (obj.get('rules') or {}) != body.get('rules', {}):
            return ("A server group named '%s' exists already, with another "
                    "policy: give this one another name." % body['name'])
        return None

    def attributes(self, obj):
        return {}


class Flavor(co.CloudObject):
    """OS::Nova::Flavor: a flavor (an admin's). Its extra specs and, for a
    private flavor, the projects that may use it change in place;
    anything else replaces it."""

    kind = 'flavor'
    title = 'Flavor'
    natural_identity = True
    update_fields = ('extra_specs', 'tenants')
    drift_fields = ('extra_specs',)
    cleared = {'extra_specs': {}, 'tenants': []}

    properties_schema = {
        'tenants': p.Schema(p.LIST, 'List of tenants.', default=[],
                            update_allowed=True, schema=p.Schema(p.STRING)),
        'flavorid': p.Schema(
            p.STRING, 'Unique ID of the flavor. If not specified, an UUID '
            'will be auto generated and used.'),
        'name': p.Schema(p.STRING, 'Name of the flavor.'),
        'ram': p.Schema(p.INTEGER, 'Memory in MB for the flavor.',
                        required=True),
        'vcpus': p.Schema(p.INTEGER, 'Number of VCPUs for the flavor.',
                          required=True),
        'disk': p.Schema(
            p.INTEGER, 'Size of local disk in GB. The "0" size is a special '
            'case that uses the native base image size as the size of the '
            'ephemeral root volume.', default=0),
        'swap': p.Schema(p.INTEGER, 'Swap space in MB.', default=0),
        'ephemeral': p.Schema(
            p.INTEGER, 'Size of a secondary ephemeral data disk in GB.',
            default=0),
        'rxtx_factor': p.Schema(p.NUMBER, 'RX/TX factor.', default=1.0),
        'extra_specs': p.Schema(
            p.MAP, 'Key/Value pairs to extend the capabilities of the '
            'flavor.', update_allowed=True),
        'is_public': p.Schema(
            p.BOOLEAN, 'Scope of flavor accessibility. Public or private. '
            'Default value is True, means public, shared across all '
            'projects.', default=True),
    }

    attributes_schema = {
        'is_public': 'Whether the flavor is shared across all projects.',
        'extra_specs': 'Extra specs of the flavor in key-value pairs.',
    }

    def make_body(self):
        props = self.properties
        body = {'name': self.physical_name(),
                'ram': props.get('ram'), 'vcpus': props.get('vcpus'),
                'disk': props.get('disk', 0), 'swap': props.get('swap', 0),
                'ephemeral': props.get('ephemeral', 0),
                'rxtx_factor': props.get('rxtx_factor', 1.0),
                'os-flavor-access:is_public': props.get('is_public', True),
                'extra_specs': dict(props.get('extra_specs') or {})}
        if props.get('flavorid'):
            body['id'] = props['flavorid']
        if not body['os-flavor-access:is_public']:
            # Heat: a private flavor without tenants is the project's own
            body['tenants'] = list(props.get('tenants') or
                                   [self.cloud.project_id])
        return body

    def identity_conflict(self, obj, body):
        for field in ('ram', 'vcpus', 'disk'):
            if obj.get(field) is not None and obj[field] != body[field]:
                return 'Flavor with name %s already exists.' % body['name']
        return None

    def attributes(self, obj):
        return {'is_public': obj.get('os-flavor-access:is_public'),
                'extra_specs': obj.get('extra_specs') or {}}


class HostAggregate(co.CloudObject):
    """OS::Nova::HostAggregate: a group of compute hosts (an admin's),
    with an availability zone and metadata. Everything of it changes in
    place; it is found again by its name (Nova's are unique)."""

    kind = 'host_aggregate'
    title = 'Aggregate'
    natural_identity = True
    update_fields = ('name', 'availability_zone', 'hosts', 'metadata')
    drift_fields = ('hosts', 'metadata')
    unordered_fields = ('hosts',)
    cleared = {'hosts': [], 'metadata': {}}

    properties_schema = {
        'name': p.Schema(p.STRING, 'Name for the aggregate.', required=True,
                         update_allowed=True),
        'availability_zone': p.Schema(
            p.STRING, 'Name for the availability zone.',
            update_allowed=True),
        'hosts': p.Schema(p.LIST, 'List of hosts to join aggregate.',
                          update_allowed=True, default=[],
                          schema=p.Schema(p.STRING)),
        'metadata': p.Schema(p.MAP, 'Arbitrary key/value metadata to '
                             'store information for aggregate.',
                             update_allowed=True, default={}),
    }
    attributes_schema = {}

    def make_body(self):
        props = self.properties
        meta = {str(k): str(v) for k, v in
                (props.get('metadata') or {}).items()}
        zone = props.get('availability_zone')
        if zone:
            meta['availability_zone'] = zone
        return {'name': props.get('name'), 'availability_zone': zone,
                'hosts': sorted(props.get('hosts') or []),
                'metadata': meta}

    def identity_conflict(self, obj, body):
        if obj.get('availability_zone') != body['availability_zone']:
            return 'Aggregate %s already exists.' % body['name']
        return None

    def attributes(self, obj):
        return {}
