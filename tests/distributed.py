"""A throw-away distributed deployment on loopback for one test:
a fresh PostgreSQL (or MariaDB) database, its own RabbitMQ exchange and
Redis group, N `converge-worker` processes and a CLI pointed at them.

Where a service is missing the test skips, naming it; with CI=true it
fails instead, because CI must run these tests for real."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

BIN = os.path.dirname(sys.executable)
PG = dict(host='127.0.0.1', port=5432, user='postgres')
MYSQL = dict(host='127.0.0.1', port=3306, user='root')


def _reachable(port):
    try:
        socket.create_connection(('127.0.0.1', port), timeout=1).close()
        return True
    except OSError:
        return False


def require(*services):
    names = {'postgresql': 5432, 'rabbitmq': 5672, 'redis': 6379,
             'mariadb': 3306}
    missing = [s for s in services if not _reachable(names[s])]
    if missing:
        msg = 'needs %s on 127.0.0.1 (not reachable)' % ', '.join(
            '%s:%d' % (m, names[m]) for m in missing)
        if os.environ.get('CI') == 'true':
            pytest.fail('CI=true: ' + msg)
        pytest.skip(msg)


class Deployment:
    def __init__(self, tmp_path, db='postgresql', stall_timeout=10):
        self.dir = tmp_path
        self.name = 'conv_%s' % uuid.uuid4().hex[:10]
        self.db = db
        if db == 'postgresql':
            import psycopg2
            conn = psycopg2.connect(dbname='postgres', **PG)
            conn.autocommit = True
            conn.cursor().execute('CREATE DATABASE %s' % self.name)
            conn.close()
            url = 'postgresql+psycopg2://postgres@127.0.0.1:5432/%s' % \
                self.name
        else:
            import pymysql
            conn = pymysql.connect(**MYSQL)
            conn.cursor().execute('CREATE DATABASE %s' % self.name)
            conn.close()
            url = 'mysql+pymysql://root@127.0.0.1:3306/%s' % self.name
        self.conf = str(tmp_path / 'converge.conf')
        with open(self.conf, 'w') as f:
            f.write('[DEFAULT]\n'
                    'transport_url = rabbit://guest:guest@127.0.0.1:5672/\n'
                    'control_exchange = %s\n'
                    'worker_topic = %s\n'
                    'worker_threads = 8\n'
                    'graceful_shutdown_timeout = 5\n'
                    '[database]\nconnection = %s\n'
                    '[coordination]\n'
                    'backend_url = redis://127.0.0.1:6379?timeout=5\n'
                    'group = %s\n'
                    '[worker]\nsweep_interval = 1\nstall_timeout = %d\n'
                    '[sim]\nconnection = sqlite:///%s\n'
                    % (self.name, self.name, url, self.name, stall_timeout,
                       tmp_path / 'sim.db'))
        self.workers = []
        self.manage('db', 'sync')

    def manage(self, *args):
        subprocess.run([os.path.join(BIN, 'converge-manage'),
                        '--config-file', self.conf] + list(args),
                       check=True, capture_output=True)

    def start_worker(self):
        n = len(self.workers)
        log = str(self.dir / ('worker%d.log' % n))
        proc = subprocess.Popen(
            [os.path.join(BIN, 'converge-worker'), '--config-file',
             self.conf, '--log-file', log],
            start_new_session=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.workers.append((proc, log))
        return proc, log

    def engine_id(self, index, timeout=30):
        """The engine id a worker logged when it started."""
        log = self.workers[index][1]
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(log):
                for line in open(log):
                    if 'worker ' in line and ' started' in line:
                        return line.split('worker ')[1].split()[0]
            time.sleep(0.1)
        raise AssertionError('worker %d did not start' % index)

    def kill(self, index):
        """SIGKILL a worker and its children: a host gone at once."""
        proc = self.workers[index][0]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def cli(self, *args, check=True, timeout=600):
        proc = subprocess.run(
            [os.path.join(BIN, 'converge'), '--config-file', self.conf]
            + list(args), capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode:
            raise AssertionError('converge %s: %s\n%s' % (
                ' '.join(args), proc.stdout, proc.stderr))
        return proc

    def json(self, *args, **kw):
        return json.loads(self.cli(*(list(args) + ['-f', 'json']),
                                   **kw).stdout)

    def cli_popen(self, *args):
        return subprocess.Popen(
            [os.path.join(BIN, 'converge'), '--config-file', self.conf]
            + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)

    def sql(self, query):
        if self.db == 'postgresql':
            import psycopg2
            conn = psycopg2.connect(dbname=self.name, **PG)
        else:
            import pymysql
            conn = pymysql.connect(database=self.name, **MYSQL)
        try:
            cur = conn.cursor()
            cur.execute(query)
            rows = cur.fetchall() if cur.description else []
            conn.commit()
            return rows
        finally:
            conn.close()

    def close(self):
        for proc, _ in self.workers:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=20)
                except (subprocess.TimeoutExpired, ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        try:
            if self.db == 'postgresql':
                import psycopg2
                conn = psycopg2.connect(dbname='postgres', **PG)
                conn.autocommit = True
                conn.cursor().execute(
                    'DROP DATABASE IF EXISTS %s WITH (FORCE)' % self.name)
            else:
                import pymysql
                conn = pymysql.connect(**MYSQL)
                conn.cursor().execute('DROP DATABASE IF EXISTS %s'
                                      % self.name)
            conn.close()
        except Exception:
            pass


def wait_for(predicate, timeout=120, interval=0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError('condition not met in %ss' % timeout)
