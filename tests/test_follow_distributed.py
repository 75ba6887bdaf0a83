"""`--wait` against a distributed deployment whose database drops the
CLI's connection as the event stream starts: the CLI exits 0 when the
stack succeeded, and prints every event once."""

import collections
import os
import re
import subprocess

import pytest

from tests.distributed import BIN, PG, wait_for

pytestmark = [pytest.mark.distributed, pytest.mark.xdist_group('services')]

APP = 'converge_cli'
LINE = re.compile(r'^\S+ \S+ \[(?P<name>[^\]]+)\]: (?P<status>\S+)  ')


def _template(path, n=40):
    lines = ['heat_template_version: 2018-08-31', 'resources:']
    for i in range(n):
        lines += ['  r%d:' % i, '    type: OS::Heat::TestResource',
                  '    properties: {value: v%d, action_wait_secs: '
                  '{create: 0.05}}' % i]
        if i >= 4:
            lines.append('    depends_on: r%d' % (i - 4))
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def test_wait_survives_a_dropped_connection_and_prints_each_event_once(
        dist, tmp_path):
    import psycopg2
    dist.start_worker()
    dist.engine_id(0)
    # the CLI names its connections, so that only its own are cut
    cli_conf = tmp_path / 'cli.conf'
    cli_conf.write_text(open(dist.conf).read().replace(
        dist.url, dist.url + '?application_name=' + APP))
    tmpl = _template(tmp_path / 'chain.yaml')

    # hold the events table: the CLI's first read of it waits on the lock,
    # where the test can cut its connection mid-query
    holder = psycopg2.connect(dbname=dist.name, **PG)
    cur = holder.cursor()
    cur.execute('LOCK TABLE events IN ACCESS EXCLUSIVE MODE')
    proc = subprocess.Popen(
        [os.path.join(BIN, 'converge'), '--config-file', str(cli_conf),
         'stack', 'create', 'chain', '-t', tmpl, '--wait'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def waiting_cli():
            return [r[0] for r in dist.sql(
                "SELECT pid FROM pg_stat_activity WHERE datname = "
                "current_database() AND application_name = '%s' AND "
                "wait_event_type = 'Lock'" % APP)]
        pids = wait_for(waiting_cli, timeout=60)
        cut = dist.sql('SELECT count(pg_terminate_backend(pid)) FROM '
                       'pg_stat_activity WHERE pid IN (%s)'
                       % ','.join(str(p) for p in pids))[0][0]
        assert cut >= 1
    finally:
        holder.commit()
        holder.close()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert dist.json('stack', 'show', 'chain')['stack_status'] == \
        'CREATE_COMPLETE'

    printed = collections.Counter()
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            printed[(m['name'], m['status'])] += 1
    stored = collections.Counter(
        (name, '%s_%s' % (action, status)) for name, action, status in
        dist.sql('SELECT resource_name, action, status FROM events'))
    assert len(stored) == 2 * 40  # IN_PROGRESS and COMPLETE of each
    assert printed == stored
