"""`converge deployment action run|list|show`: day-2 actions on a
deployment (backup, patch, add_user, or an explicit re-run), without a
stack update."""

import sys
import time

from cliff import lister
from cliff import show

from converge import exception

COLUMNS = ('id', 'resource_name', 'member', 'action', 'status',
           'status_reason',
           'input_values', 'output_values', 'server_id', 'deployment_id',
           'creation_time', 'updated_time')
#: seconds between two looks at an action being run
POLL = 0.2


def _row(action):
    return COLUMNS, [action.get(c) for c in COLUMNS]


def _inputs(pairs):
    values = {}
    for pair in pairs or []:
        key, sep, value = pair.partition('=')
        if not sep or not key:
            raise exception.InvalidInput(
                '--input takes KEY=VALUE, not %r' % pair)
        values[key] = value
    return values


class RunAction(lister.Lister):
    """Run a deployment's action on its server now (on every member of a
    deployment group); the stack's template and state are untouched."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('resource', metavar='<resource>',
                            help='The deployment (or deployment group)')
        parser.add_argument('action', metavar='<action>',
                            help='A day-2 action its component declares '
                                 '(e.g. backup), or a lifecycle action to '
                                 'run again')
        parser.add_argument('--input', metavar='<key=value>',
                            action='append', default=[],
                            help='An input value for this run (repeat)')
        parser.add_argument('--member', metavar='<name>', action='append',
                            help='A group member to run it on (repeat; '
                                 'default: every member)')
        parser.add_argument('--batch-size', metavar='<n>', type=int,
                            help='A group: run on at most this many '
                                 'members at once, a batch after the '
                                 'other (implies --wait)')
        parser.add_argument('--wait', action='store_true',
                            help='Wait until the action ends (embedded: '
                                 'always)')
        parser.add_argument('--timeout', metavar='<minutes>', type=float,
                            help='Stop waiting after this long (the action '
                                 'goes on)')
        return parser

    def take_action(self, args):
        svc, ctx = self.app.service(), self.app.context()
        embedded = self.app.runs_engine()
        if embedded:
            # the servers' agents signal the results to this process
            self.app.serve_api()
        if args.batch_size is not None and args.batch_size < 1:
            raise exception.InvalidInput('--batch-size must be at least 1')
        inputs = _inputs(args.input)
        deadline = (time.monotonic() + args.timeout * 60 if args.timeout
                    else None)
        if args.batch_size:
            done = self._batches(svc, ctx, args, inputs, args.member,
                                 deadline)
        else:
            done = svc.deployment_action_run(ctx, args.stack, args.resource,
                                             args.action, inputs,
                                             members=args.member)
            if embedded or args.wait:
                done = [self._wait(svc, ctx, a, deadline, args.timeout)
                        for a in done]
        if any(a['status'] == 'FAILED' for a in done):
            self.app.exit_code = 1
        return COLUMNS, [[a.get(c) for c in COLUMNS] for a in done]

    def _batches(self, svc, ctx, args, inputs, members, deadline):
        """Run on `members` (None: all, learnt from the first batch) at
        most batch_size at a time, each batch waited for."""
        done = []
        pending = list(members or svc.deployment_action_members(
            ctx, args.stack, args.resource)) or [None]
        while pending:
            batch, pending = (pending[:args.batch_size],
                              pending[args.batch_size:])
            batch = None if batch == [None] else batch
            started = svc.deployment_action_run(
                ctx, args.stack, args.resource, args.action, inputs,
                members=batch)
            done += [self._wait(svc, ctx, a, deadline, args.timeout)
                     for a in started]
        return done

    def _wait(self, svc, ctx, action, deadline, timeout):
        if action['status'] == 'IN_PROGRESS':
            sys.stderr.write('%s on %s: waiting for its server (%s)\n' % (
                action['action'], action['member'] or
                action['resource_name'], action['server_id']))
        while action['status'] == 'IN_PROGRESS':
            if deadline is not None and time.monotonic() > deadline:
                raise exception.ConvergeError(
                    'Still running after %s minutes: "converge deployment '
                    'action show %s" shows it later'
                    % (timeout, action['id']))
            time.sleep(POLL)  # a look at the record, not synchronisation
            action = svc.deployment_action_show(ctx, action['id'])
        return action


class ListAction(lister.Lister):
    """List the actions run on a stack's deployments."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('resource', metavar='<resource>', nargs='?')
        return parser

    def take_action(self, args):
        actions = self.app.service().deployment_action_list(
            self.app.context(), args.stack, args.resource)
        cols = ('id', 'resource_name', 'member', 'action', 'status',
                'status_reason', 'updated_time')
        return cols, [[a.get(c) for c in cols] for a in actions]


class ShowAction(show.ShowOne):
    """Show one action: its status, outputs, stdout and stderr."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('action_id', metavar='<action id>')
        return parser

    def take_action(self, args):
        return _row(self.app.service().deployment_action_show(
            self.app.context(), args.action_id))
