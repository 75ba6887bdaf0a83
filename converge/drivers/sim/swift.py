"""Swift's containers, as the sim keeps them: a container's id is its
name, unique in its project (its natural identity); its metadata and
access lists are what the create said. The sim stores no objects, so
a container is always empty and its delete never refused. Its view
names the URL Swift would serve it at (``url``), under the sim's own
object-store endpoint.
"""

from converge.drivers.sim import rows
from converge.drivers.sim.rows import bad

#: the sim's object-store endpoint (no service answers there)
ENDPOINT = 'http://object-store.sim.invalid:8080/v1/AUTH_%s'


class Container(rows.Kind):
    name = 'container'
    title = 'Container'
    fields = ('name', 'metadata', 'read_acl', 'write_acl')

    def identity(self, ctx, body):
        if not body.get('name'):
            return None
        return 'container:%s:%s' % (ctx.project_id, body['name'])

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        name = body.get('name') or ''
        if not 1 <= len(name) <= 256 or '/' in name:
            raise bad('Container name must be 1 to 256 characters, '
                      'without "/"')
        stored = {'name': name,
                  'metadata': dict(body.get('metadata') or {}),
                  'read_acl': body.get('read_acl') or '',
                  'write_acl': body.get('write_acl') or ''}
        return ctx.insert(self.new(ctx, stored, key, id=name,
                                   ident=self.identity(ctx, body)))

    def show(self, ctx, obj):
        view = rows.public(obj.body)
        view.update(id=obj.id, count=0, bytes=0,
                    url='%s/%s' % (ENDPOINT % obj.project_id, obj.id))
        return view


KINDS = {'container': Container()}
