"""Cinder's volumes and Nova's volume attachments on the sim.

A volume is ``creating`` for the latency of ``volume.create``, then
``available``; ``in-use`` while attached (``attaching`` for the latency
of ``volume_attachment.create``, ``detaching`` for that of its delete);
``extending`` for the latency of an update that grows it; ``deleting``
for the latency of ``volume.delete``, then gone. As in Cinder, a volume
in use or still creating is not deleted (400), and a size only grows.

An attachment is Nova's (``POST /servers/{id}/os-volume_attachments``):
its id is the volume's, it needs a live sim server, and it shows
``attaching`` then ``attached``. A volume is attached to one server at a
time on the sim.

The key is in the volume's metadata (``converge-key``); an attachment
is found by its server and volume.

Volume types (an admin's, as in Cinder) are the cloud's, found by their
unique name; a type's encryption (``volume_encryption_type``) is one per
type, its id the type's, as Heat's OS::Cinder::EncryptedVolumeType
names it. A type in use by a live volume, or with an encryption, is not
deleted (400), as Cinder refuses.
"""

import sqlalchemy as sa

from converge.drivers.sim import rows
from converge.drivers.sim import store
from converge.drivers.sim.rows import bad, conflict, missing

#: a volume's statuses a delete accepts (Cinder's list)
DELETABLE = ('available', 'error', 'error_restoring', 'error_extending',
             'error_managing')
S = store.servers.c


def _size(value):
    try:
        size = int(value)
    except (TypeError, ValueError):
        size = 0
    if size <= 0 or str(value).strip() != str(size):
        raise bad("Invalid input received: Volume size '%s' must be an "
                  "integer and greater than 0" % (value,))
    return size


class Volume(rows.Kind):
    name = 'volume'
    title = 'Volume'
    key_in = 'metadata'
    task_ops = ('create', 'delete')
    fields = ('size', 'name', 'description', 'volume_type',
              'availability_zone', 'imageRef', 'snapshot_id',
              'source_volid', 'metadata', 'multiattach', 'consistencygroup_id',
              'group_id', 'backup_id', 'scheduler_hints')
    updatable = ('name', 'description', 'metadata', 'size')

    def is_task(self, op, body=None):
        # an update that grows the volume takes the latency extending
        return op in self.task_ops or (op == 'update' and 'size' in
                                       (body or {}))

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        image = None
        if body.get('snapshot_id'):
            raise missing('Snapshot %s could not be found.'
                          % body['snapshot_id'])
        size = None if body.get('size') is None else _size(body['size'])
        backup = None
        if body.get('backup_id'):
            # restored from the backup: its size at least (Cinder's)
            backup = ctx.visible('volume_backup', body['backup_id'])
            if backup is None:
                raise missing('Backup %s could not be found.'
                              % body['backup_id'])
            ctx.settle(backup)
            if backup.status != 'available':
                raise bad('Invalid backup: Backup status must be '
                          'available, but current status is: %s.'
                          % backup.status)
            if size is None or size < backup.body['size']:
                size = backup.body['size']
        if body.get('source_volid'):
            source = ctx.visible('volume', body['source_volid'])
            if source is None:
                raise missing('Volume %s could not be found.'
                              % body['source_volid'])
            if size is None:
                size = source.body['size']
            if size < source.body['size']:
                raise bad('Invalid input received: Volume size %s GB cannot '
                          'be smaller than the source volume size %s GB.'
                          % (size, source.body['size']))
        if size is None:
            size = _size(body.get('size'))
        if body.get('imageRef'):
            # the sim has every image (objects.py): one it knows shows its
            # name, another its reference
            image = ctx.visible('image', body['imageRef'])
            image = {'image_id': image.id if image else body['imageRef'],
                     'image_name': image.body['name'] if image
                     else body['imageRef']}
        metadata = body.get('metadata') or {}
        if not isinstance(metadata, dict):
            raise bad('Invalid input received: metadata must be a dict')
        stored = {
            'name': body.get('name'), 'description': body.get('description'),
            'size': size, 'volume_type': body.get('volume_type')
            or '__DEFAULT__', 'availability_zone': body.get(
                'availability_zone') or 'nova',
            'bootable': 'true' if image else 'false', 'encrypted': False,
            'multiattach': bool(body.get('multiattach', False)),
            'attachments': [], 'metadata': {str(k): str(v)
                                            for k, v in metadata.items()},
            'snapshot_id': None, 'source_volid': body.get('source_volid'),
            'consistencygroup_id': None, 'group_id': None,
            'replication_status': None, 'migration_status': None,
            'user_id': 'sim', 'links': []}
        if image:
            stored['volume_image_metadata'] = image
        if backup is not None:
            stored['backup_id'] = backup.id
            if backup.body.get('volume_image_metadata'):
                stored['bootable'] = 'true'
                stored['volume_image_metadata'] = dict(
                    backup.body['volume_image_metadata'])
        obj = self.new(ctx, stored, key, **_settling(
            ctx, 'restoring-backup' if backup is not None else 'creating',
            latency, 'available'))
        return ctx.insert(obj)

    def show(self, ctx, obj):
        status, body = obj.state(ctx.now)
        view = rows.public(body)
        view.update(id=obj.id, status=status, created_at=obj.created,
                    updated_at=obj.updated)
        view['os-vol-tenant-attr:tenant_id'] = obj.project_id
        if obj.gone_at is not None:
            view['status'] = 'deleting'
        return self.with_key(obj, view)

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        ctx.settle(obj)
        for field in ('name', 'description'):
            if field in body:
                obj.body[field] = body[field]
                if field == 'name':
                    obj.name = body[field]
        if 'metadata' in body:
            obj.body['metadata'] = {str(k): str(v) for k, v in
                                    (body['metadata'] or {}).items()}
        if body.get('size') is not None and \
                int(body['size']) != obj.body['size']:
            self._extend(ctx, obj, _size(body['size']), latency)
        return ctx.save(obj)

    def _extend(self, ctx, obj, size, latency):
        if size < obj.body['size']:
            raise bad('Invalid input received: New size for extend must be '
                      'greater than current size. (current: %s, extended: '
                      '%s).' % (obj.body['size'], size))
        if obj.status not in ('available', 'in-use'):
            raise bad("Invalid volume: Volume %s status must be available or "
                      "in-use to extend, but current status is: %s."
                      % (obj.id, obj.status))
        settled = obj.status
        obj.body['size'] = size
        for column, value in _settling(ctx, 'extending', latency,
                                       settled).items():
            setattr(obj, column, value)

    def delete(self, ctx, obj, latency):
        if obj.gone_at is not None:
            return   # a delete under way: as Cinder, accepted again
        ctx.settle(obj)
        if obj.status not in DELETABLE or obj.body.get('attachments'):
            raise bad('Invalid volume: Volume status must be available or '
                      'error or error_restoring or error_extending or '
                      'error_managing and must not be migrating, attached, '
                      'belong to a group, have snapshots or be '
                      'disassociated from snapshots after volume transfer.')
        ctx.remove(obj, after=latency)


def _settling(ctx, busy, latency, settled, **fields):
    """Columns of an object that is `busy` for `latency` seconds, then
    `settled` (with `fields` of its body changed then)."""
    if latency <= 0:
        return {'status': settled, 'ready_at': None, 'outcome': None}
    outcome = {'status': settled}
    if fields:
        outcome['fields'] = fields
    return {'status': busy, 'ready_at': ctx.now + latency,
            'outcome': rows.dumps(outcome)}


def server_row(ctx, server_id):
    """The live sim server, or Nova's 404."""
    row = ctx.conn.execute(sa.select(store.servers).where(
        S.id == str(server_id), S.deleted == sa.false(),
        sa.or_(S.gone_at.is_(None), S.gone_at > ctx.now))).first()
    if row is None:
        raise missing('Instance %s could not be found.' % server_id)
    return row


def _building(row, now):
    if row.gone_at is not None:
        return 'task_state deleting'
    if row.ready_at is not None and now < row.ready_at:
        return 'task_state %s' % row.task_state
    return None


class VolumeAttachment(rows.Kind):
    name = 'volume_attachment'
    title = 'Volume attachment'
    task_ops = ('create', 'delete')
    fields = ('server_id', 'volume_id', 'device', 'tag',
              'delete_on_termination')

    def identity(self, ctx, body):
        if not body.get('volume_id'):
            return None
        return 'volume_attachment:%s' % body['volume_id']

    def find(self, ctx, body):
        obj = super().find(ctx, body)
        if obj is not None and obj.device != str(body.get('server_id')):
            return None   # the volume is another server's
        return obj

    def same(self, obj, body):
        if obj.device != str(body.get('server_id')):
            raise bad("Invalid volume: volume %s status must be 'available'. "
                      "Currently in 'in-use'" % obj.id)
        return True

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        for field in ('server_id', 'volume_id'):
            if not body.get(field):
                raise bad("Invalid input for field/attribute %s: it is "
                          "required" % field)
        server = server_row(ctx, body['server_id'])
        busy = _building(server, ctx.now)
        if busy:
            raise conflict("Cannot 'attach_volume' instance %s while it is "
                           "in %s" % (server.id, busy))
        volume = ctx.visible('volume', body['volume_id'])
        if volume is None:
            raise missing('Volume %s could not be found.'
                          % body['volume_id'])
        return attach(ctx, server, volume, body.get('device'), key, latency,
                      delete_on_termination=bool(
                          body.get('delete_on_termination', False)))

    def show(self, ctx, obj):
        status, body = obj.state(ctx.now)
        if obj.gone_at is not None:
            status = 'detaching'
        view = rows.public(body)
        view.update(id=obj.id, status=status)
        return view

    def delete(self, ctx, obj, latency):
        detach(ctx, obj, latency)


def _devices_of(ctx, server_id):
    return {a.body.get('device') for a in ctx.all(
        'volume_attachment', device=server_id, visible_only=False)}


def next_device(ctx, server_id):
    taken = _devices_of(ctx, server_id)
    for letter in 'bcdefghijklmnopqrstuvwxyz':
        device = '/dev/vd%s' % letter
        if device not in taken:
            return device
    raise conflict('No free device name is left on instance %s.'
                   % server_id)


def attach(ctx, server, volume, device, key=None, latency=0.0,
           delete_on_termination=False):
    """Attach `volume` (an Obj) to the sim server (its row): the volume
    is ``attaching`` for `latency`, then ``in-use``."""
    ctx.settle(volume)
    ident = 'volume_attachment:%s' % volume.id
    # frees the identity of an attachment whose detach is over
    ctx.held('live_ident', ident)
    if volume.status != 'available' or volume.gone_at is not None:
        raise bad("Invalid volume: volume %s status must be 'available'. "
                  "Currently in '%s'" % (volume.id, volume.status
                                         if volume.gone_at is None
                                         else 'deleting'))
    device = device or next_device(ctx, server.id)
    entry = {'id': volume.id, 'attachment_id': rows.new_id(),
             'volume_id': volume.id, 'server_id': server.id,
             'host_name': server.host, 'device': device,
             'attached_at': ctx.stamp}
    attachments = [entry]
    volume.body['attachments'] = attachments
    for column, value in _settling(ctx, 'attaching', latency,
                                   'in-use').items():
        setattr(volume, column, value)
    ctx.save(volume)
    stored = {'volume_id': volume.id, 'server_id': server.id,
              'device': device,
              'delete_on_termination': delete_on_termination}
    kind = KINDS['volume_attachment']
    obj = kind.new(ctx, stored, key, id=volume.id,
                   project_id=volume.project_id, name='',
                   ident=ident,
                   parent=volume.id, device=server.id,
                   **_settling(ctx, 'attaching', latency, 'attached'))
    ctx.insert(obj)
    # the server's delete lets go of its volumes (wiring.py)
    ctx.conn.execute(store.servers.update().where(
        S.seq == server.seq).values(wired=True))
    return obj


def detach(ctx, attachment, latency=0.0):
    """The volume goes back to ``available`` (``detaching`` for
    `latency`); the attachment is gone then."""
    volume = ctx.live('volume', attachment.parent)
    if attachment.gone_at is not None:
        return
    if volume is not None:
        ctx.settle(volume)
        if latency > 0:
            volume.status = 'detaching'
            volume.ready_at = ctx.now + latency
            volume.outcome = rows.dumps({'status': 'available',
                                         'fields': {'attachments': []}})
        else:
            volume.status = 'available'
            volume.body['attachments'] = []
            volume.ready_at = volume.outcome = None
        ctx.save(volume)
    ctx.remove(attachment, after=latency)


class VolumeType(rows.Kind):
    name = 'volume_type'
    title = 'Volume type'
    fields = ('name', 'description', 'extra_specs',
              'os-volume-type-access:is_public', 'projects')
    updatable = ('name', 'description', 'extra_specs',
                 'os-volume-type-access:is_public', 'projects')

    def identity(self, ctx, body):
        return 'volume_type:%s' % body['name'] if body.get('name') else None

    def same(self, obj, body):
        if (body.get('extra_specs') or {}) != obj.body['extra_specs']:
            raise conflict('Volume Type %s already exists.' % body['name'])
        return True

    @staticmethod
    def _stored(body, had=None):
        out = dict(had or {})
        for field in ('name', 'description'):
            if field in body:
                out[field] = body[field]
        if 'extra_specs' in body:
            out['extra_specs'] = {str(k): str(v) for k, v in (
                body.get('extra_specs') or {}).items()}
        if 'os-volume-type-access:is_public' in body:
            out['os-volume-type-access:is_public'] = bool(
                body['os-volume-type-access:is_public'])
        if 'projects' in body:
            out['_projects'] = sorted({str(p) for p in body['projects']
                                       or []})
        return out

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        name = body.get('name') or ''
        if not 1 <= len(name.strip()) <= 255:
            raise bad('Invalid input received: Volume type name can not be '
                      'empty.')
        stored = self._stored(dict({
            'description': None, 'extra_specs': {},
            'os-volume-type-access:is_public': True, 'projects': []},
            **body))
        obj = self.new(ctx, stored, key, ident=self.identity(ctx, body),
                       shared=stored['os-volume-type-access:is_public'])
        return ctx.insert(obj)

    def show(self, ctx, obj):
        view = rows.public(obj.body)
        view.update(id=obj.id, is_public=view[
            'os-volume-type-access:is_public'],
            projects=list(obj.body.get('_projects') or []))
        return view

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        name = body.get('name', obj.body['name'])
        if name != obj.body['name']:
            other = ctx.held('live_ident', 'volume_type:%s' % name)
            if other is not None:
                raise conflict('Volume Type %s already exists.' % name)
            obj.live_ident = 'volume_type:%s' % name
        obj.body = self._stored(body, obj.body)
        obj.shared = obj.body['os-volume-type-access:is_public']
        return ctx.save(obj)

    def delete(self, ctx, obj, latency):
        if ctx.all('volume_encryption_type', parent=obj.id):
            raise bad('Target volume type is still in use: it has an '
                      'encryption.')
        for volume in ctx.all('volume'):
            if volume.body.get('volume_type') in (obj.id, obj.body['name']):
                raise bad('Target volume type is still in use.')
        ctx.remove(obj)


class VolumeEncryptionType(rows.Kind):
    name = 'volume_encryption_type'
    title = 'Volume encryption type'
    fields = ('volume_type_id', 'provider', 'control_location', 'cipher',
              'key_size')
    updatable = ('provider', 'control_location', 'cipher', 'key_size')

    def identity(self, ctx, body):
        vtype = body.get('volume_type_id')
        return 'volume_encryption_type:%s' % vtype if vtype else None

    def same(self, obj, body):
        raise conflict('Volume type encryption for type %s already exists.'
                       % obj.id)

    @staticmethod
    def _check(body):
        location = body.get('control_location')
        if location is not None and location not in ('front-end',
                                                     'back-end'):
            raise bad("Invalid input received: Valid control location are: "
                      "['front-end', 'back-end']")
        size = body.get('key_size')
        if size is not None and (not isinstance(size, int) or size < 0):
            raise bad('Invalid input received: key_size must be a '
                      'non-negative integer')

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        vtype = ctx.visible('volume_type', body.get('volume_type_id'))
        if vtype is None:
            raise missing('Volume type %s could not be found.'
                          % body.get('volume_type_id'))
        if not body.get('provider'):
            raise bad('Invalid input received: provider must be defined')
        self._check(body)
        stored = {'volume_type_id': vtype.id,
                  'encryption_id': rows.new_id(),
                  'provider': body['provider'],
                  'control_location': body.get('control_location') or
                  'front-end',
                  'cipher': body.get('cipher'),
                  'key_size': body.get('key_size')}
        obj = self.new(ctx, stored, key, id=vtype.id, parent=vtype.id,
                       name=vtype.body['name'],
                       ident=self.identity(ctx, body))
        return ctx.insert(obj)

    def show(self, ctx, obj):
        return self.show_with_id(ctx, obj)

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        self._check(body)
        obj.body.update(body)
        return ctx.save(obj)


class VolumeBackup(rows.Kind):
    """Cinder's backups: of a volume available (or in use, with force),
    ``creating`` for the latency of ``volume_backup.create``, then
    ``available``; a volume made with ``backup_id`` is restored from one
    (its size, its image's metadata). Its key is in its metadata."""

    name = 'volume_backup'
    title = 'Backup'
    key_in = 'metadata'
    task_ops = ('create', 'delete')
    fields = ('volume_id', 'name', 'description', 'force', 'incremental',
              'container', 'metadata', 'snapshot_id')

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        volume = ctx.visible('volume', body.get('volume_id'))
        if volume is None:
            raise missing('Volume %s could not be found.'
                          % body.get('volume_id'))
        ctx.settle(volume)
        allowed = ('available', 'in-use') if body.get('force') \
            else ('available',)
        if volume.status not in allowed or volume.gone_at is not None:
            raise bad('Invalid volume: Volume to be backed up must be '
                      'available or in-use, but the current status is "%s".'
                      % volume.status)
        metadata = body.get('metadata') or {}
        stored = {
            'name': body.get('name'), 'description': body.get('description'),
            'volume_id': volume.id, 'size': volume.body['size'],
            'container': body.get('container') or 'volumebackups',
            'is_incremental': bool(body.get('incremental')),
            'has_dependent_backups': False, 'snapshot_id': None,
            'object_count': 0, 'fail_reason': None,
            'availability_zone': volume.body.get('availability_zone'),
            'metadata': {str(k): str(v) for k, v in metadata.items()}}
        if volume.body.get('volume_image_metadata'):
            stored['volume_image_metadata'] = dict(
                volume.body['volume_image_metadata'])
        obj = self.new(ctx, stored, key, **_settling(
            ctx, 'creating', latency, 'available'))
        return ctx.insert(obj)

    def show(self, ctx, obj):
        status, body = obj.state(ctx.now)
        view = rows.public(body)
        view.pop('volume_image_metadata', None)
        view.update(id=obj.id, status=status, created_at=obj.created,
                    updated_at=obj.updated)
        if obj.gone_at is not None:
            view['status'] = 'deleting'
        return self.with_key(obj, view)

    def delete(self, ctx, obj, latency):
        if obj.gone_at is not None:
            return
        ctx.settle(obj)
        if obj.status not in ('available', 'error'):
            raise bad('Invalid backup: Backup status must be available or '
                      'error')
        ctx.remove(obj, after=latency)


KINDS = {k.name: k for k in (Volume(), VolumeAttachment(), VolumeType(),
                             VolumeBackup(),
                             VolumeEncryptionType())}
