"""`converge stack template show|environment show|file list`: what a
stack was made from, as stored (openstack stack template show ...)."""

from cliff import show


class _Stored(show.ShowOne):
    """One part of the stack's stored bundle, its keys as fields."""

    #: reads only: a home's read server may answer (cli.py)
    read_only = True

    part = None

    @property
    def formatter_default(self):
        # a template reads best as YAML, as openstack prints it
        return 'yaml'

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>',
                            help='Name or ID of the stack')
        return parser

    def take_action(self, args):
        data = self.app.service().stack_template(self.app.context(),
                                                 args.stack)[self.part]
        keys = sorted(data)
        return keys, [data[k] for k in keys]


class ShowTemplate(_Stored):
    """Show the stack's template."""

    part = 'template'


class ShowEnvironment(_Stored):
    """Show the stack's environment (every -e merged)."""

    part = 'environment'


class ListFiles(_Stored):
    """Show the stack's files: every get_file target and provider
    template sent with it, by URL."""

    part = 'files'
