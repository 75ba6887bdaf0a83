"""check_resource messages over oslo.messaging.

Embedded: the ``inproc://`` transport (inproc.py), in this process, sent
and served directly on its queues (inproc.cast, inproc.Server: see there
why). Distributed: ``rabbit://``; casts go to the topic, so any worker
takes them.
"""

import threading

import oslo_messaging

from converge import conf as conf_mod
from converge.messaging import inproc
from converge import listeners as listeners_mod
from converge import metrics
from converge import tracing

# transport_url and control_exchange with converge's defaults, whatever
# asks for them first (conf.setup registers them too)
conf_mod.messaging_options()

# 2.0: check_resource carries the stack id (locks are taken before reading)
# 2.1: check_resources, several nodes of one traversal in one message
VERSION = '2.1'


def topic():
    return conf_mod.CONF.worker_topic


def _direct():
    """The in-process bus, served without oslo.messaging's layers."""
    return conf_mod.transport_url().startswith('inproc:')


_TRANSPORTS = {}


def transport():
    # a transport sends to the exchange configured when it was made: a
    # process that moves to another deployment on the same broker (a
    # harness starting one deployment per run does) needs a new one
    key = (conf_mod.transport_url(), conf_mod.CONF.control_exchange)
    t = _TRANSPORTS.get(key)
    if t is None:
        t = _TRANSPORTS[key] = oslo_messaging.get_rpc_transport(
            conf_mod.CONF, url=key[0])
    return t


class Client:
    """What sends nodes to the workers: ``check_resource`` one node; the
    rest is in terms of it (WorkerClient sends many nodes in fewer
    messages)."""

    def check_resource(self, stack_id, traversal_id, node, attempt=0):
        raise NotImplementedError

    def check_resources(self, stack_id, traversal_id, nodes):
        for node in nodes:
            self.check_resource(stack_id, traversal_id, node)

    def send(self, items):
        """Send (stack id, traversal id, node) items, those of one
        traversal together (check_resources)."""
        by_trav = {}
        for stack_id, traversal_id, node in items:
            by_trav.setdefault((stack_id, traversal_id), []).append(node)
        for (stack_id, traversal_id), nodes in by_trav.items():
            self.check_resources(stack_id, traversal_id, nodes)


class WorkerClient(Client):
    def __init__(self, listeners=None, idle=None):
        """`idle`: how many of this process's worker threads are free,
        used in process (the workers of a broker are elsewhere)."""
        self.listeners = listeners_mod.Listeners() if listeners is None \
            else listeners
        self._exchange = self._client = self._idle = None
        if _direct():
            self._exchange = conf_mod.CONF.control_exchange
            self._topic = topic()
            self._idle = idle
            return
        target = oslo_messaging.Target(topic=topic(), version=VERSION)
        # prepared once: RPCClient.cast prepares a call context on every
        # cast (4% of the engine's time on a stack of deployments)
        self._client = oslo_messaging.get_rpc_client(
            transport(), target).prepare()

    def check_resource(self, stack_id, traversal_id, node, attempt=0):
        kwargs = dict(stack_id=stack_id, traversal_id=traversal_id,
                      node=node)
        if attempt:
            kwargs['attempt'] = attempt
        self.listeners.on_cast(traversal_id, node)
        self._cast('check_resource', **kwargs)

    def check_resources(self, stack_id, traversal_id, nodes):
        """Send many nodes of one traversal: in at most `[worker]
        fanout_messages` messages (a fan-out of 2,000 servers cost the
        workers' message consumption about what their units cost) of at
        least `fanout_min_nodes` each (a message's units share their
        records: reconcile.check_resources), each worked through in turn
        by the worker that takes it. The same in process, where a message
        costs little but the units of one share their loads and records
        (2,000 server creates: 1.9 ms of the embedded engine's core each,
        sent one to a message; 1.1 ms sent eight to one); there the
        process's idle threads are known, and each is given a message
        first: a message's units run in turn, and two resources whose
        actions hold their thread (a slow cloud call) would otherwise wait
        for each other while threads stood idle."""
        nodes = list(nodes)
        if len(nodes) <= 1:
            return super().check_resources(stack_id, traversal_id, nodes)
        idle = self._idle() if self._idle is not None else 0
        for part in parts(nodes, idle):
            if len(part) == 1:
                self.check_resource(stack_id, traversal_id, part[0])
                continue
            self.listeners.on_cast(traversal_id, part[0])
            self._cast('check_resources', stack_id=stack_id,
                       traversal_id=traversal_id, nodes=part)

    def _cast(self, method, **kwargs):
        metrics.MESSAGES_SENT.labels(method).inc()
        # the message's context: its traversal's trace (converge/tracing.py)
        ctxt = tracing.carried(kwargs['traversal_id']) \
            if tracing.enabled else {}
        if self._exchange is not None:
            inproc.cast(self._exchange, self._topic, {
                'method': method, 'args': kwargs, 'version': VERSION}, ctxt)
        else:
            self._client.cast(ctxt, method, **kwargs)


def parts(nodes, idle=0):
    """`nodes` (one or more) spread in order over the messages they go
    in: at most `[worker] fanout_messages`, at least `fanout_min_nodes`
    nodes each, or one for each of `idle` threads
    (WorkerClient.check_resources says why)."""
    CONF = conf_mod.CONF.worker
    count = min(len(nodes), CONF.fanout_messages,
                max(1, idle, len(nodes) // CONF.fanout_min_nodes))
    size, extra = divmod(len(nodes), count)
    start = 0
    for i in range(count):
        part = nodes[start:start + size + (i < extra)]
        start += len(part)
        yield part


def start_server(endpoint, server_name, threads):
    if _direct():
        return inproc.Server(conf_mod.CONF.control_exchange, topic(),
                             server_name, endpoint, threads)
    t = transport()
    if conf_mod.transport_url().startswith('rabbit'):
        # take only what the pool can work on, so idle workers get the rest
        # and a dead worker's unstarted messages go back to the queue
        conf_mod.CONF.set_override('rabbit_qos_prefetch_count', threads,
                                   group='oslo_messaging_rabbit')
    target = oslo_messaging.Target(topic=topic(), server=server_name,
                                   version=VERSION)
    server = oslo_messaging.get_rpc_server(t, target, [endpoint])
    server.start(override_pool_size=threads)
    return server


def local_submit(server):
    """How to hand work to the threads that work through `server`'s
    messages (their executor's submit), or None: in process (``inproc``)
    a cast is served here already, and a server without one has none."""
    if server is None or _direct():
        return None
    # oslo.messaging keeps its pool as MessageHandlingServer._work_executor
    # (a futurist executor of override_pool_size threads)
    executor = getattr(server, '_work_executor', None)
    return executor.submit if executor is not None else None


#: seconds stop_server waits for the server's executor to wind down
STOP_WAIT = 0.1


def stop_server(server):
    """Take no more messages. Waiting for the units in flight is the
    caller's (the worker service waits for them, gracefully); the wait
    for the executor's idle threads, which look for work once a second
    (futurist), goes on in the background: it cost every command a
    second. A unit cut short when the process exits is resumed as after
    any crash."""
    server.stop()
    waiter = threading.Thread(target=server.wait, name='rpc-stop',
                              daemon=True)
    waiter.start()
    waiter.join(STOP_WAIT)
