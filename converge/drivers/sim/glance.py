"""Glance's images on the sim.

An image made with a ``location`` is imported from it (web-download):
``importing`` for the latency of ``image.create``, then ``active``; one
without is ``queued`` for that long, then ``active`` (the sim has no
upload: its data is taken to arrive). Unknown fields are properties, as
in Glance; the key is the ``converge-key`` property. A protected image
is not deleted (403). Public and community images are every project's.
"""

import hashlib

from converge.drivers.sim import cinder
from converge.drivers.sim import rows
from converge.drivers.sim.rows import bad, forbidden

DISK_FORMATS = ('ami', 'ari', 'aki', 'vhd', 'vhdx', 'vmdk', 'raw', 'qcow2',
                'vdi', 'iso', 'ploop')
CONTAINER_FORMATS = ('ami', 'ari', 'aki', 'bare', 'ovf', 'ova', 'docker',
                     'compressed')
VISIBILITIES = ('public', 'community', 'shared', 'private')
#: what Glance computes itself: never given
READ_ONLY = ('status', 'size', 'virtual_size', 'checksum', 'os_hash_algo',
             'os_hash_value', 'owner', 'created_at', 'updated_at', 'file',
             'schema', 'self', 'direct_url', 'locations')


def _one_of(value, allowed, field):
    if value is not None and value not in allowed:
        raise bad("Provided object does not match schema 'image': '%s' is "
                  "not one of %s (%s)" % (value, list(allowed), field))
    return value


def _count(value, field):
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0:
        raise bad("Provided object does not match schema 'image': %s must "
                  "be an integer of 0 or more, not %r" % (field, value))
    return number


def _data(obj_id, name):
    """Size and hashes of an image's data (made up, stable)."""
    digest = hashlib.sha512(('%s:%s' % (obj_id, name)).encode())
    size = 12716032 + int(digest.hexdigest()[:4], 16) * 4096
    return {'size': size, 'virtual_size': size,
            'checksum': hashlib.md5(digest.digest()).hexdigest(),
            'os_hash_algo': 'sha512', 'os_hash_value': digest.hexdigest()}


class Image(rows.Kind):
    name = 'image'
    title = 'Image'
    key_in = 'property'
    task_ops = ('create',)

    def create(self, ctx, body, key, latency):
        given = sorted(set(body) & set(READ_ONLY))
        if given:
            raise forbidden("Attribute '%s' is read-only." % given[0])
        body = dict(body)
        location = body.pop('location', None)
        image_id = body.pop('id', None) or ctx.new_id('image',
                                                      body.get('name'))
        if ctx.live('image', image_id) is not None:
            raise rows.conflict('Image with identifier %s already exists!'
                                % image_id)
        stored = {
            'name': body.pop('name', None),
            'container_format': _one_of(body.pop('container_format', None),
                                        CONTAINER_FORMATS,
                                        'container_format'),
            'disk_format': _one_of(body.pop('disk_format', None),
                                   DISK_FORMATS, 'disk_format'),
            'min_disk': _count(body.pop('min_disk', 0), 'min_disk'),
            'min_ram': _count(body.pop('min_ram', 0), 'min_ram'),
            'protected': bool(body.pop('protected', False)),
            'visibility': _one_of(body.pop('visibility', 'shared'),
                                  VISIBILITIES, 'visibility'),
            'os_hidden': bool(body.pop('os_hidden', False)),
            'tags': list(body.pop('tags', None) or []),
            'size': None, 'virtual_size': None, 'checksum': None,
            'os_hash_algo': None, 'os_hash_value': None}
        # any other field is a property of the image (strings, as Glance)
        stored.update({k: None if v is None else str(v)
                       for k, v in body.items()})
        busy = 'importing' if location else 'queued'
        data = _data(image_id, stored['name'])
        if latency > 0:
            columns = {'status': busy, 'ready_at': ctx.now + latency,
                       'outcome': rows.dumps({'status': 'active',
                                              'fields': data})}
        else:
            stored.update(data)
            columns = {'status': 'active'}
        obj = self.new(ctx, stored, key, id=image_id,
                       shared=stored['visibility'] in ('public',
                                                       'community'),
                       **columns)
        return ctx.insert(obj)

    def show(self, ctx, obj):
        status, body = obj.state(ctx.now)
        view = rows.public(body)
        view.update(id=obj.id, status=status, owner=obj.project_id,
                    created_at=obj.created, updated_at=obj.updated,
                    file='/v2/images/%s/file' % obj.id,
                    schema='/v2/schemas/image', self='/v2/images/%s' % obj.id)
        return self.with_key(obj, view)

    def update(self, ctx, obj, body, latency):
        given = sorted(set(body) & set(READ_ONLY + ('id', 'location')))
        if given:
            raise forbidden("Attribute '%s' is read-only." % given[0])
        ctx.settle(obj)
        for field, value in body.items():
            if field == 'visibility':
                obj.body[field] = _one_of(value, VISIBILITIES, field)
                obj.shared = value in ('public', 'community')
            elif field in ('min_disk', 'min_ram'):
                obj.body[field] = _count(value, field)
            elif field in ('protected', 'os_hidden'):
                obj.body[field] = bool(value)
            elif field == 'tags':
                obj.body[field] = list(value or [])
            elif field in ('container_format', 'disk_format'):
                if obj.status != 'queued':
                    raise forbidden("Attribute '%s' can be only replaced "
                                    "for a queued image." % field)
                obj.body[field] = _one_of(
                    value, DISK_FORMATS if field == 'disk_format'
                    else CONTAINER_FORMATS, field)
            elif value is None and field != 'name':
                obj.body.pop(field, None)   # a property removed
            else:
                obj.body[field] = value if field == 'name' else str(value)
        obj.name = obj.body.get('name')
        return ctx.save(obj)

    def delete(self, ctx, obj, latency):
        if obj.body.get('protected'):
            raise forbidden('Image %s is protected and cannot be deleted.'
                            % obj.id)
        ctx.remove(obj)


class ServerImage(rows.Kind):
    """Nova's createImage: an image of a server's disk. What it makes is
    an ``image`` (Glance's: got, listed and deleted as one), ``queued``
    for the latency of ``server_image.create``, then ``active``; its
    properties say where it came from, as Nova's snapshots' do
    (image_type snapshot, instance_uuid, base_image_ref). Found again
    by its key (the create's look-up is under this kind)."""

    name = 'server_image'
    title = 'Image'
    key_in = 'property'
    task_ops = ('create',)

    def create(self, ctx, body, key, latency):
        self.check_fields(body, ('server_id', 'name', 'metadata'))
        server = cinder.server_row(ctx, body.get('server_id'))
        if not ctx.admin and server.project_id not in (None,
                                                       ctx.project_id):
            raise rows.missing('Instance %s could not be found.'
                               % body.get('server_id'))
        name = body.get('name') or 'snapshot'
        stored = {
            'name': name, 'container_format': 'bare', 'disk_format': 'raw',
            'min_disk': 0, 'min_ram': 0, 'protected': False,
            'visibility': 'private', 'os_hidden': False, 'tags': [],
            'size': None, 'virtual_size': None, 'checksum': None,
            'os_hash_algo': None, 'os_hash_value': None,
            'image_type': 'snapshot', 'instance_uuid': server.id,
            'base_image_ref': server.image}
        stored.update({str(k): str(v) for k, v in
                       (body.get('metadata') or {}).items()})
        image_id = ctx.new_id('image', '%s:%s' % (name, key))
        data = _data(image_id, name)
        if latency > 0:
            columns = {'status': 'queued', 'ready_at': ctx.now + latency,
                       'outcome': rows.dumps({'status': 'active',
                                              'fields': data})}
        else:
            stored.update(data)
            columns = {'status': 'active'}
        obj = IMAGE.new(ctx, stored, key, id=image_id, **columns)
        # found again by its key as this kind's (SimCloud.create)
        obj.live_key = rows.live_key(self.name, key) if key else None
        return ctx.insert(obj)

    def show(self, ctx, obj):
        return IMAGE.show(ctx, obj)


IMAGE = Image()
KINDS = {'image': IMAGE, 'server_image': ServerImage()}
