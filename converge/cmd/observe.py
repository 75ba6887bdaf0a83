"""`converge observe`: the continuous convergence passes of stacks with a
converge policy (observers/loop.py), in this process."""

import threading

from cliff import lister

from converge import exception


class Observe(lister.Lister):
    """Run the continuous convergence passes that are due (stacks with
    --converge-policy observe or repair) and list what each did; with
    --forever, keep running them (and the repairs they start) until
    Ctrl-C, as a foreground daemon of an embedded home."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--forever', action='store_true',
                            help='Keep observing (and repairing) until '
                                 'interrupted')
        parser.add_argument('--all', action='store_true',
                            help='Every stack with a policy now, not only '
                                 'those whose pass is due')
        return parser

    def take_action(self, args):
        if self.app.remote():
            raise exception.InvalidInput(
                'converge observe runs the passes in this process: on a '
                'distributed deployment every converge-worker runs them')
        from converge.observers import loop
        from converge.workers import pool
        engine = self.app.engine()
        # the engine of this process runs the repairs' units, and serves
        # the agents of the servers they recreate
        pool.start(engine, observe=args.forever)
        from converge import metrics
        metrics.serve('cli')
        from converge import tracing
        tracing.setup('cli')
        self.app.serve_api()
        if args.forever:
            self.app.resume_hint = None
            threading.Event().wait()   # until Ctrl-C (exits the process)
        done = loop.run_due(engine, everything=args.all)
        loop.settle(engine, done)
        cols = ('stack_id', 'stack_name', 'outcome')
        return cols, [(sid, name, outcome)
                      for sid, (name, outcome) in sorted(done.items())]
