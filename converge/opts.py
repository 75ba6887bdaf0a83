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
    cfg.ListOpt('hidden_stack_tags', default=[],
                help='Stacks with any of these tags are left out of stack '
                     'lists unless hidden ones are asked for (Heat\'s '
                     'option: `openstack stack list --hidden`, '
                     'show_hidden=True).'),
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
    cfg.FloatOpt('pattern_time_limit', default=0.5, min=0.01,
                 help='Seconds the matches of a template\'s patterns '
                      '(allowed_pattern) that RE2 cannot run (look-arounds, '
                      'back-references) may take in all, per template: '
                      'those are matched by backtracking, which can take '
                      'exponential time. RE2 matches the others in linear '
                      'time, unlimited.'),
    cfg.IntOpt('max_timeout_mins', default=10080, min=1,
               help='Largest stack timeout (timeout_mins, --timeout) '
                    'accepted, in minutes; the default is a week.'),
    cfg.IntOpt('max_resources_per_stack', default=30000, min=1,
               help='Most resources one stack may hold.'),
    cfg.IntOpt('max_stack_size', default=64 * 1024 * 1024, min=1024,
               help='Most bytes (as JSON) one stack may store: its '
                    'template, files, environment and parameters, and '
                    'its resources\' resolved properties and attributes '
                    'and its outputs. A create or update beyond it is '
                    'refused (400) and nothing stored; a resource whose '
                    'resolved values would take the stack beyond it fails '
                    'without storing them. Nested stacks count on their '
                    'own. The results of the intrinsic functions of one '
                    'resolution (a resource\'s properties, the outputs, '
                    'a template\'s values as it is checked) are held to '
                    'it too. A 1,000-node TripleO overcloud in one stack '
                    '(22,000 resources) stores about 22 MB so.'),
    cfg.IntOpt('max_stacks_per_project', default=512, min=0,
               help='Most live stacks (nested ones not counted) one '
                    'project may have; 0: no limit. Heat\'s '
                    'max_stacks_per_tenant and its default.'),
    cfg.IntOpt('max_nested_stack_depth', default=5, min=0,
               help='How deeply stacks may nest (provider templates, '
                    'OS::Heat::Stack, groups): a stack of depth 0 may own '
                    'nested stacks down to this depth. Heat\'s option and '
                    'default.'),
    cfg.IntOpt('max_resources_in_progress_per_stack', default=0, min=0,
               help='Most resources of one stack being acted on at once '
                    '(created, updated, deleted; a server building '
                    'counts), across every worker of the deployment. '
                    'Others wait for a free slot without holding a '
                    'thread. 0: no limit.'),
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
               help='Default project of a CLI request without '
                    '--os-project-id (or OS_PROJECT_ID): the project '
                    'whose stacks it sees and makes (a stack\'s '
                    'OS::project_id).'),
    # Heat defaults both to False: on a shared cloud an operator does not
    # want tenants to drop resources out of Heat's sight. A converge home
    # belongs to the one who runs the CLI, who asked for the verb; nothing
    # in the cloud is touched by either, and the file is written before
    # the stack goes. Operators of a shared converge-api turn them off.
    cfg.BoolOpt('enable_stack_abandon', default=True,
                help='Allow `stack abandon`: write the stack\'s state as '
                     'JSON (Heat\'s abandon format) and forget the stack '
                     'without touching its resources.'),
    cfg.BoolOpt('enable_stack_adopt', default=True,
                help='Allow `stack adopt`: take over the resources an '
                     'abandon file records, creating none of them.'),
    cfg.ListOpt('listeners', default=[],
                help='Listeners every engine process loads: names of entry '
                     'points of the converge.listeners group, each told of '
                     'every unit of work, message cast and resource lock '
                     '(see converge/listeners.py). converge-bench '
                     'sets "bench" on the workers it starts.'),
    cfg.StrOpt('auth_encryption_key', secret=True,
               help='The key (any text) the values a stack keeps that may '
                    'carry a secret are encrypted with in the database '
                    '(Heat\'s option): its template versions\' '
                    'parameters and environment, its resources\' '
                    'properties, attributes and observed state, its '
                    'outputs, its deployments\' inputs and outputs, its '
                    'snapshots. Every engine and API process of a '
                    'deployment needs the same key, and data written with '
                    'one cannot be read without it. Unset: with the '
                    'embedded database (no [database] connection), a key '
                    'made on first use and kept in $home/'
                    'auth_encryption.key (0600); with a database server, '
                    'nothing is encrypted.'),
    cfg.BoolOpt('encrypt_parameters_and_properties', default=True,
                help='Encrypt what auth_encryption_key says, whenever a '
                     'key is at hand (Heat\'s option; its default is '
                     'off). Off: new rows are written in clear; rows '
                     'already encrypted are still read with the key.'),
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
    cfg.IntOpt('fanout_messages', default=256, min=1,
               help='Nodes made ready together (a stack\'s leaves, '
                    'waits that came due at once) are sent in at most '
                    'this many messages, spread over them in order: each '
                    'message costs the broker and the worker that takes '
                    'it about what a unit of work costs, and up to this '
                    'many worker threads still share the work. Keep it '
                    'at least the worker threads of the deployment.'),
    cfg.IntOpt('fanout_min_nodes', default=8, min=1,
               help='Nodes sent together go at least this many to a '
                    'message (fewer only when fewer are sent): the units '
                    'of one message record their outcomes in one '
                    'transaction, and a message costs about what a unit '
                    'does; one thread works through a message\'s units '
                    'in turn, so against a slow cloud API a lower value '
                    'spreads its calls over more threads. Embedded, a '
                    'message goes to each idle worker thread first.'),
    cfg.FloatOpt('timer_interval', default=0.2, min=0.05,
                 help='Seconds between looks for waiting resources whose '
                      'time has come (a server to poll again, a retry '
                      'after backoff). Every live engine looks; one sends '
                      'each. Also how late a wait may end.'),
    cfg.FloatOpt('slot_lease', default=3600.0, min=1.0,
                 help='Seconds after which a slot of '
                      'max_resources_in_progress_per_stack whose holder '
                      'never recorded its result is free again.'),
    cfg.IntOpt('transient_retries', default=8, min=0,
               help='Times a resource action is tried again after a '
                    'transient cloud error (5xx, 429, a dropped '
                    'connection), with backoff, before it fails.'),
    cfg.FloatOpt('transient_backoff_max', default=60.0, min=0.1,
                 help='Longest backoff, in seconds, between tries after '
                      'a transient cloud error (the cloud\'s own '
                      'Retry-After wins).'),
    cfg.FloatOpt('in_use_timeout', default=120.0, min=0.0,
                 help='Seconds a delete the cloud refuses because the '
                      'object is still in use (409: a subnet whose ports '
                      'a deleted server\'s Nova is still letting go of, a '
                      'security group, a router interface) is asked again, '
                      'with backoff and holding no worker thread, before '
                      'the resource fails with the cloud\'s message.'),
    cfg.IntOpt('retry_limit', default=0, min=0,
               help='Times a unit of work that hit an unexpected error '
                    '(database or broker gone) is sent again, with '
                    'backoff, before the sweeper is left to find it '
                    '(after stall_timeout). 0: no limit, retry for as '
                    'long as the worker lives.'),
    cfg.FloatOpt('retry_max_delay', default=30.0, min=0.1,
                 help='Longest wait between two retries of a unit of '
                      'work (the backoff doubles from 1 s up to this): '
                      'work interrupted by an outage resumes at most '
                      'this long after the service is back.'),
]

COMPUTE_OPTS = [
    cfg.IntOpt('max_creates_per_second', default=0, min=0,
               help='Most server creates the whole deployment sends the '
                    'compute cloud per second; others wait and try '
                    'again. 0: no limit.'),
    cfg.IntOpt('max_builds_in_flight', default=0, min=0,
               help='Most servers building at once across the '
                    'deployment (from the create call until the server '
                    'is seen ACTIVE, SHUTOFF or ERROR). 0: no limit.'),
    cfg.FloatOpt('build_slot_lease', default=3600.0, min=1.0,
                 help='Seconds after which a build slot whose server was '
                      'never seen settled is free again.'),
]

SIM_OPTS = [
    cfg.StrOpt('connection', secret=True,
               help='Database URL of the simulated cloud\'s own store. '
                    'Default: sqlite in $home/sim.db.'),
    cfg.StrOpt('disks_dir',
               help='Directory of the sim servers\' disks: a server whose '
                    'user_data has a converge agent part runs its agent '
                    'with the directory <disks_dir>/<server id> (journal, '
                    'scripts). One agent host process per directory runs '
                    'them all (its log: agent-host.log there). Default: '
                    '$home/sim-disks.'),
    cfg.BoolOpt('boot_agents', default=True,
                help='Servers whose user_data has a converge agent part '
                     'run their agent (the sim\'s agent host). False: '
                     'none runs, and their deployments wait, as on a '
                     'server whose agent never started.'),
    cfg.BoolOpt('run_user_data', default=False,
                help='Servers created while this is set have their '
                     'user_data run at their first boot, as cloud-init '
                     'would: cloud-config users, write_files and runcmd, '
                     'and shell scripts, once per server, on its disk, '
                     'confined as its deployments are (confine_servers; '
                     'where they cannot be, scripts are not run).'),
    cfg.BoolOpt('confine_servers', default=True,
                help='A sim server\'s software (its deployments\' hooks '
                     'and first-boot scripts) runs in a root of its own: '
                     'mount, PID and user namespaces, root inside, an '
                     'unprivileged uid on this machine, its disk and a '
                     'read-only /usr, not the engine\'s files or '
                     'processes (docs/software.md). It needs the agent '
                     'host to run as root on Linux; where it cannot, '
                     'the hooks fail saying so. False: the software runs '
                     'unconfined, as the agent host\'s user on this '
                     'machine; only for templates you trust.'),
    cfg.ListOpt('absent_services', default=[],
                help='Services the simulated cloud answers as absent, as '
                     'a cloud without them: catalog types (object-store, '
                     'alarming) or Neutron extensions (network:trunk, '
                     'network:vpnaas). Their resource types are left out '
                     'of the resource type list and refused at validate '
                     '(ResourceTypeUnavailable), as on such a cloud. '
                     'Default: none, the simulated cloud has every '
                     'service.'),
    cfg.StrOpt('images_dir',
               help='Where the images sim servers boot from are built, '
                    'once per machine and version, and kept: heat-agents '
                    '(Heat\'s os-collect-config, os-refresh-config, '
                    'os-apply-config and heat-config hooks, from PyPI; '
                    'docs/software.md). Default: '
                    '$XDG_CACHE_HOME/converge/images.'),
    cfg.IntOpt('server_uid', default=2000000000, min=1,
               max=2 ** 32 - 2 - 65536,
               help='First of the 65536 uids (and gids) of this machine '
                    'that a confined sim server\'s users 0..65535 are '
                    '(its root is this one). No account of the machine '
                    'should use them.'),
]

API_OPTS = [
    cfg.StrOpt('bind_host', default='127.0.0.1',
               help='Address converge-api listens on.'),
    cfg.PortOpt('bind_port', default=0,
                help='Port converge-api listens on. 0: embedded, a free '
                     'port chosen once and kept in $home/api.url, so '
                     'agents find it from one command to the next.'),
    cfg.StrOpt('public_endpoint',
               help='The URL servers reach converge-api at (what their '
                    'agents are given). Default: the address it listens '
                    'on.'),
    cfg.IntOpt('threads', default=32, min=2,
               help='Requests of the orchestration API converge-api '
                    'serves at once; more wait their turn.'),
    cfg.IntOpt('agent_threads', default=16, min=1,
               help='Requests of the agents\' routes (/v1/agent/...) '
                    'served at once, on threads of their own: a held long '
                    'poll takes one of these, never one of `threads`; '
                    'others wait their turn. Each running request may '
                    'hold a database connection (an agent host\'s '
                    'signals do): with `threads` and the engine\'s own, '
                    'keep them within the database pool (64).'),
    cfg.IntOpt('stream_threads', default=16, min=1,
               help='Event streams (a stack\'s /event_stream, which the '
                    'dashboard follows: docs/dashboard.md) served at once, '
                    'on threads of their own: an open stream takes one of '
                    'these, never one of `threads`; more wait their turn.'),
    cfg.FloatOpt('max_stream_time', default=600.0, min=1.0,
                 help='Seconds an event stream is kept open; then it ends '
                      'and the client resumes it (Last-Event-ID), so a '
                      'stream forgotten in a tab gives its thread back.'),
    cfg.IntOpt('max_connections', default=1000, min=1,
               help='Connections converge-api keeps open at once; beyond '
                    'them it accepts no more until one closes. Requests '
                    'waiting for a thread are at most one a connection.'),
    cfg.FloatOpt('header_timeout', default=10.0, min=0.1,
                 help='Seconds a request\'s line and headers may take to '
                      'arrive, from their first byte; a connection still '
                      'sending them then is closed (slow clients hold no '
                      'thread meanwhile, only a connection).'),
    cfg.FloatOpt('body_timeout', default=60.0, min=0.1,
                 help='Seconds a request\'s body may take to arrive after '
                      'its headers.'),
    cfg.IntOpt('client_socket_timeout', default=60, min=1,
               help='Seconds an idle connection (no request in progress) '
                    'is kept open. Heat\'s option (its default, 900, kept '
                    'idle clients for a quarter of an hour).'),
    cfg.IntOpt('max_header_size', default=65536, min=1024,
               help='Largest request line and headers, in bytes; larger '
                    'is answered 431.'),
    cfg.IntOpt('max_requests_per_credential', default=8, min=0,
               help='Requests one credential (an API token, an agent\'s '
                    'id and token) may have in progress at once in one '
                    'converge-api process; one more is answered 429 with '
                    'Retry-After. 0: no limit.'),
    cfg.FloatOpt('signal_queue_timeout', default=30.0, min=0.0,
                 help='Seconds a signal (a POST or PUT to a route ending in '
                      '/signal: a resource\'s, a wait condition handle\'s, '
                      'a deployment\'s; an agent host\'s /v1/agent/signals) '
                      'beyond max_requests_per_credential waits for one of '
                      'its credential\'s requests to end before it is '
                      'answered 429: a boot script signalling one handle '
                      'many times at once, without retrying, loses no '
                      'signal. 0: answered 429 at once, as other requests.'),
    cfg.IntOpt('max_queued_signals_per_credential', default=16, min=0,
               help='Signals of one credential waiting at once for a slot '
                    '(signal_queue_timeout); one more is answered 429 at '
                    'once. Each waiting signal holds a thread of its pool '
                    '(threads, agent_threads) and no database connection.'),
    cfg.IntOpt('max_response_size', default=80 * 1024 * 1024, min=1024,
               help='Largest answer, in bytes of JSON; a request whose '
                    'answer would be larger is refused (400, '
                    'RequestLimitExceeded) and told how to ask for less '
                    '(a listing without with_detail, a limit).'),
    cfg.FloatOpt('max_poll_wait', default=20.0, min=0.0,
                 help='Longest an agent\'s long poll is held, in seconds.'),
    cfg.IntOpt('max_signals_per_request', default=500, min=1,
               help='Most deployment signals one request of an agent host '
                    '(POST /v1/agent/signals) may carry.'),
    cfg.StrOpt('auth_strategy', default='token',
               choices=[('token', "converge's own tokens "
                         '(converge-manage token create)'),
                        ('keystone', 'keystone tokens, validated by '
                         'keystonemiddleware ([keystone_authtoken])'),
                        ('noauth', 'no authentication: the project is the '
                         "URL's, the roles X-Roles' (development only)")],
               help='How the orchestration API (/v1/{project_id}/...) '
                    'knows who is asking.'),
    cfg.IntOpt('max_requests_per_minute', default=3000, min=0,
               help='Most requests to the orchestration API one caller (a '
                    'token, or a keystone user in a project) may make in '
                    'a minute, counted across every API process in the '
                    'database (each counted request costs a write); '
                    'beyond it, 429. The default is generous (50 a '
                    'second, sustained): it stops a runaway script, not '
                    'a busy client. 0: no limit.'),
    cfg.IntOpt('max_json_body_size', default=1048576, min=1,
               help='Largest request body the API reads, in bytes '
                    "(Heat's default)."),
]

CLOUD_OPTS = [
    cfg.StrOpt('name',
               help='The cloud (a clouds.yaml name, found as every '
                    'OpenStack client finds it: OS_CLIENT_CONFIG_FILE, '
                    './clouds.yaml, ~/.config/openstack) that stacks live '
                    'in when a request names none. Unset: the simulated '
                    'cloud.'),
    cfg.BoolOpt('use_trusts', default=False,
                help='With [api] auth_strategy = keystone: a stack created '
                     'through the API lives in the Keystone deployment the '
                     'token came from, and the engine acts there with the '
                     'requesting user\'s authority: a Keystone trust from '
                     'the user to the [trustee] user, made when the stack '
                     'is created (roles: the request\'s, or '
                     'trusts_delegated_roles), used by every worker and '
                     'observer for everything they do later, deleted with '
                     'the stack (Heat\'s deferred_auth_method = trusts).'),
    cfg.IntOpt('availability_cache_time', default=300, min=0,
               help='Seconds converge-api keeps what a cloud answered '
                    'about its services and Neutron extensions for the '
                    'resource type list (which types it leaves out), per '
                    'cloud and project: one question per service, not '
                    'one per type or per request. 0: asked at every '
                    'listing.'),
    cfg.ListOpt('trusts_delegated_roles', default=[],
                help='Roles the trust delegates. Empty: the roles of the '
                     'request that created the stack.'),
    cfg.StrOpt('region_name',
               help='Region of the services a trust-scoped engine uses, '
                    'and the one a POLL_SERVER_HEAT server\'s '
                    'os-collect-config and heat-config-notify look '
                    'Heat\'s API up in, in Keystone\'s catalog (its '
                    'orchestration endpoint there must be this '
                    'converge-api).'),
]

SOFTWARE_OPTS = [
    cfg.FloatOpt('deployment_recheck', default=60.0, min=1.0,
                 help='Seconds after which a deployment waiting for its '
                      'agent\'s signal looks at its row again by itself '
                      '(a signal whose wake-up was lost).'),
    cfg.IntOpt('transport_url_lifetime', default=5 * 365 * 86400, min=60,
               help='Seconds the signed URLs of Heat\'s transports '
                    '(POLL_TEMP_URL\'s metadata URL, TEMP_URL_SIGNAL\'s '
                    'and CFN_SIGNAL\'s signal URLs) stay valid after they '
                    'are made. A metadata URL lives as long as its server '
                    'polls (Heat\'s Swift TempURLs: until 2038); each '
                    'also stops working when its server is deleted, a '
                    'signal URL once its run has ended.'),
    cfg.StrOpt('server_users_project', default='service',
               help='Where a Keystone is configured ([trustee]): the '
                    'project (in the [trustee] user\'s domain) the '
                    '[trustee] user is scoped to when it makes and '
                    'deletes the Keystone user of a POLL_SERVER_HEAT '
                    'server; it needs the admin role there.'),
]

OBSERVER_OPTS = [
    cfg.FloatOpt('tick', default=1.0, min=0.05,
                 help='Seconds between looks for stacks whose continuous '
                      'convergence pass is due (every live engine looks; '
                      'one takes each stack).'),
    cfg.FloatOpt('interval', default=300.0, min=1.0,
                 help='Default seconds between passes over a stack whose '
                      'converge policy names none.'),
    cfg.FloatOpt('jitter', default=0.1, min=0.0, max=1.0,
                 help='Each pass is due up to this fraction of the interval '
                      'later, at random, so stacks made together are not '
                      'observed in step.'),
    cfg.FloatOpt('backoff_max', default=3600.0, min=1.0,
                 help='Longest wait before the next repair of a stack whose '
                      'repairs keep failing (the wait doubles per failure).'),
    cfg.IntOpt('max_repairs', default=4, min=1,
               help='Repair traversals the observers run at once across '
                    'the deployment; a stack due while they all run waits '
                    'for the next pass.'),
]

CLI_OPTS = [
    cfg.BoolOpt('read_server', default=True,
                help='Embedded: a read-only command (stack list, show, '
                     'resource list, event list, output show...) sends its '
                     'reads to the home\'s read server, an engine of the '
                     'home that stays up between commands, and the first '
                     'read of a home starts one. Off: every command reads '
                     'for itself (about half a second, most of it '
                     'importing the engine).'),
    cfg.IntOpt('read_server_idle', default=300, min=1,
               help='Seconds a home\'s read server stays up after its last '
                    'request.'),
]


METRICS_OPTS = [
    cfg.BoolOpt('enabled', default=True,
                help='Serve this process\'s Prometheus metrics '
                     '(docs/operating.md lists them): converge-api under '
                     '/metrics on its own address, converge-worker and '
                     'converge-observer on the ports below. They are '
                     'counted either way (a few microseconds a unit of '
                     'work).'),
    cfg.HostAddressOpt('bind_host', default='127.0.0.1',
                       help='Address the workers\' and observers\' '
                            'metrics ports listen on (0.0.0.0 for a '
                            'Prometheus on another host). The metrics are '
                            'not authenticated.'),
    cfg.PortOpt('worker_port', default=9620,
                help='First metrics port of converge-worker: each of its '
                     'processes ([worker] workers) serves on the first '
                     'free port from here on, so a host running N worker '
                     'processes serves worker_port .. worker_port+N-1. '
                     '0: not served.'),
    cfg.PortOpt('observer_port', default=9610,
                help='Metrics port of converge-observer (the first free '
                     'from here on). 0: not served.'),
    cfg.PortOpt('cli_port', default=0,
                help='Metrics port of the embedded CLI, whose process is '
                     'the engine while a command runs (`converge stack '
                     'create --wait`, `converge observe --forever`). '
                     '0 (the default): not served; an embedded '
                     'converge-api serves its engine\'s under /metrics.'),
]


TRACING_OPTS = [
    cfg.BoolOpt('enabled', default=False,
                help='Make OpenTelemetry spans (docs/operating.md, '
                     '"Tracing"): an API request, the traversal it starts, '
                     'each unit of work, with the trace context carried in '
                     'the messages between processes and kept with the '
                     'traversal, so one stack operation is one trace across '
                     'converge-api, the workers and the agents\' signals. '
                     'Needs `pip install \'converge[tracing]\'`. False: '
                     'OpenTelemetry is not imported.'),
    cfg.URIOpt('otlp_endpoint', schemes=['http', 'https'],
               help='Where spans are sent, over OTLP/HTTP (protobuf): the '
                    'collector\'s traces URL, e.g. '
                    'http://collector:4318/v1/traces. Unset: the '
                    'exporter\'s own default '
                    '($OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else '
                    'http://localhost:4318/v1/traces).'),
    cfg.StrOpt('service_name', default='converge',
               help='The service.name of the spans, followed by the '
                    'process\'s kind: converge-api, converge-worker, '
                    'converge-observer; the CLI\'s embedded engine is '
                    'this name alone.'),
    cfg.FloatOpt('sample_ratio', default=1.0, min=0.0, max=1.0,
                 help='The fraction of traces kept, decided where a trace '
                      'starts (an API request, a CLI command, an '
                      'observer\'s repair) and followed by every span of '
                      'it, in every process; a request that brings a '
                      'traceparent follows its caller\'s decision.'),
]


def _trustee_opts():
    """[trustee]: the user converge acts as in a trust (a service user,
    as Heat's [trustee]), authenticated by password."""
    return [
        cfg.StrOpt('auth_url', help='Keystone\'s URL (…/v3).'),
        cfg.StrOpt('username', help='The trustee user\'s name.'),
        cfg.StrOpt('password', secret=True,
                   help='The trustee user\'s password.'),
        cfg.StrOpt('user_domain_name', default='Default',
                   help='The trustee user\'s domain.'),
    ]


def list_opts():
    return [
        (None, DEFAULT_OPTS),
        ('database', DATABASE_OPTS),
        ('coordination', COORDINATION_OPTS),
        ('worker', WORKER_OPTS),
        ('compute', COMPUTE_OPTS),
        ('sim', SIM_OPTS),
        ('api', API_OPTS),
        ('cloud', CLOUD_OPTS),
        ('trustee', _trustee_opts()),
        ('software', SOFTWARE_OPTS),
        ('observer', OBSERVER_OPTS),
        ('cli', CLI_OPTS),
        ('metrics', METRICS_OPTS),
        ('tracing', TRACING_OPTS),
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
