"""`converge template validate` (also `stack template validate`)."""

import json

import yaml
from cliff import command

from converge.cmd import common


class ValidateTemplate(command.Command):
    """Validate a template (and environments); print its parameters."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        common.add_template_args(parser)
        parser.add_argument('-f', '--format', choices=['yaml', 'json'],
                            default='yaml', help='Output format')
        parser.add_argument('--show-nested', action='store_true',
                            help='Resolve parameters from nested templates '
                                 'as well')
        return parser

    def take_action(self, args):
        bundle = common.bundle(args)
        info = self.app.service().template_validate(
            self.app.context(), bundle, common.parameters(args),
            show_nested=args.show_nested)
        if args.format == 'json':
            self.app.stdout.write(json.dumps(info, indent=2, default=str)
                                  + '\n')
        else:
            self.app.stdout.write(yaml.safe_dump(info, default_flow_style=False))
