"""One engine process: its database, locks, messaging and drivers."""

import collections
import socket
import threading
import uuid

from oslo_log import log as logging
import oslo_messaging

from converge import conf as conf_mod
from converge import template
from converge.db import api
from converge.db import migrate
from converge.db import session as db_session
from converge.drivers import clients as clients_mod
from converge.engine import listeners as listeners_mod
from converge.resources import base
from converge.resources import registry
from converge.workers import gate
from converge.workers import locks as locks_mod
from converge.workers import reconcile
from converge.workers import rpc
from converge.workers import walker

LOG = logging.getLogger(__name__)


class Engine:
    def __init__(self, auto_migrate=None):
        CONF = conf_mod.CONF
        self.engine_id = '%s-%s' % (socket.gethostname(), uuid.uuid4().hex[:8])
        self.db = db_session.get(conf_mod.database_url())
        if auto_migrate is None:
            auto_migrate = self.db.is_sqlite
        if auto_migrate:
            migrate.ensure(self.db)
        self.lock_wait = CONF.lock_wait
        self.threads = CONF.worker_threads
        self.gate = gate.Gate(engine_threads(self.db, self.threads))
        self._locks = None
        self._client = None
        self.clients = clients_mod.Clients(conf_mod.sim_url(), self.db)
        self._defs = collections.OrderedDict()
        self._building = {}  # key -> lock held by the thread parsing it
        self._defs_lock = threading.Lock()
        self._server = None
        self.inflight = 0
        self._inflight_lock = threading.Lock()
        self.idle = threading.Event()
        self.idle.set()
        self.listeners = listeners_mod.load(CONF.listeners, self)

    # lazily built: read-only commands need neither locks nor messaging
    @property
    def locks(self):
        if self._locks is None:
            self._locks = locks_mod.Locks(conf_mod.coordination_url(),
                                          self.engine_id, self.listeners)
        return self._locks

    @property
    def client(self):
        if self._client is None:
            self._client = rpc.WorkerClient(self.listeners)
        return self._client

    # -- desired state ------------------------------------------------------
    def definition(self, template_id, stack):
        """The parsed template version (cached: template rows never change)."""
        key = (template_id, stack.id)
        with self._defs_lock:
            defn = self._defs.get(key)
            if defn is not None:
                self._defs.move_to_end(key)
                return defn
            building = self._building.setdefault(key, threading.Lock())
        # one thread parses, the others wait for it: at the start of a
        # traversal every worker thread misses at once, and eight parses of
        # a 22,000-resource template took a worker to 770 MB
        with building:
            with self._defs_lock:
                defn = self._defs.get(key)
            if defn is None:
                defn = self._parse(template_id, stack)
                self.remember(template_id, stack, defn)
        with self._defs_lock:
            self._building.pop(key, None)
        return defn

    def _parse(self, template_id, stack):
        with self.db.read() as s:
            row = api.template_get(s, template_id)
            bundle = template.Bundle.from_dict(row.bundle)
            params = row.parameters
        return template.StackDefinition(
            bundle, params, stack_name=stack.name, stack_id=stack.id,
            project_id=stack.project_id, limits=limits())

    def remember(self, template_id, stack, defn):
        """Cache `defn`, bounded by resources rather than versions: one
        22,000-resource definition weighs what thousands of small ones do."""
        budget = conf_mod.CONF.definition_cache_resources
        with self._defs_lock:
            self._defs[(template_id, stack.id)] = defn
            self._defs.move_to_end((template_id, stack.id))
            held = sum(len(d.resources) for d in self._defs.values())
            while len(self._defs) > 1 and held > budget:
                _, old = self._defs.popitem(last=False)
                held -= len(old.resources)

    def plugin_class(self, type_name):
        return registry.get(type_name)

    def plugin(self, cls, row, props, stack):
        return cls(row.name, props,
                   stack=base.StackInfo(stack.id, stack.name,
                                        stack.project_id),
                   uuid=row.uuid, physical_id=row.physical_id,
                   data=row.data, clients=self.clients)

    # -- failure ------------------------------------------------------------
    def settle(self, trav, stack):
        """End a failing traversal once nothing is in flight; roll back
        in the same transaction, so nobody sees it FAILED in between."""
        from converge.engine import stacks
        rollback = trav.options.get('rollback') and trav.action in (
            'CREATE', 'UPDATE')
        new = None
        with self.db.write() as s:
            ended = walker.settle(s, trav, stack.id, mark_stack=not rollback)
            if ended and rollback:
                new = stacks.start_rollback(self, s, stack.id, trav)
        if new is not None:
            stacks.kick(self, new)

    # -- workers ------------------------------------------------------------
    def start_workers(self):
        """Serve check_resource, join the group of live workers, and sweep
        for stranded work (the same in embedded and distributed mode)."""
        if self._server is None:
            self._server = rpc.start_server(_Endpoint(self), self.engine_id,
                                            self.threads)
            self.locks.join(conf_mod.CONF.coordination.group)
            self._sweeping = threading.Event()
            self._sweeper = threading.Thread(target=self._sweep_loop,
                                             name='sweeper', daemon=True)
            self._sweeper.start()

    def _sweep_loop(self):
        CONF = conf_mod.CONF
        while not self._sweeping.wait(CONF.worker.sweep_interval):
            try:
                self.sweep_once()
            except Exception:
                LOG.exception('sweep failed; trying again next interval')

    def sweep_once(self):
        """One sweep, by one worker at a time (a tooz lock elects it)."""
        from converge.workers import sweeper
        CONF = conf_mod.CONF
        lock = self.locks.try_lock('sweeper')
        if lock is None:
            return []
        try:
            members = self.locks.members(CONF.coordination.group)
            members.add(self.engine_id)
            return sweeper.sweep(self, members, CONF.worker.stall_timeout)
        finally:
            lock.release()

    def stop_consuming(self):
        """Take no more messages; in-flight units go on."""
        if self._server is not None:
            self._server.stop()

    def stop_workers(self):
        if self._server is not None:
            self._sweeping.set()
            rpc.stop_server(self._server)
            self._server = None
            self.locks.leave(conf_mod.CONF.coordination.group)
        if self._locks is not None:
            self._locks.stop()
            self._locks = None

    def _enter(self):
        with self._inflight_lock:
            self.inflight += 1
            self.idle.clear()

    def _leave(self):
        with self._inflight_lock:
            self.inflight -= 1
            if self.inflight == 0:
                self.idle.set()


class _Endpoint:
    """The RPC endpoint: what the message bus may ask of a worker."""

    target = oslo_messaging.Target(version=rpc.VERSION)

    def __init__(self, engine):
        self.engine = engine
        self._per_stack = collections.defaultdict(self._semaphore)

    def _semaphore(self):
        limit = conf_mod.CONF.worker.max_inflight_per_stack
        return threading.BoundedSemaphore(limit) if limit else _NoLimit()

    def check_resource(self, ctxt, stack_id, traversal_id, node, attempt=0):
        self.engine._enter()
        try:
            with self._per_stack[stack_id]:
                reconcile.check_resource(self.engine, stack_id, traversal_id,
                                         node)
        except Exception:
            # the database or the broker went away mid-unit: the node is
            # not done, so send it again later (the sweeper is the backstop)
            LOG.exception('check_resource %s %s failed (attempt %d)',
                          traversal_id, node, attempt + 1)
            if attempt < conf_mod.CONF.worker.retry_limit:
                timer = threading.Timer(
                    min(2 ** attempt, 30), self._again,
                    (stack_id, traversal_id, node, attempt + 1))
                timer.daemon = True
                timer.start()
        finally:
            self.engine._leave()

    def _again(self, stack_id, traversal_id, node, attempt):
        try:
            self.engine.client.check_resource(stack_id, traversal_id, node,
                                              attempt=attempt)
        except Exception:
            LOG.exception('could not send %s again; the sweeper will', node)


class _NoLimit:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def limits():
    CONF = conf_mod.CONF
    return {'max_resources_per_stack': CONF.max_resources_per_stack}


def engine_threads(db, worker_threads):
    """The gate's size (0: none): [DEFAULT] engine_threads, or by the
    database."""
    n = conf_mod.CONF.engine_threads
    if not n:
        return 1 if db.is_sqlite else 0
    return 0 if n >= worker_threads else n
