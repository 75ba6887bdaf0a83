"""`converge stack create|update|delete|list|show|check|cancel|converge|graph|
abandon|adopt`."""

import json
import os
import sys

from cliff import command
from cliff import lister
from cliff import show

from converge import exception
from converge.agent import journal
from converge.cmd import columns
from converge.cmd import common
from converge.cmd import listing


#: what `openstack stack show` prints first, in this order; the rest
#: follows (heatclient's osc/v1/stack.py _show_stack)
SHOW_FIRST = ('id', 'stack_name', 'description', 'creation_time',
              'updated_time', 'stack_status', 'stack_status_reason')


class _StackShowOne(show.ShowOne):
    def _show(self, stack_id, formatter='table', resolve_outputs=True):
        """The stack as `openstack stack show` prints it: its summary,
        then parameters, outputs and the rest; maps and lists as YAML in
        a table, JSON text in value and shell."""
        data = self.app.service().stack_show(
            self.app.context(), stack_id, with_outputs=resolve_outputs)
        cols = list(SHOW_FIRST) + [
            c for c in ('parameters', 'outputs', 'links') if c in data]
        cols += sorted(c for c in data if c not in cols and
                       c != 'template_description')
        return cols, columns.values(formatter, data, cols)

    def _summary(self, stack_id):
        """The short summary OSC prints after a create, an update or an
        adopt: what the stack is and where it stands."""
        data = self.app.service().stack_show(self.app.context(), stack_id,
                                             with_outputs=False)
        return SHOW_FIRST, [data.get(c) for c in SHOW_FIRST]


class CreateStack(_StackShowOne):
    """Create a stack."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        common.add_template_args(parser)
        common.add_timeout(parser, 'Stack creation timeout')
        parser.add_argument('--enable-rollback', action='store_true',
                            help='Enable rollback on create/update failure')
        parser.add_argument('--tags', metavar='<tag1,tag2...>',
                            help='A list of tags to associate with the stack')
        common.add_converge_policy(parser)
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
            plan = self.app.service().stack_preview(
                self.app.context(), args.name, bundle, params)
            cols = ('stack_name', 'resources', 'description')
            return cols, tuple(plan[c] for c in cols)
        tags = args.tags.split(',') if args.tags else []
        stack = common.run(
            self.app, args, args.name, lambda svc, ctx: svc.stack_create(
                ctx, args.name, bundle, params,
                disable_rollback=not args.enable_rollback,
                timeout=args.timeout, tags=tags,
                converge_policy=args.converge_policy))
        return self._summary(stack.id)


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
        common.add_timeout(parser, 'Stack update timeout')
        parser.add_argument('--tags', metavar='<tag1,tag2...>',
                            help='Replace the stack\'s tags')
        common.add_converge_policy(parser)
        parser.add_argument('--resume', action='store_true',
                            help='Move on a rolling update waiting for '
                                 'the operator after its canary batch '
                                 '(nothing else changes)')
        parser.add_argument('--dry-run', action='store_true',
                            help='Do not actually perform the stack '
                                 'update, but show what would be changed')
        parser.add_argument('--converge', action='store_true',
                            help='Stack update with observe on reality: '
                                 'every resource, nested stacks\' too, is '
                                 'compared with what is really there and '
                                 'repaired')
        parser.add_argument('--show-nested', action='store_true',
                            help='Show nested stacks when performing '
                                 '--dry-run (each of their resources with '
                                 'its parent_resource)')
        common.add_wait(parser)
        parser.add_argument('stack', metavar='<stack>',
                            help='Name or ID of the stack to update')
        return parser

    def take_action(self, args):
        if args.resume:
            if args.template or args.existing or args.parameter or \
                    args.environment or args.tags is not None:
                raise exception.InvalidInput(
                    '--resume moves a waiting rollout on and changes '
                    'nothing: give it no template, --existing, '
                    '--parameter, -e or --tags')
            stack = common.run(
                self.app, args, args.stack,
                lambda svc, ctx: svc.stack_resume_rollout(ctx, args.stack))
            return self._summary(stack.id)
        bundle = common.bundle(args) if args.template else None
        params = common.parameters(args)
        if args.dry_run:
            return self._dry_run(args, bundle, params)
        rollback = {'enabled': True, 'disabled': False,
                    'keep': None}[args.rollback]
        tags = args.tags.split(',') if args.tags is not None else None
        stack = common.run(
            self.app, args, args.stack, lambda svc, ctx: svc.stack_update(
                ctx, args.stack, bundle, params, existing=args.existing,
                rollback=rollback, clear_parameters=args.clear_parameter,
                timeout=args.timeout, tags=tags, converge=args.converge,
                converge_policy=args.converge_policy))
        return self._summary(stack.id)

    def _dry_run(self, args, bundle, params):
        """What the update would do, as OSC prints it: a column per kind
        of change (added, deleted, replaced, unchanged, updated), each
        the list of its resources as JSON text."""
        changes = self.app.service().stack_preview_update(
            self.app.context(), args.stack, bundle, params,
            existing=args.existing, clear_parameters=args.clear_parameter,
            show_nested=args.show_nested)
        cols = sorted(changes)
        items = [i for c in cols for i in changes[c]]
        visited = sum(1 for i in items if i.get('visit'))
        if args.converge:
            sys.stderr.write('--converge: all %d resources are visited\n'
                             % len(items))
        else:
            sys.stderr.write('change set: %d of %d resources to visit '
                             '(--converge visits every one)\n' % (
                                 visited, len(items)))
        return cols, [columns.json_column(args.formatter, changes[c])
                      for c in cols]


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
                common.run(self.app, args, ident,
                           lambda svc, ctx, i=ident: svc.stack_delete(ctx, i))
            except exception.ConvergeError as exc:
                failures.append(exc)
        if failures:
            # one exit code for one kind of failure: every stack not found
            # exits as "not found" does for any verb
            codes = {exc.exit_code for exc in failures}
            err = exception.ConvergeError(
                '\n'.join(str(exc) for exc in failures))
            err.exit_code = codes.pop() if len(codes) == 1 else 1
            raise err


class ListStack(lister.Lister):
    """List stacks."""

    #: reads only: a home's read server may answer (cli.py)
    read_only = True

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--show-nested', '--nested', dest='show_nested',
                            action='store_true',
                            help='Include nested stacks (with their '
                                 'parent\'s id)')
        parser.add_argument('--filter', '--property', dest='filters',
                            metavar='<key=value>', action='append',
                            default=[],
                            help='Filter on name, status, action or id '
                                 '(repeat; a key repeated matches any of '
                                 'its values)')
        parser.add_argument('--tags', metavar='<tag1,tag2...>',
                            help='List of tags to filter by. Can be '
                                 'combined with --tag-mode to specify how '
                                 'to filter tags')
        parser.add_argument('--tag-mode', metavar='<mode>',
                            help='Method of filtering tags. Must be one of '
                                 '"any", "not", or "not-any". If not '
                                 'specified, multiple tags will be '
                                 'combined with the boolean AND expression')
        parser.add_argument('--limit', metavar='<limit>', type=int,
                            help='The number of stacks returned')
        parser.add_argument('--marker', metavar='<id>',
                            help='Only return stacks that appear after the '
                                 'given ID')
        parser.add_argument('--sort', metavar='<key>[:<direction>]',
                            help='Sort output by selected keys and '
                                 'directions (asc or desc) (default: '
                                 'asc), comma-separated: stack_name, '
                                 'stack_status, creation_time, '
                                 'updated_time')
        parser.add_argument('--short', action='store_true',
                            help='List fewer fields in output')
        parser.add_argument('--long', action='store_true',
                            help='List additional fields in output')
        parser.add_argument('--deleted', action='store_true',
                            help='Include deleted stacks (with their '
                                 'deletion time)')
        parser.add_argument('--hidden', action='store_true',
                            help='Include hidden stacks (those with a tag '
                                 'of [DEFAULT] hidden_stack_tags)')
        return parser

    def take_action(self, args):
        cols = ['ID', 'Stack Name', 'Stack Status', 'Creation Time',
                'Updated Time']
        if args.short:
            cols = cols[:3]
        if args.long:
            # as OSC's: the project, then the owner (converge records
            # none: Heat's API answers stack_owner null too)
            cols[2:2] = ['Project', 'Stack Owner']
        if args.show_nested:
            cols.append('Parent')
        if args.deleted:
            cols.append('Deletion Time')
        query = listing.query(args)
        rows = self.app.service().stack_list(
            self.app.context(), show_nested=args.show_nested,
            show_deleted=args.deleted, show_hidden=args.hidden, **query)
        rows = listing.sort_rows(rows, args.sort)
        return cols, [tuple(r.get(listing.KEYS[c]) for c in cols)
                      for r in rows]


class ShowStack(_StackShowOne):
    """Show stack details."""

    #: reads only: a home's read server may answer (cli.py)
    read_only = True

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('--no-resolve-outputs', action='store_true',
                            help='Do not resolve outputs of the stack.')
        return parser

    def take_action(self, args):
        return self._show(args.stack, args.formatter,
                          resolve_outputs=not args.no_resolve_outputs)


#: what OSC's check, suspend, resume and cancel print: a row a stack
ACTION_COLUMNS = ('ID', 'Stack Name', 'Stack Status', 'Creation Time',
                  'Updated Time')


class _Action(lister.Lister):
    """A verb on one or more stacks, each followed to its end (embedded,
    or with --wait), printed as OSC's stack actions print them."""

    verb = None

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>', nargs='+',
                            help='Stack(s) (name or ID)')
        common.add_wait(parser)
        return parser

    def take_action(self, args):
        # as OSC's: the first stack that fails ends the command
        return ACTION_COLUMNS, [self._row(self._act(args, ident))
                                for ident in args.stack]

    def _act(self, args, ident):
        """The stack's id once the verb on it ended (or was accepted)."""
        return common.run(self.app, args, ident,
                          lambda svc, ctx: getattr(svc, self.verb)(
                              ctx, ident)).id

    def _row(self, stack_id):
        data = self.app.service().stack_show(self.app.context(), stack_id,
                                             with_outputs=False)
        return tuple(data.get(listing.KEYS[c]) for c in ACTION_COLUMNS)


class CheckStack(_Action):
    """Check a stack: observe every resource and report its health."""

    verb = 'stack_check'


class SuspendStack(_Action):
    """Suspend a stack: every resource, dependents first."""

    verb = 'stack_suspend'


class ResumeStack(_Action):
    """Resume a suspended stack."""

    verb = 'stack_resume'


class ConvergeStack(_StackShowOne):
    """Walk the stack's graph again against reality (finish or heal)."""

    #: --dry-run's columns
    PLAN = ('resource_name', 'stack_name', 'resource_type',
            'physical_resource_id', 'resource_status', 'action', 'reason')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('--dry-run', action='store_true',
                            help='Observe the stack (nested stacks too) and '
                                 'list what converging would repair, and '
                                 'why, without repairing')
        common.add_wait(parser)
        return parser

    def run(self, parsed_args):
        if not parsed_args.dry_run:
            return super().run(parsed_args)
        # a list, not one stack: the formatter's list form (table, json,
        # yaml, value, csv print lists as they print `stack list`)
        self.formatter = self._formatter_plugins[parsed_args.formatter].obj
        items = self.app.service().stack_preview_converge(
            self.app.context(), parsed_args.stack)
        self.formatter.emit_list(
            self.PLAN, [tuple(i[c] for c in self.PLAN) for i in items],
            self.app.stdout, parsed_args)
        return 0

    def take_action(self, args):
        stack = common.run(self.app, args, args.stack,
                           lambda svc, ctx: svc.stack_converge(
                               ctx, args.stack))
        return self._show(stack.id, args.formatter)


class CancelStack(_Action):
    """Cancel a create or update (rolls back unless --no-rollback)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--no-rollback', action='store_true',
                            help='Stop propagation, let running actions '
                                 'finish, and end FAILED')
        return parser

    def _act(self, args, ident):
        svc, ctx = self.app.service(), self.app.context()
        if not args.no_rollback:
            return common.run(self.app, args, ident,
                              lambda svc, ctx: svc.stack_cancel(
                                  ctx, ident, rollback=True)).id
        if not args.wait:
            # running actions finish on their own: nothing to follow
            return svc.stack_cancel(ctx, ident, rollback=False)['id']
        # --wait: until the cancelled traversal's running actions ended;
        # the stack then is FAILED, as cancelled: the goal reached
        try:
            return common.run(self.app, args, ident,
                              lambda svc, ctx: svc.stack_cancel(
                                  ctx, ident, rollback=False)).id
        except exception.ConvergeError as exc:
            if exc.exit_code != 1:
                raise
            return svc.stack_identify(ctx, ident)['id']


class GraphStack(command.Command):
    """Print the stack's dependency graph: DOT, or SVG (Graphviz's when
    `dot` is on PATH, else converge's own layered drawing)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('--format', dest='graph_format',
                            choices=('dot', 'svg'), default='dot',
                            help='dot (default): Graphviz DOT text; svg: '
                                 'a picture (Graphviz draws it when its '
                                 '`dot` is on PATH, else converge draws '
                                 'one layer per dependency depth)')
        parser.add_argument('--output', metavar='<file>',
                            help='Write to this file instead of standard '
                                 'output')
        return parser

    def take_action(self, args):
        text = self.app.service().stack_graph(self.app.context(), args.stack)
        if args.graph_format == 'svg':
            text = _svg(text)
        if args.output:
            journal.write_atomically(os.path.abspath(args.output),
                                     text.encode())
        else:
            self.app.stdout.write(text)


def _svg(dot_text):
    """SVG of the DOT: Graphviz's `dot -Tsvg` if installed, else
    converge.graph.svg's (no dependency to install for a picture)."""
    import shutil
    import subprocess
    dot = shutil.which('dot')
    if dot:
        proc = subprocess.run([dot, '-Tsvg'], input=dot_text,
                              capture_output=True, text=True)
        if proc.returncode == 0:
            return proc.stdout
    from converge.graph import svg
    return svg.from_dot(dot_text)


class DriftStack(lister.Lister):
    """Observe every resource of a stack, its nested stacks' too, and list
    those whose real state differs from what was applied (recorded: see
    `stack resource list --drift`)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        return parser

    def take_action(self, args):
        cols = ('resource_name', 'stack_name', 'physical_resource_id',
                'kind', 'drift')
        rows = self.app.service().stack_drift(self.app.context(), args.stack)
        return cols, [tuple(r[c] for c in cols) for r in rows]


class AbandonStack(command.Command):
    """Abandon a stack: write its state as JSON (Heat's abandon format) and
    forget it; its resources stay in the cloud, untouched."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--output-file', metavar='<output-file>',
                            help='Write the JSON to this file instead of '
                                 'standard output')
        parser.add_argument('stack', metavar='<stack>',
                            help='Name or ID of the stack to abandon')
        return parser

    def take_action(self, args):
        def save(doc):
            # written out (and flushed) before the stack's rows go: should
            # this fail, the stack stays as it was
            text = json.dumps(doc, indent=2, sort_keys=True) + '\n'
            if args.output_file:
                journal.write_atomically(
                    os.path.abspath(args.output_file), text.encode())
            else:
                self.app.stdout.write(text)
                self.app.stdout.flush()

        self.app.service().stack_abandon(self.app.context(), args.stack,
                                         save=save)
        if args.output_file:
            sys.stderr.write('Stack %s abandoned; its state is in %s\n'
                             % (args.stack, args.output_file))


class AdoptStack(_StackShowOne):
    """Adopt a stack: take back the resources an abandon file records,
    creating none of them and re-running no deployment."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--adopt-file', metavar='<adopt-file>',
                            required=True,
                            help='The JSON `stack abandon` wrote')
        parser.add_argument('--parameter', metavar='<key=value>',
                            action='append', default=[],
                            help='Parameter value over the file\'s; '
                                 'repeatable, or "k1=v1;k2=v2"')
        common.add_timeout(parser, 'Stack adopt timeout')
        common.add_wait(parser)
        parser.add_argument('name', metavar='<stack-name>',
                            help='Name of the stack to adopt')
        return parser

    def take_action(self, args):
        data = _read_adopt_file(args.adopt_file)
        params = common.parameters(args)
        stack = common.run(
            self.app, args, args.name, lambda svc, ctx: svc.stack_adopt(
                ctx, args.name, data, params, timeout=args.timeout,
                source=args.adopt_file))
        return self._summary(stack.id)


def _read_adopt_file(path):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise exception.InvalidInput('Cannot read adopt file %s: %s'
                                     % (path, exc.strerror or exc))
    from converge.template import bounds
    try:
        return bounds.loads_json(text)
    except bounds.NotPlainJSON as exc:
        raise exception.InvalidTemplate(str(exc), filename=path)
    except ValueError as exc:
        raise exception.InvalidTemplate(
            'not JSON (%s); an adopt file is what `stack abandon` writes'
            % getattr(exc, 'msg', exc), filename=path,
            line=getattr(exc, 'lineno', None))
