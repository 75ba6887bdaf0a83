"""`converge`: the command line, mirroring `openstack stack ...`.

On the embedded default (no transport_url configured) the CLI process is
the engine: a command that starts a traversal runs it to the end here.
With a distributed configuration it stores desired state, casts the work
to the workers, and (with --wait) follows progress in the database.
"""

import logging
import os
import signal
import sys

import converge  # noqa: F401  (selects oslo.service's threading backend)

from cliff import app
from cliff import command as cliff_command
from cliff import commandmanager

from converge import conf as conf_mod
from converge import exception


class ConvergeApp(app.App):
    def __init__(self):
        super().__init__(
            description='converge: converge Heat templates, embedded or '
                        'distributed',
            version='0.1.0',
            command_manager=_Commands('converge.cli'),
            deferred_help=True)
        self._engine = None
        self._service = None
        self._local = None
        self._context = None
        self._api = None
        #: the command reads only (its class's `read_only`): a home's
        #: read server may answer it (converge/client/home.py)
        self._read_only = False
        #: the stack a command works on, for the message after Ctrl-C
        self.resume_hint = None

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
        # as python-openstackclient names them
        parser.add_argument(
            '--os-project-id', metavar='<project-id>',
            default=os.environ.get('OS_PROJECT_ID'),
            help='Project whose stacks the command sees and makes (Env: '
                 'OS_PROJECT_ID; default: [DEFAULT] project_id)')
        parser.add_argument(
            '--os-user-id', metavar='<user-id>',
            default=os.environ.get('OS_USER_ID'),
            help='User on whose behalf the command runs (Env: OS_USER_ID)')
        parser.add_argument(
            '--os-cloud', metavar='<cloud-config-name>',
            default=os.environ.get('OS_CLOUD'),
            help='Cloud name in clouds.yaml (OS_CLIENT_CONFIG_FILE, as '
                 'every OpenStack client reads it): stacks this command '
                 'creates live in that OpenStack and the engine acts there '
                 'with its credentials, in its project unless '
                 '--os-project-id says otherwise (Env: OS_CLOUD; default: '
                 'the simulated cloud)')
        # remote mode: a converge-api does the work (docs/cli.md)
        parser.add_argument(
            '--os-url', metavar='<url>',
            default=os.environ.get('CONVERGE_URL'),
            help='converge-api to send the commands to, e.g. '
                 'http://127.0.0.1:8004/v1/PROJECT (Env: CONVERGE_URL); '
                 'without it this process is the engine (embedded) or '
                 'reads the database the configuration names')
        parser.add_argument(
            '--os-token', metavar='<token>',
            default=os.environ.get('CONVERGE_TOKEN'),
            help='Token for --os-url (converge-manage token create; Env: '
                 'CONVERGE_TOKEN)')
        # an application option is its whole name: `--config` is a
        # command's (software deployment create), not --config-file
        parser.allow_abbrev = False
        parser.parse_known_args = _globals_first(parser)
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
        # oslo.messaging's options are registered when first asked for
        # (conf.transport_url(), messaging/rpc.py): a command that sends no
        # message (against a converge-api, or one that only reads the
        # database) does without oslo.messaging
        conf_mod.setup([], home=self.options.home,
                       default_config_files=self.options.config_files,
                       log=False, messaging=False,
                       make_home=not self.remote())
        signal.signal(signal.SIGINT, self._interrupted)

    def _interrupted(self, signum, frame):
        """Ctrl-C stops the command at once, whatever it is doing.

        Nothing is lost by stopping here: every state change is one
        transaction, and the traversal a command started is resumed by
        `stack converge` (embedded) or carried on by the workers. Exiting
        without unwinding also ends this process's worker threads, which
        an exception in the main thread would leave running.
        """
        sys.stderr.write('\n' + self.interrupt_message() + '\n')
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(130)

    def interrupt_message(self):
        ident = self.resume_hint
        if ident is None:
            return 'Interrupted.'
        if self.remote():
            return ('Interrupted. Nothing is lost: if the operation had '
                    'started, converge-api carries on with stack %s; '
                    '"converge stack show %s" shows where it stands.'
                    % (ident, ident))
        if conf_mod.is_embedded():
            return ('Interrupted. Nothing is lost: if the operation had '
                    'started, stack %s stays IN_PROGRESS; run "converge '
                    'stack converge %s" to finish it.' % (ident, ident))
        return ('Interrupted. Nothing is lost: if the operation had started, '
                'the workers carry on with stack %s; "converge stack show '
                '%s" shows where it stands.' % (ident, ident))

    def remote(self):
        """Whether a converge-api does the work (--os-url)."""
        return bool(self.options.os_url)

    def runs_engine(self):
        """Whether this process is the engine: embedded, not remote. It
        then runs the traversals a command starts, and serves its
        servers' agents while it does."""
        return not self.remote() and conf_mod.is_embedded()

    def engine(self):
        if self._engine is None:
            from converge.engine import context
            # when locks or messaging start their pools' threads (a remote
            # or read-only command has none; futurist is not imported)
            self._engine = context.Engine(
                before_threads=_idle_threads_exit_soon)
        return self._engine

    def serve_api(self):
        """Embedded: serve the agents' routes from this process (once)."""
        if self._api is None:
            from converge.api import server
            self._api = server.serve_embedded(self.engine()) or False
        return self._api or None

    def prepare_to_run_command(self, cmd):
        self._read_only = getattr(cmd, 'read_only', False)

    def service(self):
        """The service layer: every stack operation a command may use,
        local (an engine of this process) or a converge-api's; for a
        read-only command of an embedded home, its reads answered by the
        home's read server when one is up."""
        if self._service is None:
            if self.remote():
                from converge.client import http
                from converge.client import service as remote
                root, _ = http.split_url(self.options.os_url)
                self._service = remote.RemoteService(http.Client(
                    root, self.context().project_id,
                    self.options.os_token))
            elif self._read_only and (socket := self._read_server()):
                from converge.client import home
                self._service = home.Reads(socket, self._local_service)
            else:
                self._service = self._local_service()
        return self._service

    def _local_service(self):
        if self._local is None:
            from converge.engine import service
            self._local = service.Service(self.engine())
        return self._local

    def _read_server(self):
        """The socket of this home's read server, or None when reads
        are this process's own: [cli] read_server off, or a database
        that is not the home's SQLite file (distributed: converge-api
        answers at once already)."""
        if not conf_mod.CONF.cli.read_server or \
                not conf_mod.database_url().startswith('sqlite:'):
            return None
        from converge.client import home
        return home.socket_path(conf_mod.home_dir(),
                                self.options.config_files)

    def context(self):
        """The request context: the project from --os-project-id /
        OS_PROJECT_ID, else (remote) the one --os-url names, else
        [DEFAULT] project_id."""
        if self._context is None:
            from converge.engine import request
            cloud = None if self.remote() else self.options.os_cloud
            project = self._project()
            if cloud and not project:
                # the project the cloud's credentials are scoped to
                from converge.drivers import openstack
                project = openstack.project_of(cloud)
            self._context = request.make(
                project_id=project, user_id=self.options.os_user_id,
                cloud=cloud or None)
        return self._context

    def _project(self):
        given = self.options.os_project_id
        if not self.remote():
            return given
        from converge.client import http
        _, named = http.split_url(self.options.os_url)
        if given and named and given != named:
            # acting on another project than the URL says would be a
            # surprise either way: say so rather than pick one
            raise exception.InvalidInput(
                'The project is %s by --os-project-id (or OS_PROJECT_ID) '
                'but %s by --os-url: give one' % (given, named))
        return given or named

    def sim(self):
        from converge.drivers import sim
        return sim.SimCompute(conf_mod.sim_url())

    def clean_up(self, cmd, result, err):
        if self._api:
            self._api.stop()
        if self._engine is not None:
            self._engine.close()
        if getattr(self._service, 'absent', False):
            # the next read of this home finds it up
            from converge.client import home
            home.start(self._service.socket, conf_mod.home_dir(),
                       self.options.config_files,
                       conf_mod.CONF.cli.read_server_idle)
        if err and isinstance(err, exception.ConvergeError):
            self.exit_code = getattr(err, 'exit_code', 1)


class _Commands(commandmanager.CommandManager):
    """cliff's command manager, but a command's module is imported when
    that command runs: cliff lists the commands with stevedore's
    ExtensionManager, which imports every plug-in it lists (all of
    converge/cmd/ and what each imports: the simulator's client, the
    observer, YAML), a tenth of a second of every command's start.
    cliff loads the entry point it finds (find_command), so the names
    with their unloaded entry points are all it needs."""

    def load_commands(self, namespace):
        import stevedore

        class Listed(stevedore.ExtensionManager):
            def __init__(self):  # the list only, nothing loaded
                self.namespace = namespace

        self.group_list.append(namespace)
        for ep in Listed().list_entry_points():
            if self._is_module_ignored(ep.value, self.ignored_modules):
                continue
            name = ep.name.replace('_', ' ') if self.convert_underscores \
                else ep.name
            self.commands[name] = ep


class _Distributions(dict):
    """cliff's table of which distribution installed which package, for
    a command's help epilog ("This command is provided by the X plugin",
    when X is not the application's): cliff builds it from the metadata
    of every installed distribution, about a tenth of a second of every
    command's start (the parser, epilog included, is built for each
    command run). converge's own commands and the application are both
    the converge distribution's, which is all the epilog asks of them.
    Run as `python -m converge.cmd.cli`, the application's module is
    __main__, which no distribution installs (cliff then finds none and
    names converge as a plugin, as it did before). A package of another
    distribution gets the full table."""

    def __init__(self):
        super().__init__()
        self._full = None

    def get(self, package, default=None):
        if package == 'converge':
            return 'converge'
        if package == '__main__':
            return default
        if self._full is None:
            from importlib import metadata
            try:
                self._full = {k: v[0] for k, v in
                              metadata.packages_distributions().items()}
            except FileNotFoundError:  # as cliff does
                self._full = {}
        return self._full.get(package, default)


def _no_distribution_scan():
    if getattr(cliff_command, '_dists_by_mods', False) is None:
        cliff_command._dists_by_mods = _Distributions()


def _idle_threads_exit_soon():
    """futurist's idle pool threads (tooz's executor, oslo.messaging's
    server) look for work once a second, and futurist joins them at exit:
    up to a second lost at the end of every command that ran the engine,
    whatever the background stops in locks.py and rpc.py save. A command
    lives seconds, so here they look every 50 ms instead (a long-running
    converge-worker keeps futurist's default)."""
    try:
        from futurist import _thread
        _thread.ThreadWorker.MAX_IDLE_FOR = 0.05
    except (ImportError, AttributeError):  # pragma: no cover - futurist
        pass


#: application options a command has too (OSC's `software config create
#: --config-file`): after the command's words, they are the command's
COMMAND_TOO = ('--config-file',)


def _globals_first(parser):
    """The application's options are read anywhere, as cliff reads them,
    but for those of COMMAND_TOO after the command's first word: those
    are the command's (its own --config-file, not oslo.config's)."""
    parse = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        i = 0
        while i < len(args) and args[i].startswith('-') and args[i] != '--':
            action = parser._option_string_actions.get(
                args[i].split('=', 1)[0])
            takes_value = action is not None and action.nargs != 0 and \
                '=' not in args[i]
            i += 2 if takes_value else 1
        head, tail, kept = args[:i], [], []
        while i < len(args):
            name = args[i].split('=', 1)[0]
            if name in COMMAND_TOO:
                # with its value, unless given as --opt=value
                step = 1 if '=' in args[i] else 2
                kept += args[i:i + step]
                i += step
            else:
                tail.append(args[i])
                i += 1
        options, rest = parse(head + tail, namespace)
        return options, rest + kept
    return parse_known_args


def main(argv=None):
    _no_distribution_scan()
    application = ConvergeApp()
    rc = application.run(sys.argv[1:] if argv is None else argv)
    return getattr(application, 'exit_code', None) or rc


if __name__ == '__main__':
    sys.exit(main())
