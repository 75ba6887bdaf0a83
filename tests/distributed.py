"""A throw-away distributed deployment on loopback for one test:
a fresh PostgreSQL (or MariaDB) database, its own RabbitMQ exchange and
Redis group, N `converge-worker` processes and a CLI pointed at them.

Where a service is missing the test skips, naming it; with CI=true it
fails instead, because CI must run these tests for real."""

import json
import os
import subprocess
import time
import uuid

import pytest

from converge.bench import fleet

BIN = fleet.BIN
PG, MYSQL = fleet.PG, fleet.MYSQL


def require(*services):
    ci = os.environ.get('CI') == 'true'
    # CI must run these tests, so a service that is starting or restarting
    # gets time to come back before it counts as missing
    gone = fleet.missing(*services, wait=60 if ci else 0)
    if gone:
        msg = 'needs %s on 127.0.0.1 (not reachable)' % ', '.join(gone)
        if ci:
            pytest.fail('CI=true: %s after 60 s' % msg)
        pytest.skip(msg)


class Deployment(fleet.Deployment):
    """``coordination_timeout``: seconds without a heartbeat before a
    worker leaves the group and its locks expire (tooz's redis driver
    beats every half of it); ``coordination_options`` adds to the URL
    (``&membership_timeout=2&lock_timeout=12`` sets the two apart)."""

    def __init__(self, tmp_path, db='postgresql', stall_timeout=10,
                 coordination_timeout=5, coordination_options='',
                 options=None):
        sections = {
            'DEFAULT': {'worker_threads': 8},
            'worker': {'sweep_interval': 1, 'stall_timeout': stall_timeout},
            'coordination': {'backend_url': 'redis://127.0.0.1:6379?'
                             'timeout=%s%s' % (coordination_timeout,
                                               coordination_options)},
        }
        for section, values in (options or {}).items():
            sections.setdefault(section, {}).update(values)
        super().__init__(tmp_path, db, options=sections)
        self.dir = tmp_path

    def coordinator(self):
        """A tooz member of this deployment's backend that joins nothing
        (to list the group, try locks); stop() it."""
        from converge.coordination import locks
        return locks.Locks(self._coordination_url(),
                           'probe-%s' % uuid.uuid4().hex[:8])

    def _coordination_url(self):
        import configparser
        c = configparser.ConfigParser(interpolation=None)
        c.read(self.conf)
        return c['coordination']['backend_url']

    def group(self):
        import configparser
        c = configparser.ConfigParser(interpolation=None)
        c.read(self.conf)
        return c['coordination']['group']

    def members(self, probe):
        return probe.members(self.group())

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


def wait_for(predicate, timeout=120, interval=0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError('condition not met in %ss' % timeout)
