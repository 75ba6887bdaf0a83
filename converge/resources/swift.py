"""OS::Swift::Container, as Heat's
(heat/engine/resources/openstack/swift/container.py), made through
``clients.cloud`` (kind container).

The container's name is its physical id (the template's ``name``, else
Heat's physical name); the ACLs and ``X-Container-Meta`` become its
headers, ``X-Account-Meta`` the account's. No property changes in
place: any change makes a new container. A container with objects in
it is deleted only with ``PurgeOnDelete`` (its objects go first),
otherwise the delete fails as Heat's does. The attributes are read from
the container's URL and what its HEAD answers.
"""

import urllib.parse

from converge import exception
from converge.resources import cloud_object as co
from converge.resources import properties as p


class Container(co.CloudObject):
    """OS::Swift::Container: a Swift container."""

    kind = 'container'
    title = 'Container'
    # a cloud without Swift refuses the type at validate (engine/stacks.py)
    required_service = ('swift', 'object-store', None)
    natural_identity = True
    # Swift's limit on a container's name
    name_limit = 256

    properties_schema = {
        'name': p.Schema(
            p.STRING, 'Name for the container. If not specified, a unique '
            'name will be generated.'),
        'X-Container-Read': p.Schema(
            p.STRING, 'Specify the ACL permissions on who can read objects '
            'in the container.'),
        'X-Container-Write': p.Schema(
            p.STRING, 'Specify the ACL permissions on who can write objects '
            'to the container.'),
        'X-Container-Meta': p.Schema(
            p.MAP, 'A map of user-defined meta data to associate with the '
            'container. Each key in the map will set the header '
            'X-Container-Meta-{key} with the corresponding value.',
            default={}),
        'X-Account-Meta': p.Schema(
            p.MAP, 'A map of user-defined meta data to associate with the '
            'account. Each key in the map will set the header '
            'X-Account-Meta-{key} with the corresponding value.',
            default={}),
        'PurgeOnDelete': p.Schema(
            p.BOOLEAN, 'If True, delete any objects in the container when '
            'the container is deleted. Otherwise, deleting a non-empty '
            'container will result in an error.', default=False),
    }

    attributes_schema = {
        'DomainName': 'The host from the container URL.',
        'WebsiteURL': 'The URL of the container.',
        'RootURL': 'The parent URL of the container.',
        'ObjectCount': 'The number of objects stored in the container.',
        'BytesUsed': 'The number of bytes stored in the container.',
        'HeadContainer': 'A map containing all headers for the container.',
    }

    def make_body(self):
        props = self.properties
        headers = {'X-Container-Meta-%s' % k: v for k, v in (
            props.get('X-Container-Meta') or {}).items()}
        for key in ('X-Container-Read', 'X-Container-Write'):
            if props.get(key) is not None:
                headers[key] = props[key]
        body = {'name': self.physical_name(), 'headers': headers}
        account = {'X-Account-Meta-%s' % k: v for k, v in (
            props.get('X-Account-Meta') or {}).items()}
        if account:
            body['account_headers'] = account
        return body

    def in_use(self, obj):
        if int((obj.get('headers') or {}).get(
                'x-container-object-count') or 0) and \
                not self.properties.get('PurgeOnDelete'):
            raise exception.ResourceFailure(
                'Deleting non-empty container (%s) when PurgeOnDelete is '
                'False' % obj['id'])
        return None

    def attributes(self, obj):
        url = urllib.parse.urlparse(obj.get('url') or '')
        root = '%s://%s%s' % (url.scheme, url.netloc,
                              url.path.rsplit('/', 1)[0])
        headers = obj.get('headers') or {}
        return {'DomainName': url.hostname,
                'WebsiteURL': '%s/%s' % (root, obj.get('id')),
                'RootURL': root,
                'ObjectCount': headers.get('x-container-object-count'),
                'BytesUsed': headers.get('x-container-bytes-used'),
                'HeadContainer': dict(headers)}
