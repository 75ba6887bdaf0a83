"""check_resource messages over oslo.messaging.

Embedded: the ``inproc://`` transport (inproc.py), in this process. Distributed:
``rabbit://``; casts go to the topic, so any worker takes them.
"""

import oslo_messaging

from converge import conf as conf_mod

# 2.0: check_resource carries the stack id (locks are taken before reading)
VERSION = '2.0'


def topic():
    return conf_mod.CONF.worker_topic

_TRANSPORTS = {}


def transport():
    url = conf_mod.transport_url()
    t = _TRANSPORTS.get(url)
    if t is None:
        t = _TRANSPORTS[url] = oslo_messaging.get_rpc_transport(
            conf_mod.CONF, url=url)
    return t


class WorkerClient:
    def __init__(self):
        target = oslo_messaging.Target(topic=topic(), version=VERSION)
        self._client = oslo_messaging.get_rpc_client(transport(), target)

    def check_resource(self, stack_id, traversal_id, node, attempt=0):
        kwargs = dict(stack_id=stack_id, traversal_id=traversal_id,
                      node=node)
        if attempt:
            kwargs['attempt'] = attempt
        self._client.cast({}, 'check_resource', **kwargs)


def start_server(endpoint, server_name, threads):
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


def stop_server(server):
    server.stop()
    server.wait()
