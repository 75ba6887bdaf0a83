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
               help='Largest template, environment or get_file file '
                    'accepted, in bytes.'),
    cfg.IntOpt('max_template_nodes', default=2000000, min=1,
               help='Most YAML nodes (scalars, maps, lists; a map\'s keys '
                    'count) a template or environment may expand to, '
                    'counting every alias as a copy of what it refers to. '
                    'A 22,000-resource template has about 350,000. The '
                    'characters of its values, expanded likewise, may not '
                    'exceed max_template_size.'),
    cfg.IntOpt('max_template_depth', default=64, min=1,
               help='How deeply maps and lists may nest in a template or '
                    'environment, aliases expanded.'),
    cfg.IntOpt('max_function_result_size', default=4 * 1024 * 1024, min=1,
               help='Largest result, in bytes (as JSON), of one call of an '
                    'intrinsic function that can build more than it is '
                    'given: str_replace, list_join, repeat, list_concat.'),
    cfg.FloatOpt('yaql_time_limit', default=2.0, min=0.01,
                 help='Seconds one evaluation of a yaql expression may run, '
                      'regex matching included.'),
    cfg.IntOpt('yaql_limit_iterators', default=200, min=1,
               help='Most items a collection built by a yaql expression '
                    'may have (yaql\'s limitIterators).'),
    cfg.IntOpt('yaql_memory_quota', default=10000, min=1,
               help='Most bytes one value built by a yaql expression may '
                    'take (yaql\'s memoryQuota).'),
    cfg.IntOpt('max_resources_per_stack', default=30000, min=1,
               help='Most resources one stack may hold.'),
    cfg.IntOpt('max_events_per_stack', default=0, min=0,
               help='Events kept per stack; 0 keeps all.'),
    cfg.IntOpt('worker_threads', default=8, min=1,
               help='check_resource units of work one engine process runs '
                    'at once (the bounded pool of the graph walk).'),
    cfg.IntOpt('engine_threads', default=0, min=0,
               help='Of the worker threads, how many may run engine code '
                    '(templates, SQL) at once; the others are waiting on '
                    'cloud actions. 0: 1 on SQLite, whose writes queue for '
                    'one writer anyway (more threads only trade the GIL '
                    'and that writer back and forth), and worker_threads '
                    'on a server database, whose round trips are waits '
                    'worth overlapping.'),
    cfg.IntOpt('definition_cache_resources', default=50000, min=0,
               help='Parsed template versions each engine process keeps, '
                    'counted in resources (the most recently used kept '
                    'first; the one in use is kept whatever its size). '
                    'The default holds the old and the new version of a '
                    '22,000-resource stack during an update.'),
    cfg.FloatOpt('lock_wait', default=600.0, min=0,
                 help='Seconds a unit of work waits for a resource lock '
                      'held by another worker before giving up.'),
    cfg.StrOpt('worker_topic', default='converge-worker',
               help='Message bus topic the workers consume check_resource '
                    'work from; deployments sharing a broker need their '
                    'own (RabbitMQ names the queue after it).'),
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
               help='tooz coordination URL for locks and membership, e.g. '
                    'redis://127.0.0.1:6379?timeout=10 (timeout: seconds '
                    'until a dead worker\'s locks expire and it leaves the '
                    'group). Default: file://$home/locks.'),
    cfg.StrOpt('group', default='converge-workers',
               help='tooz group every worker joins; its members are the '
                    'live workers.'),
]

WORKER_OPTS = [
    cfg.IntOpt('workers', default=1, min=1,
               help='converge-worker processes per host.'),
    cfg.FloatOpt('sweep_interval', default=5.0, min=0.5,
                 help='Seconds between sweeps for work held by dead '
                      'workers or lost in transit.'),
    cfg.FloatOpt('stall_timeout', default=60.0, min=1.0,
                 help='A ready traversal node that nobody has started for '
                      'this long (a lost message) is sent again.'),
    cfg.IntOpt('max_inflight_per_stack', default=0, min=0,
               help='Most resource actions of one stack a worker process '
                    'runs at once; 0: no limit beyond worker_threads.'),
    cfg.IntOpt('retry_limit', default=5, min=0,
               help='Times a unit of work that hit an unexpected error '
                    '(database or broker gone) is sent again, with '
                    'backoff, before the sweeper is left to find it.'),
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
        ('worker', WORKER_OPTS),
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
    _cfg.set_defaults(transport._transport_opts, transport_url='inproc://')
