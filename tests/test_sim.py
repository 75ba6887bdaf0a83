"""The simulated compute cloud, as its users (the engine, tests) see it."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest
import sqlalchemy as sa

from converge import exception
from converge.drivers import sim
from converge.drivers.sim import api as sim_api
from converge.drivers.sim import store

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Extra database URLs to run the portable tests against, e.g.
# CONVERGE_SIM_TEST_URLS="postgresql+psycopg2://u:p@127.0.0.1/simtest"
EXTRA_URLS = os.environ.get('CONVERGE_SIM_TEST_URLS', '').split()


@pytest.fixture(params=['sqlite'] + EXTRA_URLS)
def url(request, tmp_path):
    if request.param == 'sqlite':
        u = 'sqlite:///%s' % (tmp_path / 'sim.db')
    else:
        u = request.param
    yield u
    if request.param != 'sqlite':
        sim.SimCompute(u).reset()
    store.forget(u)


@pytest.fixture
def cloud(url):
    c = sim.SimCompute(url)
    c.reset()
    return c


def _creates(cloud, **kw):
    return [e for e in cloud.api_log(op='create', **kw) if e['ok']]


def test_create_get_list_delete_round_trip(cloud):
    s = cloud.create_server('web', 'cirros', 'm1.tiny', key_name='k',
                            metadata={'a': '1'}, user_data='#!/bin/sh',
                            idempotency_key='key-1', resource='web')
    assert s['status'] == 'ACTIVE'
    assert s['name'] == 'web'
    assert s['image'] == 'cirros' and s['flavor'] == 'm1.tiny'
    assert s['key_name'] == 'k'
    assert s['metadata'] == {'a': '1'}
    assert s['user_data'] == '#!/bin/sh'
    assert s['networks'] == [{'network': 'private'}]
    assert list(s['addresses']) == ['private']
    entry, = s['addresses']['private']
    assert entry['version'] == 4 and entry['OS-EXT-IPS:type'] == 'fixed'
    assert s['accessIPv4'] == entry['addr']
    assert s['accessIPv6'] == ''
    assert s['host'].startswith('sim-host-')
    assert s['created'] and s['updated']
    assert s['resource'] == 'web' and s['idempotency_key'] == 'key-1'

    assert cloud.get_server(s['id']) == s
    assert [x['id'] for x in cloud.list_servers()] == [s['id']]
    assert cloud.find_server_by_key('key-1') == s

    cloud.delete_server(s['id'])
    assert cloud.list_servers() == []
    assert cloud.find_server_by_key('key-1') is None
    with pytest.raises(exception.CloudNotFound):
        cloud.get_server(s['id'])
    with pytest.raises(exception.CloudNotFound):
        cloud.delete_server(s['id'])
    ops = [e['op'] for e in cloud.api_log()]
    assert ops == ['create', 'get', 'list', 'find', 'delete', 'list',
                   'find', 'get', 'delete']
    assert [e['ok'] for e in cloud.api_log()][-2:] == [False, False]


def test_list_is_in_creation_order(cloud):
    ids = [cloud.create_server('s%d' % i, 'img', 'fl')['id']
           for i in range(5)]
    assert [s['id'] for s in cloud.list_servers()] == ids


def test_unknown_server_is_not_found(cloud):
    for call in (cloud.get_server, cloud.delete_server, cloud.stop_server,
                 cloud.start_server):
        with pytest.raises(exception.CloudNotFound) as e:
            call('no-such-id')
        assert e.value.code == 404
    with pytest.raises(exception.CloudNotFound):
        cloud.rebuild_server('no-such-id', 'img')
    with pytest.raises(exception.CloudNotFound):
        cloud.resize_server('no-such-id', 'fl')
    with pytest.raises(exception.CloudNotFound):
        cloud.update_server('no-such-id', name='x')


def test_addresses_are_unique(cloud):
    servers = [cloud.create_server('s%d' % i, 'img', 'fl',
                                   networks=[{'network': 'private'},
                                             {'network': 'public'}])
               for i in range(30)]
    addrs = [a['addr'] for s in servers for net in s['addresses'].values()
             for a in net]
    assert len(addrs) == 60
    assert len(set(addrs)) == 60
    for s in servers:
        assert set(s['addresses']) == {'private', 'public'}
        assert s['accessIPv4'] == s['addresses']['private'][0]['addr']


def test_network_forms_and_fixed_ip(cloud):
    s = cloud.create_server('s', 'img', 'fl', networks=[
        {'network': 'net1', 'fixed_ip': '192.168.7.7'},
        {'uuid': '1234-abcd'}, {'port': 'port-9'}])
    assert s['addresses']['net1'][0]['addr'] == '192.168.7.7'
    assert set(s['addresses']) == {'net1', '1234-abcd', 'port-9'}
    assert s['networks'][0] == {'network': 'net1', 'fixed_ip': '192.168.7.7'}
    with pytest.raises(exception.CloudError) as e:
        cloud.create_server('t', 'img', 'fl', networks=[
            {'network': 'net1', 'fixed_ip': '192.168.7.7'}])
    assert e.value.code == 409
    assert len(cloud.list_servers()) == 1
    # the address is free again once its server is gone
    cloud.delete_server(s['id'])
    t = cloud.create_server('t', 'img', 'fl', networks=[
        {'network': 'net1', 'fixed_ip': '192.168.7.7'}])
    assert t['accessIPv4'] == '192.168.7.7'


def test_an_address_given_by_hand_is_not_given_again(cloud):
    first = sim_api._ip(0)
    mine = cloud.create_server('mine', 'img', 'fl', networks=[
        {'network': 'private', 'fixed_ip': first}])
    auto = cloud.create_server('auto', 'img', 'fl')
    assert mine['accessIPv4'] == first
    assert auto['accessIPv4'] == sim_api._ip(1)
    # on another network the same address is free
    other = cloud.create_server('other', 'img', 'fl', networks=[
        {'network': 'other', 'fixed_ip': first}])
    assert other['accessIPv4'] == first


def test_a_cloud_made_before_the_address_index_keeps_its_addresses(
        tmp_path):
    url = 'sqlite:///%s' % (tmp_path / 'old.db')
    cloud = sim.SimCompute(url)
    taken = cloud.create_server('old', 'img', 'fl')['accessIPv4']
    store.forget(url)
    engine = sa.create_engine(url)
    with engine.begin() as conn:   # as an older sim left it
        conn.exec_driver_sql('DROP TABLE sim_addresses')
        conn.exec_driver_sql("UPDATE sim_counters SET value = 0")
    engine.dispose()
    cloud = sim.SimCompute(url)
    new = cloud.create_server('new', 'img', 'fl')
    assert new['accessIPv4'] != taken
    with pytest.raises(exception.CloudError) as e:
        cloud.create_server('again', 'img', 'fl', networks=[
            {'network': 'private', 'fixed_ip': taken}])
    assert e.value.code == 409
    store.forget(url)


def test_idempotency_key_adopts_the_live_server(cloud):
    a = cloud.create_server('a', 'img', 'fl', idempotency_key='k',
                            resource='web')
    b = cloud.create_server('a', 'img', 'fl', idempotency_key='k',
                            resource='web')
    assert a['id'] == b['id']
    assert len(cloud.list_servers()) == 1
    log = cloud.api_log(op='create', idempotency_key='k')
    assert [e['ok'] for e in log] == [True, True]
    assert [e['detail'].get('adopted', False) for e in log] == [False, True]
    assert [e['resource'] for e in log] == ['web', 'web']
    # once deleted, the key is free for a new server
    cloud.delete_server(a['id'])
    c = cloud.create_server('a', 'img', 'fl', idempotency_key='k')
    assert c['id'] != a['id']
    assert cloud.find_server_by_key('k')['id'] == c['id']


def test_concurrent_creates_with_one_key_make_one_server(cloud, url):
    n = 8
    barrier = threading.Barrier(n)
    results, errors = [], []

    def worker():
        c = sim.SimCompute(url)
        barrier.wait()
        try:
            results.append(c.create_server('x', 'img', 'fl',
                                           idempotency_key='same',
                                           resource='x'))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len({r['id'] for r in results}) == 1
    assert len(cloud.list_servers()) == 1
    log = _creates(cloud, resource='x')
    assert len(log) == n
    assert sum(1 for e in log if not e['detail'].get('adopted')) == 1


def test_concurrent_creates_of_different_servers(cloud, url):
    n = 8
    barrier = threading.Barrier(n)
    errors = []

    def worker(i):
        c = sim.SimCompute(url)
        barrier.wait()
        try:
            for j in range(5):
                c.create_server('s%d-%d' % (i, j), 'img', 'fl',
                                idempotency_key='k%d-%d' % (i, j))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    servers = cloud.list_servers()
    assert len(servers) == 40
    assert len({s['accessIPv4'] for s in servers}) == 40


def _queued(engine, n):
    """Wait until `n` calls queue for the writer (store.run)."""
    writer = store._writer(engine)
    deadline = time.monotonic() + 30
    while len(writer._waiting) < n:
        assert time.monotonic() < deadline, 'calls did not queue'
        time.sleep(0.005)


def test_calls_queued_for_the_writer_run_together_and_fail_alone(tmp_path):
    """The threads of a process that wait for the sim's one writer have
    their calls run one after the other in one transaction, by the
    thread whose turn it is; one call that raises fails alone, the
    others commit as they would have."""
    url = 'sqlite:///%s' % (tmp_path / 'sim.db')
    sim.SimCompute(url)   # the schema
    engine = store.get_engine(url)
    ran_by, outcomes = {}, {}

    def call(name, fail=False):
        def fn(conn):
            ran_by[name] = threading.get_ident()
            conn.execute(store.counters.insert().values(name=name, value=1))
            if fail:
                raise ValueError('%s refused' % name)
            return name.upper()
        try:
            outcomes[name] = store.run(engine, fn)
        except ValueError as e:
            outcomes[name] = e

    def batch(names, bad=None):
        with store.write(engine):   # the writer's turn, held meanwhile
            threads = [threading.Thread(target=call, args=(n, n == bad))
                       for n in names]
            for t in threads:
                t.start()
            _queued(engine, len(names))
        for t in threads:
            t.join()

    batch(['a%d' % i for i in range(6)])
    assert {outcomes['a%d' % i] for i in range(6)} == {
        'A%d' % i for i in range(6)}
    assert len(set(ran_by.values())) == 1   # one thread ran them all

    batch(['b%d' % i for i in range(6)], bad='b3')
    assert isinstance(outcomes['b3'], ValueError)
    assert [outcomes['b%d' % i] for i in (0, 1, 2, 4, 5)] == [
        'B0', 'B1', 'B2', 'B4', 'B5']
    with store.read(engine) as conn:
        names = {r.name for r in conn.execute(sa.select(store.counters))}
    assert names == {'ip'} | {'a%d' % i for i in range(6)} | {
        'b%d' % i for i in (0, 1, 2, 4, 5)}


def test_key_inserted_between_check_and_insert_is_adopted(
        cloud, url, monkeypatch):
    """The unique live key settles a race the up-front check missed (on
    SQLite BEGIN IMMEDIATE already serialises; other databases need
    this)."""
    other = sim.SimCompute(url)
    first = other.create_server('x', 'img', 'fl', idempotency_key='raced',
                                resource='x')
    real = sim.SimCompute._live_by_key
    calls = []

    def blind_once(self, conn, key, now):
        calls.append(key)
        if len(calls) == 1:
            return None     # as if the other insert was not visible yet
        return real(self, conn, key, now)

    monkeypatch.setattr(sim.SimCompute, '_live_by_key', blind_once)
    got = cloud.create_server('x', 'img', 'fl', idempotency_key='raced',
                              resource='x')
    assert got['id'] == first['id']
    assert len(cloud.list_servers()) == 1
    log = _creates(cloud, resource='x')
    assert [e['detail'].get('adopted', False) for e in log] == [False, True]


def test_two_instances_share_the_cloud(cloud, url):
    other = sim.SimCompute(url)
    s = cloud.create_server('a', 'img', 'fl', idempotency_key='k')
    assert other.get_server(s['id'])['name'] == 'a'
    assert other.find_server_by_key('k')['id'] == s['id']
    other.stop_server(s['id'])
    assert cloud.get_server(s['id'])['status'] == 'SHUTOFF'
    other.set_fault('get', fail_count=1)
    with pytest.raises(exception.CloudError):
        cloud.get_server(s['id'])


def _in_subprocess(code, url):
    env = dict(os.environ)
    env['PYTHONPATH'] = REPO + os.pathsep + env.get('PYTHONPATH', '')
    return subprocess.run(
        [sys.executable, '-c', code, url], capture_output=True, text=True,
        env=env, timeout=120, check=True).stdout


def test_another_process_sees_the_same_cloud(cloud, url):
    mine = cloud.create_server('mine', 'img', 'fl', idempotency_key='m')
    out = _in_subprocess(
        'import json, sys\n'
        'from converge.drivers.sim import SimCompute\n'
        'c = SimCompute(sys.argv[1])\n'
        'seen = [s["name"] for s in c.list_servers()]\n'
        'theirs = c.create_server("theirs", "img", "fl",\n'
        '                         idempotency_key="t", resource="r")\n'
        'again = c.create_server("mine", "img", "fl", idempotency_key="m")\n'
        'print(json.dumps([seen, theirs["id"], again["id"]]))\n', url)
    seen, theirs, again = json.loads(out)
    assert seen == ['mine']
    assert again == mine['id']
    assert cloud.get_server(theirs)['name'] == 'theirs'
    assert [s['name'] for s in cloud.list_servers()] == ['mine', 'theirs']


def test_processes_racing_on_one_key_make_one_server(cloud, url):
    code = ('import sys\n'
            'from converge.drivers.sim import SimCompute\n'
            'c = SimCompute(sys.argv[1])\n'
            'sys.stdin.read()\n'    # start together
            'print(c.create_server("x", "img", "fl", idempotency_key="k",\n'
            '                      resource="x")["id"])\n')
    env = dict(os.environ)
    env['PYTHONPATH'] = REPO + os.pathsep + env.get('PYTHONPATH', '')
    procs = [subprocess.Popen([sys.executable, '-c', code, url],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(4)]
    outs = [p.communicate('', timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    assert len({o.strip() for o, _ in outs}) == 1
    assert len(cloud.list_servers()) == 1
    assert sum(1 for e in _creates(cloud, resource='x')
               if not e['detail'].get('adopted')) == 1


def test_fail_count_fails_the_next_n_calls(cloud):
    cloud.set_fault('create', fail_count=2, message='no capacity')
    for _ in range(2):
        with pytest.raises(exception.CloudError) as e:
            cloud.create_server('a', 'img', 'fl', idempotency_key='k',
                                resource='a')
        assert e.value.code == 500
        assert 'no capacity' in str(e.value)
    assert cloud.list_servers() == []
    s = cloud.create_server('a', 'img', 'fl', idempotency_key='k',
                            resource='a')
    assert cloud.list_servers() == [s]
    log = cloud.api_log(op='create', resource='a')
    assert [e['ok'] for e in log] == [False, False, True]
    assert log[0]['detail']['injected'] == 'fail_count'
    assert cloud.faults()[0]['fail_count'] == 0


def test_fail_count_is_shared_across_processes(cloud, url):
    s = cloud.create_server('a', 'img', 'fl')
    cloud.set_fault('get', fail_count=3)
    code = ('import sys\n'
            'from converge.drivers.sim import SimCompute\n'
            'from converge.exception import CloudError\n'
            'c = SimCompute(sys.argv[1])\n'
            'n = 0\n'
            'for _ in range(2):\n'
            '    try:\n'
            '        c.get_server(%r)\n'
            '    except CloudError:\n'
            '        n += 1\n'
            'print(n)\n' % s['id'])
    failures = sum(int(_in_subprocess(code, url)) for _ in range(3))
    assert failures == 3
    assert [e['ok'] for e in cloud.api_log(op='get')].count(False) == 3


def test_fail_count_is_exact_under_threads(cloud, url):
    s = cloud.create_server('a', 'img', 'fl')
    cloud.set_fault('get', fail_count=5)
    barrier = threading.Barrier(6)
    failed = []

    def worker():
        c = sim.SimCompute(url)
        barrier.wait()
        for _ in range(3):
            try:
                c.get_server(s['id'])
            except exception.CloudError:
                failed.append(1)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(failed) == 5


def test_fail_rate_one_always_fails(cloud):
    s = cloud.create_server('a', 'img', 'fl')
    cloud.set_fault('get', fail_rate=1.0)
    for _ in range(5):
        with pytest.raises(exception.CloudError) as e:
            cloud.get_server(s['id'])
        assert 'Injected failure in get' in str(e.value)
    # other operations are unaffected
    assert cloud.stop_server(s['id'])['status'] == 'SHUTOFF'
    cloud.clear_faults('get')
    assert cloud.get_server(s['id'])['id'] == s['id']
    gets = cloud.api_log(op='get')
    assert [e['ok'] for e in gets] == [False] * 5 + [True]
    # failures are logged with the server they were about
    assert {e['server_id'] for e in gets} == {s['id']}


def test_wildcard_fault_applies_to_every_op(cloud):
    cloud.set_fault('*', fail_rate=1.0)
    with pytest.raises(exception.CloudError):
        cloud.list_servers()
    with pytest.raises(exception.CloudError):
        cloud.create_server('a', 'img', 'fl')
    cloud.clear_faults()
    assert cloud.faults() == []
    assert cloud.list_servers() == []


def test_latency_is_applied_and_logged(cloud):
    cloud.set_fault('create', latency=0.01)
    s = cloud.create_server('a', 'img', 'fl', resource='a')
    assert cloud.get_server(s['id'])['name'] == 'a'
    entry, = cloud.api_log(op='create', resource='a')
    assert entry['ok'] and entry['detail']['latency'] == 0.01
    assert cloud.faults() == [{'op': 'create', 'latency': 0.01,
                               'fail_rate': None, 'fail_count': None,
                               'code': None, 'message': None}]


def test_bad_faults_are_refused(cloud):
    with pytest.raises(exception.ConvergeError):
        cloud.set_fault('explode', fail_rate=1)
    with pytest.raises(exception.ConvergeError):
        cloud.set_fault('get', fail_rate=2)
    with pytest.raises(exception.ConvergeError):
        cloud.set_fault('get', latency=-1)
    assert cloud.faults() == []


def test_admin_view_ignores_faults_and_logs_only_changes(cloud):
    s = cloud.create_server('a', 'img', 'fl')
    cloud.set_fault('*', fail_count=1)
    admin = cloud.admin()
    assert [x['id'] for x in admin.list_servers()] == [s['id']]
    admin.stop_server(s['id'])
    assert cloud.faults()[0]['fail_count'] == 1   # not used up
    ops = [(e['op'], e['detail'].get('admin', False))
           for e in cloud.api_log()]
    assert ops == [('create', False), ('stop', True)]


def test_stop_start_rebuild_resize_update(cloud):
    s = cloud.create_server('a', 'img1', 'small', metadata={'x': '1'})
    assert cloud.stop_server(s['id'])['status'] == 'SHUTOFF'
    assert cloud.get_server(s['id'])['status'] == 'SHUTOFF'
    assert cloud.stop_server(s['id'])['status'] == 'SHUTOFF'  # no-op
    assert cloud.start_server(s['id'])['status'] == 'ACTIVE'
    r = cloud.rebuild_server(s['id'], 'img2')
    assert r['image'] == 'img2' and r['addresses'] == s['addresses']
    resized = cloud.resize_server(s['id'], 'large')
    assert (resized['flavor'], resized['status']) == ('large',
                                                      'VERIFY_RESIZE')
    assert cloud.confirm_resize(s['id'])['status'] == 'ACTIVE'
    u = cloud.update_server(s['id'], name='b', metadata={'y': '2'})
    assert u['name'] == 'b' and u['metadata'] == {'y': '2'}
    assert cloud.update_server(s['id'], name='c')['metadata'] == {'y': '2'}
    got = cloud.get_server(s['id'])
    assert (got['name'], got['image'], got['flavor'], got['status']) == (
        'c', 'img2', 'large', 'ACTIVE')
    assert got['id'] == s['id'] and got['created'] == s['created']
    ops = [e['op'] for e in cloud.api_log() if e['ok']]
    assert ops == ['create', 'stop', 'get', 'stop', 'start', 'rebuild',
                   'resize', 'confirm_resize', 'update', 'update', 'get']


def test_reset_drops_everything(cloud):
    cloud.create_server('a', 'img', 'fl')
    cloud.set_fault('get', latency=1)
    cloud.reset()
    assert cloud.faults() == []
    assert cloud.api_log() == []
    assert cloud.list_servers() == []
    assert cloud.create_server('b', 'img', 'fl')['accessIPv4'] == '10.0.0.2'


def test_store_engine_is_cached_per_url(url):
    assert sim.SimCompute(url)._engine is sim.SimCompute(url)._engine


def test_sqlite_runs_in_wal_mode(tmp_path):
    u = 'sqlite:///%s' % (tmp_path / 'sub' / 'dir' / 'sim.db')
    sim.SimCompute(u).list_servers()
    with store.get_engine(u).connect() as conn:
        assert conn.exec_driver_sql('PRAGMA journal_mode').scalar() == 'wal'
    store.forget(u)


def test_a_writer_waits_for_another_process_write_lock(tmp_path):
    """Every worker writes to one sim database: a create that finds the
    write lock held elsewhere waits for it (trying every few ms) instead
    of failing with "database is locked"."""
    import sqlite3
    import threading
    path = tmp_path / 'sim.db'
    u = 'sqlite:///%s' % path
    cloud = sim.SimCompute(u)
    cloud.list_servers()
    other = sqlite3.connect(str(path), isolation_level=None,
                            check_same_thread=False)
    other.execute('BEGIN IMMEDIATE')  # another process's transaction
    release = threading.Timer(0.3, other.execute, ('COMMIT',))
    release.start()
    try:
        server = cloud.create_server('a', 'img', 'fl')
    finally:
        release.join()
        other.close()
    assert [s['id'] for s in cloud.list_servers()] == [server['id']]
    store.forget(u)


def test_in_memory_sqlite_is_refused():
    with pytest.raises(exception.ConvergeError):
        sim.SimCompute('sqlite://')


@pytest.mark.parametrize('dialect', ['postgresql', 'mysql'])
def test_schema_is_portable(dialect):
    """The DDL compiles for the other supported databases."""
    mod = __import__('sqlalchemy.dialects.%s' % dialect,
                     fromlist=['dialect'])
    for table in store.metadata.sorted_tables:
        ddl = str(sa.schema.CreateTable(table).compile(
            dialect=mod.dialect()))
        assert table.name in ddl


def _child_stops(url, server_id):  # runs in the forked child
    child = sim.SimCompute(url)
    if child.get_server(server_id)['name'] != 'a':
        raise SystemExit(1)
    child.stop_server(server_id)


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs fork')
@pytest.mark.filterwarnings('ignore:Using fork')
def test_forked_child_uses_the_cloud(cloud, url):
    """A worker forked after the parent used the sim gets fresh
    connections and sees (and changes) the same cloud."""
    import multiprocessing
    s = cloud.create_server('a', 'img', 'fl')
    proc = multiprocessing.get_context('fork').Process(
        target=_child_stops, args=(url, s['id']))
    proc.start()
    proc.join(120)
    if proc.is_alive():  # pragma: no cover - never wait forever
        proc.kill()
        proc.join()
    assert proc.exitcode == 0
    assert cloud.get_server(s['id'])['status'] == 'SHUTOFF'


# -- long actions take their time, as with Nova ----------------------------

class Clock:
    """The sim's clock, moved by hand."""

    def __init__(self):
        self.now = time.time()

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(sim_api, 'clock', c)
    return c


def _status(server):
    return server['status'], server['task_state']


def test_create_with_latency_is_build_then_active(cloud, clock):
    cloud.set_fault('create', latency=30)
    started = time.monotonic()
    s = cloud.create_server('a', 'img', 'fl', idempotency_key='k',
                            resource='a')
    assert time.monotonic() - started < 10     # the call did not wait
    assert _status(s) == ('BUILD', 'spawning') and s['progress'] == 0
    clock.advance(15)
    assert _status(cloud.get_server(s['id'])) == ('BUILD', 'spawning')
    assert cloud.get_server(s['id'])['progress'] == 50
    assert cloud.list_servers()[0]['status'] == 'BUILD'
    assert cloud.find_server_by_key('k')['status'] == 'BUILD'
    # adopting a building server returns it as it is
    assert cloud.create_server('a', 'img', 'fl', idempotency_key='k',
                               resource='a')['status'] == 'BUILD'
    clock.advance(15)
    got = cloud.get_server(s['id'])
    assert _status(got) == ('ACTIVE', None) and got['progress'] == 100
    assert cloud.find_server_by_key('k')['status'] == 'ACTIVE'
    log = _creates(cloud, resource='a')
    assert [e['detail'].get('adopted', False) for e in log] == [False, True]
    assert log[0]['detail']['latency'] == 30


def test_build_ends_for_every_reader_with_the_real_clock(cloud, url):
    cloud.set_fault('create', latency=0.3)
    s = cloud.create_server('a', 'img', 'fl')
    assert s['status'] == 'BUILD'
    deadline = time.monotonic() + 30
    while cloud.get_server(s['id'])['status'] == 'BUILD':
        assert time.monotonic() < deadline, 'still BUILD after 30 s'
        time.sleep(0.05)
    assert cloud.get_server(s['id'])['status'] == 'ACTIVE'
    cloud.set_fault('create', latency=600)
    long = cloud.create_server('long', 'img', 'fl')
    out = _in_subprocess(
        'import json, sys\n'
        'from converge.drivers.sim import SimCompute\n'
        'c = SimCompute(sys.argv[1])\n'
        'print(json.dumps({s["name"]: s["status"]\n'
        '                  for s in c.list_servers()}))\n', url)
    assert json.loads(out) == {'a': 'ACTIVE', 'long': 'BUILD'}
    assert cloud.get_server(long['id'])['status'] == 'BUILD'
    assert len(_creates(cloud)) == 2


def test_stop_and_rebuild_refused_while_building(cloud, clock):
    cloud.set_fault('create', latency=10)
    s = cloud.create_server('a', 'img', 'fl')
    for call in (lambda: cloud.stop_server(s['id']),
                 lambda: cloud.rebuild_server(s['id'], 'img2'),
                 lambda: cloud.resize_server(s['id'], 'big')):
        with pytest.raises(exception.CloudError) as e:
            call()
        assert e.value.code == 409
        assert not isinstance(e.value, exception.CloudTransient)
        assert 'BUILD' in str(e.value)
    # renaming is fine at any time
    assert cloud.update_server(s['id'], name='b')['name'] == 'b'
    clock.advance(10)
    assert cloud.stop_server(s['id'])['status'] == 'SHUTOFF'
    ops = [(e['op'], e['ok']) for e in cloud.api_log()]
    assert ops == [('create', True), ('stop', False), ('rebuild', False),
                   ('resize', False), ('update', True), ('stop', True)]


def test_rebuild_with_latency(cloud, clock):
    s = cloud.create_server('a', 'img1', 'fl')
    cloud.set_fault('rebuild', latency=20)
    r = cloud.rebuild_server(s['id'], 'img2')
    assert _status(r) == ('REBUILD', 'rebuilding')
    assert r['image'] == 'img2'     # Nova shows the new image at once
    clock.advance(5)
    assert cloud.get_server(s['id'])['progress'] == 25
    with pytest.raises(exception.CloudError) as e:
        cloud.rebuild_server(s['id'], 'img3')
    assert e.value.code == 409
    clock.advance(15)
    assert _status(cloud.get_server(s['id'])) == ('ACTIVE', None)
    # a stopped server is rebuilt stopped
    cloud.stop_server(s['id'])
    cloud.rebuild_server(s['id'], 'img4')
    clock.advance(20)
    assert cloud.get_server(s['id'])['status'] == 'SHUTOFF'
    rebuilds = [e for e in cloud.api_log(op='rebuild') if e['ok']]
    assert [e['detail']['image'] for e in rebuilds] == ['img2', 'img4']


def test_resize_with_latency_waits_for_confirm(cloud, clock):
    s = cloud.create_server('a', 'img', 'small')
    cloud.set_fault('resize', latency=10)
    r = cloud.resize_server(s['id'], 'large')
    assert _status(r) == ('RESIZE', 'resize_migrating')
    assert r['flavor'] == 'small'   # the new flavor shows once migrated
    with pytest.raises(exception.CloudError) as e:
        cloud.confirm_resize(s['id'])
    assert e.value.code == 409
    clock.advance(10)
    got = cloud.get_server(s['id'])
    assert _status(got) == ('VERIFY_RESIZE', None)
    assert got['flavor'] == 'large'
    clock.advance(3600)     # it waits for the confirmation, however long
    assert cloud.get_server(s['id'])['status'] == 'VERIFY_RESIZE'
    confirmed = cloud.confirm_resize(s['id'])
    assert (confirmed['status'], confirmed['flavor']) == ('ACTIVE', 'large')
    with pytest.raises(exception.CloudError) as e:
        cloud.confirm_resize(s['id'])     # nothing to confirm
    assert e.value.code == 409


def test_delete_with_latency(cloud, clock):
    s = cloud.create_server('a', 'img', 'fl', idempotency_key='k',
                            networks=[{'network': 'n',
                                       'fixed_ip': '10.9.9.9'}])
    cloud.set_fault('delete', latency=8)
    assert cloud.delete_server(s['id']) is None
    got = cloud.get_server(s['id'])
    assert _status(got) == ('ACTIVE', 'deleting') and got['progress'] == 0
    assert cloud.find_server_by_key('k')['task_state'] == 'deleting'
    assert [x['task_state'] for x in cloud.list_servers()] == ['deleting']
    clock.advance(4)
    assert cloud.get_server(s['id'])['progress'] == 50
    cloud.delete_server(s['id'])    # again: accepted, changes nothing
    with pytest.raises(exception.CloudError) as e:
        cloud.stop_server(s['id'])
    assert e.value.code == 409
    # the address is still taken while the server exists
    with pytest.raises(exception.CloudError):
        cloud.create_server('b', 'img', 'fl', networks=[
            {'network': 'n', 'fixed_ip': '10.9.9.9'}])
    clock.advance(4)
    with pytest.raises(exception.CloudNotFound):
        cloud.get_server(s['id'])
    with pytest.raises(exception.CloudNotFound):
        cloud.delete_server(s['id'])
    assert cloud.find_server_by_key('k') is None
    assert cloud.list_servers() == []
    b = cloud.create_server('b', 'img', 'fl', idempotency_key='k',
                            networks=[{'network': 'n',
                                       'fixed_ip': '10.9.9.9'}])
    assert b['id'] != s['id']
    deletes = [(e['ok'], e['detail'].get('noop', False))
               for e in cloud.api_log(op='delete')]
    assert deletes == [(True, False), (True, True), (False, False)]


def test_create_with_the_key_of_a_server_being_deleted_boots_anew(
        cloud, clock):
    s = cloud.create_server('a', 'img', 'fl', idempotency_key='k')
    cloud.set_fault('delete', latency=60)
    cloud.delete_server(s['id'])
    t = cloud.create_server('a', 'img', 'fl', idempotency_key='k')
    assert t['id'] != s['id'] and t['task_state'] is None
    assert cloud.find_server_by_key('k')['id'] == t['id']
    assert cloud.get_server(s['id'])['task_state'] == 'deleting'
    clock.advance(60)
    assert [x['id'] for x in cloud.list_servers()] == [t['id']]


def test_deleting_a_building_server_stops_the_build(cloud, clock):
    cloud.set_fault('create', latency=30)
    cloud.set_fault('delete', latency=10)
    s = cloud.create_server('a', 'img', 'fl')
    cloud.delete_server(s['id'])
    assert _status(cloud.get_server(s['id'])) == ('BUILD', 'deleting')
    clock.advance(10)
    assert cloud.list_servers() == []


def test_admin_delete_is_immediate(cloud):
    s = cloud.create_server('a', 'img', 'fl')
    cloud.set_fault('delete', latency=60)
    cloud.admin().delete_server(s['id'])
    assert cloud.list_servers() == []


def test_other_ops_take_their_latency_as_response_time(cloud):
    s = cloud.create_server('a', 'img', 'fl')
    cloud.set_fault('get', latency=0.2)
    started = time.monotonic()
    assert cloud.get_server(s['id'])['status'] == 'ACTIVE'
    assert time.monotonic() - started >= 0.2


# -- errors: transient or not ----------------------------------------------

@pytest.mark.parametrize('code,kind', [
    (None, exception.CloudTransient), (503, exception.CloudTransient),
    (429, exception.CloudTransient), (404, exception.CloudNotFound),
    (400, exception.CloudError), (409, exception.CloudError)])
def test_injected_failure_kind_follows_its_code(cloud, code, kind):
    s = cloud.create_server('a', 'img', 'fl')
    cloud.set_fault('get', fail_count=1, code=code, message='busy')
    with pytest.raises(exception.CloudError) as e:
        cloud.get_server(s['id'])
    assert type(e.value) is kind
    assert e.value.code == (code or 500)
    assert 'busy' in str(e.value)
    entry = cloud.api_log(op='get')[-1]
    assert not entry['ok'] and entry['detail']['code'] == (code or 500)
    assert cloud.get_server(s['id'])['id'] == s['id']


def test_bad_code_is_refused(cloud):
    for code in (200, 302, 600):
        with pytest.raises(exception.ConvergeError):
            cloud.set_fault('get', fail_count=1, code=code)
    assert cloud.faults() == []


class _Drops:
    """Makes the sim's database connection drop on statements containing
    `on` (or, with commit=True, right after the commit of a transaction
    that ran one reached the database), as a restarted server or a
    terminated backend would."""

    def __init__(self, monkeypatch, engine, on, times=1, commit=False):
        self.left = times
        dialect = engine.dialect
        dbapi = dialect.loaded_dbapi
        touched = set()

        def drop():
            self.left -= 1
            # what the driver says on a closed connection: SQLAlchemy
            # takes it for a disconnect and invalidates the connection
            if dialect.name == 'sqlite':
                raise dbapi.ProgrammingError(
                    'Cannot operate on a closed database.')
            raise dbapi.OperationalError(
                'server closed the connection unexpectedly')

        real_execute = dialect.do_execute

        def do_execute(cursor, statement, parameters, context=None):
            if on in statement:
                if commit:
                    touched.add(id(cursor.connection))
                elif self.left > 0:
                    drop()
            return real_execute(cursor, statement, parameters, context)
        monkeypatch.setattr(dialect, 'do_execute', do_execute)
        real_commit = dialect.do_commit

        def do_commit(dbapi_conn):
            real_commit(dbapi_conn)
            raw = id(getattr(dbapi_conn, 'dbapi_connection', dbapi_conn))
            if raw in touched:
                touched.discard(raw)
                if self.left > 0:
                    drop()
        monkeypatch.setattr(dialect, 'do_commit', do_commit)


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setattr(sim_api, 'DB_RETRY_DELAY', 0.001)


def test_dropped_connection_is_retried(cloud, monkeypatch, fast_retries):
    s = cloud.create_server('a', 'img', 'fl')
    drops = _Drops(monkeypatch, cloud._engine, 'FROM sim_servers', times=2)
    assert cloud.get_server(s['id'])['id'] == s['id']
    assert drops.left == 0
    # the tries that failed were rolled back: one get happened
    assert [e['op'] for e in cloud.api_log()] == ['create', 'get']


def test_connection_that_stays_down_is_transient(cloud, monkeypatch,
                                                 fast_retries):
    s = cloud.create_server('a', 'img', 'fl')
    _Drops(monkeypatch, cloud._engine, 'sim_', times=100)
    with pytest.raises(exception.CloudTransient) as e:
        cloud.get_server(s['id'])
    assert 'database is unavailable' in str(e.value)


def test_create_dropped_at_commit_adopts_instead_of_booting_twice(
        cloud, monkeypatch, fast_retries):
    _Drops(monkeypatch, cloud._engine, 'INSERT INTO sim_servers',
           commit=True)
    s = cloud.create_server('a', 'img', 'fl', idempotency_key='k',
                            resource='a')
    assert [x['id'] for x in cloud.list_servers()] == [s['id']]
    log = _creates(cloud, resource='a')
    assert [e['detail'].get('adopted', False) for e in log] == [False, True]


def test_rebuild_dropped_at_commit_is_not_repeated(cloud, monkeypatch,
                                                   fast_retries):
    s = cloud.create_server('a', 'img1', 'fl')
    _Drops(monkeypatch, cloud._engine, 'UPDATE sim_servers', commit=True)
    with pytest.raises(exception.CloudTransient) as e:
        cloud.rebuild_server(s['id'], 'img2')
    assert 'may or may not have happened' in str(e.value)
    assert cloud.get_server(s['id'])['image'] == 'img2'
    assert len(cloud.api_log(op='rebuild')) == 1


def test_older_database_gets_the_new_columns(tmp_path):
    path = tmp_path / 'old.db'
    old = sa.MetaData()
    for table in store.metadata.sorted_tables:
        sa.Table(table.name, old, *[
            sa.Column(c.name, c.type, primary_key=c.primary_key,
                      nullable=c.nullable, unique=c.unique)
            for c in table.columns
            if c.name not in ('task_state', 'task_started', 'ready_at',
                              'outcome', 'delete_started', 'gone_at',
                              'code')])
    engine = sa.create_engine('sqlite:///%s' % path)
    old.create_all(engine)
    engine.dispose()
    u = 'sqlite:///%s' % path
    try:
        c = sim.SimCompute(u)
        c.set_fault('create', latency=60, code=503, fail_rate=0)
        assert c.create_server('a', 'img', 'fl')['status'] == 'BUILD'
    finally:
        store.forget(u)


def test_prepared_statements_read_what_sqlalchemy_reads(cloud):
    """The hot statements (db/prepared.py) give the rows and
    write the rows SQLAlchemy's execution of the same statements does."""
    from converge.db import prepared
    s = cloud.create_server('a', 'img', 'fl', idempotency_key='k',
                            resource='a', user_data='#!/bin/sh')
    by_id = sim_api._BY_ID
    params = {'id': s['id'], 'now': time.time()}
    with store.read(cloud._engine) as conn:
        mine = by_id.run(conn, params).first()
        theirs = conn.execute(by_id.stmt, params).first()
    assert mine is not None and tuple(mine) == tuple(theirs)
    assert mine.id == theirs.id == s['id']
    assert mine.idempotency_key == 'k'
    # rows written through it read back the same through SQLAlchemy
    with store.read(cloud._engine) as conn:
        row = conn.execute(sa.select(store.servers).where(
            store.servers.c.id == s['id'])).one()
    assert (row.name, row.live_key, row.deleted) == ('a', 'k', False)
    # no rows, nothing written
    empty = prepared.Statement(store.addresses.insert())
    with store.write(cloud._engine) as conn:
        assert empty.run(conn, []).rowcount == 0


def test_prepared_statement_errors_are_sqlalchemys(cloud):
    """A constraint the driver enforces is raised as SQLAlchemy's error,
    which the sim's create catches to adopt a racing create."""
    cloud.create_server('a', 'img', 'fl', idempotency_key='k')
    with store.read(cloud._engine) as conn:
        row = conn.execute(sa.select(store.servers)).one()
    values = {c.name: getattr(row, c.name) for c in store.servers.c
              if c.name != 'seq'}
    values['id'] = 'another'
    with pytest.raises(sa.exc.IntegrityError):
        with store.write(cloud._engine) as conn:
            sim_api._SERVER_ADD.run(conn, values)   # the same live key
