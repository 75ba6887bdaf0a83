"""Nova's key pairs, server groups, flavors and host aggregates on the
sim.

None of them carries a key (Nova has nowhere to keep one): a key pair
is found by its project and name (its id is its name), a flavor by its
name (flavor names are the cloud's, unique), a server group by its name
in its project. A second create of the same name returns the one there
is, or is refused as Nova refuses it when it asks for something else
(another public key, another size).

A key pair made without a public key gets a new one; its private key is
in the create's answer only.

A host aggregate (an admin's) is found by its name, unique in the cloud
as Nova keeps it; its hosts are the sim's compute hosts (any name), its
availability zone is its metadata's ``availability_zone``, as Nova's.
"""

import base64
import binascii
import hashlib
import string

from converge.drivers.sim import rows
from converge.drivers.sim.rows import bad, conflict

POLICIES = ('anti-affinity', 'affinity', 'soft-anti-affinity',
            'soft-affinity')
#: what Nova lets a key pair's name hold
NAME_CHARS = set(string.ascii_letters + string.digits + '-_ .@')


def fingerprint(public_key):
    """Nova's fingerprint of an OpenSSH public key (MD5 of its blob), or
    its 400."""
    parts = str(public_key).split()
    try:
        blob = base64.b64decode(parts[1], validate=True)
        kind_len = int.from_bytes(blob[:4], 'big')
        if blob[4:4 + kind_len].decode() != parts[0]:
            raise ValueError(parts[0])
    except (IndexError, ValueError, binascii.Error, UnicodeDecodeError):
        raise bad('Keypair data is invalid: failed to generate fingerprint')
    digest = hashlib.md5(blob).hexdigest()
    return ':'.join(digest[i:i + 2] for i in range(0, len(digest), 2))


def generate(name):
    """(public key, private key) of a new ed25519 pair, OpenSSH's
    formats."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH,
        serialization.PublicFormat.OpenSSH).decode()
    return '%s Generated-by-Nova %s' % (public, name), private


class Keypair(rows.Kind):
    name = 'keypair'
    title = 'Keypair'
    fields = ('name', 'public_key', 'type', 'user_id')

    def identity(self, ctx, body):
        if not body.get('name'):
            return None
        return 'keypair:%s:%s' % (ctx.project_id, body['name'])

    def same(self, obj, body):
        asked = body.get('public_key')
        if (asked and asked.strip() != obj.body['public_key'].strip()) or \
                body.get('type', obj.body['type']) != obj.body['type']:
            raise conflict("Key pair '%s' already exists." % obj.id)
        return True

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        name = body.get('name') or ''
        if not 1 <= len(name) <= 255:
            raise bad('Keypair data is invalid: Keypair name must be string '
                      'and between 1 and 255 characters long')
        if set(name) - NAME_CHARS:
            raise bad('Keypair data is invalid: Keypair name contains unsafe '
                      'characters')
        kind = body.get('type') or 'ssh'
        if kind not in ('ssh', 'x509'):
            raise bad("Invalid input for field/attribute type. Value: %s. "
                      "'%s' is not one of ['ssh', 'x509']" % (kind, kind))
        once = {}
        public = body.get('public_key')
        if not public:
            public, once['private_key'] = generate(name)
        if kind == 'ssh':
            print_ = fingerprint(public)
        else:
            digest = hashlib.sha1(public.encode()).hexdigest()
            print_ = ':'.join(digest[i:i + 2] for i in range(0, 40, 2))
        stored = {'name': name, 'public_key': public, 'fingerprint': print_,
                  'type': kind, 'user_id': body.get('user_id') or 'sim'}
        obj = self.new(ctx, stored, key, id=name,
                       ident=self.identity(ctx, body))
        obj.once = once
        return ctx.insert(obj)

    def show(self, ctx, obj):
        view = rows.public(obj.body)
        view.update(id=obj.id, created_at=obj.created, updated_at=None,
                    deleted=False, deleted_at=None)
        return view


class ServerGroup(rows.Kind):
    name = 'server_group'
    title = 'Server group'
    fields = ('name', 'policy', 'policies', 'rules')

    def find(self, ctx, body):
        if not body.get('name'):
            return None
        named = ctx.all(self.name, name=body['name'],
                        project=ctx.project_id)
        return named[0] if named else None

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        if not body.get('name'):
            raise bad("Invalid input for field/attribute name. Value: None. "
                      "None is not of type 'string'")
        policy = body.get('policy') or (body.get('policies') or [None])[0]
        if policy not in POLICIES:
            raise bad("Invalid input for field/attribute policy. Value: %s. "
                      "'%s' is not one of %s" % (policy, policy,
                                                 list(POLICIES)))
        rules = dict(body.get('rules') or {})
        if rules and (policy != 'anti-affinity' or set(rules) != {
                'max_server_per_host'}):
            raise bad('Invalid input for field/attribute rules: only '
                      'max_server_per_host, with the anti-affinity policy')
        stored = {'name': body['name'], 'policy': policy, 'rules': rules,
                  'members': [], 'user_id': 'sim'}
        return ctx.insert(self.new(ctx, stored, key))

    def show(self, ctx, obj):
        view = rows.public(obj.body)
        view.update(id=obj.id, project_id=obj.project_id)
        return view


def _number(body, field, low, default=None, kind=int):
    value = body.get(field, default)
    try:
        number = kind(value)
    except (TypeError, ValueError):
        number = None
    if number is None or number < low:
        raise bad('Invalid input for field/attribute %s. Value: %s. %r is '
                  'less than the minimum of %s or not a number'
                  % (field, value, value, low))
    return number


class Flavor(rows.Kind):
    name = 'flavor'
    title = 'Flavor'
    fields = ('name', 'ram', 'vcpus', 'disk', 'swap', 'ephemeral',
              'OS-FLV-EXT-DATA:ephemeral', 'rxtx_factor',
              'os-flavor-access:is_public', 'extra_specs', 'tenants', 'id',
              'description')
    updatable = ('extra_specs', 'tenants', 'description')
    #: what makes two flavors of one name the same flavor
    SIZE = ('ram', 'vcpus', 'disk', 'swap', 'OS-FLV-EXT-DATA:ephemeral',
            'os-flavor-access:is_public')

    def identity(self, ctx, body):
        return 'flavor:%s' % body['name'] if body.get('name') else None

    def same(self, obj, body):
        asked = self._size(body)
        if any(asked[f] != obj.body[f] for f in self.SIZE):
            raise conflict('Flavor with name %s already exists.'
                           % obj.body['name'])
        return True

    def _size(self, body):
        return {
            'ram': _number(body, 'ram', 1), 'vcpus': _number(body, 'vcpus', 1),
            'disk': _number(body, 'disk', 0, 0),
            'swap': _number(body, 'swap', 0, 0),
            'OS-FLV-EXT-DATA:ephemeral': _number(
                body, 'ephemeral', 0, body.get('OS-FLV-EXT-DATA:ephemeral',
                                               0)),
            'os-flavor-access:is_public': bool(body.get(
                'os-flavor-access:is_public', True))}

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        name = body.get('name') or ''
        if not 1 <= len(name.strip()) <= 255:
            raise bad('Invalid input for field/attribute name. Value: %s. '
                      'It must be a string of 1 to 255 characters' % name)
        flavor_id = str(body.get('id') or rows.new_id())
        if ctx.live('flavor', flavor_id) is not None:
            raise conflict('Flavor with ID %s already exists.' % flavor_id)
        stored = dict(self._size(body), name=name,
                      rxtx_factor=_number(body, 'rxtx_factor', 0, 1.0,
                                          float),
                      extra_specs={str(k): str(v) for k, v in (
                          body.get('extra_specs') or {}).items()},
                      description=body.get('description'),
                      _tenants=self._tenants(body, stored_public=bool(
                          body.get('os-flavor-access:is_public', True))))
        stored['OS-FLV-DISABLED:disabled'] = False
        obj = self.new(ctx, stored, key, id=flavor_id,
                       ident=self.identity(ctx, body),
                       shared=stored['os-flavor-access:is_public'])
        return ctx.insert(obj)

    @staticmethod
    def _tenants(body, stored_public, had=()):
        tenants = [str(t) for t in body.get('tenants') or []]
        if tenants and stored_public:
            raise conflict('Can not add access to a public flavor.')
        # as the OpenStack driver does: access is granted, never taken
        return sorted(set(had) | set(tenants))

    def show(self, ctx, obj):
        view = rows.public(obj.body)
        view.update(id=obj.id, links=[])
        return view

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        if body.get('extra_specs') is not None:
            obj.body['extra_specs'] = {str(k): str(v) for k, v in
                                       body['extra_specs'].items()}
        if 'tenants' in body:
            obj.body['_tenants'] = self._tenants(
                body, obj.body['os-flavor-access:is_public'],
                obj.body.get('_tenants') or ())
        if 'description' in body:
            obj.body['description'] = body['description']
        return ctx.save(obj)


class HostAggregate(rows.Kind):
    name = 'host_aggregate'
    title = 'Aggregate'
    fields = ('name', 'availability_zone', 'hosts', 'metadata')
    updatable = fields

    def identity(self, ctx, body):
        return 'aggregate:%s' % body['name'] if body.get('name') else None

    def same(self, obj, body):
        raise conflict('Aggregate %s already exists.' % body['name'])

    @staticmethod
    def _apply(stored, body):
        if 'name' in body:
            name = body['name'] or ''
            if not 1 <= len(name.strip()) <= 255:
                raise bad('Invalid input for field/attribute name. Value: '
                          '%s.' % name)
            stored['name'] = name
        meta = dict(stored.get('metadata') or {})
        if body.get('metadata') is not None:
            meta = {str(k): str(v) for k, v in body['metadata'].items()}
        if 'availability_zone' in body:
            if body['availability_zone']:
                meta['availability_zone'] = str(body['availability_zone'])
            else:
                meta.pop('availability_zone', None)
        stored['metadata'] = meta
        stored['availability_zone'] = meta.get('availability_zone')
        if body.get('hosts') is not None:
            stored['hosts'] = sorted({str(h) for h in body['hosts']})
        return stored

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        stored = self._apply({'hosts': [], 'metadata': {}},
                             dict({'name': None}, **body))
        obj = self.new(ctx, stored, key, ident=self.identity(ctx, body))
        return ctx.insert(obj)

    def show(self, ctx, obj):
        view = rows.public(obj.body)
        view.update(id=obj.id, uuid=obj.id)
        return view

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        name = body.get('name', obj.body['name'])
        if name != obj.body['name']:
            if ctx.held('live_ident', 'aggregate:%s' % name) is not None:
                raise conflict('Aggregate %s already exists.' % name)
            obj.live_ident = 'aggregate:%s' % name
        obj.body = self._apply(dict(obj.body), body)
        obj.name = obj.body['name']
        return ctx.save(obj)


KINDS = {k.name: k for k in (Keypair(), ServerGroup(), Flavor(),
                             HostAggregate())}
