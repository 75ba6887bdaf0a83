"""Every converge option, in one place (oslo.config).

Backends are chosen by URL: ``[database] connection``, ``[DEFAULT]
transport_url`` (oslo.messaging's own option), ``[coordination]
backend_url`` and ``[sim] connection``. Left unset, each falls back to the
embedded default inside ``home``.
"""

from oslo_config import cfg

DEFAULT_OPTS = [
    cfg.StrOpt('home',
               help='Directory holding the embedded deployment\'s state '
                    '(database, locks, simulated cloud). Defaults to '
                    '$CONVERGE_HOME, else ~/.converge.'),
    cfg.IntOpt('max_template_size', default=16 * 1024 * 1024, min=1,
               help='Largest template file accepted, in bytes.'),
    cfg.IntOpt('max_resources_per_stack', default=30000, min=1,
               help='Most resources one stack may hold.'),
    cfg.IntOpt('max_events_per_stack', default=0, min=0,
               help='Events kept per stack; 0 keeps all.'),
    cfg.IntOpt('worker_threads', default=8, min=1,
               help='check_resource units of work one engine process runs '
                    'at once (the bounded pool of the graph walk).'),
    cfg.FloatOpt('lock_wait', default=600.0, min=0,
                 help='Seconds a unit of work waits for a resource lock '
                      'held by another worker before giving up.'),
    cfg.StrOpt('project_id', default='converge',
               help='Value of the OS::project_id pseudo parameter.'),
]

DATABASE_OPTS = [
    cfg.StrOpt('connection', secret=True,
               help='SQLAlchemy URL of the engine database, e.g. '
                    'postgresql+psycopg2://user:pw@host/converge. '
                    'Default: sqlite in $home/converge.db.'),
]

COORDINATION_OPTS = [
    cfg.StrOpt('backend_url', secret=True,
               help='tooz coordination URL for locks, e.g. '
                    'redis://127.0.0.1:6379?timeout=10. Default: '
                    'file://$home/locks.'),
]

SIM_OPTS = [
    cfg.StrOpt('connection', secret=True,
               help='Database URL of the simulated cloud\'s own store. '
                    'Default: sqlite in $home/sim.db.'),
]


def list_opts():
    return [
        (None, DEFAULT_OPTS),
        ('database', DATABASE_OPTS),
        ('coordination', COORDINATION_OPTS),
        ('sim', SIM_OPTS),
    ]


def register(conf):
    for group, opts in list_opts():
        conf.register_opts(opts, group=group)


def set_defaults():
    """Embedded by default: in-process messaging unless a URL is configured.

    Also run by oslo-config-generator (entry point oslo.config.opts.defaults)
    so the sample shows converge's defaults.
    """
    from oslo_messaging import transport
    from oslo_config import cfg as _cfg
    _cfg.set_defaults(transport._transport_opts, transport_url='fake://')
