"""``inproc://``: the embedded deployment's message bus, inside one process.

oslo.messaging's own in-memory driver (``fake://``) is made for unit tests:
its listener sleeps 50 ms whenever its queue is empty, so every hop of a
dependency chain on an idle engine waits up to 50 ms (measured: a chain of
40 one-second creates took 2 s more than its critical path), it pops from
the front of a list (quadratic when 20,000 leaves are cast at once) and it
serialises each message to JSON only to check that it could. This driver
keeps the same semantics (topic queues shared by the servers of a topic,
per-server queues, fanout, casts and calls) with a deque per queue and a
condition that wakes the listener the moment a message arrives.

The embedded engine goes one step further (``serve`` and ``cast``, used
by rpc.py): its check_resource messages skip oslo.messaging's client and
server too. Per message, those built a call context, an incoming message,
an executor future and work item, and checked versions; during a ramp of
2,000 server creates that was a quarter of the engine's one core, more
than the unit of work's own database reads (py-spy, --gil). The queues,
their order and the way out are the same: a message sent either way is
taken either way.
"""

import collections
import queue
import threading
import time

from oslo_log import log as logging
import oslo_messaging
from oslo_messaging._drivers import base

LOG = logging.getLogger(__name__)

#: a stopped listener notices within this long even if nothing arrives
_WAKE = 1.0


class _Incoming(base.RpcIncomingMessage):
    def __init__(self, ctxt, message, reply_q):
        super().__init__(ctxt, message, msg_id=None)
        self._reply_q = reply_q

    def reply(self, reply=None, failure=None):
        if self._reply_q is not None:
            self._reply_q.put((reply, failure))

    def acknowledge(self):
        pass

    def requeue(self):
        pass

    def heartbeat(self):
        pass


class _Exchange:
    """The queues of one exchange, and a condition per exchange: a listener
    waits on it instead of polling."""

    def __init__(self):
        self.cond = threading.Condition()
        self.topics = collections.defaultdict(collections.deque)
        self.servers = collections.defaultdict(collections.deque)

    def deliver(self, target, item):
        with self.cond:
            if target.fanout:
                queues = [q for (topic, _), q in self.servers.items()
                          if topic == target.topic]
            elif target.server:
                queues = [self.servers[(target.topic, target.server)]]
            else:
                queues = [self.topics[target.topic]]
            for q in queues:
                q.append(item)
            self.cond.notify_all()

    def take(self, topic, server):
        """The next message for a server of `topic` (its own first), or
        None; the caller holds ``cond``."""
        for q in (self.servers.get((topic, server)), self.topics.get(topic)):
            if q:
                return q.popleft()
        return None


_EXCHANGES = collections.defaultdict(_Exchange)
_EXCHANGES_LOCK = threading.Lock()


def _exchange(name):
    with _EXCHANGES_LOCK:
        return _EXCHANGES[name]


class _Listener(base.PollStyleListener):
    def __init__(self, exchange, topic, server):
        super().__init__()
        self.exchange, self.topic, self.server = exchange, topic, server
        self._stopped = False
        with exchange.cond:  # casts made before the first poll are kept
            exchange.topics[topic]
            if server:
                exchange.servers[(topic, server)]

    @base.batch_poll_helper
    def poll(self, timeout=None):
        item = self.take(timeout)
        return None if item is None else _Incoming(*item)

    def take(self, timeout=None):
        """The next (context, message, reply queue), or None once
        stopped or after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        ex = self.exchange
        with ex.cond:
            while not self._stopped:
                item = ex.take(self.topic, self.server)
                if item is not None:
                    return item
                wait = _WAKE
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        return None
                ex.cond.wait(wait)
        return None

    def stop(self):
        with self.exchange.cond:
            self._stopped = True
            self.exchange.cond.notify_all()


class InProcDriver(base.BaseDriver):
    def __init__(self, conf, url, default_exchange=None,
                 allowed_remote_exmods=None):
        super().__init__(conf, url, default_exchange, allowed_remote_exmods)

    def require_features(self, requeue=True):
        pass

    def _exchange_of(self, target):
        return _exchange(target.exchange or self._default_exchange)

    def send(self, target, ctxt, message, wait_for_reply=None, timeout=None,
             call_monitor_timeout=None, retry=None, transport_options=None):
        reply_q = queue.Queue() if wait_for_reply else None
        self._exchange_of(target).deliver(target, (ctxt, message, reply_q))
        if not wait_for_reply:
            return None
        try:
            reply, failure = reply_q.get(timeout=timeout)
        except queue.Empty:
            raise oslo_messaging.MessagingTimeout(
                'No reply on topic %s' % target.topic)
        if failure:
            raise failure
        return reply

    def send_notification(self, target, ctxt, message, version, retry=None):
        self.send(target, ctxt, message)

    def listen(self, target, batch_size, batch_timeout):
        listener = _Listener(self._exchange_of(target), target.topic,
                             target.server)
        return base.PollStyleListenerAdapter(listener, batch_size,
                                             batch_timeout)

    def listen_for_notifications(self, targets_and_priorities, pool,
                                 batch_size, batch_timeout):
        raise NotImplementedError('inproc:// carries RPC only')

    def cleanup(self):
        pass


# -- the embedded engine's direct way (see the top) ---------------------------

def cast(exchange, topic, message, ctxt=None):
    """Send `message` (oslo.messaging's form: method, args, version) with
    its context `ctxt` (a dict) to a server of `topic`, as RPCClient.cast
    would."""
    _exchange(exchange).deliver(oslo_messaging.Target(topic=topic),
                                ({} if ctxt is None else ctxt, message,
                                 None))


_STOP = object()


class Server:
    """Serve `endpoint`'s methods from the queues of `topic` (and of this
    `server`) on `threads` threads. A message is taken from its queue only
    when a thread is free for it, so another server of the topic in this
    process may take it meanwhile."""

    def __init__(self, exchange, topic, server, endpoint, threads):
        self._listener = _Listener(_exchange(exchange), topic, server)
        self._endpoint = endpoint
        self._free = threading.Semaphore(threads)
        self._work = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._take,
                                          name='inproc-take', daemon=True)]
        self._threads += [threading.Thread(target=self._serve,
                                           name='inproc-%d' % i, daemon=True)
                          for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def _take(self):
        try:
            while True:
                self._free.acquire()
                item = self._listener.take()
                if item is None:   # stopped
                    return
                self._work.put(item)
        finally:
            for _ in self._threads[1:]:
                self._work.put(_STOP)

    def _serve(self):
        while True:
            item = self._work.get()
            if item is _STOP:
                return
            ctxt, message, reply_q = item
            result = failure = None
            try:
                method = getattr(self._endpoint, message['method'])
                result = method(ctxt, **message.get('args', {}))
            except Exception as exc:
                LOG.exception('%s failed', message.get('method'))
                failure = exc
            finally:
                self._free.release()
            if reply_q is not None:
                reply_q.put((result, failure))

    def stop(self):
        """Take no more messages; those taken are served."""
        self._listener.stop()
        self._free.release()   # a taker waiting for a free thread

    def wait(self):
        for thread in self._threads:
            thread.join()
