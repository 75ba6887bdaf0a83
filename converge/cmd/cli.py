"""`converge`: the command line, mirroring `openstack stack ...`.

On the embedded default (no transport_url configured) the CLI process is
the engine: a command that starts a traversal runs it to the end here.
With a distributed configuration it stores desired state, casts the work
to the workers, and (with --wait) follows progress in the database.
"""

import logging
import sys

import converge  # noqa: F401  (selects oslo.service's threading backend)

from cliff import app
from cliff import commandmanager

from converge import conf as conf_mod
from converge import exception


class ConvergeApp(app.App):
    def __init__(self):
        super().__init__(
            description='converge: converge Heat templates, embedded or '
                        'distributed',
            version='0.1.0',
            command_manager=commandmanager.CommandManager('converge.cli'),
            deferred_help=True)
        self._engine = None

    def build_option_parser(self, description, version, argparse_kwargs=None):
        parser = super().build_option_parser(description, version,
                                             argparse_kwargs)
        parser.add_argument(
            '--home', metavar='DIR',
            help='State directory of the embedded deployment (default: '
                 '$CONVERGE_HOME, else ~/.converge)')
        parser.add_argument(
            '--config-file', metavar='PATH', action='append', default=[],
            dest='config_files',
            help='oslo.config file(s); a distributed deployment sets '
                 '[DEFAULT] transport_url, [database] connection, '
                 '[coordination] backend_url, [sim] connection')
        return parser

    def configure_logging(self):
        """One handler on stderr; warnings by default, -v/--debug for more."""
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        level = {0: logging.ERROR, 1: logging.WARNING,
                 2: logging.INFO}.get(self.options.verbose_level,
                                      logging.DEBUG)
        if self.options.debug:
            level = logging.DEBUG
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(
            '%(message)s' if level >= logging.WARNING else
            '%(asctime)s %(levelname)s %(name)s %(message)s'))
        root.addHandler(handler)
        root.setLevel(level)

    def initialize_app(self, argv):
        conf_mod.setup([], home=self.options.home,
                       default_config_files=self.options.config_files,
                       log=False)

    def engine(self):
        if self._engine is None:
            from converge.engine import context
            self._engine = context.Engine()
        return self._engine

    def sim(self):
        from converge.drivers import sim
        return sim.SimCompute(conf_mod.sim_url())

    def clean_up(self, cmd, result, err):
        if self._engine is not None:
            self._engine.close()
        if err and isinstance(err, exception.ConvergeError):
            self.exit_code = getattr(err, 'exit_code', 1)


def main(argv=None):
    application = ConvergeApp()
    rc = application.run(sys.argv[1:] if argv is None else argv)
    return getattr(application, 'exit_code', None) or rc


if __name__ == '__main__':
    sys.exit(main())
