"""AWS::S3::Bucket: a Swift container, as Heat makes it
(heat/engine/resources/aws/s3/s3.py), through ``clients.cloud`` (on the
simulator, a container object).

The container is named as Heat names it (``<stack>-<resource>-<short
id>``), which is its Ref; Tags become its metadata (``S3-Tag-<Key>``),
WebsiteConfiguration its static-web metadata (``Web-Index``,
``Web-Error``), AccessControl its read and write ACLs (the project's
own, or ``.r:*`` for the public ones). DomainName is the host of the
object store's endpoint, WebsiteURL the container's URL. Nothing changes
in place: a changed property makes a new bucket.
"""

import urllib.parse

from converge.resources import cloud_object as co
from converge.resources import properties as p

ACCESS = ('Private', 'PublicRead', 'PublicReadWrite', 'AuthenticatedRead',
          'BucketOwnerRead', 'BucketOwnerFullControl')


class Bucket(co.CloudObject):
    kind = 'container'
    title = 'Bucket'
    # Heat's client of the type is Swift's: a cloud without Swift leaves
    # it out of the type list and refuses it at validate
    required_service = ('swift', 'object-store', None)
    # a container is its name: a create repeated finds it by that
    natural_identity = True
    name_limit = 256

    properties_schema = {
        'AccessControl': p.Schema(p.STRING, 'A predefined access control '
                                  'list (ACL) that grants permissions on '
                                  'the bucket.', allowed_values=ACCESS),
        'WebsiteConfiguration': p.Schema(
            p.MAP, 'Information used to configure the bucket as a static '
            'website.', schema={
                'IndexDocument': p.Schema(p.STRING, 'The name of the index '
                                          'document.'),
                'ErrorDocument': p.Schema(p.STRING, 'The name of the error '
                                          'document.')}),
        'Tags': p.Schema(p.LIST, 'Tags to attach to the bucket.', schema={
            'Key': p.Schema(p.STRING, 'The tag key name.', required=True),
            'Value': p.Schema(p.STRING, 'The tag value.', required=True)}),
    }
    attributes_schema = {
        'DomainName': 'The DNS name of the specified bucket.',
        'WebsiteURL': 'The website endpoint for the specified bucket.',
    }

    def make_body(self):
        props = self.properties
        meta = {'S3-Tag-' + t['Key']: t['Value']
                for t in props.get('Tags') or []}
        site = props.get('WebsiteConfiguration')
        if site is not None:
            # as Heat: Swift's staticweb middleware reads these
            meta['Web-Index'] = site.get('IndexDocument')
            meta['Web-Error'] = site.get('ErrorDocument')
        own = '%s:*' % self.stack.project_id
        access = props.get('AccessControl')
        read = '.r:*' if access in ('PublicRead', 'PublicReadWrite') else (
            self.stack.project_id if access == 'AuthenticatedRead' else own)
        write = '.r:*' if access == 'PublicReadWrite' else own
        headers = {'X-Container-Meta-%s' % k: v for k, v in meta.items()
                   if v is not None}
        headers.update({'X-Container-Read': read,
                        'X-Container-Write': write})
        return {'name': self.physical_name(prop='Name'), 'headers': headers}

    def identity_conflict(self, obj, body):
        return None   # the name is the resource's own

    def reference_id(self):
        return self.physical_id or self.name

    def attributes(self, obj):
        url = urllib.parse.urlsplit(obj.get('url') or '')
        return {'DomainName': url.hostname, 'WebsiteURL': obj.get('url')}
