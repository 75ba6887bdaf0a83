"""`converge stack output list|show`."""

from cliff import lister
from cliff import show

from converge import exception


class ListOutput(lister.Lister):
    """List a stack's outputs."""

    #: reads only: a home's read server may answer (cli.py)
    read_only = True

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        return parser

    def take_action(self, args):
        outs = self.app.service().output_list(self.app.context(), args.stack)
        return ('output_key', 'description'), [
            (k, v.get('description', '')) for k, v in sorted(outs.items())]


class ShowOutput(show.ShowOne):
    """Show an output's value (or all with --all)."""

    #: reads only: a home's read server may answer (cli.py)
    read_only = True

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('output', metavar='<output>', nargs='?')
        parser.add_argument('--all', action='store_true',
                            help='Show all outputs')
        return parser

    def take_action(self, args):
        svc, ctx = self.app.service(), self.app.context()
        if args.all:
            outs = svc.output_list(ctx, args.stack)
            keys = sorted(outs)
            return keys, [outs[k].get('value') for k in keys]
        if not args.output:
            raise exception.InvalidInput('Either <output> or --all')
        data = svc.output_show(ctx, args.stack, args.output)
        cols = sorted(data)
        return cols, [data[c] for c in cols]
