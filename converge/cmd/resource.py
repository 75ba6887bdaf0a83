"""`converge stack resource list|show|signal|mark unhealthy`."""

import json

from cliff import command
from cliff import lister
from cliff import show

from converge import exception
from converge.cmd import common


class ListResource(lister.Lister):
    """List a stack's resources."""

    #: reads only: a home's read server may answer (cli.py)
    read_only = True

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
        parser.add_argument('--long', action='store_true',
                            help='Enable detailed information presented '
                                 'for each resource in resource list')
        parser.add_argument('--drift', action='store_true',
                            help='Only resources whose real state differed '
                                 'from what was applied when last observed '
                                 '(`stack drift`, `stack check` or the '
                                 'observer), with how and when')
        return parser

    def take_action(self, args):
        filters = dict(f.split('=', 1) for f in args.filter if '=' in f)
        cols = ('resource_name', 'physical_resource_id', 'resource_type',
                'resource_status', 'updated_time')
        # as openstack stack resource list: --long and -n add the stack
        if args.nested_depth > 0 or args.long:
            cols += ('stack_name',)
        if args.nested_depth > 0:
            cols += ('parent_resource',)
        if args.drift:
            cols += ('drift', 'observed_time')
        rows = self.app.service().resource_list(
            self.app.context(), args.stack, filters,
            nested_depth=max(0, args.nested_depth))
        if args.drift:
            rows = [r for r in rows if r.get('drift')]
        return cols, [tuple(r.get(c) for c in cols) for r in rows]


class ShowResource(show.ShowOne):
    """Show a resource, with its attributes."""

    #: reads only: a home's read server may answer (cli.py)
    read_only = True

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


class _NothingToFollow(Exception):
    pass


class SignalResource(command.Command):
    """Signal a resource (as `openstack stack resource signal`): an
    OS::Heat::ScalingPolicy scales its group, and (embedded, or with
    --wait) the group's traversal is followed to its end."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('resource', metavar='<resource>')
        parser.add_argument('--data', metavar='<data>',
                            help='JSON data to send to the signal handler')
        common.add_wait(parser)
        return parser

    def take_action(self, args):
        details = None
        if args.data is not None:
            try:
                details = json.loads(args.data)
            except ValueError as e:
                raise exception.InvalidInput('--data is not JSON: %s' % e)
        result = {}

        def operation(svc, ctx):
            result.update(svc.resource_signal(ctx, args.stack,
                                              args.resource, details))
            if not result.get('traversal_id'):
                raise _NothingToFollow()
            return {'id': result['stack_id'],
                    'traversal_id': result['traversal_id']}

        try:
            common.run(self.app, args, args.stack, operation,
                       until_paused=isinstance(details, dict) and
                       'unset_hook' in details)
        except _NothingToFollow:
            self.app.resume_hint = None
        self.app.stdout.write('%s: %s\n' % (
            result['status'].lower(), result['reason']))


class MarkUnhealthy(command.Command):
    """Mark a resource unhealthy (CHECK_FAILED): the next update or
    converge does its action again. --reset takes the mark back."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--reset', action='store_true',
                            help='Take the mark back')
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('resource', metavar='<resource>')
        parser.add_argument('reason', metavar='<reason>', nargs='?',
                            default='', help='Why (its status reason)')
        return parser

    def take_action(self, args):
        self.app.service().resource_mark_unhealthy(
            self.app.context(), args.stack, args.resource,
            not args.reset, args.reason)
