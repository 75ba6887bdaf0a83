"""Load configuration once per process and derive the backend URLs."""

import os

from oslo_config import cfg
from oslo_log import log as logging

import oslo_messaging
from oslo_messaging import transport as _om_transport

from converge import opts

CONF = cfg.CONF
opts.register(CONF)
logging.register_options(CONF)
# transport_url is oslo.messaging's option; register it so config files
# can set it before any transport is built.
CONF.register_opts(_om_transport._transport_opts)
oslo_messaging.set_transport_defaults('converge')
opts.set_defaults()

_DONE = {'setup': False}


def setup(argv=(), home=None, default_config_files=None, log=True):
    """Parse config files/args into the global CONF (oslo.messaging needs it).

    :param home: overrides [DEFAULT] home (the CLI's --home)
    """
    if _DONE['setup']:
        CONF.reset()
        CONF.clear()
    CONF(list(argv), project='converge',
         default_config_files=default_config_files or [])
    if home:
        CONF.set_override('home', home)
    if log:
        logging.set_defaults(default_log_levels=logging.get_default_log_levels()
                             + ['stevedore=WARN', 'alembic=WARN',
                                'oslo_messaging=WARN', 'tooz=WARN'])
        logging.setup(CONF, 'converge')
    _DONE['setup'] = True
    os.makedirs(home_dir(), exist_ok=True)
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


def transport_url():
    """oslo.messaging's [DEFAULT] transport_url, or the in-process one."""
    return CONF.transport_url or 'inproc://'


def api_endpoint():
    """converge-api's base URL as servers reach it ([api]
    public_endpoint), without a trailing slash; '' when not set."""
    return (CONF.api.public_endpoint or '').rstrip('/')


def is_embedded():
    """In-process messaging (``inproc://``, or oslo's test ``fake://``)."""
    return transport_url().startswith(('inproc:', 'fake:'))
