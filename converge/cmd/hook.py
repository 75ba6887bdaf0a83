"""`converge stack hook poll|clear`: the hooks (breakpoints) a stack's
resources are paused at, and clearing them (engine/hooks.py), as
`openstack stack hook poll|clear` do."""

import fnmatch

from cliff import command
from cliff import lister

from converge import breakpoints
from converge import exception
from converge.cmd import common


def _hook_of_status(svc, ctx, stack):
    """The hook of the stack's action (OSC's reading of its status)."""
    st = svc.stack_show(ctx, stack, with_outputs=False)
    status = st['stack_status']
    if 'IN_PROGRESS' not in status:
        raise exception.InvalidInput('Stack status %s not IN_PROGRESS'
                                     % status)
    hook = breakpoints.HOOK_OF_ACTION.get(status.split('_', 1)[0])
    if hook is None:
        raise exception.InvalidInput(
            'Unexpected stack status %s, only create, update and delete '
            'supported' % status)
    return hook


class PollHook(lister.Lister):
    """List the resources paused at a hook (of the stack's action)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('--nested-depth', type=int, default=0,
                            metavar='<nested-depth>',
                            help='Depth of nested stacks from which to '
                                 'display hooks')
        return parser

    def take_action(self, args):
        svc, ctx = self.app.service(), self.app.context()
        found = svc.hook_poll(ctx, args.stack,
                              nested_depth=args.nested_depth)
        # OSC's columns (the name first only when there is a row)
        cols = ['ID', 'Resource Status Reason', 'Resource Status',
                'Event Time']
        keys = ['uuid', 'resource_status_reason', 'resource_status',
                'event_time']
        if args.nested_depth:
            cols.append('Stack Name')
            keys.append('stack_name')
        if found:
            cols.insert(0, 'Resource Name')
            keys.insert(0, 'resource_name')
        return cols, [[ev[k] for k in keys] for ev in found]


class ClearHook(command.Command):
    """Clear the hooks of resources (names, globs, nested paths such as
    nested_stack/an*/*_resource); embedded, the stack then goes on here
    until it ends or waits for hooks alone again."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        for hook in ('pre-create', 'pre-update', 'pre-delete',
                     'post-create', 'post-update'):
            parser.add_argument('--' + hook, dest='hook_type',
                                action='store_const', const=hook,
                                help='Clear the %s hooks' % hook)
        parser.add_argument('hook', metavar='<resource>', nargs='+',
                            help='Resource names with hooks to clear; in '
                                 'nested stacks as nested/another/res; '
                                 'wildcards match several')
        common.add_wait(parser)
        return parser

    def take_action(self, args):
        svc, ctx = self.app.service(), self.app.context()
        hook = args.hook_type or _hook_of_status(svc, ctx, args.stack)
        started = {}

        def clear(stack, path, pattern):
            for res in svc.resource_list(ctx, stack):
                name = res['resource_name']
                if not fnmatch.fnmatchcase(name, path[0] if path
                                           else pattern):
                    continue
                if path:
                    if res['physical_resource_id']:
                        clear(res['physical_resource_id'], path[1:],
                              pattern)
                    continue
                try:
                    result = svc.resource_signal(ctx, stack, name,
                                                 {'unset_hook': hook})
                except exception.NotFound as exc:
                    self.app.stderr.write('%s\n' % exc)
                    continue
                started.update(id=result['stack_id'],
                               traversal_id=result['traversal_id'])

        def operation(svc_, ctx_):
            for text in args.hook:
                parts = [p for p in text.split('/') if p]
                if parts:
                    clear(args.stack, parts[:-1], parts[-1])
            if not started:
                raise _NoneCleared()
            return started

        try:
            common.run(self.app, args, args.stack, operation,
                       until_paused=True)
        except _NoneCleared:
            self.app.resume_hint = None
            raise exception.InvalidInput(
                'No %s hook of stack %s matched %s' % (
                    hook, args.stack, ' '.join(args.hook)))


class _NoneCleared(Exception):
    pass
