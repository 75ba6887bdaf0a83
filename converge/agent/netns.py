"""A simulated server's network: a namespace of its own, where what it
reaches of the host is the endpoints converge gave it, and nothing else.

A server's root (`rootfs.Root`) is made in a network namespace of its
own: its loopback only, up, and no route out. The host's loopback (the
engine's database, a broker, other servers' agents and converge
processes) and its abstract unix sockets are not in it. What converge
gave the server is its converge-api URL (in its user data, a wait
condition's ``curl_cli``, a deployment's ``deploy_signal_id``), and for
POLL_SERVER_HEAT the Keystone of ``[trustee]`` (the metadata's
``auth_url``, whose catalog names converge-api); at each of their
addresses the namespace gets a listening socket, made there by
the agent host (`listen`), whose connections `converge.agent.relay`
forwards to the same address and port on the host.

An address that is not a loopback one (a ``public_endpoint`` naming the
host's own, or another machine's, address) is carried on the
namespace's ``lo``; a name is resolved on the host and written in the
root's ``/etc/hosts`` (`Target.name`), as the server has no DNS.
"""

import collections
import ctypes
import fcntl
import ipaddress
import os
import socket
import struct
import threading
import urllib.parse

CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_SIOCSIFADDR = 0x8916
_SIOCSIFNETMASK = 0x891c
_IFF_UP = 0x1
#: connections a server's software may queue on one of its endpoints
BACKLOG = 64
_DEFAULT_PORTS = {'http': 80, 'https': 443}


class Target(collections.namedtuple(
        'Target', 'family address port connect name')):
    """One endpoint of the host a server may reach: listened on at
    (`address`, `port`) in its namespace, forwarded to (`connect`,
    `port`) on the host. `name`: the URL's host when it is a name (the
    root's /etc/hosts gives it `address`), else None."""


def targets(urls):
    """The Targets of the URLs converge gave the servers (each address a
    name resolves to), without repeats. OSError naming the URL when one
    has no host or its name does not resolve."""
    found = []
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        try:
            host, port = parts.hostname, parts.port
        except ValueError as e:   # a port that is not a number
            raise OSError('endpoint %r: %s' % (url, e))
        port = port or _DEFAULT_PORTS.get(parts.scheme)
        if not host or not port:
            raise OSError('endpoint %r names no host and '
                          'port' % url)
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            addresses = [(_family(literal), str(literal))]
        else:
            try:
                infos = socket.getaddrinfo(host, port,
                                           type=socket.SOCK_STREAM)
            except socket.gaierror as e:
                raise OSError('endpoint %r: %s cannot be '
                              'resolved (%s)' % (url, host, e))
            addresses = [(family, info[0]) for family, _t, _p, _c, info
                         in infos if family in (socket.AF_INET,
                                                socket.AF_INET6)]
        for family, address in addresses:
            connect = address
            if ipaddress.ip_address(address).is_unspecified:
                # a server told 0.0.0.0 reaches whatever listens there;
                # the host reaches the same through its loopback
                connect = '127.0.0.1' if family == socket.AF_INET \
                    else '::1'
            target = Target(family, address, port, connect,
                            None if literal is not None else host)
            if target not in found:
                found.append(target)
    return found


def _family(address):
    return socket.AF_INET if address.version == 4 else socket.AF_INET6


def hosts_lines(found):
    """Lines of /etc/hosts naming the Targets' names."""
    return ['%s %s' % (t.address, t.name) for t in found if t.name]


def listen(pid, found):
    """Bring up the loopback of the network namespace of process `pid`
    and make a listening socket there for each Target (its address
    carried on ``lo`` when it is not a loopback one); [(socket, Target)].
    Done from a thread of its own that joins the namespace and ends
    (a thread's network namespace is its own, the process's is left)."""
    result = {}

    def work():
        try:
            fd = os.open('/proc/%d/ns/net' % pid, os.O_RDONLY | os.O_CLOEXEC)
            try:
                _setns(fd, CLONE_NEWNET)
            finally:
                os.close(fd)
            result['sockets'] = _set_up(found)
        except BaseException as e:   # raised again in the caller's thread
            result['error'] = e
    thread = threading.Thread(target=work, name='netns-%d' % pid,
                              daemon=True)
    thread.start()
    thread.join()
    if 'error' in result:
        raise result['error']
    return result['sockets']


def _load_setns():
    if hasattr(os, 'setns'):   # Python 3.12
        return os.setns
    try:
        libc_setns = ctypes.CDLL(None, use_errno=True).setns
    except (OSError, AttributeError):
        return None

    def setns(fd, nstype):
        if libc_setns(fd, nstype) != 0:
            err = ctypes.get_errno()
            raise OSError(err, 'setns: %s' % os.strerror(err))
    return setns


_SETNS = _load_setns()


def _setns(fd, nstype):
    if _SETNS is None:
        raise OSError('setns() is not available here')
    _SETNS(fd, nstype)


def _set_up(found):
    """In the namespace: lo up, the addresses carried, the sockets."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as ctl:
        request = struct.pack('16sH22x', b'lo', 0)
        flags = struct.unpack('16sH22x', fcntl.ioctl(
            ctl, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(ctl, _SIOCSIFFLAGS,
                    struct.pack('16sH22x', b'lo', flags | _IFF_UP))
        carried = set()
        for target in found:
            address = ipaddress.ip_address(target.address)
            if address.is_loopback or address.is_unspecified or \
                    target.address in carried:
                continue
            try:
                _carry(ctl, address, len(carried))
            except OSError as e:
                raise OSError(e.errno, 'cannot carry %s on the loopback '
                              'of a server\'s network namespace: %s'
                              % (address, e.strerror or e))
            carried.add(target.address)
    sockets = []
    try:
        for target in found:
            sock = socket.socket(target.family, socket.SOCK_STREAM)
            sockets.append((sock, target))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if target.family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((target.address, target.port))
            sock.listen(BACKLOG)
    except OSError:
        for sock, _target in sockets:
            sock.close()
        raise
    return sockets


def _carry(ctl, address, index):
    """Add `address` to lo (its own, /32 or /128)."""
    if address.version == 4:
        label = ('lo:%d' % index).encode()
        for request, value in ((_SIOCSIFADDR, address.packed),
                               (_SIOCSIFNETMASK, b'\xff' * 4)):
            fcntl.ioctl(ctl, request, struct.pack(
                '16sH2s4s16x', label, socket.AF_INET, b'\0\0', value))
        return
    # in6_ifreq: the address, its prefix length, the device's index
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as ctl6:
        fcntl.ioctl(ctl6, _SIOCSIFADDR, struct.pack(
            '16sIi', address.packed, 128, socket.if_nametoindex('lo')))
