"""What one engine process owns: its database, locks, message transport,
cloud drivers and caches.

Everything else — what a traversal is and how it ends (traversal.py), the
unit of work (workers/reconcile.py), the worker pool with its sweeper and
timer (workers/pool.py) — takes an Engine and uses these.
"""

import socket
import threading
import time
import uuid

from converge import lazy
from converge import conf as conf_mod
from converge.db import migrate
from converge.db import session as db_session
from converge.drivers import clients as clients_mod
from converge.engine import definitions
from converge.engine import gate
from converge import listeners as listeners_mod
from converge.coordination import locks as locks_mod
from converge.engine import nested
from converge.resources import base
from converge.resources import registry

# imported at first use (converge/lazy.py): a read-only CLI command,
# a process of its own, builds an engine and uses none of these (issue 41)
template = lazy.module('converge.template')
nested_resource = lazy.module('converge.resources.nested')


#: seconds an engine whose threads were all busy still counts as saturated
SATURATED_HOLD = 0.05


class Engine:
    def __init__(self, auto_migrate=None, before_threads=None):
        """:param before_threads: called once before the first lock or
            message client is made (what starts a pool's threads): the
            CLI tunes them there, and a read-only command makes neither"""
        CONF = conf_mod.CONF
        self._before_threads = before_threads
        self.engine_id = '%s-%s' % (socket.gethostname(), uuid.uuid4().hex[:8])
        self.db = db_session.get(conf_mod.database_url())
        if auto_migrate is None:
            auto_migrate = self.db.is_sqlite
        if auto_migrate:
            migrate.ensure(self.db)
        else:
            # a schema of another converge's: refused here, not as
            # database errors in every unit
            migrate.require_head(self.db)
        self.lock_wait = CONF.lock_wait
        self.threads = CONF.worker_threads
        self.gate = gate.Gate(engine_threads(self.db, self.threads))
        self._locks = None
        self._client = None
        self.clients = clients_mod.Clients(conf_mod.sim_url(), self.db)
        self.clients.waiting = self.gate.released
        #: what a resource that owns a nested stack asks of the engine
        self.clients.stacks = nested.NestedStacks(self)
        self.definitions = definitions.Cache(self.db)
        #: the worker pool this process runs, if any (workers/pool.py)
        self.workers = None
        # units of work running in this process (a worker stops when idle)
        self.inflight = 0
        self._inflight_lock = threading.Lock()
        self._saturated_at = float('-inf')
        # units received and not started yet (the rest of a message of
        # several nodes, which one thread runs in turn)
        self.queued = 0
        self.idle = threading.Event()
        self.idle.set()
        self.listeners = listeners_mod.load(CONF.listeners, self)

    def _threads_coming(self):
        hook, self._before_threads = self._before_threads, None
        if hook is not None:
            hook()

    # lazily built: read-only commands need neither locks nor messaging
    @property
    def locks(self):
        if self._locks is None:
            self._threads_coming()
            self._locks = locks_mod.Locks(conf_mod.coordination_url(),
                                          self.engine_id, self.listeners)
        return self._locks

    @property
    def client(self):
        if self._client is None:
            self._threads_coming()
            # oslo.messaging, loaded here: a read-only command sends nothing
            from converge.messaging import rpc
            self._client = rpc.WorkerClient(self.listeners,
                                            idle=self.idle_threads)
        return self._client

    # -- desired state ------------------------------------------------------
    def definition(self, template_id, stack):
        """The parsed template version (cached: template rows never change)."""
        return self.definitions.get(template_id, stack)

    def remember(self, template_id, stack, defn):
        self.definitions.put(template_id, stack, defn)

    # -- plug-ins -----------------------------------------------------------
    def plugin_class(self, type_name):
        found = registry.get(type_name)
        if found is None and template.is_provider(type_name):
            # a provider template's resource: deleting or showing it needs
            # its nested stack, not the file's parameters
            return nested_resource.TemplateResource
        return found

    def plugin(self, cls, row, props, stack, update_policy=None,
               metadata=None):
        cloud = getattr(stack, 'cloud', None)
        info = base.StackInfo(stack.id, stack.name, stack.project_id,
                              getattr(stack, 'template_id', None))
        info.cloud = cloud
        info.timeout_mins = getattr(stack, 'timeout_mins', None)
        return cls(row.name, props, metadata=metadata, stack=info,
                   uuid=row.uuid, physical_id=row.physical_id,
                   data=row.data,
                   clients=self.clients.for_stack(cloud, stack.project_id),
                   update_policy=update_policy)

    # -- this process's units of work ---------------------------------------
    def unit_started(self):
        with self._inflight_lock:
            self.inflight += 1
            self.idle.clear()
            if self.inflight + self.queued >= self.threads:
                self._saturated_at = time.monotonic()

    def units_queued(self, count):
        """`count` more (or fewer) units waiting for a thread here: the
        rest of a message's units, and due waits handed to this
        process's threads (workers/pool.py); an engine with any is not
        idle."""
        with self._inflight_lock:
            self.queued += count
            if self.queued > 0:
                self.idle.clear()
            elif self.inflight == 0:
                self.idle.set()
            if self.inflight + self.queued >= self.threads:
                self._saturated_at = time.monotonic()

    @property
    def saturated(self):
        """Every worker thread is busy, or was within the last
        SATURATED_HOLD seconds: a thread between two units of a long queue
        leaves `inflight` one short for a moment, and a timer that took
        that moment for an idle engine took one due wait at a time (990
        write transactions in a ramp of 2,000 creates)."""
        return (self.inflight + self.queued >= self.threads or
                time.monotonic() - self._saturated_at < SATURATED_HOLD)

    def idle_threads(self):
        """Worker threads of this process running no unit now."""
        return 0 if self.saturated else max(
            0, self.threads - self.inflight - self.queued)

    def unit_ended(self):
        with self._inflight_lock:
            self.inflight -= 1
            if self.inflight == 0 and self.queued <= 0:
                self.idle.set()

    def close(self):
        """Stop this process's workers (if any) and its coordination."""
        if self.workers is not None:
            self.workers.stop()
            self.workers = None
        if self._locks is not None:
            self._locks.stop()
            self._locks = None


def schema_refusal(url):
    """Why a service may not start on the database at `url` (its schema
    not this converge's, in words: db/migrate.py require_head), or
    None. Asked before a service's launcher starts its processes: an
    Engine refused in one of them would be started again and again."""
    from converge import exception
    try:
        migrate.require_head(db_session.get(url))
    except exception.SchemaMismatch as e:
        return str(e)
    return None


def engine_threads(db, worker_threads):
    """The gate's size (0: none): [DEFAULT] engine_threads, or by the
    database."""
    n = conf_mod.CONF.engine_threads
    if not n:
        return 1 if db.is_sqlite else 0
    return 0 if n >= worker_threads else n
