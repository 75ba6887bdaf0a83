"""The state layer: migrations, compare-and-swap, sync points."""

import threading

import sqlalchemy as sa

from converge.db import api, migrate, models, session


def _db(tmp_path):
    db = session.Database('sqlite:///%s' % (tmp_path / 'c.db'))
    migrate.ensure(db)
    return db


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
            assert api.sync_mark_done(conn, 't1', 'u:p%d' % i)
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
        assert api.sync_mark_done(s, 't1', 'u:r')
    with db.write() as s:
        assert not api.sync_mark_done(s, 't1', 'u:r')


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
