"""`converge stack event list`."""

from cliff import lister

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
