"""`converge stack resource list|show`."""

from cliff import lister
from cliff import show


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
        filters = dict(f.split('=', 1) for f in args.filter if '=' in f)
        cols = ('resource_name', 'physical_resource_id', 'resource_type',
                'resource_status', 'updated_time')
        rows = self.app.service().resource_list(self.app.context(),
                                                args.stack, filters)
        return cols, [tuple(r[c] for c in cols) for r in rows]


class ShowResource(show.ShowOne):
    """Show a resource, with its attributes."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('resource', metavar='<resource>')
        return parser

    def take_action(self, args):
        data = self.app.service().resource_show(self.app.context(),
                                                args.stack, args.resource)
        cols = sorted(data)
        return cols, [data[c] for c in cols]
