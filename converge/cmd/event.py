"""`converge stack event list|show`."""

from cliff import lister
from cliff import show

from converge import exception


class ListEvent(lister.Lister):
    """List a stack's events, oldest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('--resource', metavar='<resource>',
                            help='Only events of this resource')
        parser.add_argument('--limit', type=int, metavar='<limit>')
        parser.add_argument('--nested-depth', type=int, default=0,
                            metavar='<depth>',
                            help='Also the events of nested stacks (a '
                                 'provider\'s, a group\'s, a deployment '
                                 'group\'s members) to this depth, with '
                                 'their stack_name')
        return parser

    def take_action(self, args):
        if args.resource and args.nested_depth:
            # as openstack stack event list says
            raise exception.InvalidInput(
                '--nested-depth cannot be specified with --resource')
        events = self.app.service().event_list(
            self.app.context(), args.stack, resource_name=args.resource,
            limit=args.limit, nested_depth=max(0, args.nested_depth))
        cols = ('id', 'resource_name', 'resource_status',
                'resource_status_reason', 'event_time', 'physical_resource_id')
        if args.nested_depth:
            cols += ('stack_name',)
        return cols, [(e['uuid'],) + tuple(e[c] for c in cols[1:])
                      for e in events]


class ShowEvent(show.ShowOne):
    """Show one event of a resource."""

    COLUMNS = ('id', 'resource_name', 'resource_type',
               'physical_resource_id', 'resource_status',
               'resource_status_reason', 'event_time', 'stack_name')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('resource', metavar='<resource>')
        parser.add_argument('event', metavar='<event>',
                            help='The event\'s id (event list shows it)')
        return parser

    def take_action(self, args):
        e = self.app.service().event_show(self.app.context(), args.stack,
                                          args.resource, args.event)
        return self.COLUMNS, [e['uuid']] + [e.get(c)
                                            for c in self.COLUMNS[1:]]
