"""`converge stack create|update|delete|list|show|check|cancel|converge|graph`."""

import sys

from cliff import command
from cliff import lister
from cliff import show

from converge import exception
from converge.cmd import common
from converge.db import api
from converge.engine import stacks


def stack_fields(engine, stack, with_outputs=True):
    from converge.engine import views
    return views.stack(engine, stack, with_outputs=with_outputs)


class _StackShowOne(show.ShowOne):
    def _show(self, stack):
        data = stack_fields(self.app.engine(), stack)
        cols = sorted(data)
        return cols, [data[c] for c in cols]


class CreateStack(_StackShowOne):
    """Create a stack."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        common.add_template_args(parser)
        parser.add_argument('--timeout', metavar='<timeout>', type=int,
                            help='Stack creation timeout in minutes')
        parser.add_argument('--enable-rollback', action='store_true',
                            help='Enable rollback on create/update failure')
        parser.add_argument('--tags', metavar='<tag1,tag2...>',
                            help='A list of tags to associate with the stack')
        parser.add_argument('--dry-run', action='store_true',
                            help='Validate and show the plan; store nothing')
        common.add_wait(parser)
        parser.add_argument('name', metavar='<stack-name>',
                            help='Name of the stack to create')
        return parser

    def take_action(self, args):
        bundle = common.bundle(args)
        params = common.parameters(args)
        if args.dry_run:
            defn = stacks.validate(bundle, params, stack_name=args.name)
            cols = ('stack_name', 'resources', 'description')
            return cols, (args.name, len(defn.resources), defn.description)
        tags = args.tags.split(',') if args.tags else []
        stack = common.run(self.app, args, lambda engine: stacks.create(
            engine, args.name, bundle, params,
            disable_rollback=not args.enable_rollback,
            timeout=args.timeout, tags=tags))
        return self._show(stack)


class UpdateStack(_StackShowOne):
    """Update a stack."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        common.add_template_args(parser, required=False)
        parser.add_argument('--existing', action='store_true',
                            help='Re-use the template, parameters and '
                                 'environment of the current stack')
        parser.add_argument('--clear-parameter', metavar='<parameter>',
                            action='append', default=[],
                            help='Remove a parameter from the update '
                                 '(with --existing)')
        parser.add_argument('--rollback', choices=['enabled', 'disabled',
                                                   'keep'], default='keep',
                            help='Rollback on failure (default: keep)')
        parser.add_argument('--timeout', metavar='<timeout>', type=int)
        parser.add_argument('--tags', metavar='<tag1,tag2...>')
        common.add_wait(parser)
        parser.add_argument('stack', metavar='<stack>',
                            help='Name or ID of the stack to update')
        return parser

    def take_action(self, args):
        bundle = common.bundle(args) if args.template else None
        params = common.parameters(args)
        rollback = {'enabled': True, 'disabled': False,
                    'keep': None}[args.rollback]
        stack = common.run(self.app, args, lambda engine: stacks.update(
            engine, args.stack, bundle, params, existing=args.existing,
            rollback=rollback, clear_parameters=args.clear_parameter))
        return self._show(stack)


class DeleteStack(command.Command):
    """Delete stack(s)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stacks', metavar='<stack>', nargs='+')
        parser.add_argument('-y', '--yes', action='store_true',
                            help='Skip the yes/no prompt (assume yes)')
        common.add_wait(parser)
        return parser

    def take_action(self, args):
        if not args.yes and sys.stdin.isatty():
            sys.stdout.write('Are you sure you want to delete this stack(s) '
                             '[y/N]? ')
            sys.stdout.flush()
            if sys.stdin.readline().strip().lower() not in ('y', 'yes'):
                return
        failures = []
        for ident in args.stacks:
            try:
                common.run(self.app, args,
                           lambda engine, i=ident: stacks.delete(engine, i))
            except exception.ConvergeError as exc:
                failures.append(str(exc))
        if failures:
            raise exception.ConvergeError('\n'.join(failures))


class ListStack(lister.Lister):
    """List stacks."""

    def take_action(self, args):
        engine = self.app.engine()
        cols = ('ID', 'Stack Name', 'Stack Status', 'Creation Time',
                'Updated Time')
        with engine.db.read() as s:
            rows = [(st.id, st.name, '%s_%s' % (st.action, st.status),
                     common.iso(st.created_at), common.iso(st.updated_at))
                    for st in api.stack_list(s)]
        return cols, rows


class ShowStack(_StackShowOne):
    """Show stack details."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        return parser

    def take_action(self, args):
        engine = self.app.engine()
        with engine.db.read() as s:
            stack = api.stack_get(s, args.stack, include_deleted=True)
        return self._show(stack)


class _Action(_StackShowOne):
    verb = None

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        common.add_wait(parser)
        return parser

    def take_action(self, args):
        stack = common.run(self.app, args,
                           lambda engine: self.verb(engine, args.stack))
        return self._show(stack)


class CheckStack(_Action):
    """Check a stack: observe every resource and report its health."""

    verb = staticmethod(stacks.check)


class ConvergeStack(_Action):
    """Walk the stack's graph again against reality (finish or heal)."""

    verb = staticmethod(stacks.converge)


class CancelStack(_Action):
    """Cancel a create or update (rolls back unless --no-rollback)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--no-rollback', action='store_true',
                            help='Stop propagation, let running actions '
                                 'finish, and end FAILED')
        return parser

    def take_action(self, args):
        rollback = not args.no_rollback
        if not rollback:
            engine = self.app.engine()
            stacks.cancel(engine, args.stack, rollback=False)
            with engine.db.read() as s:
                return self._show(api.stack_get(s, args.stack))
        stack = common.run(self.app, args, lambda engine: stacks.cancel(
            engine, args.stack, rollback=True))
        return self._show(stack)


class GraphStack(command.Command):
    """Print the stack's dependency graph in DOT."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        return parser

    def take_action(self, args):
        from converge.engine import views
        self.app.stdout.write(views.dot(self.app.engine(), args.stack))


class DriftStack(lister.Lister):
    """List resources whose real state differs from what was applied."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        return parser

    def take_action(self, args):
        from converge.observers import drift
        engine = self.app.engine()
        with engine.db.read() as s:
            stack = api.stack_get(s, args.stack)
        rows = drift.scan(engine, stack)
        return (('resource_name', 'physical_resource_id', 'drift'),
                [(d.name, d.physical_id, d.detail) for d in rows])
