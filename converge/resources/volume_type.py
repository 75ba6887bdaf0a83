"""OS::Cinder::VolumeType and OS::Cinder::EncryptedVolumeType, as Heat's
(heat/engine/resources/openstack/cinder/volume_type.py,
encrypted_volume_type.py), made through ``clients.cloud``. Both are an
admin's: Heat's policy (resource_types:...) keeps them from everyone else
(api/policy.py), and Cinder's refuses them too.

A volume type is found again by its name (Cinder's are the cloud's,
unique); everything of it changes in place. An encryption is one per
volume type: its id, and what get_resource returns, is its volume
type's (Heat's resource id), and a change of volume type replaces it.
"""

from converge.resources import cloud_object as co
from converge.resources import properties as p


class VolumeType(co.CloudObject):
    """OS::Cinder::VolumeType: a type of volume, its extra specs
    (``metadata``) mapping it to a backend; a private type lists the
    projects that may use it."""

    kind = 'volume_type'
    title = 'Volume type'
    natural_identity = True
    update_fields = ('name', 'description', 'extra_specs',
                     'os-volume-type-access:is_public', 'projects')
    drift_fields = ('extra_specs',)
    cleared = {'extra_specs': {}, 'projects': [], 'description': ''}

    properties_schema = {
        'name': p.Schema(p.STRING, 'Name of the volume type.',
                         required=True, update_allowed=True),
        'metadata': p.Schema(
            p.MAP, 'The extra specs key and value pairs of the volume '
            'type.', update_allowed=True),
        'is_public': p.Schema(
            p.BOOLEAN, 'Whether the volume type is accessible to the '
            'public.', default=True, update_allowed=True),
        'description': p.Schema(p.STRING, 'Description of the volume '
                                'type.', update_allowed=True),
        'projects': p.Schema(
            p.LIST, 'Projects to add volume type access to. NOTE: This '
            'property is only supported since Cinder API V2.',
            default=[], update_allowed=True, schema=p.Schema(p.STRING)),
    }
    attributes_schema = {}

    def make_body(self):
        props = self.properties
        body = {'name': props.get('name'),
                'extra_specs': {str(k): str(v) for k, v in (
                    props.get('metadata') or {}).items()},
                'os-volume-type-access:is_public': props.get('is_public',
                                                             True),
                'projects': list(props.get('projects') or [])}
        if props.get('description') is not None:
            body['description'] = props['description']
        return body

    def identity_conflict(self, obj, body):
        if (obj.get('extra_specs') or {}) != body['extra_specs']:
            return 'Volume Type %s already exists.' % body['name']
        return None

    def attributes(self, obj):
        return {}


class EncryptedVolumeType(co.CloudObject):
    """OS::Cinder::EncryptedVolumeType: the encryption of a volume type
    (its provider, cipher, key size, where it runs)."""

    kind = 'volume_encryption_type'
    title = 'Volume encryption type'
    natural_identity = True
    update_fields = ('provider', 'control_location', 'cipher', 'key_size')
    drift_fields = update_fields
    cleared = {'cipher': None, 'key_size': None}

    properties_schema = {
        'provider': p.Schema(
            p.STRING, 'The class that provides encryption support. For '
            'example, nova.volume.encryptors.luks.LuksEncryptor.',
            required=True, update_allowed=True),
        'control_location': p.Schema(
            p.STRING, 'Notional service where encryption is performed. For '
            'example, front-end. For Nova.', default='front-end',
            update_allowed=True, allowed_values=('front-end', 'back-end')),
        'cipher': p.Schema(
            p.STRING, 'The encryption algorithm or mode. For example, '
            'aes-xts-plain64.', update_allowed=True,
            allowed_values=('aes-xts-plain64', 'aes-cbc-essiv')),
        'key_size': p.Schema(
            p.INTEGER, 'Size of encryption key, in bits. For example, 128 '
            'or 256.', update_allowed=True),
        'volume_type': p.Schema(
            p.STRING, 'Name or id of volume type (OS::Cinder::VolumeType).',
            required=True, constraint='cinder.vtype'),
    }
    attributes_schema = {}

    def make_body(self):
        props = self.properties
        return {'volume_type_id': self.resolve(
                    'volume_type', props.get('volume_type'), 'volume_type'),
                'provider': props.get('provider'),
                'control_location': props.get('control_location') or
                'front-end',
                'cipher': props.get('cipher'),
                'key_size': props.get('key_size')}

    def identity_conflict(self, obj, body):
        if any(obj.get(f) != body[f] for f in self.update_fields):
            return ('Volume type encryption for type %s already exists.'
                    % body['volume_type_id'])
        return None

    def attributes(self, obj):
        return {}
