"""OS::Glance::WebImage, as Heat's (heat/engine/resources/openstack/
glance/image.py), made through ``clients.cloud``: Glance downloads the
image from ``location`` (web-download import), and the create waits
(base.Wait) until the image is active.

What Heat lets change in place changes in place (protected, visibility,
tags, the os_*, kernel and ramdisk properties, owner, extra_properties:
one taken out is removed); name, formats, sizes and location replace the
image. Deactivating an image (``active: false``) and sharing it with
``members`` are not supported: the cloud interface carries neither.
"""

from converge import exception
from converge.resources import cloud_object as co
from converge.resources import properties as p

UUID_PATTERN = ('([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}'
                '-([0-9a-fA-F]){4}-([0-9a-fA-F]){12}')
DISK_FORMATS = ('ami', 'ari', 'aki', 'vhd', 'vhdx', 'vmdk', 'raw', 'qcow2',
                'vdi', 'iso', 'ploop')
CONTAINER_FORMATS = ('ami', 'ari', 'aki', 'bare', 'ovf', 'ova', 'docker')


class WebImage(co.CloudObject):
    """OS::Glance::WebImage: an image Glance imports from a URL."""

    kind = 'image'
    title = 'Image'
    update_fields = ('protected', 'tags', 'architecture', 'kernel_id',
                     'os_distro', 'os_version', 'owner', 'visibility',
                     'ramdisk_id')
    drift_fields = ('protected', 'visibility', 'tags', 'architecture',
                    'kernel_id', 'os_distro', 'os_version', 'ramdisk_id')
    cleared = {'tags': []}
    extra_fields_property = 'extra_properties'
    extra_cleared = None   # an extra property taken out is removed

    properties_schema = {
        'name': p.Schema(
            p.STRING, 'Name for the image. The name of an image is not '
            'unique to a Image Service node.'),
        'id': p.Schema(
            p.STRING, 'The image ID. Glance will generate a UUID if not '
            'specified.'),
        'min_disk': p.Schema(
            p.INTEGER, 'Amount of disk space (in GB) required to boot image. '
            'Default value is 0 if not specified and means no limit on the '
            'disk size.', min=0, default=0),
        'min_ram': p.Schema(
            p.INTEGER, 'Amount of ram (in MB) required to boot image. Default '
            'value is 0 if not specified and means no limit on the ram '
            'size.', min=0, default=0),
        'protected': p.Schema(
            p.BOOLEAN, 'Whether the image can be deleted. If the value is '
            'True, the image is protected and cannot be deleted.',
            default=False, update_allowed=True),
        'disk_format': p.Schema(p.STRING, 'Disk format of image.',
                                required=True, allowed_values=DISK_FORMATS),
        'container_format': p.Schema(
            p.STRING, 'Container format of image.', required=True,
            allowed_values=CONTAINER_FORMATS),
        'location': p.Schema(
            p.STRING, 'URL where the data for this image already resides. '
            'For example, if the image data is stored in swift, you could '
            'specify "swift://example.com/container/obj".', required=True),
        'tags': p.Schema(p.LIST, 'List of image tags.', update_allowed=True),
        'architecture': p.Schema(p.STRING, 'Operating system architecture.',
                                 update_allowed=True),
        'kernel_id': p.Schema(
            p.STRING, 'ID of image stored in Glance that should be used as '
            'the kernel when booting an AMI-style image.',
            update_allowed=True, pattern=UUID_PATTERN),
        'os_distro': p.Schema(
            p.STRING, 'The common name of the operating system distribution '
            'in lowercase.', update_allowed=True),
        'os_version': p.Schema(
            p.STRING, 'Operating system version as specified by the '
            'distributor.', update_allowed=True),
        'owner': p.Schema(p.STRING, 'Owner of the image.',
                          update_allowed=True),
        'extra_properties': p.Schema(
            p.MAP, 'Arbitrary properties to associate with the image.',
            default={}, update_allowed=True),
        'visibility': p.Schema(
            p.STRING, 'Scope of image accessibility.', default='private',
            update_allowed=True,
            allowed_values=('public', 'private', 'community', 'shared')),
        'ramdisk_id': p.Schema(
            p.STRING, 'ID of image stored in Glance that should be used as '
            'the ramdisk when booting an AMI-style image.',
            update_allowed=True, pattern=UUID_PATTERN),
        'active': p.Schema(
            p.BOOLEAN, 'Activate or deactivate the image. Requires Admin '
            'Access (deactivating is not supported by converge).',
            default=True, update_allowed=True),
        'members': p.Schema(
            p.LIST, 'List of additional members that are permitted to read '
            'the image (not supported by converge).',
            schema=p.Schema(p.STRING), update_allowed=True),
    }
    attributes_schema = {}

    @classmethod
    def validate_more(cls, values, path):
        path = list(path)
        container = values.get('container_format')
        if container in ('ami', 'ari', 'aki') and \
                values.get('disk_format') != container:
            raise exception.InvalidTemplate(
                "Invalid mix of disk and container formats. When setting a "
                "disk or container format to one of 'aki', 'ari', or 'ami', "
                "the container and disk formats must match.",
                path=path + ['disk_format'])
        if values.get('members') and values.get('visibility') != 'shared':
            raise exception.InvalidTemplate(
                'members property should only be specified for visibility '
                'with value shared.', path=path + ['members'])
        if values.get('members'):
            raise exception.InvalidTemplate(
                'members is not supported by converge',
                path=path + ['members'])
        if values.get('active') is False:
            raise exception.InvalidTemplate(
                'active: false (deactivating an image) is not supported by '
                'converge', path=path + ['active'])
        return values

    def make_body(self):
        props = self.properties
        body = {}
        for key in ('name', 'id', 'min_disk', 'min_ram', 'protected',
                    'disk_format', 'container_format', 'location',
                    'architecture', 'kernel_id', 'os_distro', 'os_version',
                    'owner', 'visibility', 'ramdisk_id'):
            if props.get(key) is not None:
                body[key] = props[key]
        if props.get('tags') is not None:
            body['tags'] = list(props['tags'])
        for key, value in (props.get('extra_properties') or {}).items():
            body[key] = value
        return body

    def attributes(self, obj):
        return {}
