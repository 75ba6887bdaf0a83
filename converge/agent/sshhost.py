"""A simulated host reached over SSH: what an OS::Heat::DeployedServer
stands for in the simulator (a machine outside the cloud, no agent, that
`converge deployment run` configures over SSH).

Each host is one detached process (`serve`) that holds:

- a root of its own (`rootfs.Root`: mount, PID, IPC, user and network
  namespaces, as a simulated server's hooks get), its disk at
  ``<hosts dir>/<name>/disk``;
- a real OpenSSH ``sshd`` running in that root, listening on the root's
  own loopback (127.0.0.1:2222 there), with a host key made in the root and
  the public half of converge's key (`key_pair`) as root's authorized key;
- a listening socket on the host's loopback (127.0.0.1, a port of its
  own) whose connections it carries into the root's network namespace
  (a thread per connection joins it with setns and connects there).

What logs in runs as root of that root only (on the machine, a uid of
``[sim] server_uid``'s range), sees its disk and the host's ``/usr``
read-only, and nothing of the engine's. The host's record,
``<hosts dir>/<name>/host.json`` (name, address, port, user, pid, disk),
is what `converge deployment export` reads to write the inventory.
"""

import argparse
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading

from converge.agent import netns
from converge.agent import rootfs

#: where sshd listens inside a host's root (not 22: the root's root
#: has no privilege over the network namespace, made before its user
#: namespace, so it cannot bind a port below 1024)
INNER_PORT = 2222
RECORD = 'host.json'
CHUNK = 64 * 1024


def key_pair(directory):
    """converge's SSH key (ed25519, made once under `directory`): the
    private key's path; its public half is ``<path>.pub``."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, 'id_ed25519')
    if not os.path.exists(path):
        tmp = path + '.%d' % os.getpid()
        subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '',
                        '-C', 'converge', '-f', tmp], check=True,
                       stdin=subprocess.DEVNULL)
        os.replace(tmp + '.pub', path + '.pub')
        os.replace(tmp, path)   # last: its presence says both are there
    return path


def record(hosts_dir, name):
    """The host's record (a dict), or None when it has none."""
    try:
        with open(os.path.join(hosts_dir, name, RECORD)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def records(hosts_dir):
    try:
        names = sorted(os.listdir(hosts_dir))
    except FileNotFoundError:
        return []
    return [r for r in (record(hosts_dir, n) for n in names) if r]


def alive(rec):
    try:
        os.kill(rec['pid'], 0)
    except (OSError, KeyError, TypeError):
        return False
    return True


def _sshd_config(disk):
    ssh = os.path.join(disk, 'ssh')
    return '\n'.join([
        'ListenAddress 127.0.0.1:%d' % INNER_PORT,
        'HostKey %s' % os.path.join(ssh, 'host_ed25519'),
        'AuthorizedKeysFile %s' % os.path.join(ssh, 'authorized_keys'),
        'PidFile none',
        'PermitRootLogin prohibit-password',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'UsePAM no',
        # its files are the machine root's, seen as nobody from inside
        'StrictModes no',
        'Subsystem sftp internal-sftp',
        ''])


class Host:
    """One simulated host: its root, its sshd, its forwarder."""

    def __init__(self, hosts_dir, name, public_key, port=0):
        self.dir = os.path.join(os.path.realpath(hosts_dir), name)
        self.name = name
        self.disk = os.path.join(self.dir, 'disk')
        os.makedirs(self.disk, exist_ok=True)
        rootfs.enable(on=True, confine=True, endpoints=())
        why = rootfs.refused()
        if why:
            raise rootfs.Unconfined(why)
        self.root = rootfs.Root(self.disk, rootfs.binds(self.disk),
                                endpoints=[])
        try:
            self._sshd(public_key)
            self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR,
                                     1)
            self.listener.bind(('127.0.0.1', port))
            self.listener.listen(64)
        except BaseException:
            self.root.close()
            raise
        self.port = self.listener.getsockname()[1]

    def _in_root(self, *argv, **kw):
        return subprocess.run(self.root.argv('/') + list(argv),
                              env=rootfs.base_env(), check=True,
                              stdin=subprocess.DEVNULL, **kw)

    def _sshd(self, public_key):
        ssh = os.path.join(self.disk, 'ssh')
        self._in_root('mkdir', '-p', ssh, '/run/sshd')
        # the root has no /etc/shadow (not copied from the machine's):
        # sshd then takes root's account as locked. A password no one
        # can type, and password logins refused anyway.
        self._in_root('/bin/sh', '-c', 'umask 077; grep -q "^root:" '
                      '/etc/shadow 2>/dev/null || echo '
                      '"root:no-password-login:19000:0:99999:7:::" '
                      '>> /etc/shadow')
        with open(os.path.join(ssh, 'authorized_keys.tmp'), 'w') as f:
            f.write(public_key.strip() + '\n')
        os.chmod(os.path.join(ssh, 'authorized_keys.tmp'), 0o644)
        os.replace(os.path.join(ssh, 'authorized_keys.tmp'),
                   os.path.join(ssh, 'authorized_keys'))
        with open(os.path.join(ssh, 'sshd_config.tmp'), 'w') as f:
            f.write(_sshd_config(self.disk))
        os.chmod(os.path.join(ssh, 'sshd_config.tmp'), 0o644)
        os.replace(os.path.join(ssh, 'sshd_config.tmp'),
                   os.path.join(ssh, 'sshd_config'))
        if not os.path.exists(os.path.join(ssh, 'host_ed25519')):
            self._in_root('ssh-keygen', '-q', '-t', 'ed25519', '-N', '',
                          '-f', os.path.join(ssh, 'host_ed25519'))
        # -D: in the foreground, as the root's child; it dies with the
        # root (its PID namespace)
        self.sshd = subprocess.Popen(
            self.root.argv('/') + ['/usr/sbin/sshd', '-D', '-e', '-f',
                                   os.path.join(ssh, 'sshd_config')],
            env=rootfs.base_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, 'sshd.log'), 'ab'),
            start_new_session=True)
        # ready once it listens in the root's namespace (sshd -t checks
        # the configuration first, so a bad one fails here, not later)
        self._in_root('/usr/sbin/sshd', '-t', '-f',
                      os.path.join(ssh, 'sshd_config'))

    def _connect_inside(self):
        """A socket connected to the root's sshd, made in its network
        namespace (a socket stays in the namespace it was made in)."""
        fd = os.open('/proc/%d/ns/net' % self.root.pid,
                     os.O_RDONLY | os.O_CLOEXEC)
        try:
            netns._setns(fd, netns.CLONE_NEWNET)
        finally:
            os.close(fd)
        sock = socket.create_connection(('127.0.0.1', INNER_PORT), 10)
        sock.settimeout(None)
        return sock

    def _carry(self, outer):
        inner = None
        try:
            for _ in range(50):   # sshd may not listen yet at the start
                try:
                    inner = self._connect_inside()
                    break
                except ConnectionRefusedError:
                    select.select([], [], [], 0.1)
            if inner is None:
                return
            ends = {outer: inner, inner: outer}
            while ends:
                ready, _, _ = select.select(list(ends), [], [])
                for sock in ready:
                    data = sock.recv(CHUNK)
                    other = ends[sock]
                    if data:
                        other.sendall(data)
                    else:
                        try:
                            other.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                        del ends[sock]
        except OSError:
            pass
        finally:
            outer.close()
            if inner is not None:
                inner.close()

    def serve_forever(self):
        while True:
            conn, _ = self.listener.accept()
            # a thread per connection: it joins the root's network
            # namespace (setns is per thread) and ends with the connection
            threading.Thread(target=self._carry, args=(conn,),
                             daemon=True).start()

    def close(self):
        self.listener.close()
        self.root.close()


def serve(argv=None):
    parser = argparse.ArgumentParser(prog='converge-sim-host')
    parser.add_argument('--hosts-dir', required=True)
    parser.add_argument('--name', required=True)
    parser.add_argument('--public-key', required=True)
    parser.add_argument('--port', type=int, default=0)
    args = parser.parse_args(argv)
    with open(args.public_key) as f:
        public = f.read()
    try:
        host = Host(args.hosts_dir, args.name, public, args.port)
    except (OSError, subprocess.SubprocessError) as e:
        print('error %s' % e, flush=True)
        return 1
    rec = {'name': args.name, 'address': '127.0.0.1', 'port': host.port,
           'user': 'root', 'pid': os.getpid(), 'disk': host.disk}
    path = os.path.join(host.dir, RECORD)
    with open(path + '.tmp', 'w') as f:
        json.dump(rec, f)
    os.replace(path + '.tmp', path)

    def stop(signum, frame):
        host.close()
        try:
            os.unlink(path)
        except OSError:
            pass
        os._exit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print('ready %d' % host.port, flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    host.serve_forever()


def start(hosts_dir, name, public_key_path, port=0):
    """Start host `name` (a detached process; it outlives the command);
    its record. OSError when it could not be made."""
    os.makedirs(os.path.join(hosts_dir, name), exist_ok=True)
    log = open(os.path.join(hosts_dir, name, 'host.log'), 'ab')
    proc = subprocess.Popen(
        [sys.executable, '-m', 'converge.agent.sshhost', '--hosts-dir',
         hosts_dir, '--name', name, '--public-key', public_key_path,
         '--port', str(port)], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    line = proc.stdout.readline().decode('utf-8', 'replace').strip()
    proc.stdout.close()
    if not line.startswith('ready '):
        proc.wait()
        raise OSError('simulated host %s could not be started: %s' % (
            name, line[6:] if line.startswith('error ') else
            'see %s' % os.path.join(hosts_dir, name, 'host.log')))
    return record(hosts_dir, name)


def stop(hosts_dir, name):
    """Stop host `name` (its root, sshd and forwarder); its disk stays.
    False when it was not running."""
    rec = record(hosts_dir, name)
    if rec is None or not alive(rec):
        try:
            os.unlink(os.path.join(hosts_dir, name, RECORD))
        except OSError:
            pass
        return False
    os.kill(rec['pid'], signal.SIGTERM)
    # gone once its record is (it removes it as it stops)
    for _ in range(200):
        if not alive(rec):
            break
        select.select([], [], [], 0.05)
    return True


if __name__ == '__main__':
    sys.exit(serve())
