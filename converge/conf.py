"""Load configuration once per process and derive the backend URLs."""

import os

from oslo_config import cfg

from converge import masking
from converge import opts
from converge import private

CONF = cfg.CONF
opts.register(CONF)

_DONE = {'setup': False, 'messaging': False, 'log': False}


def log_options():
    """Register oslo.log's options (debug, log_file...) on CONF, once:
    setup(log=True) does, before the command line is parsed. oslo.log
    and what it imports are a sixth of a second of a process's start; the
    CLI logs to stderr its own way (converge/cmd/cli.py) and does
    without (issue 41). Returns oslo.log's log module."""
    from oslo_log import log as logging
    if not _DONE['log']:
        logging.register_options(CONF)
        _DONE['log'] = True
    return logging


def messaging_options():
    """Register oslo.messaging's transport options (transport_url,
    control_exchange) on CONF with converge's defaults, once: setup()
    does, before anything builds a transport, and so does the first
    transport_url(). Importing oslo.messaging for them is a fifth of a
    second; a process that never sends a message (the CLI against a
    converge-api) does without. Options registered after the files were
    read take their values from them all the same."""
    if _DONE['messaging']:
        return
    import oslo_messaging
    from oslo_messaging import transport as _om_transport
    CONF.register_opts(_om_transport._transport_opts)
    oslo_messaging.set_transport_defaults('converge')
    opts.set_defaults()
    _DONE['messaging'] = True


def setup(argv=(), home=None, default_config_files=None, log=True,
          messaging=True, make_home=True):
    """Parse config files/args into the global CONF (oslo.messaging needs it).

    :param home: overrides [DEFAULT] home (the CLI's --home)
    :param messaging: register oslo.messaging's options now (False: when
        transport_url() is first asked, if ever)
    :param make_home: make the home folder (False: a process that keeps
        nothing in it, the CLI against a converge-api)
    """
    if messaging:
        messaging_options()
    if _DONE['setup']:
        CONF.reset()
        CONF.clear()
    if log:
        # its command-line options too: before CONF parses the line
        logging = log_options()
    CONF(list(argv), project='converge',
         default_config_files=default_config_files or [])
    if home:
        CONF.set_override('home', home)
    if log:
        logging.set_defaults(
            default_log_levels=logging.get_default_log_levels()
            + ['stevedore=WARN', 'alembic=WARN', 'oslo_messaging=WARN',
               'tooz=WARN'])
        logging.setup(CONF, 'converge')
        masking.mask_logs()
    _DONE['setup'] = True
    if make_home:
        private.folder(home_dir())
    return CONF


def home_dir():
    home = CONF.home or os.environ.get('CONVERGE_HOME') or os.path.join(
        os.path.expanduser('~'), '.converge')
    return os.path.abspath(home)


def database_url():
    return CONF.database.connection or 'sqlite:///' + os.path.join(
        home_dir(), 'converge.db')


def sim_url():
    return CONF.sim.connection or 'sqlite:///' + os.path.join(
        home_dir(), 'sim.db')


def coordination_url():
    return CONF.coordination.backend_url or 'file://' + os.path.join(
        home_dir(), 'locks')


def api_url_file():
    """Where the embedded API's address is kept between commands."""
    return os.path.join(home_dir(), 'api.url')


def api_endpoint():
    """The URL servers' agents reach converge-api at: [api]
    public_endpoint, else the address kept in the home, else the one
    configured to listen on ('' when none is known yet)."""
    if CONF.api.public_endpoint:
        return CONF.api.public_endpoint.rstrip('/')
    try:
        with open(api_url_file()) as f:
            return f.read().strip()
    except OSError:
        pass
    if CONF.api.bind_port:
        return 'http://%s:%d' % (CONF.api.bind_host, CONF.api.bind_port)
    return ''


def transport_url():
    """oslo.messaging's [DEFAULT] transport_url, or the in-process one."""
    messaging_options()
    return CONF.transport_url or 'inproc://'


def is_embedded():
    """In-process messaging (``inproc://``, or oslo's test ``fake://``)."""
    return transport_url().startswith(('inproc:', 'fake:'))
