"""A simulated server's software has a network namespace of its own
(converge/agent/netns.py, relay.py): what listens on the host's
loopback and the host's abstract unix sockets are not there; the
converge-api endpoints the agent host was given are, at the same
address and port, forwarded to the host."""

import http.server
import os
import socket
import sys
import threading
import time
import uuid

import pytest

from converge.agent import hooks
from converge.agent import rootfs

pytestmark = pytest.mark.skipif(
    not rootfs.available(), reason='no roots here (not root on Linux?)')

# what a tenant's script does: connect to an address and port, or to an
# abstract unix socket, and print what it got (the agent's Python is in
# every root)
PROBE = '''#!%s
import os, socket, sys
for what in sys.argv[1:] or os.environ['targets'].split():
    try:
        if what.startswith('@'):
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(5)
            sock.connect('\\0' + what[1:])
        else:
            host, _, port = what.rpartition(':')
            sock = socket.create_connection((host, int(port)), 5)
        sock.sendall(b'GET /%%s HTTP/1.0\\r\\n\\r\\n' %% os.environ.get(
            'size', '0').encode())
        data = b''
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        print(what, 'connected', len(data.partition(b'\\r\\n\\r\\n')[2]),
              data.split(b'\\r\\n', 1)[0].decode())
    except OSError as e:
        print(what, type(e).__name__, e)
''' % sys.executable


@pytest.fixture(autouse=True)
def simulated(monkeypatch):
    """The hooks run for simulated servers, given no endpoint unless the
    test gives one."""
    monkeypatch.setitem(rootfs._STATE, 'enabled', True)
    monkeypatch.setitem(rootfs._STATE, 'endpoints', ())
    monkeypatch.setitem(rootfs._STATE, 'endpoint_file', None)
    monkeypatch.setitem(rootfs._STATE, 'targets', None)


def _listener(family=socket.AF_INET, address=('127.0.0.1', 0)):
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind(address)
    sock.listen(8)
    sock.setblocking(False)
    return sock


def _connections(sock):
    """How many connections `sock` was asked for (taken, closed)."""
    count = 0
    while True:
        try:
            conn, _peer = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


class _Answer(http.server.BaseHTTPRequestHandler):
    """GET /N: N bytes."""

    def do_GET(self):
        body = b'x' * int(self.path.strip('/') or 0)
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def api():
    """An HTTP server on the host's loopback, standing for converge-api."""
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _probe(disk, targets, size=0, runner=None):
    result = hooks.run({'id': 'probe', 'group': 'script', 'config': PROBE,
                        'inputs': [{'name': 'targets',
                                    'value': ' '.join(targets)},
                                   {'name': 'size', 'value': str(size)}]},
                       disk, runner or hooks.ProcessRunner())
    assert result['deploy_status_code'] == 0, result
    return dict(line.split(' ', 1)
                for line in result['deploy_stdout'].splitlines())


def test_a_script_cannot_reach_the_hosts_loopback_or_abstract_sockets(
        tmp_path):
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    tcp = _listener()
    name = 'converge-test-%s' % uuid.uuid4().hex
    unix = _listener(socket.AF_UNIX, '\0' + name)
    port = tcp.getsockname()[1]
    try:
        seen = _probe(disk, ['127.0.0.1:%d' % port, '@' + name])
        assert seen['127.0.0.1:%d' % port].startswith(
            'ConnectionRefusedError'), seen
        assert seen['@' + name].startswith('ConnectionRefusedError'), seen
        assert _connections(tcp) == 0
        assert _connections(unix) == 0
    finally:
        tcp.close()
        unix.close()


def test_the_endpoint_it_was_given_is_forwarded_and_no_other_port(
        tmp_path, monkeypatch, api):
    """converge-api's address and port reach the host's (a response of
    a few MiB comes back whole); another port of the same address does
    not, nor does the endpoint's port at another loopback address."""
    port = api.server_address[1]
    monkeypatch.setitem(rootfs._STATE, 'endpoints',
                        ('http://127.0.0.1:%d/' % port,))
    other = _listener()
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    size = 3 * 1024 * 1024 + 17
    try:
        seen = _probe(disk, ['127.0.0.1:%d' % port,
                             '127.0.0.1:%d' % other.getsockname()[1],
                             '127.0.0.2:%d' % port], size=size)
        assert seen['127.0.0.1:%d' % port] == \
            'connected %d HTTP/1.0 200 OK' % size, seen
        for what in ('127.0.0.1:%d' % other.getsockname()[1],
                     '127.0.0.2:%d' % port):
            assert seen[what].startswith('ConnectionRefusedError'), seen
        assert _connections(other) == 0
    finally:
        other.close()


def test_a_named_endpoint_resolves_in_the_root(tmp_path, monkeypatch, api):
    """A URL naming the host (not an address) reaches it from the
    server too: the root's /etc/hosts gives the name the address the
    host resolved it to."""
    port = api.server_address[1]
    monkeypatch.setitem(rootfs._STATE, 'endpoints',
                        ('http://localhost:%d' % port,))
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    seen = _probe(disk, ['localhost:%d' % port])
    assert seen['localhost:%d' % port] == 'connected 0 HTTP/1.0 200 OK', \
        seen


def _own_address():
    """An address of this host that is not a loopback one, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(('198.51.100.1', 9))   # no packet is sent
        except OSError:
            return None
        address = sock.getsockname()[0]
    return None if address.startswith('127.') else address


def test_an_endpoint_at_a_hosts_other_address_is_carried(tmp_path,
                                                         monkeypatch):
    """[api] public_endpoint naming the host's own address (not a
    loopback one): the server's namespace carries that address, and
    its port there reaches the host's."""
    address = _own_address()
    if address is None:
        pytest.skip('this host has no address but loopback')
    server = http.server.ThreadingHTTPServer((address, 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    monkeypatch.setitem(rootfs._STATE, 'endpoints',
                        ('http://%s:%d' % (address, port),))
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    try:
        seen = _probe(disk, ['%s:%d' % (address, port),
                             '127.0.0.1:%d' % port])
    finally:
        server.shutdown()
        server.server_close()
    assert seen['%s:%d' % (address, port)] == \
        'connected 0 HTTP/1.0 200 OK', seen
    assert seen['127.0.0.1:%d' % port].startswith('ConnectionRefused'), \
        seen


def _fds():
    return len(os.listdir('/proc/self/fd'))


def test_a_servers_forwarders_go_with_its_root(tmp_path, monkeypatch, api):
    """The agent host keeps no socket of a server whose root is gone:
    roots made and let go, again and again, leave nothing open."""
    port = api.server_address[1]
    monkeypatch.setitem(rootfs._STATE, 'endpoints',
                        ('http://127.0.0.1:%d' % port,))
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    runner = hooks.ProcessRunner()
    _probe(disk, ['127.0.0.1:%d' % port], runner=runner)   # relay started
    runner.kill_all()
    before = _fds()
    for _ in range(3):
        runner = hooks.ProcessRunner()
        seen = _probe(disk, ['127.0.0.1:%d' % port], runner=runner)
        assert seen['127.0.0.1:%d' % port].startswith('connected'), seen
        runner.kill_all()
    deadline = time.monotonic() + 10
    while _fds() > before:
        assert time.monotonic() < deadline, (before, os.listdir(
            '/proc/self/fd'))
        time.sleep(0.05)


def test_an_endpoint_that_cannot_be_resolved_fails_the_hook_saying_so(
        tmp_path, monkeypatch):
    monkeypatch.setitem(rootfs._STATE, 'endpoints',
                        ('http://converge-api.invalid:8004',))
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    result = hooks.run({'id': 'd', 'group': 'script',
                        'config': '#!/bin/sh\necho ran\n'}, disk,
                       hooks.ProcessRunner())
    assert result['deploy_status_code'] == 1, result
    assert result['deploy_stdout'] == ''
    assert 'converge-api.invalid' in result['deploy_stderr'], result
