"""`converge software deployment create|list|show|delete|output show|
metadata show`, as `openstack software deployment …`: a config deployed
to a server of the project that has an agent, outside any stack
(converge/engine/standalone.py). The agent runs it once and signals its
outputs to converge-api (standing in for OSC's Swift TempURL)."""

import json
import time

from cliff import command
from cliff import lister
from cliff import show

from converge import exception
from converge.cmd import columns
from converge.cmd import software_config

SHOW_COLUMNS = ('id', 'server_id', 'config_id', 'creation_time',
                'updated_time', 'status', 'status_reason', 'input_values',
                'action')
#: seconds between two looks at a deployment being run
POLL = 0.2


def _values(pairs):
    values = {}
    for pair in pairs or ():
        key, sep, value = pair.partition('=')
        if not sep or not key:
            raise exception.InvalidInput(
                'Malformed input value (%s): use the format key=value'
                % pair)
        values[key] = value
    return values


class CreateDeployment(show.ShowOne):
    """Create a software deployment. Embedded, this process serves the
    server's agent, so it waits until the deployment ran; remotely,
    --wait does."""

    @property
    def formatter_default(self):
        return 'yaml'

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', metavar='<deployment-name>',
                            help='Name of the derived config of this '
                                 'deployment (orders the configs deployed '
                                 'to the server)')
        parser.add_argument('--input-value', metavar='<key=value>',
                            action='append',
                            help='Input value to set on the deployment '
                                 '(repeatable)')
        parser.add_argument('--action', metavar='<action>',
                            default='UPDATE',
                            help='CREATE, UPDATE, DELETE, SUSPEND, RESUME '
                                 '(default: UPDATE)')
        parser.add_argument('--config', metavar='<config>',
                            help='ID of the configuration to deploy '
                                 '(default: an empty one)')
        parser.add_argument('--signal-transport',
                            metavar='<signal-transport>',
                            default='TEMP_URL_SIGNAL',
                            help='How the server signals its outputs: '
                                 'NO_SIGNAL (COMPLETE at once) or any '
                                 'other (signalled to converge-api)')
        parser.add_argument('--container', metavar='<container>',
                            help='Accepted for OSC\'s sake: converge keeps '
                                 'no Swift container')
        parser.add_argument('--timeout', metavar='<timeout>', type=int,
                            default=60,
                            help='Minutes to wait for the deployment '
                                 '(default: 60)')
        parser.add_argument('--server', metavar='<server>', required=True,
                            help='ID of the server being deployed to')
        parser.add_argument('--wait', action='store_true',
                            help='Wait until the deployment ran '
                                 '(embedded: always)')
        return parser

    def take_action(self, args):
        svc, ctx = self.app.service(), self.app.context()
        embedded = self.app.runs_engine()
        if embedded:
            # the server's agent pulls the deployment from this process
            # and signals its outcome to it
            self.app.serve_api()
        config = args.config
        if not config:
            # OSC derives a config of nothing then; converge derives the
            # deployment's config itself, so it needs one to start from
            config = svc.software_config_create(ctx, {
                'name': args.name, 'group': 'Heat::Ungrouped',
                'config': ''})['id']
        sd = svc.software_deployment_create(ctx, {
            'name': args.name, 'config_id': config,
            'server_id': args.server, 'action': args.action,
            'status': 'IN_PROGRESS',
            'input_values': _values(args.input_value),
            'signal_transport': args.signal_transport})
        if embedded or args.wait:
            sd = self._wait(svc, ctx, sd, args.timeout)
        if sd['status'] == 'FAILED':
            self.app.exit_code = 1
        keys = sorted(sd)
        return keys, columns.values(args.formatter, sd, keys)

    def _wait(self, svc, ctx, sd, timeout):
        deadline = time.monotonic() + timeout * 60
        while sd['status'] == 'IN_PROGRESS':
            if time.monotonic() > deadline:
                raise exception.ConvergeError(
                    'Deployment %s still IN_PROGRESS after %d minutes: '
                    '"converge software deployment show %s" shows it '
                    'later' % (sd['id'], timeout, sd['id']))
            time.sleep(POLL)  # a look at the record, not synchronisation
            sd = svc.software_deployment_show(ctx, sd['id'])
        return sd


class ListDeployment(lister.Lister):
    """List software deployments."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--server', metavar='<server>',
                            help='ID of the server to fetch deployments for')
        parser.add_argument('--long', action='store_true',
                            help='List more fields in output')
        return parser

    def take_action(self, args):
        cols = ['id', 'config_id', 'server_id', 'action', 'status']
        if args.long:
            cols += ['creation_time', 'status_reason']
        rows = self.app.service().software_deployment_list(
            self.app.context(), args.server)
        return cols, [tuple(r.get(c) for c in cols) for r in rows]


class ShowDeployment(show.ShowOne):
    """Show a software deployment."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('deployment', metavar='<deployment>',
                            help='ID of the deployment')
        parser.add_argument('--long', action='store_true',
                            help='Show more fields in output')
        return parser

    def take_action(self, args):
        sd = self.app.service().software_deployment_show(self.app.context(),
                                                         args.deployment)
        cols = list(SHOW_COLUMNS)
        if args.long:
            cols.append('output_values')
        return cols, columns.values(args.formatter, sd, cols)


class DeleteDeployment(command.Command):
    """Delete software deployment(s). The config each started from
    stays: converge keeps the derived config inside the deployment."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('deployment', metavar='<deployment>',
                            nargs='+',
                            help='ID of the deployment(s) to delete.')
        return parser

    def take_action(self, args):
        svc, ctx = self.app.service(), self.app.context()
        software_config.delete_each(
            args.deployment,
            lambda d: svc.software_deployment_delete(ctx, d),
            'deployments')


class ShowOutputDeployment(command.Command):
    """Show a deployment's output (or all with --all)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('deployment', metavar='<deployment>',
                            help='ID of deployment to show the output for')
        parser.add_argument('output', metavar='<output-name>', nargs='?',
                            help='Name of an output to display')
        parser.add_argument('--all', action='store_true',
                            help='Display all deployment outputs')
        parser.add_argument('--long', action='store_true',
                            help='Show full deployment logs in output')
        return parser

    def take_action(self, args):
        if args.all == (args.output is not None):
            raise exception.InvalidInput(
                'Error: either <output-name> or --all argument is needed.')
        sd = self.app.service().software_deployment_show(self.app.context(),
                                                         args.deployment)
        outputs = sd.get('output_values') or {}
        out = self.app.stdout
        if args.all:
            if outputs:
                out.write('output_values:\n\n')
                for key in outputs:
                    columns.deployment_output(out, outputs, key,
                                              long=args.long)
            return
        if args.output not in outputs:
            raise exception.NotFound(
                'Output %s does not exist in deployment %s'
                % (args.output, args.deployment))
        out.write('output_value:\n\n')
        columns.deployment_output(out, outputs, args.output, long=args.long)


class ShowMetadataDeployment(command.Command):
    """Show the deployments' metadata of a server (what its agent reads)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', metavar='<server>',
                            help='ID of the server to fetch deployments for')
        return parser

    def take_action(self, args):
        md = self.app.service().software_deployment_metadata(
            self.app.context(), args.server)
        self.app.stdout.write(json.dumps(md, indent=2) + '\n')
