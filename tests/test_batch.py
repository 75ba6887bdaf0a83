"""The units of one message (a fan-out's leaves, waits that came due
together) share their records: reconcile.check_resources. Each unit
still ends with its own outcome, lost writes fall back to one
transaction each, and a node locked elsewhere is left to run alone."""

import collections
import time

import pytest

from converge.db import api
from converge.messaging import rpc
from converge.engine import stacks
from converge.workers import pool
from converge.workers import reconcile
from tests import enginetools as et
from tests import test_waits as tw


@pytest.fixture(params=['sqlite', pytest.param(
    'postgresql', marks=pytest.mark.distributed)])
def engine(request, tmp_path):
    """The in-process engine on its embedded SQLite, or on a fresh
    PostgreSQL database with Redis locks (a distributed deployment's,
    no worker started): batches are what distributed workers run."""
    if request.param == 'sqlite':
        yield request.getfixturevalue('engine')
        return
    from converge import conf
    from converge.db import session
    from converge.engine import context
    deployment = request.getfixturevalue('dist')
    conf.setup(['--config-file', deployment.conf], log=False)
    eng = context.Engine(auto_migrate=False)
    yield eng
    eng.close()
    session.forget()


def _walker(engine):
    """The engine's messages into a queue, for the test to run (no worker
    pool runs here: nothing runs but what the test runs)."""
    queue = collections.deque()

    class Client(rpc.Client):
        def check_resource(self, stack_id, t, node, attempt=0):
            queue.append((stack_id, t, node))

    if engine.workers is not None:
        engine.workers.stop()
        engine.workers = None
    engine._client = Client()
    return queue


def _template(tmp_path, n, waits=True):
    resources = {'w%d' % i: {'type': 'OS::Heat::TestResource',
                             'properties': {'wait_secs': 30}}
                 for i in range(n if waits else 0)}
    resources.update({'d%d' % i: {'type': 'OS::Heat::None'}
                      for i in range(n)})
    return et.bundle(tmp_path, et.hot(resources))


def _transactions(engine, monkeypatch):
    """Count the write transactions the engine begins."""
    count = []
    begin = engine.db.begin

    def counted():
        count.append(1)
        return begin()
    monkeypatch.setattr(engine.db, 'begin', counted)
    return count


def _three_ends(engine, tmp_path, name):
    """A stack of three resources that end at once (d0, d1, d2), created
    with nothing run: (stack id, traversal id, their nodes)."""
    queue = _walker(engine)
    stack_id, trav = stacks.create(engine, name,
                                   _template(tmp_path, 3, waits=False), {})
    nodes = [node for _, _, node in queue if node.startswith('u:d')]
    queue.clear()
    return stack_id, trav, nodes


def test_a_message_of_waits_and_ends_is_recorded_in_one_transaction(
        engine, tmp_path, monkeypatch):
    queue = _walker(engine)
    stack_id, trav = stacks.create(engine, 'batch', _template(tmp_path, 4),
                                   {})
    nodes = [node for _, _, node in queue]
    queue.clear()
    count = _transactions(engine, monkeypatch)
    failed = []
    assert reconcile.check_resources(engine, stack_id, trav, nodes,
                                     failed.append) == []
    # a claim each before the test resource acts (a server's create needs
    # none), then one transaction for all eight records
    assert failed == [] and len(count) == 4 + 1
    for i in range(4):
        # each as a unit alone would have left it
        sp = tw._sync_point(engine, trav, 'u:w%d' % i)
        assert sp.wake_at > time.time() + 20 and not sp.done
        assert tw._row(engine, stack_id, 'w%d' % i).status == 'IN_PROGRESS'
        assert tw._sync_point(engine, trav, 'u:d%d' % i).done
        assert tw._row(engine, stack_id, 'd%d' % i).status == 'COMPLETE'
    # the stack's own node waits for the waits: nothing sent
    assert not queue
    # a second delivery of the ends drops them, writing nothing
    assert reconcile.check_resources(
        engine, stack_id, trav, [n for n in nodes if n.startswith('u:d')],
        failed.append) == []
    assert len(count) == 4 + 1 and not queue


def test_a_lost_write_records_the_others_each_alone(
        engine, tmp_path, monkeypatch):
    stack_id, trav, nodes = _three_ends(engine, tmp_path, 'lost')
    # another unit writes d1 between this one's load and its record
    record = reconcile.Unit._record

    def raced(unit, outcome):
        if unit.name == 'd1' and unit.shared is not None:
            raise reconcile.Lost()
        return record(unit, outcome)
    monkeypatch.setattr(reconcile.Unit, '_record', raced)
    count = _transactions(engine, monkeypatch)
    failed = []
    assert reconcile.check_resources(engine, stack_id, trav, nodes,
                                     failed.append) == []
    # one shared try, rolled back; then each alone
    assert failed == [] and len(count) == 1 + 3
    for name in ('d0', 'd1', 'd2'):
        assert tw._row(engine, stack_id, name).status == 'COMPLETE'
    # the last end completed the stack
    assert tw._stack(engine, stack_id).status == 'COMPLETE'


def test_a_row_written_elsewhere_first_loses_only_its_own_record(
        engine, tmp_path, monkeypatch):
    # the rows of a batch are written in one statement; another writer
    # moves d1's row on after the batch loaded it: that statement finds
    # one row fewer, the batch is rolled back, and each is recorded alone,
    # d1 losing (its row left as the other writer left it)
    stack_id, trav, nodes = _three_ends(engine, tmp_path, 'raced')
    prepare = reconcile.Unit.prepare

    def raced(unit, outcome):
        if unit.name == 'd1':
            with engine.db.begin() as conn:
                assert api.resource_cas(conn, unit.row.id,
                                        unit.row.atomic_key,
                                        status_reason='elsewhere')
        return prepare(unit, outcome)
    monkeypatch.setattr(reconcile.Unit, 'prepare', raced)
    failed = []
    assert reconcile.check_resources(engine, stack_id, trav, nodes,
                                     failed.append) == []
    assert failed == []
    for name in ('d0', 'd2'):
        row = tw._row(engine, stack_id, name)
        assert (row.action, row.status) == ('CREATE', 'COMPLETE')
        assert tw._sync_point(engine, trav, 'u:%s' % name).done
    raced_row = tw._row(engine, stack_id, 'd1')
    assert raced_row.status_reason == 'elsewhere'
    assert raced_row.action == 'INIT'   # not recorded as created
    assert not tw._sync_point(engine, trav, 'u:d1').done
    assert tw._stack(engine, stack_id).status == 'IN_PROGRESS'


def test_a_wide_stack_ends_through_batches_counting_each_end_once(
        engine, tmp_path):
    # 80 ends count the stack's own node down through its shards (more
    # than plan.FAN_IN inputs): batches of several ends share a shard,
    # one is delivered twice, and the stack completes exactly when the
    # last end is recorded, with one COMPLETE event for each resource
    queue = _walker(engine)
    stack_id, trav = stacks.create(engine, 'wide',
                                   _template(tmp_path, 80, waits=False), {})
    nodes = sorted(node for _, _, node in queue)
    queue.clear()
    assert len(nodes) == 80
    batches = [nodes[i:i + 20] for i in range(0, 80, 20)]
    failed = []
    for batch in batches[:-1]:
        assert reconcile.check_resources(engine, stack_id, trav, batch,
                                         failed.append) == []
        assert tw._stack(engine, stack_id).status == 'IN_PROGRESS'
    # delivered again: nothing counted twice
    assert reconcile.check_resources(engine, stack_id, trav, batches[0],
                                     failed.append) == []
    assert tw._stack(engine, stack_id).status == 'IN_PROGRESS'
    assert reconcile.check_resources(engine, stack_id, trav, batches[-1],
                                     failed.append) == []
    assert failed == [] and not queue
    assert tw._stack(engine, stack_id).status == 'COMPLETE'
    with engine.db.read() as session:
        events = api.events_list(session, stack_id)
    done = collections.Counter(e.resource_name for e in events
                               if e.status == 'COMPLETE' and
                               e.resource_name != 'wide')
    assert len(done) == 80 and set(done.values()) == {1}


def test_probes_an_engine_holds_wait_for_units_still_to_run_elsewhere(
        engine, tmp_path):
    # an engine that has run its share of a fan-out keeps holding its
    # probes while more nodes are still to run than it runs itself (nodes
    # sent to another engine); it sends them once nothing is left to run
    # elsewhere (or PROBE_HOLD_MAX, as before)
    queue = _walker(engine)
    stack_id, trav = stacks.create(engine, 'elsewhere',
                                   _template(tmp_path, 3, waits=False), {})
    nodes = [node for _, _, node in queue]    # sent, not run yet
    queue.clear()
    timer = pool.Pool(engine)
    now = time.time()

    def probe_due(name):
        timer.wake_at(now - 1, stack_id, trav, name, probe=True)
        engine.units_queued(engine.threads)   # this engine busy: held
        try:
            assert timer._soon_due(now)[0] == []
        finally:
            engine.units_queued(-engine.threads)
        engine._saturated_at = float('-inf')
        assert not engine.saturated

    def sent_after_a_look():
        timer._looked = 0.0                   # GATHER later
        timer._look_elsewhere()
        return [item[3] for item in timer._soon_due(now)[0]]

    # the three nodes are this engine's own units: nothing elsewhere
    probe_due('mine')
    engine.units_queued(len(nodes))
    try:
        assert sent_after_a_look() == ['mine']
    finally:
        engine.units_queued(-len(nodes))
    # another engine's: held until they have run
    probe_due('theirs')
    assert sent_after_a_look() == []
    assert reconcile.check_resources(engine, stack_id, trav, nodes,
                                     lambda node: None) == []
    assert sent_after_a_look() == ['theirs']


def test_a_node_locked_elsewhere_is_left_to_run_alone(engine, tmp_path):
    queue = _walker(engine)
    stack_id, trav = stacks.create(engine, 'locked', _template(tmp_path, 2),
                                   {})
    nodes = [node for _, _, node in queue if node.startswith('u:d')]
    other = engine.locks.try_resource(stack_id, 'd0')
    try:
        assert reconcile.check_resources(engine, stack_id, trav, nodes,
                                         [].append) == ['u:d0']
    finally:
        engine.locks.release_resource(other)
    assert not tw._sync_point(engine, trav, 'u:d0').done
    assert tw._sync_point(engine, trav, 'u:d1').done
    assert reconcile.check_resource(engine, stack_id, trav,
                                    'u:d0').kind == 'done'


def test_a_unit_that_hits_an_error_is_told_and_the_rest_recorded(
        engine, tmp_path, monkeypatch):
    queue = _walker(engine)
    stack_id, trav = stacks.create(engine, 'error', _template(tmp_path, 2),
                                   {})
    nodes = [node for _, _, node in queue if node.startswith('u:d')]
    converge = reconcile.Unit.converge

    def broken(unit):
        if unit.name == 'd0':
            raise ConnectionError('database gone')
        return converge(unit)
    monkeypatch.setattr(reconcile.Unit, 'converge', broken)
    failed = []
    assert reconcile.check_resources(engine, stack_id, trav, nodes,
                                     failed.append) == []
    assert failed == ['u:d0']
    assert not tw._sync_point(engine, trav, 'u:d0').done
    assert tw._sync_point(engine, trav, 'u:d1').done


def test_waits_due_together_are_taken_in_one_go_and_only_once(
        engine, tmp_path):
    from converge.db import api
    queue = _walker(engine)
    stack_id, trav = stacks.create(engine, 'take', _template(tmp_path, 3),
                                   {})
    nodes = [node for _, _, node in queue if node.startswith('u:w')]
    reconcile.check_resources(engine, stack_id, trav, nodes, [].append)
    waits = [(node, tw._sync_point(engine, trav, node).wake_at)
             for node in nodes]
    stale = [(waits[0][0], waits[0][1] - 1)] + waits[1:]
    new = time.time() + 60
    with engine.db.begin() as conn:
        # the first was recorded anew since (another wake): not this one's
        assert sorted(api.sync_take_many(conn, trav, stale, new)) == \
            sorted(n for n, _ in waits[1:])
    with engine.db.begin() as conn:   # taken by another engine's timer
        assert api.sync_take_many(conn, trav, waits[1:], new + 1) == []
    assert tw._sync_point(engine, trav, nodes[1]).wake_at == new
    assert tw._sync_point(engine, trav, nodes[0]).wake_at == waits[0][1]
    if engine.db.is_sqlite:   # one writer: nothing else can hold a row
        return
    # a row another transaction holds (a unit recording the node's next
    # wait) is left to it, not waited for
    import sqlalchemy as sa
    from converge.db import models
    sync = models.SyncPoint.__table__
    waits = [(node, tw._sync_point(engine, trav, node).wake_at)
             for node in nodes]
    with engine.db.writer_engine.connect() as other, other.begin():
        other.execute(sa.select(sync.c.node).where(
            sync.c.traversal_id == trav,
            sync.c.node == nodes[1]).with_for_update())
        with engine.db.begin() as conn:
            assert sorted(api.sync_take_many(conn, trav, waits, new + 2)) \
                == sorted([nodes[0], nodes[2]])


def test_an_engine_runs_its_own_due_waits_while_it_has_room_the_rest_go_on_the_bus(
        engine, monkeypatch):
    # the waits an engine's timer took (leased to it in the database) are
    # handed to its own threads, in the parts a message would carry, while
    # fewer than LOCAL_ROOM messages' worth wait for a thread there; the
    # rest are cast, for an engine with threads free. In process (inproc)
    # every cast is served here already: nothing is handed
    queue = _walker(engine)
    timer = pool.Pool(engine)
    handed = []

    class Executor:
        def submit(self, fn):
            handed.append(fn)

    class Server:
        _work_executor = Executor()

    ran = []

    class Endpoint:
        def check_resources(self, ctxt, stack_id, trav, nodes):
            ran.append((stack_id, trav, list(nodes)))

    timer._server, timer._endpoint = Server(), Endpoint()
    if rpc._direct():   # the embedded engine
        assert rpc.local_submit(timer._server) is None    # inproc: cast
        timer._dispatch([('s', 't', 'u:a'), ('s', 't', 'u:b')])
        assert handed == [] and [n for _, _, n in queue] == ['u:a', 'u:b']
        queue.clear()

    monkeypatch.setattr(rpc, '_direct', lambda: False)  # a broker's engine
    per = engine.threads * 8 * pool.LOCAL_ROOM   # fanout_min_nodes 8
    nodes = ['u:r%d' % i for i in range(per + 16)]
    timer._dispatch([('s', 't', node) for node in nodes])
    # each part as a message would carry it, in order, up to the room
    assert all(8 <= n <= 15 for n in map(len, _parts(nodes)))
    kept = [node for part in _parts(nodes) for node in part][:per]
    assert len(handed) == len([p for p in _parts(nodes)
                               if nodes.index(p[0]) < per])
    assert sorted(n for _, _, n in queue) == sorted(set(nodes) - set(kept))
    assert engine.queued == per          # waiting for a thread here
    assert not engine.idle.is_set()      # a graceful stop waits for them
    for fn in handed:
        fn()
    assert engine.queued == 0 and engine.idle.is_set()
    assert [n for _, _, part in ran for n in part] == kept
    assert {(s, t) for s, t, _ in ran} == {('s', 't')}

    # room again once they ran; none handed once it stops consuming
    handed.clear(), queue.clear()
    timer._dispatch([('s', 't', 'u:x'), ('s', 't', 'u:y')])
    assert len(handed) == 1 and not queue
    handed[0]()
    handed.clear()
    # handed before it stopped consuming, started after: they go on the
    # bus (to the engines that stay), not run here
    timer._dispatch([('s', 't', 'u:w')])
    timer._server = None
    timer.stop_consuming()
    timer._server = Server()
    ran.clear()
    handed[0]()
    assert ran == [] and [n for _, _, n in queue] == ['u:w']
    assert engine.idle.is_set()
    handed.clear(), queue.clear()
    # and waits taken from then on go on the bus at once
    timer._dispatch([('s', 't', 'u:z')])
    assert handed == [] and [n for _, _, n in queue] == ['u:z']


def _parts(nodes):
    return list(rpc.parts(nodes))
