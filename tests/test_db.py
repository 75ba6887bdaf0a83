"""The state layer: migrations, compare-and-swap, sync points."""

import threading
import uuid

import pytest
import sqlalchemy as sa

from converge.bench import fleet
from converge.db import api, migrate, models, session
from tests import distributed


def _db(tmp_path):
    db = session.Database('sqlite:///%s' % (tmp_path / 'c.db'))
    migrate.ensure(db)
    return db


@pytest.fixture(params=['sqlite', 'postgresql'])
def any_db(request, tmp_path):
    """A fresh database of each kind the statements are written for."""
    if request.param == 'sqlite':
        yield _db(tmp_path)
        return
    distributed.require('postgresql')
    name = 'conv_db_%s' % uuid.uuid4().hex[:10]
    admin = fleet._admin('postgresql')
    admin.cursor().execute('CREATE DATABASE %s' % name)
    db = session.Database(fleet._url('postgresql', name))
    try:
        migrate.ensure(db)
        yield db
    finally:
        db.dispose()
        admin.cursor().execute('DROP DATABASE IF EXISTS %s WITH (FORCE)'
                               % name)
        admin.close()


def _stack_with_resource(db):
    with db.write() as s:
        s.add(models.Stack(id='s1', name='s', action='CREATE',
                           status='IN_PROGRESS', current_traversal='t1'))
        s.flush()
        s.add(models.Traversal(id='t1', stack_id='s1', action='CREATE',
                               state='running'))
        s.add(models.Resource(uuid='u1', stack_id='s1', name='r', type='T',
                              atomic_key=0, requires=[], data={}))
    with db.read() as s:
        return s.scalar(sa.select(models.Resource.id))


def test_migrations_create_every_table(tmp_path):
    db = _db(tmp_path)
    names = set(sa.inspect(db.writer_engine).get_table_names())
    assert {'stacks', 'templates', 'resources', 'traversals', 'sync_points',
            'events', 'software_configs'} <= names
    assert migrate.current(db) == migrate.head()
    # the check every command makes on start reads the files, not Alembic
    assert migrate.declared_head() == migrate.head()


def test_racing_writers_one_wins_the_other_sees_it_lost(tmp_path):
    db = _db(tmp_path)
    rid = _stack_with_resource(db)
    results = []
    barrier = threading.Barrier(8)

    def racer(i):
        barrier.wait()
        with db.write() as s:
            results.append(api.resource_cas(s, rid, 0, status_reason=str(i)))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    winners = [r for r in results if r is not None]
    assert winners == [1]
    with db.read() as s:
        row = api.resource_get(s, rid)
    assert row.atomic_key == 1


def test_claim_refused_when_traversal_is_not_running(tmp_path):
    db = _db(tmp_path)
    rid = _stack_with_resource(db)
    with db.write() as s:
        api.traversal_set_state(s, 't1', 'failing', ['running'])
    with db.write() as s:
        assert api.resource_cas(s, rid, 0, traversal_running='t1',
                                status='IN_PROGRESS') is None


def test_sync_point_released_exactly_once_under_concurrency(tmp_path):
    db = _db(tmp_path)
    _stack_with_resource(db)
    n = 6
    with db.write() as s:
        s.execute(sa.insert(models.SyncPoint), [
            dict(traversal_id='t1', node='u:p%d' % i, stack_id='s1',
                 remaining=0, dependents=['u:join'], done=False)
            for i in range(n)] + [
            dict(traversal_id='t1', node='u:join', stack_id='s1',
                 remaining=n, dependents=[], done=False)])
    released = []
    barrier = threading.Barrier(n)

    def finish(i):
        barrier.wait()
        with db.begin() as conn:  # as a unit records: Core, one transaction
            assert api.sync_mark_done(conn, 't1', 'u:p%d' % i) == ['u:join']
            released.extend(api.sync_release(conn, 't1', ['u:join']))

    threads = [threading.Thread(target=finish, args=(i,)) for i in range(n)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert released == ['u:join']


def test_a_node_is_done_once(tmp_path):
    db = _db(tmp_path)
    _stack_with_resource(db)
    with db.write() as s:
        s.add(models.SyncPoint(traversal_id='t1', node='u:r', stack_id='s1',
                               remaining=0, dependents=[], done=False))
    with db.write() as s:
        assert api.sync_mark_done(s, 't1', 'u:r') == []
    with db.write() as s:
        assert api.sync_mark_done(s, 't1', 'u:r') is None


def test_migrations_match_the_models(tmp_path):
    """A model change without a migration fails here."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    db = _db(tmp_path)
    with db.writer_engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn),
                                models.Base.metadata)
    assert diff == []


def test_a_signal_finds_the_nodes_waiting_for_it_without_reading_the_stack(
        tmp_path):
    """The wake of a signal is looked up by its event: with the stack's
    index instead, each of 9,000 signals read all 22,000 nodes of a
    1,000-server overcloud inside the write transaction."""
    db = _db(tmp_path)
    with db.connect() as conn:
        compiled = api._WAITING_FOR.compile(dialect=conn.dialect)
        plan = conn.exec_driver_sql(
            'EXPLAIN QUERY PLAN ' + str(compiled),
            tuple(None for _ in compiled.positiontup)).all()
    steps = ' '.join(row[-1] for row in plan)
    assert 'wait_event=?' in steps, steps


def test_rows_written_together_in_any_number_write_exactly_those(any_db):
    # a batch's rows are written by one statement made for a power of two
    # of them: 3, 5 and 7 rows run padded, and only the given rows move
    db = any_db
    _stack_with_resource(db)
    with db.write() as s:
        s.add_all([models.Resource(uuid='u%d' % i, stack_id='s1',
                                   name='r%d' % i, type='T', atomic_key=0,
                                   requires=[], data={})
                   for i in range(2, 10)])
    with db.read() as s:
        rows = dict(s.execute(sa.select(models.Resource.name,
                                        models.Resource.id)).all())
    for count in (3, 5, 7):
        names = ['r%d' % i for i in range(2, 2 + count)]
        with db.read() as s:
            keys = {n: api.resource_get(s, rows[n]).atomic_key
                    for n in rows}
        # r2 is given a key it never had: its write loses
        writes = [(rows[n], keys[n] + (7 if n == 'r2' else 0),
                   {'status_reason': '%s of %d' % (n, count),
                    'data': {'n': count}}) for n in names]
        with db.begin() as conn:
            written = api.resource_cas_many(conn, writes)
        assert written == {rows[n] for n in names[1:]}
        with db.read() as s:
            after = {n: api.resource_get(s, rows[n]) for n in rows}
        for n in names[1:]:
            assert after[n].status_reason == '%s of %d' % (n, count)
            assert after[n].data == {'n': count}
            assert after[n].atomic_key == keys[n] + 1
        # neither the loser nor a row not given moved
        for n in ['r2'] + sorted(set(rows) - set(names)):
            assert after[n].atomic_key == keys[n]


def test_nodes_marked_done_or_waiting_together_in_any_number(any_db):
    db = any_db
    _stack_with_resource(db)
    nodes = ['u:n%d' % i for i in range(7)]
    with db.write() as s:
        s.execute(sa.insert(models.SyncPoint), [
            dict(traversal_id='t1', node=n, stack_id='s1', remaining=0,
                 dependents=[], done=n == 'u:n0') for n in nodes])
    with db.begin() as conn:
        waiting = api.sync_wait_many(
            conn, 't1', [(n, 100.0 + i, None)
                         for i, n in enumerate(nodes[:5])])
    assert waiting == set(nodes[1:5])   # n0 is done: it waits for nothing
    with db.begin() as conn:
        done = api.sync_mark_done_many(conn, 't1',
                                       [(n, None) for n in nodes[:3]])
    assert done == {'u:n1': [], 'u:n2': []}
    with db.read() as s:
        found = {r.node: r for r in s.scalars(sa.select(models.SyncPoint))}
    assert [n for n in nodes if found[n].done] == nodes[:3]
    assert [found[n].wake_at for n in nodes[1:6]] == [
        101.0, 102.0, 103.0, 104.0, None]
    # the timer takes the waits still recorded as it saw them (n3's time
    # it saw is not the recorded one)
    with db.begin() as conn:
        taken = api.sync_take_many(conn, 't1', [
            ('u:n3', 99.0), ('u:n4', 104.0), ('u:n6', None)], 500.0)
    assert taken == ['u:n4']
    with db.begin() as conn:
        loaded = api.unit_load_many(conn, 't1', ['u:n4', 'u:n5', 'u:nx'])
    assert sorted(loaded) == ['u:n4', 'u:n5']
    assert loaded['u:n4'][0].wake_at == 500.0
    assert loaded['u:n5'][0].wake_at is None
