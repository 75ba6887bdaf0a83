"""`converge stack resource list|show`."""

from cliff import lister
from cliff import show

from converge.db import api
from converge.engine import views
from converge.engine.views import iso


class ListResource(lister.Lister):
    """List a stack's resources."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('--filter', metavar='<key=value>',
                            action='append', default=[],
                            help='Filter by name, status, type, action')
        return parser

    def take_action(self, args):
        engine = self.app.engine()
        with engine.db.read() as s:
            st = api.stack_get(s, args.stack)
        filters = dict(f.split('=', 1) for f in args.filter if '=' in f)
        cols = ('resource_name', 'physical_resource_id', 'resource_type',
                'resource_status', 'updated_time')
        out = []
        for name, row in views.resources(engine, st).items():
            status = '%s_%s' % (row.action, row.status)
            item = {'name': name, 'status': status, 'type': row.type,
                    'action': row.action}
            if any(str(item.get(k)) != v for k, v in filters.items()):
                continue
            out.append((name, row.physical_id or '', row.type, status,
                        iso(row.updated_at or row.created_at)))
        return cols, sorted(out)


class ShowResource(show.ShowOne):
    """Show a resource, with its attributes."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('resource', metavar='<resource>')
        return parser

    def take_action(self, args):
        engine = self.app.engine()
        with engine.db.read() as s:
            st = api.stack_get(s, args.stack)
        data = views.resource_detail(engine, st, args.resource)
        cols = sorted(data)
        return cols, [data[c] for c in cols]
