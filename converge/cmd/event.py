"""`converge stack event list|show`."""

import signal
import time

from cliff import lister
from cliff import show

from converge import exception
from converge.cmd import eventlog

#: seconds between two looks for new events with --follow
FOLLOW_POLL = 0.5


class ListEvent(lister.Lister):
    """List a stack's events, oldest first (as log lines by default, as
    OSC prints them)."""

    #: reads only: a home's read server may answer (cli.py)
    read_only = True

    @property
    def formatter_namespace(self):
        # cliff's formatters and `log`
        return 'converge.event.formatter.list'

    @property
    def formatter_default(self):
        return 'log'

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
        parser.add_argument('--follow', action='store_true',
                            help='Print events until the process is '
                                 'halted (Ctrl-C), with --format log')
        return parser

    def take_action(self, args):
        if args.resource and args.nested_depth:
            # as openstack stack event list says
            raise exception.InvalidInput(
                '--nested-depth cannot be specified with --resource')
        if args.follow and args.formatter != 'log':
            raise exception.InvalidInput(
                '--follow can only be specified with --format log')
        cols = ('id', 'resource_name', 'resource_status',
                'resource_status_reason', 'event_time', 'physical_resource_id')
        if args.nested_depth:
            cols += ('stack_name',)
        if args.follow:
            self._follow(args, cols)
            return cols, []
        events = self._events(args)
        if args.formatter == 'log' and args.nested_depth:
            paths = eventlog.Paths()
            for e in events:
                paths.learn(e)
            events = [dict(e, resource_name=paths.name(e)) for e in events]
        return cols, [self._row(e, cols) for e in events]

    def _events(self, args):
        return self.app.service().event_list(
            self.app.context(), args.stack, resource_name=args.resource,
            limit=args.limit, nested_depth=max(0, args.nested_depth))

    @staticmethod
    def _row(event, cols):
        return (event['uuid'],) + tuple(event[c] for c in cols[1:])

    def _follow(self, args, cols):
        """Print each event once, as it comes, until Ctrl-C: the normal
        way out, so it exits 0 as OSC's does."""
        # Ctrl-C ends this read-only loop rather than the whole process
        # (the application's handler exits 130 for interrupted work)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        out = self.app.stdout
        seen = set()
        paths = eventlog.Paths()
        try:
            while True:
                for e in self._events(args):
                    paths.learn(e)
                    if e['uuid'] in seen:
                        continue
                    seen.add(e['uuid'])
                    e = dict(e, resource_name=paths.name(e))
                    out.write(eventlog.line(dict(zip(
                        cols, self._row(e, cols)))) + '\n')
                out.flush()
                time.sleep(FOLLOW_POLL)  # a look for more, not a wait
        except KeyboardInterrupt:
            out.flush()


class ShowEvent(show.ShowOne):
    """Show one event of a resource."""

    #: reads only: a home's read server may answer (cli.py)
    read_only = True

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
