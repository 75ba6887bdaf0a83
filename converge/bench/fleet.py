"""A throw-away distributed deployment on loopback: a fresh PostgreSQL (or
MariaDB) database, its own RabbitMQ exchange and topic, its own Redis
group, and `converge-worker` processes, each in its own session so it can
be killed with its children. converge-bench's distributed mode and the
distributed tests both stand on it.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

BIN = os.path.dirname(sys.executable)
PG = dict(host='127.0.0.1', port=5432, user='postgres')
MYSQL = dict(host='127.0.0.1', port=3306, user='root')
SERVICES = {'postgresql': 5432, 'rabbitmq': 5672, 'redis': 6379,
            'mariadb': 3306}


def missing(*services, wait=0):
    """The services of `services` not reachable on loopback, as
    'name:port' strings; with `wait`, a service is retried for that many
    seconds first (one restarting is not missing)."""
    deadline = time.monotonic() + wait
    out = []
    for name in services:
        while True:
            try:
                socket.create_connection(('127.0.0.1', SERVICES[name]),
                                         timeout=1).close()
                break
            except OSError:
                if time.monotonic() >= deadline:
                    out.append('%s:%d' % (name, SERVICES[name]))
                    break
                time.sleep(0.5)
    return out


def free_port(host='127.0.0.1'):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _admin(db):
    if db == 'postgresql':
        import psycopg2
        conn = psycopg2.connect(dbname='postgres', **PG)
        conn.autocommit = True
        return conn
    import pymysql
    return pymysql.connect(**MYSQL)


def _url(db, name):
    if db == 'postgresql':
        return 'postgresql+psycopg2://postgres@127.0.0.1:5432/%s' % name
    return 'mysql+pymysql://root@127.0.0.1:3306/%s' % name


class Deployment:
    """``directory`` holds converge.conf and the workers' logs; ``options``
    adds or overrides config lines (``{'worker': {'stall_timeout': 5}}``)."""

    def __init__(self, directory, db='postgresql', options=None, env=None):
        self.dir = directory
        self.name = 'conv_%s' % uuid.uuid4().hex[:10]
        self.db = db
        self.env = env
        conn = _admin(db)
        try:
            conn.cursor().execute('CREATE DATABASE %s' % self.name)
        finally:
            conn.close()
        self.url = _url(db, self.name)
        sections = {
            'DEFAULT': {
                'transport_url': 'rabbit://guest:guest@127.0.0.1:5672/',
                'control_exchange': self.name,
                'worker_topic': self.name,
                'graceful_shutdown_timeout': 5,
                # what a process keeps of its own (the sim's disks, file
                # locks) stays in this directory, not in ~/.converge
                'home': str(directory)},
            'database': {'connection': self.url},
            'coordination': {
                'backend_url': 'redis://127.0.0.1:6379?timeout=5',
                'group': self.name},
            'sim': {'connection': 'sqlite:///%s' % os.path.join(
                str(directory), 'sim.db')},
        }
        for section, values in (options or {}).items():
            sections.setdefault(section, {}).update(values)
        self.sim_url = sections['sim']['connection']
        self.conf = os.path.join(str(directory), 'converge.conf')
        with open(self.conf, 'w') as f:
            for section, values in sections.items():
                f.write('[%s]\n' % section)
                for key, value in values.items():
                    f.write('%s = %s\n' % (key, value))
        self.workers = []
        self.apis = []
        self.manage('db', 'sync')

    def manage(self, *args):
        subprocess.run([os.path.join(BIN, 'converge-manage'),
                        '--config-file', self.conf] + list(args),
                       check=True, capture_output=True)

    def start_worker(self):
        n = len(self.workers)
        log = os.path.join(str(self.dir), 'worker%d.log' % n)
        env = dict(os.environ, **self.env) if self.env else None
        proc = subprocess.Popen(
            [os.path.join(BIN, 'converge-worker'), '--config-file',
             self.conf, '--log-file', log],
            start_new_session=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=env)
        self.workers.append((proc, log))
        return proc, log

    def start_api(self, host, port, timeout=30):
        """Start converge-api on host:port; return once it serves."""
        log = os.path.join(str(self.dir), 'api.log')
        # the API is not an engine that runs units: none of the workers'
        # listeners (the bench's probe counts engines by their answers)
        own = os.path.join(str(self.dir), 'api.conf')
        with open(own, 'w') as f:
            f.write('[DEFAULT]\nlisteners =\n')
        proc = subprocess.Popen(
            [os.path.join(BIN, 'converge-api'), '--bind',
             '%s:%d' % (host, port), '--config-file', self.conf,
             '--config-file', own, '--log-file', log],
            start_new_session=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=dict(os.environ, **self.env)
            if self.env else None)
        self.apis.append((proc, log))
        deadline = time.time() + timeout
        while time.time() < deadline:
            if proc.poll() is not None:
                break
            try:
                socket.create_connection((host, port), timeout=1).close()
                return proc
            except OSError:
                time.sleep(0.1)
        raise RuntimeError('converge-api did not start (see %s)' % log)

    def engine_id(self, index, timeout=30):
        """The engine id a worker logged when it started."""
        proc, log = self.workers[index]
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(log):
                for line in open(log):
                    if 'worker ' in line and ' started' in line:
                        return line.split('worker ')[1].split()[0]
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError('worker %d did not start (see %s)' % (index, log))

    def kill(self, index):
        """SIGKILL a worker and its children: a host gone at once."""
        proc = self.workers[index][0]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def close(self):
        # every process is told first and then waited for: each takes
        # seconds to stop gracefully, and one after the other those
        # seconds added up at the end of every run
        running = [proc for proc, _ in self.workers + self.apis
                   if proc.poll() is None]
        for proc in running:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.time() + 20
        for proc in running:
            try:
                proc.wait(timeout=max(deadline - time.time(), 0.1))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        # the sim's agent host a worker or API started is a session of its
        # own (it outlives a restart of the process that started it), so
        # the process groups above do not reach it
        disks = os.path.join(str(self.dir), 'sim-disks')
        if os.path.isdir(disks):
            from converge.drivers.sim import agents
            try:
                agents.shutdown(self.sim_url, disks)
            except Exception:
                pass
        try:
            conn = _admin(self.db)
            drop = 'DROP DATABASE IF EXISTS %s' % self.name
            if self.db == 'postgresql':
                drop += ' WITH (FORCE)'
            conn.cursor().execute(drop)
            conn.close()
        except Exception:
            pass
