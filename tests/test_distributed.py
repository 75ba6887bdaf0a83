"""The distributed deployment against real PostgreSQL, RabbitMQ and Redis
(and MariaDB), on loopback: several worker processes, killed, restarted
under, and cut off from their services."""

import json
import subprocess
import time

import pytest

from converge.bench import fleet
from tests.distributed import Deployment, require, wait_for

pytestmark = [pytest.mark.distributed, pytest.mark.xdist_group('services')]

SERVERS = 49
CHAIN = 9
FANIN = 9


def big_template(path, wait=0.2):
    """500 resources: a hub, 49 servers fanned out from it, behind each
    server a chain of 9 test resources, and 9 values fanning chain ends
    back in."""
    lines = ['heat_template_version: 2018-08-31', 'resources:',
             '  hub: {type: OS::Heat::Value, properties: {value: hub}}']
    for s in range(SERVERS):
        lines += ['  s%d:' % s, '    type: OS::Nova::Server',
                  '    properties:', '      image: cirros',
                  '      flavor: m1.tiny',
                  '      metadata: {hub: {get_attr: [hub, value]}}']
        prev = 's%d' % s
        for c in range(CHAIN):
            name = 't%d_%d' % (s, c)
            lines += ['  %s:' % name, '    type: OS::Heat::TestResource',
                      '    properties:',
                      '      value: {get_resource: %s}' % prev,
                      '      action_wait_secs: {create: %s, delete: 0}'
                      % wait]
            prev = name
    for k in range(FANIN):
        ends = ['t%d_%d' % (s, CHAIN - 1) for s in range(k, SERVERS, FANIN)]
        lines += ['  sum%d:' % k, '    type: OS::Heat::Value',
                  '    properties:', '      value: {list_join: [",", [%s]]}'
                  % ', '.join('{get_attr: [%s, output]}' % e for e in ends)]
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def _complete_count(d):
    return d.sql("SELECT count(*) FROM events WHERE status = 'COMPLETE' "
                 "AND action = 'CREATE'")[0][0]


@pytest.mark.long
def test_three_workers_500_resources_one_killed(dist, tmp_path):
    for _ in range(3):
        dist.start_worker()
    ids = [dist.engine_id(i) for i in range(3)]
    tmpl = big_template(tmp_path / 'big.yaml')
    started = time.time()
    create = dist.cli_popen('stack', 'create', 'big', '-t', tmpl, '--wait')
    wait_for(lambda: _complete_count(dist) >= 120)
    # kill the worker that holds the most work, as a host dying would
    held = dict(dist.sql("SELECT engine_id, count(*) FROM resources WHERE "
                         "status = 'IN_PROGRESS' GROUP BY engine_id"))
    victim = max(range(3), key=lambda i: held.get(ids[i], 0))
    killed_at = time.time()
    dist.kill(victim)
    # what it held when it died (read before the kill, a unit could still
    # finish in between); survivors take it over only after the tooz
    # timeout, so it is all still there
    stranded = [r[0] for r in dist.sql(
        "SELECT name FROM resources WHERE status = 'IN_PROGRESS' AND "
        "engine_id = '%s'" % ids[victim])]
    out, err = create.communicate(timeout=600)
    finished = time.time()
    assert create.returncode == 0, err
    show = dist.json('stack', 'show', 'big')
    assert show['stack_status'] == 'CREATE_COMPLETE'

    # exactly one create per server resource at the cloud
    log = dist.json('sim', 'log', '--op', 'create', '--long')
    creates = {}
    for e in log:
        detail = e.get('Detail') or {}
        if isinstance(detail, str):
            detail = json.loads(detail or '{}')
        if e['OK'] and not detail.get('adopted'):
            creates[e['Resource']] = creates.get(e['Resource'], 0) + 1
    assert creates == {'big/s%d' % s: 1 for s in range(SERVERS)}
    assert len(dist.json('sim', 'server', 'list')) == SERVERS

    # the events tell the story: what the dead worker held was started
    # again by a survivor and completed once
    events = dist.json('stack', 'event', 'list', 'big')
    done = {}
    starts = {}
    for e in events:
        if e['resource_status'] == 'CREATE_COMPLETE':
            done[e['resource_name']] = done.get(e['resource_name'], 0) + 1
        if e['resource_status'] == 'CREATE_IN_PROGRESS':
            starts[e['resource_name']] = starts.get(e['resource_name'], 0) + 1
    expected = {'hub'} | {'s%d' % i for i in range(SERVERS)} | {
        't%d_%d' % (i, c) for i in range(SERVERS) for c in range(CHAIN)} | {
        'sum%d' % k for k in range(FANIN)}
    assert len(expected) == 500
    missing = sorted(expected - set(done))
    if missing:
        print('ROWS', dist.sql("SELECT name, action, status, engine_id, "
                               "traversal_id, atomic_key FROM resources "
                               "WHERE name IN (%s)" % ','.join(
                                   "'%s'" % m for m in missing)))
    assert not missing, [(e['resource_name'], e['resource_status'],
                          e['resource_status_reason'])
                         for e in events if e['resource_name'] in missing]
    assert len(done) == 500 and set(done.values()) == {1}
    # what the dead worker was acting on was started again by a survivor
    # (a resource that was waiting belongs to no worker: the timer of any
    # survivor resumes it, so a kill now strands only the steps running
    # at that moment, often none)
    for name in stranded:
        assert starts[name] == 2, name

    # no lock is left held
    from converge import conf
    from converge.coordination import locks
    conf.setup(['--config-file', dist.conf], log=False)
    probe = locks.Locks(conf.coordination_url(), 'probe-%d' % time.time())
    try:
        for name in done:
            with probe.resource(show['id'], name, wait=False):
                pass
    finally:
        probe.stop()
        conf.setup([], log=False)

    recovered = max((
        _epoch(e['event_time']) for e in events
        if e['resource_name'] in stranded
        and e['resource_status'] == 'CREATE_COMPLETE'), default=None)
    report = {'resources': 500, 'workers': 3,
              'wall_s': round(finished - started, 2),
              'stranded': len(stranded),
              'recovered_after_kill_s': round(recovered - killed_at, 2)
              if recovered else None}
    print('\nMEASURED', json.dumps(report))


def _epoch(stamp):
    import datetime
    return datetime.datetime.strptime(
        stamp, '%Y-%m-%dT%H:%M:%S.%fZ').replace(
        tzinfo=datetime.timezone.utc).timestamp()


def _two_step(tmp_path):
    slow = tmp_path / 'v1.yaml'
    slow.write_text('''
heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::TestResource
    properties: {value: one, action_wait_secs: {create: 3}}
  b:
    type: OS::Heat::TestResource
    depends_on: a
    properties: {value: b-one}
  s:
    type: OS::Nova::Server
    depends_on: a
    properties: {image: cirros, flavor: m1.tiny}
''')
    fast = tmp_path / 'v2.yaml'
    fast.write_text(slow.read_text().replace(
        '{value: one, action_wait_secs: {create: 3}}', '{value: two}')
        .replace('b-one', 'b-two'))
    return str(slow), str(fast)


def _running(d, name):
    return d.sql("SELECT count(*) FROM events WHERE resource_name = '%s' "
                 "AND status = 'IN_PROGRESS'" % name)[0][0] > 0


def test_update_supersedes_running_create_across_workers(dist, tmp_path):
    dist.start_worker()
    dist.start_worker()
    slow, fast = _two_step(tmp_path)
    dist.cli('stack', 'create', 'sup', '-t', slow)  # returns at once
    wait_for(lambda: _running(dist, 'a'))
    dist.cli('stack', 'update', 'sup', '-t', fast, '--wait')
    assert dist.json('stack', 'show', 'sup')['stack_status'] == \
        'UPDATE_COMPLETE'
    b = dist.json('stack', 'resource', 'show', 'sup', 'b')
    assert b['attributes']['output'] == 'b-two'
    assert len(dist.json('sim', 'server', 'list')) == 1


def test_delete_while_creating(dist, tmp_path):
    dist.start_worker()
    dist.start_worker()
    slow, _ = _two_step(tmp_path)
    dist.cli('stack', 'create', 'del', '-t', slow)
    wait_for(lambda: _running(dist, 'a'))
    dist.cli('stack', 'delete', 'del', '--yes', '--wait')
    assert dist.json('stack', 'list') == []
    assert dist.json('sim', 'server', 'list') == []


def test_rabbitmq_restarted_mid_traversal(dist, tmp_path):
    dist.start_worker()
    dist.start_worker()
    tmpl = big_template(tmp_path / 'big.yaml', wait=0.1)
    create = dist.cli_popen('stack', 'create', 'rb', '-t', tmpl, '--wait')
    wait_for(lambda: _complete_count(dist) >= 60)
    try:
        subprocess.run(['rabbitmqctl', 'stop_app'], check=True,
                       capture_output=True)
    finally:
        # the broker is shared with the tests after this one: leave it
        # serving, whatever happened
        for step in ('start_app', 'await_startup'):
            subprocess.run(['rabbitmqctl', step], check=True,
                           capture_output=True)
        assert not fleet.missing('rabbitmq', wait=60)
    out, err = create.communicate(timeout=600)
    assert create.returncode == 0, err
    assert dist.json('stack', 'show', 'rb')['stack_status'] == \
        'CREATE_COMPLETE'
    assert len(dist.json('sim', 'server', 'list')) == SERVERS


def test_database_connections_dropped_mid_traversal(dist, tmp_path):
    dist.start_worker()
    dist.start_worker()
    tmpl = big_template(tmp_path / 'big.yaml', wait=0.1)
    create = dist.cli_popen('stack', 'create', 'db', '-t', tmpl, '--wait')
    wait_for(lambda: _complete_count(dist) >= 60)
    dropped = dist.sql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = '%s' AND pid <> pg_backend_pid()" % dist.name)
    assert dropped[0][0] > 0
    out, err = create.communicate(timeout=600)
    assert create.returncode == 0, err
    assert dist.json('stack', 'show', 'db')['stack_status'] == \
        'CREATE_COMPLETE'
    assert len(dist.json('sim', 'server', 'list')) == SERVERS


@pytest.mark.long  # among the slowest of ./run-tests
def test_mariadb_backend(tmp_path):
    require('mariadb', 'rabbitmq', 'redis')
    d = Deployment(tmp_path, db='mariadb')
    try:
        d.start_worker()
        slow, fast = _two_step(tmp_path)
        d.cli('stack', 'create', 'my', '-t', fast, '--wait')
        assert d.json('stack', 'show', 'my')['stack_status'] == \
            'CREATE_COMPLETE'
        d.cli('stack', 'delete', 'my', '--yes', '--wait')
        assert d.json('sim', 'server', 'list') == []
        # more inputs than graph/plan.py's FAN_IN: `after` (and, on the
        # delete, the stack) count them in shards, read back without
        # RETURNING on MariaDB
        wide = _servers_template(tmp_path / 'wide.yaml', 40)
        d.cli('stack', 'create', 'wide', '-t', wide, '--wait')
        after = [e for e in d.json('stack', 'event', 'list', 'wide')
                 if e['resource_name'] == 'after']
        assert [e['resource_status'] for e in after] == [
            'CREATE_IN_PROGRESS', 'CREATE_COMPLETE']
        d.cli('stack', 'delete', 'wide', '--yes', '--wait')
        assert d.json('sim', 'server', 'list') == []
    finally:
        d.close()


def _servers_template(path, n, after=None):
    lines = ['heat_template_version: 2018-08-31', 'resources:']
    for i in range(n):
        lines += ['  s%d:' % i, '    type: OS::Nova::Server',
                  '    properties: {image: cirros, flavor: m1.tiny}']
    lines += ['  after:', '    type: OS::Heat::Value',
              '    depends_on: [%s]' % ', '.join('s%d' % i for i in range(n)),
              '    properties: {value: done}']
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def _waiting(d):
    return d.sql('SELECT count(*) FROM sync_points WHERE wake_at IS NOT '
                 'NULL AND NOT done')[0][0]


def _creates(d):
    counts = {}
    for e in d.json('sim', 'log', '--op', 'create', '--long'):
        detail = e.get('Detail') or {}
        if isinstance(detail, str):
            detail = json.loads(detail or '{}')
        if e['OK'] and not detail.get('adopted'):
            counts[e['Resource']] = counts.get(e['Resource'], 0) + 1
    return counts


def test_waits_survive_every_worker_killed(dist, tmp_path):
    """Servers building (the cloud takes its time) wait in the database,
    not in a worker: kill -9 every worker while they build, start a new
    one, and the stack completes with no operator and no second create.
    The builds take long enough that all twelve are waiting at once even
    on a loaded machine (at 4 s, the first were done before the last had
    started, and the count of waits never reached twelve)."""
    dist.cli('sim', 'fault', 'set', 'create', '--latency', '10')
    for _ in range(2):
        dist.start_worker()
    tmpl = _servers_template(tmp_path / 'w.yaml', 12)
    dist.cli('stack', 'create', 'w', '-t', tmpl)
    wait_for(lambda: _waiting(dist) == 12)
    # waiting rows belong to no worker
    assert dist.sql("SELECT count(*) FROM resources WHERE status = "
                    "'IN_PROGRESS' AND engine_id IS NOT NULL")[0][0] == 0
    dist.kill(0)
    dist.kill(1)
    dist.start_worker()
    wait_for(lambda: dist.json('stack', 'show', 'w')['stack_status'] ==
             'CREATE_COMPLETE', timeout=120)
    assert _creates(dist) == {'w/s%d' % i: 1 for i in range(12)}
    assert {s['Status'] for s in dist.json('sim', 'server', 'list')} == \
        {'ACTIVE'}


def test_in_progress_cap_holds_across_workers(tmp_path):
    require('postgresql', 'rabbitmq', 'redis')
    d = Deployment(tmp_path, options={
        'DEFAULT': {'max_resources_in_progress_per_stack': 3}})
    try:
        for _ in range(2):
            d.start_worker()
        lines = ['heat_template_version: 2018-08-31', 'resources:']
        for i in range(12):
            lines += ['  t%d:' % i, '    type: OS::Heat::TestResource',
                      '    properties: {wait_secs: 1}']
        (tmp_path / 'c.yaml').write_text('\n'.join(lines) + '\n')
        d.cli('stack', 'create', 'c', '-t', str(tmp_path / 'c.yaml'),
              '--wait')
        marks = []
        for e in d.json('stack', 'event', 'list', 'c'):
            t = _epoch(e['event_time'])
            if e['resource_status'] == 'CREATE_IN_PROGRESS':
                marks.append((t, 1))
            elif e['resource_status'] == 'CREATE_COMPLETE':
                marks.append((t, -1))
        most = now = 0
        for _, step in sorted(marks):
            now += step
            most = max(most, now)
        assert len(marks) == 24
        assert most == 3
        # two processes, one cap: and every slot was given back
        assert d.sql("SELECT count(*) FROM leases")[0][0] == 0
    finally:
        d.close()


def test_nested_stacks_converge_across_workers_killed_mid_create(
        dist, tmp_path):
    """A group of provider-template members, each a server: the parents
    wait for their children in the database, so every worker can die
    while the servers build and a new one finishes the whole tree, each
    server created once."""
    (tmp_path / 'node.yaml').write_text(
        'heat_template_version: 2018-08-31\n'
        'parameters:\n  index: {type: string}\n'
        'resources:\n  server:\n    type: OS::Nova::Server\n'
        '    properties:\n      image: cirros\n      flavor: m1.tiny\n'
        '      name: {list_join: [-, [node, {get_param: index}]]}\n'
        'outputs:\n  name: {value: {get_attr: [server, name]}}\n')
    (tmp_path / 'top.yaml').write_text(
        'heat_template_version: 2018-08-31\n'
        'resources:\n  nodes:\n    type: OS::Heat::ResourceGroup\n'
        '    properties:\n      count: 4\n'
        '      resource_def:\n        type: node.yaml\n'
        '        properties: {index: "%index%"}\n'
        'outputs:\n  names: {value: {get_attr: [nodes, name]}}\n')
    dist.cli('sim', 'fault', 'set', 'create', '--latency', '3')
    for _ in range(2):
        dist.start_worker()
    dist.cli('stack', 'create', 'tree', '-t', str(tmp_path / 'top.yaml'))
    wait_for(lambda: len(dist.json('sim', 'server', 'list')) == 4)
    dist.kill(0)
    dist.kill(1)
    dist.start_worker()
    wait_for(lambda: dist.json('stack', 'show', 'tree')['stack_status'] ==
             'CREATE_COMPLETE', timeout=180)
    out = dist.json('stack', 'output', 'show', 'tree', '--all')
    assert out['names'] == ['node-0', 'node-1', 'node-2', 'node-3']
    assert sorted(_creates(dist).values()) == [1, 1, 1, 1]
    assert len(dist.json('stack', 'list', '--show-nested')) == 6


def test_a_large_traversal_brings_the_planners_statistics_up_to_date(
        dist, tmp_path):
    """A traversal of hundreds of resources fills sync_points with rows
    the planner has no statistics for: it took each unit's lookup of a
    few nodes for a one-row read and read every node of the traversal
    (1-2 ms a statement at 2,000 nodes, growing with the stack). The
    tables are analyzed once such a traversal starts; a small one costs
    no ANALYZE."""
    def analyzed():
        return dist.sql("SELECT last_analyze IS NOT NULL FROM "
                        "pg_stat_user_tables WHERE relname = "
                        "'sync_points'")[0][0]

    dist.start_worker()
    small = tmp_path / 'small.yaml'
    small.write_text('heat_template_version: 2018-08-31\nresources:\n' + ''.join(
        '  r%d: {type: OS::Heat::None}\n' % i for i in range(20)))
    dist.cli('stack', 'create', 'small', '-t', str(small), '--wait')
    assert not analyzed()
    large = tmp_path / 'large.yaml'
    large.write_text('heat_template_version: 2018-08-31\nresources:\n' + ''.join(
        '  r%d: {type: OS::Heat::None}\n' % i for i in range(600)))
    dist.cli('stack', 'create', 'large', '-t', str(large), '--wait')
    assert analyzed()
    assert dist.json('stack', 'show', 'large')['stack_status'] == \
        'CREATE_COMPLETE'
