"""`converge stack event list`."""

import time

from cliff import lister

from converge.db import api


def _when(ts):
    return time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(ts)) + \
        '.%06dZ' % int(round((ts % 1) * 1e6) % 1000000)


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
        engine = self.app.engine()
        with engine.db.read() as s:
            st = api.stack_get(s, args.stack, include_deleted=True)
            events = api.events_list(s, st.id, resource_name=args.resource)
        if args.limit:
            events = events[-args.limit:]
        cols = ('id', 'resource_name', 'resource_status',
                'resource_status_reason', 'event_time', 'physical_resource_id')
        return cols, [(e.uuid, e.resource_name, '%s_%s' % (e.action, e.status),
                       e.reason, _when(e.timestamp), e.physical_id or '')
                      for e in events]
