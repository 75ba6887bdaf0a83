"""`converge deployment action run|list|show`: day-2 actions on a
deployment (backup, patch, add_user, or an explicit re-run), without a
stack update."""

import sys
import time

from cliff import lister
from cliff import show

from converge import conf as conf_mod
from converge import exception

COLUMNS = ('id', 'resource_name', 'action', 'status', 'status_reason',
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


class RunAction(show.ShowOne):
    """Run a deployment's action on its server now (the stack's template
    and state are untouched)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('resource', metavar='<resource>',
                            help='The deployment resource')
        parser.add_argument('action', metavar='<action>',
                            help='A day-2 action its component declares '
                                 '(e.g. backup), or a lifecycle action to '
                                 'run again')
        parser.add_argument('--input', metavar='<key=value>',
                            action='append', default=[],
                            help='An input value for this run (repeat)')
        parser.add_argument('--wait', action='store_true',
                            help='Wait until the action ends (embedded: '
                                 'always)')
        parser.add_argument('--timeout', metavar='<minutes>', type=float,
                            help='Stop waiting after this long (the action '
                                 'goes on)')
        return parser

    def take_action(self, args):
        svc, ctx = self.app.service(), self.app.context()
        embedded = conf_mod.is_embedded()
        if embedded:
            # the server's agent signals the result to this process
            self.app.serve_api()
        action = svc.deployment_action_run(ctx, args.stack, args.resource,
                                           args.action, _inputs(args.input))
        if embedded or args.wait:
            action = self._wait(svc, ctx, action, args.timeout)
        if action['status'] == 'FAILED':
            self.app.exit_code = 1
        return _row(action)

    def _wait(self, svc, ctx, action, timeout):
        deadline = time.monotonic() + timeout * 60 if timeout else None
        sys.stderr.write('%s on %s: waiting for its server (%s)\n' % (
            action['action'], action['resource_name'], action['server_id']))
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
        cols = ('id', 'resource_name', 'action', 'status', 'status_reason',
                'updated_time')
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
