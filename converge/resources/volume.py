"""OS::Cinder::Volume and OS::Cinder::VolumeAttachment, as Heat's
(heat/engine/resources/openstack/cinder/volume.py), made through
``clients.cloud``.

A volume's name, description and metadata change in place and its size
grows in place (extend; shrinking is refused, as Heat refuses it); a
change of what it is made from (image, snapshot, source volume), of its
availability zone or, here, of its volume type or backup (Heat retypes
and restores in place; the cloud interface has neither) replaces it.
Creating and extending wait (base.Wait) until Cinder says the volume is
available.

An attachment is the volume's, on a server: any change detaches it and
attaches it again as asked (Heat's update), waiting for each.
"""

import json
import time

from converge import exception
from converge.resources import base
from converge.resources import cloud_object as co
from converge.resources import properties as p


def _present(value):
    return value is not None and value != ''


class Volume(co.CloudObject):
    """OS::Cinder::Volume: a block storage volume."""

    kind = 'volume'
    title = 'Volume'
    update_fields = ('name', 'description', 'metadata', 'size')
    # not size: a volume extended behind converge's back is bigger, not
    # wrong (and cannot be shrunk back)
    drift_fields = ('name', 'description', 'metadata')
    # Heat keeps the description a template stops giving
    cleared = {'description': co.KEEP}

    properties_schema = {
        'availability_zone': p.Schema(
            p.STRING, 'The availability zone in which the volume will be '
            'created.'),
        'size': p.Schema(
            p.INTEGER, 'The size of the volume in GB. On update only '
            'increase in size is supported. This property is required '
            'unless property backup_id or source_volid or snapshot_id is '
            'specified.', update_allowed=True, min=1),
        'snapshot_id': p.Schema(
            p.STRING, 'If specified, the snapshot to create the volume '
            'from.', constraint='cinder.snapshot'),
        'backup_id': p.Schema(
            p.STRING, 'If specified, the backup to create the volume from '
            '(a change replaces the volume).', update_allowed=True,
            constraint='cinder.backup'),
        'name': p.Schema(p.STRING, 'A name used to distinguish the volume.',
                         update_allowed=True),
        'description': p.Schema(p.STRING, 'A description of the volume.',
                                update_allowed=True),
        'volume_type': p.Schema(
            p.STRING, 'If specified, the type of volume to use, mapping to a '
            'specific backend (a change replaces the volume).',
            update_allowed=True, constraint='cinder.vtype'),
        'metadata': p.Schema(
            p.MAP, 'Key/value pairs to associate with the volume.',
            default={}, update_allowed=True),
        'imageRef': p.Schema(
            p.STRING, 'The ID of the image to create the volume from '
            '(deprecated: use image).'),
        'image': p.Schema(
            p.STRING, 'If specified, the name or ID of the image to create '
            'the volume from.', constraint='glance.image'),
        'source_volid': p.Schema(
            p.STRING, 'If specified, the volume to use as source.',
            constraint='cinder.volume'),
        'scheduler_hints': p.Schema(
            p.MAP, 'Arbitrary key-value pairs specified by the client to '
            'help the Cinder scheduler creating a volume.'),
        'read_only': p.Schema(
            p.BOOLEAN, 'Enables or disables read-only access mode of volume '
            '(not supported by converge).', update_allowed=True),
        'multiattach': p.Schema(
            p.BOOLEAN, 'Whether allow the volume to be attached more than '
            'once.', default=False),
    }

    attributes_schema = {
        'availability_zone': 'The availability zone in which the volume is '
                             'located.',
        'size': 'The size of the volume in GB.',
        'snapshot_id': 'The snapshot the volume was created from, if any.',
        'display_name': 'Name of the volume.',
        'display_description': 'Description of the volume.',
        'volume_type': 'The type of the volume mapping to a backend, if '
                       'any.',
        'metadata': 'Key/value pairs associated with the volume.',
        'source_volid': 'The volume used as source, if any.',
        'status': 'The current status of the volume.',
        'created_at': 'The timestamp indicating volume creation.',
        'bootable': 'Boolean indicating if the volume can be booted or '
                    'not.',
        'metadata_values': 'Key/value pairs associated with the volume in '
                           'raw dict form.',
        'encrypted': 'Boolean indicating if the volume is encrypted or not.',
        'attachments': 'A string representation of the list of attachments '
                       'of the volume.',
        'attachments_list': 'The list of attachments of the volume.',
        'multiattach': 'Boolean indicating whether allow the volume to be '
                       'attached more than once.',
    }

    @classmethod
    def validate_more(cls, values, path):
        path = list(path)
        if values.get('read_only') is not None:
            # Cinder's read-only flag is an action the cloud interface does
            # not carry
            raise exception.InvalidTemplate(
                'read_only is not supported by converge',
                path=path + ['read_only'])
        if _present(values.get('image')) and _present(values.get('imageRef')):
            raise co.conflict(path + ['image'], 'image', 'imageRef')
        if _present(values.get('backup_id')):
            return values
        exclusive = [k for k in ('snapshot_id', 'source_volid', 'image',
                                 'imageRef') if _present(values.get(k))]
        no_size = [k for k in ('snapshot_id', 'source_volid')
                   if _present(values.get(k))]
        size = values.get('size')
        if size is None and (len(no_size) != 1 or len(exclusive) != 1):
            raise exception.InvalidTemplate(
                'If neither "backup_id" nor "size" is provided, one and only '
                'one of "source_volid", "snapshot_id" must be specified, but '
                'currently specified options: %s.' % exclusive,
                path=path + ['size'])
        if size is not None and len(exclusive) > 1:
            raise exception.InvalidTemplate(
                'If "size" is provided, only one of "image", "imageRef", '
                '"source_volid", "snapshot_id" can be specified, but '
                'currently specified options: %s.' % exclusive,
                path=path + ['size'])
        return values

    def needs_replace(self, prior):
        for key in ('volume_type', 'backup_id'):
            if prior.get(key) != self.properties.get(key):
                return True
        return super().needs_replace(prior)

    def make_body(self):
        props = self.properties
        body = {'name': self.physical_name(),
                'metadata': dict(props.get('metadata') or {})}
        if props.get('size') is not None:
            body['size'] = props['size']
        if props.get('description') is not None:
            body['description'] = props['description']
        image = props.get('image') or props.get('imageRef')
        if image:
            body['imageRef'] = self.resolve('image', image, 'image')
        if props.get('source_volid'):
            body['source_volid'] = self.resolve(
                'volume', props['source_volid'], 'source_volid')
        for key in ('snapshot_id', 'backup_id', 'volume_type',
                    'availability_zone', 'scheduler_hints'):
            if props.get(key):
                body[key] = props[key]
        if props.get('multiattach'):
            body['multiattach'] = True
        return body

    def check_update(self, prior, obj):
        size = self.properties.get('size')
        if size is not None and obj.get('size') is not None and \
                size < obj['size'] and size != prior.get('size', size):
            raise exception.ResourceFailure(
                '%s: Shrinking volume is not supported (it is %s GB, the '
                'template asks for %s GB).' % (self.label(obj), obj['size'],
                                               size))

    def changes(self, prior, obj, body):
        out = super().changes(prior, obj, body)
        size = out.pop('size', None)
        if size is not None and size > (obj.get('size') or 0):
            out['size'] = size   # extend (only ever grows)
        return out

    def in_use(self, obj):
        if obj.get('status') == 'in-use' or obj.get('attachments'):
            return 'Volume in use'
        if not self._settled(obj):
            # Cinder refuses to delete a volume still being made (its
            # create cleaned up while it runs): asked again once it ends
            return 'Volume is %s' % obj.get('status')
        return None

    # -- snapshots (Heat's handle_snapshot, handle_restore) ---------------
    def snapshot(self, observed, snapshot_id):
        """A Cinder backup of the volume (forced: it may be in use),
        made once per snapshot (found again by a key of the resource's
        and the snapshot's) and waited for until it is available. Heat's
        ``backup_id`` names it; ``data['snapshot']`` the snapshot it was
        made for, kept once done (a stack deleted mid-snapshot finds every
        backup made so far)."""
        if not self.physical_id:
            return None
        taken = self.data.get('snapshot') or {}
        if taken.get('of') != snapshot_id:
            backup = self.cloud.create('volume_backup', {
                'volume_id': self.physical_id, 'force': True,
                'name': '%s-%s' % (self.physical_name(), snapshot_id[:8])},
                key=base.snapshot_key(self.idempotency_key, snapshot_id))
            taken = {'of': snapshot_id, 'backup': backup['id'], 'polls': 0}
            self.data['snapshot'] = taken
            self.data['backup_id'] = backup['id']
        backup = self.cloud.get('volume_backup', taken['backup'])
        status = (backup or {}).get('status')
        if status == 'available':
            return None
        if status in (None, 'error', 'error_deleting', 'deleting'):
            raise exception.ResourceFailure(
                'Backup %s of volume %s is %s%s' % (
                    taken['backup'], self.physical_id, status or 'gone',
                    ': %s' % backup['fail_reason']
                    if (backup or {}).get('fail_reason') else ''))
        taken['polls'] = taken.get('polls', 0) + 1
        return base.Wait(after=min(5.0, 0.25 * 1.5 ** taken['polls']),
                         reason='backup %s of volume %s is %s' % (
                             taken['backup'], self.physical_id, status))

    @classmethod
    def restore_properties(cls, resource_data):
        backup = resource_data.get('backup_id')
        if not backup:
            return {}
        # made again from its backup (what it was made from no longer
        # counts; its size does: a volume grown since goes back)
        return {'backup_id': backup, 'image': None, 'imageRef': None,
                'source_volid': None, 'snapshot_id': None}

    def delete_snapshot(self, resource_data):
        backup = resource_data.get('backup_id')
        if backup:
            try:
                self.cloud.delete('volume_backup', backup)
            except exception.CloudNotFound:
                pass

    def attributes(self, obj):
        meta = co.user_metadata(obj.get('metadata'))

        def text(value):   # Heat shows most of them as strings
            return None if value is None else str(value)

        return {
            'availability_zone': obj.get('availability_zone'),
            'size': text(obj.get('size')),
            'snapshot_id': obj.get('snapshot_id'),
            'display_name': obj.get('name'),
            'display_description': obj.get('description'),
            'volume_type': obj.get('volume_type'),
            'metadata': json.dumps(meta),
            'source_volid': obj.get('source_volid'),
            'status': obj.get('status'),
            'created_at': text(obj.get('created_at')),
            'bootable': text(obj.get('bootable')),
            'metadata_values': meta,
            'encrypted': text(obj.get('encrypted')),
            'attachments': text(obj.get('attachments') or []),
            'attachments_list': list(obj.get('attachments') or []),
            'multiattach': obj.get('multiattach'),
        }


class VolumeAttachment(co.CloudObject):
    """OS::Cinder::VolumeAttachment: a volume attached to a server. Its id
    is the volume's (one attachment per volume, as Nova's)."""

    kind = 'volume_attachment'
    title = 'Volume attachment'
    natural_identity = True
    drift_fields = ('server_id',)

    properties_schema = {
        'instance_uuid': p.Schema(
            p.STRING, 'The ID of the server to which the volume attaches.',
            required=True, update_allowed=True),
        'volume_id': p.Schema(
            p.STRING, 'The ID of the volume to be attached.', required=True,
            update_allowed=True, constraint='cinder.volume'),
        'mountpoint': p.Schema(
            p.STRING, 'The location where the volume is exposed on the '
            'instance. This assignment may not be honored and it is advised '
            'that the path /dev/disk/by-id/virtio-<VolumeId> be used '
            'instead.', update_allowed=True),
    }
    attributes_schema = {}

    def make_body(self):
        props = self.properties
        body = {'server_id': props.get('instance_uuid'),
                'volume_id': self.resolve('volume', props.get('volume_id'),
                                          'volume_id')}
        if props.get('mountpoint'):
            body['device'] = props['mountpoint']
        return body

    def _ours(self, obj, applied=None):
        """`obj` if it is the attachment this resource made (the volume
        on the server it attached it to), else None."""
        applied = applied or self.data.get('applied') or {}
        if obj is None or (applied.get('server_id') and
                           obj.get('server_id') not in
                           (None, applied['server_id'])):
            return None
        return obj

    def _current(self):
        return self._ours(super()._current())

    def update(self, prior, observed):
        """Heat's: detach, then attach as the template now says, each
        waited for."""
        want = self.make_body()
        applied = self.data.get('applied') or {}
        if applied and applied != want:
            old = self._ours(self._get(applied['volume_id']), applied)
            if old is not None:
                return self._detach(old)
            self.data.pop('waiting', None)
            self.physical_id = None
            self.data['applied'] = None
        if not self.physical_id:
            obj = self.cloud.create(self.kind, want, key=self.idempotency_key,
                                    fresh=self.fresh)
            self.physical_id = obj['id']
            self.data['applied'] = want
            self.data['waiting'] = {'action': 'update', 'id': obj['id'],
                                    'since': time.time(), 'polls': 0}
        else:
            obj = self._current()
            if obj is None:
                raise exception.UpdateReplace(self.name)
        obj = self._settle(obj, 'update')
        if isinstance(obj, base.Wait):
            return obj
        self.data.pop('waiting', None)
        self.seen = obj
        return None

    def _detach(self, old):
        asked = self._waiting_for('detach')
        if asked is None or asked.get('id') != old['id']:
            try:
                self.cloud.delete(self.kind, old['id'])
            except exception.CloudNotFound:
                pass
            self.data['waiting'] = {'action': 'detach', 'id': old['id'],
                                    'since': time.time(), 'polls': 0}
        return self._wait(old, 'detach', reason='%s is being detached' %
                          self.label(old))

    def delete(self):
        if self.physical_id and self._ours(self._get()) is None:
            return None   # the volume is not on our server (any more)
        return super().delete()

    def needs_replace(self, prior):
        return False   # every change is made in place (detach, attach)

    def attributes(self, obj):
        return {}
