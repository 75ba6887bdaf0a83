"""The worker pool of one engine process: what the message bus asks of it,
and the two clocks every live engine keeps.

- check_resource messages are served on `[DEFAULT] worker_threads`
  threads; a unit that hits an unexpected error (database or broker gone)
  is sent again with backoff.
- the **timer** sends waiting nodes whose time has come (a unit of work
  that returned "wait" recorded when in the database; any live engine's
  timer resumes it, so a wait survives the death of every process);
- the **sweeper** finds work nobody is doing (sweeper.py);
- the **observer** runs the continuous convergence passes that are due
  (observers/loop.py).

The same in embedded mode (the CLI process) and in each converge-worker.
"""

import collections
import heapq
import threading
import time

from oslo_log import log as logging
import oslo_messaging

from converge import conf as conf_mod
from converge import metrics
from converge import tracing
from converge.db import api
from converge.engine import notify
from converge.messaging import rpc
from converge.engine import stacks
from converge.observers import loop as observer_loop
from converge.workers import reconcile
from converge.workers import sweeper

LOG = logging.getLogger(__name__)

#: seconds between the soon-timer's looks at the probes it holds (every
#: worker thread busy), and the longest it holds one (base.Wait.probe)
GATHER = 0.05
PROBE_HOLD_MAX = reconcile.PROBE_BACKSTOP
#: seconds the database timer of an engine whose threads are all busy
#: leaves a due wait to an idle engine
GATHER_MAX = 1.0
#: seconds the soon-timer waits for more waits to come due, to send
#: them together
SOON_WINDOW = 0.02
#: seconds between the notification relay's looks (engine/notify.py)
NOTIFY_INTERVAL = 0.5
#: an engine hands its own due waits to its threads while fewer than this
#: many messages' worth of them wait for one (Pool._dispatch); as many
#: messages as it has threads is what the broker lets it hold unstarted
LOCAL_ROOM = 1
#: an engine with at least CROWD_MAX waits of its own coming due within
#: CROWD_WINDOW seconds either side of a time is crowded then: it takes no
#: look there that a step only offered (base.Wait.sooner). At the end of
#: a ramp of 2,000 30 s builds, each server's two offered looks were a
#: third of the units there, and every last look came that much later
#: (seen 1.8 s after the build ended at p50, against 0.55 s without them)
CROWD_MAX = 50
CROWD_WINDOW = 0.5
#: the width (seconds) of the buckets the soon-timer counts waits in
CROWD_BUCKET = 0.1


def start(engine, observe=True):
    """Start serving in this process; the pool is ``engine.workers``.
    With `observe`, its observer runs continuous convergence passes too:
    a long-lived process (converge-worker, converge-api embedded, `converge
    observe --forever`), not a command that ends with its traversal (a
    repair it started would be left without its engine)."""
    if engine.workers is None:
        metrics.watch(engine)
        engine.workers = Pool(engine, observe)
        engine.workers.start()
    return engine.workers


class Pool:
    def __init__(self, engine, observe=True):
        self.engine = engine
        self.observe = observe
        self._server = None
        self._stopping = threading.Event()
        self._threads = []
        # waits this process recorded, to be sent at their exact time (the
        # database timer, ticking every timer_interval, is every engine's
        # backstop): a heap of (wake_at, stack, traversal, node, probe,
        # the time recorded in the database)
        self._soon = []
        self._soon_cv = threading.Condition()
        # how many of them come due in each CROWD_BUCKET (crowded())
        self._soon_count = collections.Counter()
        self._held = []   # probes that came due while every thread was busy
        # whether another engine has units to run, looked at (at most
        # every GATHER) while this one holds probes with threads free
        self._elsewhere = False
        self._looked = 0.0
        self._relay = None
        self._endpoint = None
        # units of its own due waits this process handed to its threads
        # that have not started yet (_dispatch)
        self._local = 0
        self._local_lock = threading.Lock()
        self._leaving = False   # stopped consuming (stop_consuming)

    def start(self):
        engine = self.engine
        CONF = conf_mod.CONF
        # before the first message: the connections its units keep
        engine.db.warm(2 * engine.threads)
        self._endpoint = Endpoint(engine)
        self._server = rpc.start_server(self._endpoint, engine.engine_id,
                                        engine.threads)
        engine.locks.join(CONF.coordination.group)
        clocks = [('timer', CONF.worker.timer_interval, self.fire_timers),
                  ('sweeper', CONF.worker.sweep_interval, self.sweep_once)]
        if self.observe:
            clocks.append(('observer', CONF.observer.tick, self.observe_due))
        if notify.enabled():
            self._relay = notify.Relay(engine)
            clocks.append(('notifier', NOTIFY_INTERVAL,
                           self._relay.relay_once))
        for name, interval, step in clocks:
            thread = threading.Thread(target=self._every, name=name,
                                      args=(interval, step), daemon=True)
            thread.start()
            self._threads.append(thread)
        thread = threading.Thread(target=self._soon_loop, name='soon',
                                  daemon=True)
        thread.start()
        self._threads.append(thread)

    def wake_at(self, when, stack_id, traversal_id, node, probe=False,
                recorded=None):
        """A unit of this process recorded a wait until `when` (in the
        database until `recorded`, by default the same): send the node
        then, to the moment, if no other engine's timer has. A `probe`
        (base.Wait.probe) is held back while every worker thread is busy,
        up to PROBE_HOLD_MAX."""
        with self._soon_cv:
            heapq.heappush(self._soon, (
                when, stack_id, traversal_id, node, probe,
                when if recorded is None else recorded))
            self._soon_count[int(when / CROWD_BUCKET)] += 1
            self._soon_cv.notify()

    def crowded(self, when):
        """Whether this engine has CROWD_MAX waits or more of its own
        coming due within CROWD_WINDOW of `when` (epoch seconds)."""
        first = int((when - CROWD_WINDOW) / CROWD_BUCKET)
        last = int((when + CROWD_WINDOW) / CROWD_BUCKET)
        with self._soon_cv:
            count = self._soon_count
            return sum(count.get(b, 0)
                       for b in range(first, last + 1)) >= CROWD_MAX

    def _soon_loop(self):
        self.engine.db.keep_connections()
        while not self._stopping.is_set():
            self._look_elsewhere()
            with self._soon_cv:
                send, delay = self._soon_due(time.time())
                if not send:
                    self._soon_cv.wait(delay)
                    continue
            try:
                self._send_due(send)
            except Exception:
                LOG.exception('sending waits that came due failed; the '
                              'timer will')

    def _soon_due(self, now):
        """(the waits to send now, else the seconds until the next may
        be due); under the soon-timer's lock.

        Waits that come due within SOON_WINDOW of the first go together,
        the first at most that late: at the end of a ramp of thousands of
        builds, waits come due a few ms apart, and each sent alone was a
        message of its own (the broker's and the consumer's work was two
        thirds of a worker's). None goes before its time (a look at a
        server a little early finds it building and costs another); a
        wait alone goes at its time.
        While every worker thread is busy a probe (base.Wait.probe) would
        queue behind their work (during a ramp of thousands of creates,
        the first looks at servers just made) and cost the busy core: it
        is held until a thread is free, or PROBE_HOLD_MAX (the time it is
        recorded at in the database, for another engine's timer should
        this one die). A look that expects to find the end goes at its
        time."""
        due = []
        soon = self._soon
        if soon and soon[0][0] <= now:
            gather_until = soon[0][0] + SOON_WINDOW
            second = min((e[0] for e in soon[1:3]), default=None)
            if now < gather_until and second is not None and \
                    now < second <= gather_until:
                # another comes due within the window: wait for it, and
                # send them together (none before its time)
                return self._nothing_yet(gather_until - now)
            while soon and soon[0][0] <= now:
                item = heapq.heappop(soon)
                bucket = int(item[0] / CROWD_BUCKET)
                self._soon_count[bucket] -= 1
                if not self._soon_count[bucket]:
                    del self._soon_count[bucket]
                due.append(item)
        send = due
        if self._held or due:
            busy = self.engine.saturated or self._elsewhere
            send, waiting, self._held = [], self._held + due, []
            for item in waiting:
                hold = busy and item[4] and now - item[0] < PROBE_HOLD_MAX
                (self._held if hold else send).append(item)
        delay = self._soon[0][0] - now if self._soon else 1.0
        return (send, 0.0) if send else self._nothing_yet(delay)

    def _look_elsewhere(self):
        """While this engine holds probes and has threads free: whether
        units are waiting to run elsewhere (another engine's share of a
        fan-out). Its probes wait for them too, up to PROBE_HOLD_MAX: a
        probe is a look that may learn nothing yet, and an engine that
        ran out of its share of 2,000 creates and sent its 1,400 held
        probes slowed the other's last creates to half their rate (on
        shared cores, and a shared database; half a second of the ramp)."""
        if not self._held or self.engine.saturated:
            self._elsewhere = False
            return
        now = time.monotonic()
        if now - self._looked < GATHER:
            return
        self._looked = now
        # more ready or running nodes than this engine's own units
        mine = self.engine.inflight + self.engine.queued
        try:
            with self.engine.db.connect() as conn:
                self._elsewhere = api.sync_pending(conn, mine + 1) > mine
        except Exception:
            LOG.debug('could not look for work elsewhere', exc_info=True)
            self._elsewhere = False

    def _nothing_yet(self, delay):
        """Nothing to send: how long to wait (shorter while probes are
        held, to see whether a thread is free)."""
        if self._held:
            delay = min(delay, GATHER)
        return [], max(0.0, min(delay, 1.0))

    def _send_due(self, due):
        lease = conf_mod.CONF.worker.stall_timeout
        now = time.time()
        by_trav = {}
        for _, stack_id, trav_id, node, _, recorded in due:
            by_trav.setdefault((stack_id, trav_id), []).append(
                (node, recorded))
        taken = []
        with self.engine.db.begin() as conn:
            for (stack_id, trav_id), waits in by_trav.items():
                taken += [(stack_id, trav_id, node) for node in
                          api.sync_take_many(conn, trav_id, waits,
                                             now + lease)]
        metrics.waits_fired('soon', len(taken), [
            now - when for when, *_ in due])
        self._dispatch(taken)

    def _dispatch(self, taken):
        """Send the waits this engine took (each leased to it in the
        database until its lease runs out, as a message in transit is).
        Those its own threads have room for, it hands them itself, in the
        same parts a message would carry: at the end of a ramp of 2,000
        builds, the messages of the waits coming due (their publishing,
        the broker's confirm, their consuming) were a third of a worker's
        CPU, on cores the units needed. Beyond LOCAL_ROOM messages' worth
        of units waiting for a thread here, the rest go on the bus, where
        an engine with threads free takes them."""
        submit = None if self._leaving or self._stopping.is_set() else \
            rpc.local_submit(self._server)
        if submit is None:
            self.engine.client.send(taken)
            return
        by_trav = {}
        for stack_id, trav_id, node in taken:
            by_trav.setdefault((stack_id, trav_id), []).append(node)
        room = self.engine.threads * \
            conf_mod.CONF.worker.fanout_min_nodes * LOCAL_ROOM
        remote = []
        for (stack_id, trav_id), nodes in by_trav.items():
            for part in rpc.parts(nodes):
                with self._local_lock:
                    here = self._local + len(part) <= room
                    if here:
                        self._local += len(part)
                if here and self._hand(submit, stack_id, trav_id, part):
                    continue
                remote += [(stack_id, trav_id, node) for node in part]
        if remote:
            self.engine.client.send(remote)

    def _hand(self, submit, stack_id, trav_id, nodes):
        """Give `nodes` to this process's threads; False if they take no
        more work (stopping). Until they start, the engine is not idle
        (a graceful stop waits for them); if it stopped consuming
        meanwhile, they go on the bus then, to the engines that stay, as
        a message not yet started goes back to the broker."""
        engine = self.engine
        engine.units_queued(len(nodes))

        def run():
            with self._local_lock:
                self._local -= len(nodes)
            engine.unit_started()   # not idle between the two counts
            engine.units_queued(-len(nodes))   # counted again as they run
            try:
                if self._leaving:
                    engine.client.send([(stack_id, trav_id, node)
                                        for node in nodes])
                else:
                    # handed here, not taken from the bus
                    self._endpoint.check_resources(LOCAL, stack_id, trav_id,
                                                   nodes)
            except Exception:   # the endpoint sends failed nodes again
                LOG.exception('check_resources %s failed', trav_id)
            finally:
                engine.unit_ended()
        try:
            submit(run)
            return True
        except RuntimeError:   # its executor is shut down
            with self._local_lock:
                self._local -= len(nodes)
            engine.units_queued(-len(nodes))
            return False

    def _every(self, interval, step):
        while not self._stopping.wait(interval):
            try:
                step()
            except Exception:
                LOG.exception('%s failed; trying again next interval',
                              step.__name__)

    def fire_timers(self, now=None):
        """Send every waiting node whose time has come. Returns them."""
        now = now or time.time()
        lease = conf_mod.CONF.worker.stall_timeout
        due_by = now
        if self.engine.saturated:
            # every worker thread is busy: as the soon-timer does, leave
            # what is due to an idle engine for GATHER_MAX (taken here it
            # would only queue behind this engine's work: in a ramp of
            # thousands of creates, the first looks at servers just made)
            due_by = now - GATHER_MAX
        # a cheap read first: most ticks find nothing, and on SQLite a
        # write transaction would queue for the one writer every tick
        with self.engine.db.read() as s:
            if not api.sync_any_due(s, due_by):
                return []
        with self.engine.db.write() as s:
            due = api.sync_take_due(s, now, lease, due_by=due_by)
        metrics.waits_fired('tick', len(due))
        self.engine.client.send(due)
        return due

    def observe_due(self):
        """The continuous convergence passes that are due, and the fact
        refreshes (observers/loop.py): reads first, as most ticks find
        none."""
        return observer_loop.run_due(self.engine)

    def sweep_once(self):
        """One sweep, by one engine at a time (a tooz lock elects it)."""
        CONF = conf_mod.CONF
        lock = self.engine.locks.try_lock('sweeper')
        if lock is None:
            return []
        try:
            members = self.engine.locks.members(CONF.coordination.group)
            members.add(self.engine.engine_id)
            sent = sweeper.sweep(self.engine, members,
                                 CONF.worker.stall_timeout)
            stacks.forget_trusts(self.engine)
            return sent
        finally:
            lock.release()

    def stop_consuming(self):
        """Take no more messages; in-flight units go on. Due waits go
        on the bus from now (_dispatch), for the engines that stay."""
        self._leaving = True
        if self._server is not None:
            self._server.stop()

    def stop(self):
        self._stopping.set()
        if self._relay is not None:
            try:
                self._relay.relay_once()   # what the last units recorded
            except Exception:
                LOG.exception('the last notifications were not sent')
        with self._soon_cv:
            self._soon_cv.notify()
        if self._server is not None:
            rpc.stop_server(self._server)
            self._server = None
            self.engine.locks.leave(conf_mod.CONF.coordination.group)


#: the context of the Endpoint's calls that no message brought (a message
#: of several nodes run one by one, an engine's own due waits): not
#: counted as messages received
LOCAL = {}


class Endpoint:
    """The RPC endpoint: what the message bus may ask of a worker."""

    target = oslo_messaging.Target(version=rpc.VERSION)

    def __init__(self, engine):
        self.engine = engine
        self._per_stack = collections.defaultdict(self._semaphore)

    def _semaphore(self):
        limit = conf_mod.CONF.worker.max_inflight_per_stack
        return threading.BoundedSemaphore(limit) if limit else _NoLimit()

    def check_resources(self, ctxt, stack_id, traversal_id, nodes):
        """Several nodes of one traversal (rpc.check_resources): each its
        own unit of work, recorded together (reconcile.check_resources);
        one at a time where a stack's units in flight are capped."""
        if ctxt is not LOCAL:
            metrics.MESSAGES_RECEIVED.labels('check_resources').inc()
        with tracing.work(tracing.UNITS, ctxt, stack_id, traversal_id,
                          self._stored_trace, nodes=len(nodes)):
            self._check_resources(stack_id, traversal_id, nodes)

    def _check_resources(self, stack_id, traversal_id, nodes):
        engine = self.engine
        if len(nodes) == 1 or \
                conf_mod.CONF.worker.max_inflight_per_stack:
            for node in nodes:
                self.check_resource(LOCAL, stack_id, traversal_id, node)
            return
        engine.db.keep_connections()
        engine.unit_started()
        engine.units_queued(len(nodes) - 1)
        try:
            left_out = reconcile.check_resources(
                engine, stack_id, traversal_id, nodes,
                failed=lambda node: self._retry_later(
                    stack_id, traversal_id, node, 0))
        except Exception:
            # the batch itself could not run (its lock service gone): each
            # node again later, as a unit that failed is
            LOG.exception('check_resources %s failed', traversal_id)
            left_out = []
            for node in nodes:
                self._retry_later(stack_id, traversal_id, node, 0)
        finally:
            engine.units_queued(1 - len(nodes))
            engine.unit_ended()
        if left_out:
            metrics.LOCKS_BUSY.inc(len(left_out))
        for node in left_out:   # locked elsewhere: wait for it alone
            self.check_resource(LOCAL, stack_id, traversal_id, node)

    def check_resource(self, ctxt, stack_id, traversal_id, node, attempt=0):
        # a thread of the bus's pool, bounded by [DEFAULT] worker_threads
        if ctxt is not LOCAL:
            metrics.MESSAGES_RECEIVED.labels('check_resource').inc()
        with tracing.work(tracing.UNIT, ctxt, stack_id, traversal_id,
                          self._stored_trace, node=node,
                          attempt=attempt or None):
            self._check_resource(stack_id, traversal_id, node, attempt)

    def _check_resource(self, stack_id, traversal_id, node, attempt):
        self.engine.db.keep_connections()
        self.engine.unit_started()
        try:
            with self._per_stack[stack_id]:
                reconcile.check_resource(self.engine, stack_id, traversal_id,
                                         node)
        except Exception:
            # the database or the broker went away mid-unit: the node is
            # not done, so send it again later, for as long as it takes (an
            # outage outlasts any fixed budget; the sweeper is the backstop)
            LOG.exception('check_resource %s %s failed (attempt %d)',
                          traversal_id, node, attempt + 1)
            self._retry_later(stack_id, traversal_id, node, attempt)
        finally:
            self.engine.unit_ended()

    def _stored_trace(self, traversal_id):
        """The traceparent kept in a traversal's options (tracing.work:
        a message that came without it)."""
        with self.engine.db.connect() as conn:
            trav = api.traversal_get(conn, traversal_id)
        return (trav.options or {}).get('trace') if trav else None

    def _retry_later(self, stack_id, traversal_id, node, attempt):
        CONF = conf_mod.CONF
        if CONF.worker.retry_limit and attempt >= CONF.worker.retry_limit:
            LOG.warning('giving %s up after %d attempts; the sweeper will '
                        'send it again', node, attempt + 1)
            return
        timer = threading.Timer(
            min(2 ** min(attempt, 16), CONF.worker.retry_max_delay),
            self._again, (stack_id, traversal_id, node, attempt + 1))
        timer.daemon = True
        timer.start()

    def _again(self, stack_id, traversal_id, node, attempt):
        try:
            self.engine.client.check_resource(stack_id, traversal_id, node,
                                              attempt=attempt)
        except Exception:  # the broker is away too: keep trying
            LOG.exception('could not send %s again (attempt %d)', node,
                          attempt + 1)
            self._retry_later(stack_id, traversal_id, node, attempt)


class _NoLimit:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
