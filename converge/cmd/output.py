"""`converge stack output list|show`."""

from cliff import lister
from cliff import show

from converge import exception
from converge.db import api
from converge.engine import views


def _outputs(app, ident):
    engine = app.engine()
    with engine.db.read() as s:
        st = api.stack_get(s, ident)
    return views.outputs(engine, st)


class ListOutput(lister.Lister):
    """List a stack's outputs."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        return parser

    def take_action(self, args):
        outs = _outputs(self.app, args.stack)
        return ('output_key', 'description'), [
            (k, v.get('description', '')) for k, v in sorted(outs.items())]


class ShowOutput(show.ShowOne):
    """Show an output's value (or all with --all)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('output', metavar='<output>', nargs='?')
        parser.add_argument('--all', action='store_true',
                            help='Show all outputs')
        return parser

    def take_action(self, args):
        outs = _outputs(self.app, args.stack)
        if args.all:
            keys = sorted(outs)
            return keys, [outs[k].get('value') for k in keys]
        if not args.output:
            raise exception.ConvergeError('Either <output> or --all')
        if args.output not in outs:
            raise exception.NotFound('Output %s not found' % args.output)
        out = outs[args.output]
        data = {'output_key': args.output,
                'output_value': out.get('value'),
                'description': out.get('description', '')}
        if 'error' in out:
            data['output_error'] = out['error']
        cols = sorted(data)
        return cols, [data[c] for c in cols]
