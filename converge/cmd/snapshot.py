"""`converge stack snapshot create|list|show|delete|restore`, as
`openstack stack snapshot …`: a snapshot keeps the stack's abandon
document and each resource's own copy (a server's image, a volume's
backup); restore brings the stack back to it (docs/api.md). Embedded,
create and restore run to their end; against converge-api, with
--wait."""

import sys

from cliff import command
from cliff import lister
from cliff import show

from converge.cmd import columns
from converge.cmd import common

LIST_COLUMNS = ('id', 'name', 'action', 'status', 'status_reason',
                'creation_time')


class CreateSnapshot(show.ShowOne):
    """Create a stack snapshot."""

    COLUMNS = ('ID', 'name', 'action', 'status', 'status_reason', 'data',
               'creation_time')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>',
                            help='Name or ID of stack')
        parser.add_argument('--name', metavar='<name>',
                            help='Name of snapshot')
        common.add_wait(parser)
        return parser

    def take_action(self, args):
        started = {}

        def snapshot(svc, ctx):
            started.update(svc.stack_snapshot(ctx, args.stack, args.name))
            return {'id': started['stack_id'],
                    'traversal_id': started['traversal_id']}
        try:
            common.run(self.app, args, args.stack, snapshot)
        finally:
            if started:   # as it ended (or as far as it got)
                started.update(self.app.service().stack_snapshot_show(
                    self.app.context(), started['stack_id'],
                    started['id']))
        snap = started
        # Heat's snapshot has an action; converge's are all SNAPSHOTs
        snap.setdefault('action', 'SNAPSHOT')
        return self.COLUMNS, [
            columns.wrap(args.formatter, snap.get(c.lower()))
            if c == 'data' else snap.get(c.lower()) for c in self.COLUMNS]


class ListSnapshot(lister.Lister):
    """List stack snapshots."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>',
                            help='Name or ID of stack containing the '
                                 'snapshots')
        return parser

    def take_action(self, args):
        snaps = self.app.service().stack_snapshot_list(self.app.context(),
                                                       args.stack)
        return LIST_COLUMNS, [
            tuple(dict(s, action=s.get('action', 'SNAPSHOT')).get(c)
                  for c in LIST_COLUMNS) for s in snaps]


def _stack_and_snapshot(parser, verb):
    parser.add_argument('stack', metavar='<stack>',
                        help='Name or ID of stack containing the snapshot')
    parser.add_argument('snapshot', metavar='<snapshot>',
                        help='ID of the snapshot to %s' % verb)


class ShowSnapshot(show.ShowOne):
    """Show a stack snapshot (YAML by default, as OSC)."""

    @property
    def formatter_default(self):
        return 'yaml'

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        _stack_and_snapshot(parser, 'show')
        return parser

    def take_action(self, args):
        snap = self.app.service().stack_snapshot_show(
            self.app.context(), args.stack, args.snapshot)
        keys = list(snap)
        return keys, columns.values(args.formatter, snap, keys)


class DeleteSnapshot(command.Command):
    """Delete a stack snapshot."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>',
                            help='Name or ID of stack')
        parser.add_argument('snapshot', metavar='<snapshot>',
                            help='ID of stack snapshot')
        parser.add_argument('-y', '--yes', action='store_true',
                            help='Skip yes/no prompt (assume yes)')
        return parser

    def take_action(self, args):
        if not args.yes and sys.stdin.isatty():
            sys.stdout.write('Are you sure you want to delete the snapshot '
                             'of this stack [Y/N]?')
            sys.stdout.flush()
            if not sys.stdin.readline().lower().startswith('y'):
                return
        self.app.service().stack_snapshot_delete(
            self.app.context(), args.stack, args.snapshot)


class RestoreSnapshot(command.Command):
    """Restore a stack snapshot: update the stack back to it (embedded,
    or with --wait, followed to its end)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        _stack_and_snapshot(parser, 'restore')
        common.add_wait(parser)
        return parser

    def take_action(self, args):
        common.run(self.app, args, args.stack,
                   lambda svc, ctx: svc.stack_snapshot_restore(
                       ctx, args.stack, args.snapshot))
