"""check_resource messages over oslo.messaging.

Embedded: the ``fake://`` transport, in this process. Distributed:
``rabbit://``; casts go to the topic, so any worker takes them.
"""

import oslo_messaging

from converge import conf as conf_mod

TOPIC = 'converge-worker'
VERSION = '1.0'

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
        target = oslo_messaging.Target(topic=TOPIC, version=VERSION)
        self._client = oslo_messaging.get_rpc_client(transport(), target)

    def check_resource(self, traversal_id, node):
        self._client.cast({}, 'check_resource', traversal_id=traversal_id,
                          node=node)


def start_server(endpoint, server_name, threads):
    target = oslo_messaging.Target(topic=TOPIC, server=server_name,
                                   version=VERSION)
    server = oslo_messaging.get_rpc_server(transport(), target, [endpoint])
    server.start(override_pool_size=threads)
    return server


def stop_server(server):
    server.stop()
    server.wait()
