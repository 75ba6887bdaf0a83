"""`converge software config create|list|show|delete`, as `openstack
software config …`: configs of the project outside any stack
(converge/engine/standalone.py)."""

import sys

import yaml
from cliff import command
from cliff import lister
from cliff import show

from converge import exception
from converge.cmd import columns

SHOW_COLUMNS = ('id', 'name', 'group', 'config', 'inputs', 'outputs',
                'options', 'creation_time')


def _read(path, what):
    try:
        with open(path) as f:
            return f.read()
    except OSError as exc:
        raise exception.InvalidInput('Cannot read %s %s: %s' % (
            what, path, exc.strerror or exc))


def _definition(path):
    """inputs, outputs and options from a --definition-file (YAML)."""
    if not path:
        return {}
    try:
        defn = yaml.safe_load(_read(path, 'definition file')) or {}
    except yaml.YAMLError as exc:
        raise exception.InvalidInput('%s is not YAML: %s' % (path, exc))
    if not isinstance(defn, dict):
        raise exception.InvalidInput('%s: a definition file is a map of '
                                     'inputs, outputs and options' % path)
    return defn


class CreateConfig(show.ShowOne):
    """Create a software config (JSON by default, as OSC)."""

    @property
    def formatter_default(self):
        return 'json'

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', metavar='<config-name>',
                            help='Name of the software config to create')
        parser.add_argument('--config-file', metavar='<config-file>',
                            help='Path to the software config script/data')
        parser.add_argument('--definition-file',
                            metavar='<destination-file>',
                            help='Path to JSON/YAML containing a map of '
                                 'inputs, outputs and options')
        parser.add_argument('--group', metavar='<group>',
                            default='Heat::Ungrouped',
                            help='Group name of the tool expected by the '
                                 'software config')
        return parser

    def take_action(self, args):
        defn = _definition(args.definition_file)
        data = {'name': args.name, 'group': args.group,
                'config': _read(args.config_file, 'config file')
                if args.config_file else '',
                'inputs': defn.get('inputs', []),
                'outputs': defn.get('outputs', []),
                'options': defn.get('options', {})}
        # the engine checks it against OS::Heat::SoftwareConfig's schema,
        # as OSC has Heat validate a template of one
        made = self.app.service().software_config_create(
            self.app.context(), data)
        keys = list(made)
        return keys, columns.values(args.formatter, made, keys)


class ListConfig(lister.Lister):
    """List software configs."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--limit', metavar='<limit>', type=int,
                            help='Limit the number of configs returned')
        parser.add_argument('--marker', metavar='<id>',
                            help='Return configs that appear after the '
                                 'given config ID')
        return parser

    def take_action(self, args):
        rows = self.app.service().software_config_list(self.app.context())
        if args.marker:
            ids = [r['id'] for r in rows]
            if args.marker not in ids:
                raise exception.InvalidInput(
                    'Marker %s is not among the results' % args.marker)
            rows = rows[ids.index(args.marker) + 1:]
        if args.limit:
            rows = rows[:args.limit]
        cols = ('id', 'name', 'group', 'creation_time')
        return cols, [tuple(r.get(c) for c in cols) for r in rows]


class ShowConfig(show.ShowOne):
    """Show software config details (YAML by default, as OSC)."""

    @property
    def formatter_default(self):
        return 'yaml'

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('config', metavar='<config>',
                            help='ID of the config')
        parser.add_argument('--config-only', action='store_true',
                            help='Only display the value of the <config> '
                                 'property.')
        return parser

    def take_action(self, args):
        sc = self.app.service().software_config_show(self.app.context(),
                                                     args.config)
        if args.config_only:
            self.app.stdout.write('%s\n' % sc.get('config'))
            return (), ()
        return SHOW_COLUMNS, columns.values(args.formatter, sc, SHOW_COLUMNS)

    def produce_output(self, parsed_args, column_names, data):
        if parsed_args.config_only:
            return 0
        return super().produce_output(parsed_args, column_names, data)


def delete_each(ids, delete, kind):
    """Delete each id; say which were not found; raise once for all the
    failures (exit 3 when every one was not found, as for stacks)."""
    failures = []
    for one in ids:
        try:
            delete(one)
        except exception.ConvergeError as exc:
            sys.stderr.write('%s\n' % exc)
            failures.append(exc)
    if failures:
        err = exception.ConvergeError(
            'Unable to delete %d of the %d %s.'
            % (len(failures), len(ids), kind))
        codes = {exc.exit_code for exc in failures}
        err.exit_code = codes.pop() if len(codes) == 1 else 1
        raise err


class DeleteConfig(command.Command):
    """Delete software configs."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('config', metavar='<config>', nargs='+',
                            help='IDs of the software configs to delete')
        return parser

    def take_action(self, args):
        svc, ctx = self.app.service(), self.app.context()
        delete_each(args.config,
                    lambda c: svc.software_config_delete(ctx, c),
                    'software configs')
