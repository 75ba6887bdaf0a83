"""Swift's containers on the sim (the object store the sim has: no
objects are stored in them, so each is empty).

A container is its name in its project's account (its id is its name,
as Swift's is); a second PUT of the name is the same container, its
headers set again, as Swift answers 202. The view is what HEAD answers
(``headers``, lower-case as swiftclient gives them, values strings)
with the container's ``url`` under the sim's storage endpoint.
"""

from converge.drivers.sim import rows
from converge.drivers.sim.rows import bad

#: the sim's object-store endpoint (an account per project under it)
ENDPOINT = 'http://swift.sim.converge:8080/v1/AUTH_%s'
#: the container headers a PUT sets (besides X-Container-Meta-*)
SETTABLE = ('x-container-read', 'x-container-write',
            'x-container-sync-to', 'x-container-sync-key',
            'x-versions-location', 'x-history-location')
META = 'x-container-meta-'


def _headers(asked):
    out = {}
    for name, value in (asked or {}).items():
        lower = str(name).lower()
        if lower not in SETTABLE and not lower.startswith(META):
            raise bad('Container header %s cannot be set' % name)
        out[lower] = str(value)
    return out


class Container(rows.Kind):
    name = 'container'
    title = 'Container'
    fields = ('name', 'headers', 'account_headers')
    updatable = ('headers',)

    def identity(self, ctx, body):
        if not body.get('name'):
            return None
        return 'container:%s:%s' % (ctx.project_id, body['name'])

    def same(self, obj, body):
        # a PUT of an existing container sets its headers (Swift's 202)
        obj.body['headers'].update(_headers(body.get('headers')))
        return True

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        name = body.get('name') or ''
        if not 1 <= len(name) <= 256 or '/' in name:
            raise bad('Container name must be 1 to 256 characters without '
                      '"/": %r' % name)
        stored = {'name': name, 'headers': _headers(body.get('headers')),
                  'account_headers': {str(k).lower(): str(v) for k, v in (
                      body.get('account_headers') or {}).items()}}
        obj = self.new(ctx, stored, key, id=name,
                       ident=self.identity(ctx, body))
        return ctx.insert(obj)

    def show(self, ctx, obj):
        headers = dict(obj.body['headers'], **{
            'x-container-object-count': '0', 'x-container-bytes-used': '0',
            'content-length': '0', 'accept-ranges': 'bytes',
            'content-type': 'text/plain; charset=utf-8',
            'x-storage-policy': 'Policy-0',
            'x-timestamp': obj.created})
        return {'id': obj.id, 'name': obj.id, 'headers': headers,
                'count': 0, 'bytes': 0,
                'url': '%s/%s' % (ENDPOINT % obj.project_id, obj.id)}

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        if 'headers' in body:
            obj.body['headers'].update(_headers(body['headers']))
        return ctx.save(obj)


KINDS = {'container': Container()}
