"""Forwarding of a simulated server's connections to the endpoints
converge gave it (`converge.agent.netns`): what its software connects
to in its own network namespace is connected to, by the agent host, on
the host's side.

One thread and one asyncio event loop serve the listening sockets of
every server's root in the process (a thread per root would be
thousands at a thousand servers). A connection is relayed both ways,
one chunk in flight per direction (the slow side holds the other back),
and half-closes are passed on (an HTTP client that shuts its side down
still gets its answer). A server has at most `MAX_CONNECTIONS` at once;
more are closed as soon as accepted. Closing a server's `Forwarding`
(its root closing) closes its sockets and every connection it has.
"""

import asyncio
import functools
import logging
import threading

LOG = logging.getLogger(__name__)

#: connections one server may have open through its forwarders at once
MAX_CONNECTIONS = 64
#: seconds the host's side of a connection may take to be made
CONNECT_TIMEOUT = 10.0
CHUNK = 64 * 1024
#: seconds a caller waits for the loop to start or stop a forwarding
_WAIT = 30.0


class Relay:
    """The event loop, started at the first forwarding."""

    def __init__(self):
        self._lock = threading.Lock()
        self._loop = None
        self._thread = None

    def _running_loop(self):
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, daemon=True,
                    name='netns-relay')
                self._thread.start()
            return self._loop

    def forward(self, listeners):
        """Serve [(listening socket, target)], each connection accepted
        forwarded to (target.connect, target.port); the Forwarding."""
        loop = self._running_loop()
        forwarding = Forwarding(self, loop)
        future = asyncio.run_coroutine_threadsafe(
            forwarding._start(listeners), loop)
        try:
            future.result(_WAIT)
        except BaseException:
            forwarding.close()
            raise
        return forwarding

    def in_loop(self):
        return threading.current_thread() is self._thread


class Forwarding:
    """The forwarders of one server's root."""

    def __init__(self, relay, loop):
        self._relay = relay
        self._loop = loop
        self._servers = []
        self._transports = set()
        self._count = 0   # connections open
        self._closed = False

    async def _start(self, listeners):
        for sock, target in listeners:
            self._servers.append(await asyncio.start_server(
                functools.partial(self._serve, target), sock=sock,
                limit=CHUNK))

    async def _serve(self, target, reader, writer):
        if self._closed or self._count >= MAX_CONNECTIONS:
            writer.transport.abort()
            return
        self._count += 1
        ends = [writer]
        self._transports.add(writer.transport)
        whole = False
        try:
            up_reader, upstream = await asyncio.wait_for(
                asyncio.open_connection(target.connect, target.port,
                                        limit=CHUNK), CONNECT_TIMEOUT)
            ends.append(upstream)
            self._transports.add(upstream.transport)
            if not self._closed:
                await asyncio.gather(_pipe(reader, upstream),
                                     _pipe(up_reader, writer))
                whole = True
        except (OSError, asyncio.TimeoutError) as e:
            LOG.debug('forwarding to %s:%s: %s', target.connect,
                      target.port, e)
        finally:
            for end in ends:
                if whole:   # what is still buffered is sent first
                    end.close()
                else:
                    end.transport.abort()
            for end in ends:
                try:
                    await end.wait_closed()
                except OSError:
                    pass
                self._transports.discard(end.transport)
            self._count -= 1

    def close(self):
        """Stop listening and cut every connection off (once; from any
        thread)."""
        if self._relay.in_loop():
            self._close()
            return
        try:
            self._loop.call_soon_threadsafe(self._close)
        except RuntimeError:   # the loop is gone (the process ends)
            return

    def _close(self):
        if self._closed:
            return
        self._closed = True
        for server in self._servers:
            server.close()
        for transport in list(self._transports):
            transport.abort()
        self._transports.clear()


async def _pipe(reader, writer):
    """Copy `reader` to `writer` until its end, then half-close it."""
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.transport.abort()


RELAY = Relay()
