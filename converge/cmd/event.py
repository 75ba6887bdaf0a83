"""`converge stack event list`."""

from cliff import lister


class ListEvent(lister.Lister):
    """List a stack's events, oldest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('--resource', metavar='<resource>',
                            help='Only events of this resource')
        parser.add_argument('--limit', type=int, metavar='<limit>')
        return parser

    def take_action(self, args):
        events = self.app.service().event_list(
            self.app.context(), args.stack, resource_name=args.resource,
            limit=args.limit)
        cols = ('id', 'resource_name', 'resource_status',
                'resource_status_reason', 'event_time', 'physical_resource_id')
        return cols, [(e['uuid'],) + tuple(e[c] for c in cols[1:])
                      for e in events]
