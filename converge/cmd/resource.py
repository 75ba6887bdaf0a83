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
        parser.add_argument('-n', '--nested-depth', type=int, default=0,
                            metavar='<nested-depth>',
                            help='Depth of nested stacks to list resources '
                                 'of (a provider\'s, a group\'s, a '
                                 'deployment group\'s members)')
        return parser

    def take_action(self, args):
        filters = dict(f.split('=', 1) for f in args.filter if '=' in f)
        cols = ('resource_name', 'physical_resource_id', 'resource_type',
                'resource_status', 'updated_time')
        if args.nested_depth > 0:   # as openstack stack resource list
            cols += ('stack_name', 'parent_resource')
        rows = self.app.service().resource_list(
            self.app.context(), args.stack, filters,
            nested_depth=max(0, args.nested_depth))
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
