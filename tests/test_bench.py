"""converge-bench: the arithmetic on tiny graphs, the generated shapes, and
one small in-process run. Nothing here asserts a time."""

import json
import types

import pytest

from converge.bench import cli
from converge.bench import compare
from converge.bench import heat
from converge.bench import measure
from converge.bench import rollout
from converge.bench import scenarios
from converge import listeners

DIAMOND = {'a': set(), 'b': {'a'}, 'c': {'a'}, 'd': {'b', 'c'}}
CHAIN = {'a': set(), 'b': {'a'}, 'c': {'b'}, 'd': {'c'}, 'e': {'d'}}


# -- critical path ----------------------------------------------------------

def test_critical_path_empty():
    assert measure.critical_path({}) == 0
    assert measure.longest_chain({}) == 0


def test_critical_path_single_and_independent():
    assert measure.longest_chain({'a': set()}) == 1
    assert measure.longest_chain({'a': set(), 'b': set(), 'c': set()}) == 1
    assert measure.critical_path({'a': set(), 'b': set()}, 0.5) == 0.5


def test_critical_path_chain():
    assert measure.longest_chain(CHAIN) == 5
    assert measure.critical_path(CHAIN, 0.5) == 2.5


def test_critical_path_diamond():
    assert measure.longest_chain(DIAMOND) == 3
    assert measure.critical_path(DIAMOND, 2) == 6


def test_critical_path_diamond_weighted_per_node():
    weights = {'a': 1, 'b': 5, 'c': 2, 'd': 1}
    assert measure.critical_path(DIAMOND, weights) == 7  # a-b-d
    assert measure.critical_path(DIAMOND, lambda n: 3 if n == 'c' else 1) \
        == 5  # a-c-d


def test_critical_path_missing_weights_and_implicit_nodes():
    # 'x' is named only as a dependency; it is a node of weight 0 in a dict
    assert measure.critical_path({'a': {'x'}}, {'a': 2}) == 2
    assert measure.longest_chain({'a': {'x'}}) == 2


def test_critical_path_refuses_cycles():
    with pytest.raises(Exception):
        measure.longest_chain({'a': {'b'}, 'b': {'a'}})


# -- percentiles and ratios -------------------------------------------------

def test_percentile():
    assert measure.percentile([], 50) is None
    assert measure.percentile([7], 95) == 7
    assert measure.percentile([3, 1, 2], 50) == 2
    assert measure.percentile([1, 2, 3, 4], 50) == 2.5
    values = list(range(1, 101))  # 1..100
    assert measure.percentile(values, 0) == 1
    assert measure.percentile(values, 100) == 100
    assert measure.percentile(values, 95) == pytest.approx(95.05)
    assert measure.percentile([10, 20], 95) == pytest.approx(19.5)


def test_per_unit_and_ratio():
    assert measure.per_unit(30, 10) == 3
    assert measure.per_unit(5, 0) is None
    assert measure.ratio(10, 4) == 2.5
    assert measure.ratio(None, 4) is None
    assert measure.ratio(1, None) is None
    assert measure.ratio(1, 0) is None


def test_figures():
    f = measure.figures(dict(units=4, casts=4, locks=4, statements=40,
                             unit_seconds=[0.001, 0.002, 0.003, 0.004]))
    assert f['statements_per_check_resource'] == 10
    assert f['messages_per_check_resource'] == 1
    assert f['locks_per_check_resource'] == 1
    assert f['cr_p50_ms'] == pytest.approx(2.5)
    assert f['cr_p95_ms'] == pytest.approx(3.85)


# -- shapes -----------------------------------------------------------------

def test_layer_sizes():
    assert scenarios.layer_sizes(0) == []
    assert scenarios.layer_sizes(5) == [1] * 5
    assert scenarios.layer_sizes(40) == [2] * 20
    assert scenarios.layer_sizes(45) == [3] * 5 + [2] * 15


def test_shapes():
    assert scenarios.wide_deps(3) == {'r0': set(), 'r1': set(), 'r2': set()}
    deep = scenarios.deep_deps(40)
    assert len(deep) == 40
    assert measure.longest_chain(deep) == 20
    assert all(len(d) == 1 for n, d in deep.items()
               if not n.startswith('r00_'))
    fan = scenarios.fanin_deps(100)  # 20 layers of 5, 3 hubs each
    assert len(fan) == 100
    assert fan['r01_4'] == {'r00_0', 'r00_1', 'r00_2'}
    assert measure.longest_chain(fan) == 20


def test_latency_bound_and_template(tmp_path):
    sc = scenarios.make('latency', 40, latency=0.5)
    assert measure.critical_path(sc.deps, sc.latency) == 10.0
    res = sc.doc['resources']
    assert res['r01_0']['type'] == 'OS::Nova::Server'
    assert res['r01_0']['properties']['metadata'] == {
        'dep0': {'get_resource': 'r00_0'}}
    written = scenarios.write('latency', 40, str(tmp_path), latency=0.5)
    assert written.chain == 20 and written.bound_s == 10.0
    bundle = written.bundle()
    assert set(bundle.template['resources']) == set(sc.deps)


def test_latency_wide_shape_is_independent_servers(tmp_path):
    sc = scenarios.make('latency', 30, latency=2.0, shape='wide')
    assert sc.deps == scenarios.wide_deps(30)
    assert all(r['type'] == 'OS::Nova::Server'
               for r in sc.doc['resources'].values())
    written = scenarios.write('latency', 30, str(tmp_path), latency=2.0,
                              shape='wide')
    # the critical path of independent servers is one create
    assert written.chain == 1 and written.bound_s == 2.0
    assert written.shape == 'wide'
    assert scenarios.make('latency', 30).shape == 'deep'
    with pytest.raises(ValueError):
        scenarios.make('latency', 3, shape='round')


def test_latency_shape_on_the_command_line(tmp_path):
    args = cli.parse_args(['--scenario', 'latency', '--shape', 'wide',
                           '--n', '2000', '--latency', '30'])
    assert (args.shape, args.n, args.latency) == ('wide', [2000], 30.0)
    assert cli.parse_args(['--scenario', 'latency']).shape == 'deep'
    wide = scenarios.write('latency', 4, str(tmp_path), 1.0, 'wide')
    deep = scenarios.write('latency', 4, str(tmp_path), 1.0, 'deep')
    assert cli.label(wide) == 'latency/wide'
    assert cli.label(deep) == 'latency'


def test_table_names_rows_without_a_label():
    rows = [dict(label='latency/wide', scenario='latency', engine='converge',
                 n=5, worker_threads=8, threads='12/14'),
            dict(scenario='wide', engine='heat', n=5)]  # Heat's row
    lines = cli.table(rows).splitlines()
    assert 'wthr' in lines[0] and 'thr_peak' in lines[0]
    assert 'latency/wide' in lines[1] and '12/14' in lines[1]
    assert lines[2].split()[:2] == ['wide', 'heat']


def test_tripleo_shape():
    sc = scenarios.make('tripleo', 10)
    res = sc.doc['resources']
    # 3 controllers, then 4/5 computes and 1/5 storage
    assert scenarios.role_sizes(10) == [('Controller', 3), ('Compute', 6),
                                        ('CephStorage', 1)]
    servers = [n for n, r in res.items() if r['type'] == 'OS::Nova::Server']
    assert len(servers) == 10
    assert sc.nodes == 10 and sc.n == len(res) == len(sc.deps)
    # per node 22 resources, per role a config, per step a barrier, and
    # the all-nodes host list with its config
    assert sc.n == 10 * 22 + 3 + scenarios.STEPS + 2
    # step k on a node waits for step k-1 on every node
    assert sc.deps['Compute0Deployment_Step2'] == {'Step1Complete',
                                                   'Compute0'}
    assert len(sc.deps['Step1Complete']) == 10
    # hostname -> user data -> server -> deployment, then each step and
    # its barrier
    assert measure.longest_chain(sc.deps) == 4 + 2 * scenarios.STEPS


def test_tripleo_size_of_cerns_cluster():
    assert scenarios.make('tripleo', 1000).n == 22010


# -- counters ---------------------------------------------------------------

def test_window_and_combine():
    before = measure.combine([
        dict(units={'t0': [0.5]}, casts={'t0': 1}, locks=1, statements=10,
             peak_rss_mb=50)])
    a = dict(units={'t0': [0.5], 't1': [0.1, 0.2]}, casts={'t0': 1, 't1': 2},
             locks=3, statements=30, peak_rss_mb=60, threads_peak=12,
             worker_threads=8)
    b = dict(units={'t1': [0.3]}, casts={'t1': 1}, locks=1, statements=5,
             peak_rss_mb=None, threads_peak=None,
             worker_threads=8)  # an API process: not an engine
    c = dict(units={}, casts={}, locks=0, statements=2, peak_rss_mb=70,
             threads_peak=30, worker_threads=8)
    after = measure.combine([a, b, c])
    assert after['rss_each'] == [60, 70]
    assert after['threads_each'] == [12, 30]
    assert measure.threads(after) == dict(
        worker_threads=8, worker_threads_each=[8, 8],
        threads_peak_each=[12, 30], threads_peak=30, threads='12/30')
    w = measure.window(before, after, 't1')
    assert w == dict(units=3, casts=3, locks=3, statements=27,
                     unit_seconds=[0.1, 0.2, 0.3])
    # without a traversal: every traversal's (a parent's and its nested
    # stacks'); t0 did nothing new
    assert measure.window(before, after) == w
    f = measure.figures(w)
    assert f['statements_per_check_resource'] == pytest.approx(27 / 3)
    assert f['messages_per_check_resource'] == 1


def test_threads_without_engine_processes():
    assert measure.threads(measure.combine([])) == dict(
        worker_threads=None, worker_threads_each=[], threads_peak_each=[],
        threads_peak=None, threads=None)


def test_thread_sampler_peak_is_per_period():
    alive = [5]
    sampler = measure.ThreadSampler(count=lambda: alive[0])
    alive[0] = 9
    sampler.sample()
    alive[0] = 6
    sampler.sample()
    assert sampler.take_peak() == 9
    # the next period starts from the threads alive when it began
    assert sampler.take_peak() == 6
    alive[0] = 3
    assert sampler.take_peak() == 6
    assert sampler.take_peak() == 3


def test_thread_count_leaves_out_the_bench_threads():
    import threading
    before = measure.engine_threads_alive()
    stop = threading.Event()
    mine = threading.Thread(target=stop.wait,
                            name=measure.OWN_THREADS + 'test')
    other = threading.Thread(target=stop.wait, name='worker-test')
    mine.start()
    other.start()
    try:
        assert measure.engine_threads_alive() == before + 1
    finally:
        stop.set()
        mine.join()
        other.join()


def test_heat_result_row():
    out = ('noise\nRESULT {"create_s": 2.0, "create_rps": 50.0, '
           '"delete_s": 1.0, "peak_rss_mb": 400.5, "ok": true}\n')
    row = heat.row_of('wide', 100, heat.parse(out))
    assert row['engine'] == 'heat' and row['status'] == 'ok'
    assert row['resources_per_s'] == 50.0 and row['rss_mb'] == '400'
    assert heat.row_of('deep', 100, heat.parse('crashed'))['status'] == \
        'no result'


# -- one real run -----------------------------------------------------------

def test_wide_run(tmp_path, capsys):
    out = tmp_path / 'rows.json'
    rc = cli.main(['--scenario', 'wide', '--n', '20', '--json', str(out),
                   '--home', str(tmp_path / 'home')])
    assert rc == 0
    rows = json.loads(out.read_text())
    assert len(rows) == 1
    row = rows[0]
    for key, _, _ in cli.COLUMNS:
        if key != 'x_heat':  # only with --heat
            assert key in row
    for key in ('create_s', 'resources_per_s', 'statements_per_check_resource',
                'messages_per_check_resource', 'locks_per_check_resource',
                'cr_p50_ms', 'cr_p95_ms', 'peak_rss_mb', 'delete_s',
                'rss_mb'):
        assert row[key] is not None, key
    assert row['status'] == 'ok'
    assert row['scenario'] == 'wide' and row['n'] == 20
    assert row['bound_s'] is None and row['wall_over_bound'] is None
    assert row['statements_per_check_resource'] > 0
    # the 20 leaves of a wide graph go in one message per worker thread
    # (8 by default), and each unit locks once
    assert row['check_resources'] == 20
    assert row['casts'] == 8
    assert row['messages_per_check_resource'] == 8 / 20
    assert row['locks_per_check_resource'] == 1
    assert row['peak_rss_mb'] > 0
    printed = capsys.readouterr().out
    assert 'wide' in printed and 'sql/cr' in printed
    assert row['script_runs'] is None and row['exactly_once'] is None


def test_tripleo_run_really_deploys(tmp_path):
    """The tripleo scenario's deployments are scripts the servers' agents
    run: each once, counted from the servers' disks."""
    out = tmp_path / 'rows.json'
    rc = cli.main(['--scenario', 'tripleo', '--nodes', '2', '--json',
                   str(out), '--home', str(tmp_path / 'home')])
    assert rc == 0
    row = json.loads(out.read_text())[0]
    assert row['status'] == 'ok'
    runs = 2 * len(scenarios.PER_NODE_DEPLOYMENTS)
    assert row['script_runs'] == runs
    assert row['exactly_once'] == 'yes'
    # the agent host's signals go in shared requests (one or more each),
    # as its polls do
    assert 1 <= row['agent_requests']['signal'] <= runs
    assert 0 < row['agent_requests_per_deployment'] <= 2
    assert row['agent_rss_mb'] > 0
    # what the scripts wrote: their inputs, on their own server's disk
    disks = tmp_path / 'home' / 'sim-disks'
    written = sorted(p.name for p in disks.glob('*/inputs-*'))
    assert len(written) == runs
    one = next(disks.glob('*/inputs-Controller0NetworkDeployment'))
    text = one.read_text()
    assert 'node_name=controller-0' in text and 'deploy_action=CREATE' in text


def test_update_shape_keeps_the_tripleo_values():
    """The update scenario's stack is the tripleo one with two
    parameters, whose defaults leave every value as it is; one is read
    by one node's hieradata only, the other by one role's config."""
    plain = scenarios.make('tripleo', 5).doc
    knobs = scenarios.make('update', 5).doc
    assert 'parameters' not in plain
    assert set(knobs['parameters']) == {scenarios.NODE_PARAM,
                                        scenarios.ROLE_PARAM}
    assert set(knobs['resources']) == set(plain['resources'])
    changed = sorted(name for name in plain['resources']
                     if knobs['resources'][name] != plain['resources'][name])
    assert changed == sorted([scenarios.UPDATE_ROLE + 'Config',
                              scenarios.UPDATE_NODE + 'HieradataValues'])
    assert [s[0] for s in scenarios.UPDATE_STEPS] == [
        'noop', 'one_node', 'one_role', 'converge']
    with pytest.raises(SystemExit):
        cli.parse_args(['--scenario', 'update', '--n', '3'])


def test_update_run_has_a_row_per_step(tmp_path, capsys):
    """5 nodes (2 computes): the create, then each update, a row each.
    An update costs what it changes: the one that changes nothing does
    no unit of work, the one-node one a few and one script run, while
    --converge visits every resource (an update node and a cleanup node
    each) and runs nothing."""
    out = tmp_path / 'rows.json'
    rc = cli.main(['--scenario', 'update', '--n', '5', '--json', str(out),
                   '--home', str(tmp_path / 'home')])
    assert rc == 0
    rows = json.loads(out.read_text())
    steps = {r['step']: r for r in rows}
    assert [r['step'] for r in rows] == ['create', 'noop', 'one_node',
                                         'one_role', 'converge']
    for row in rows:
        assert row['status'] == 'ok' and row['scenario'] == 'update'
        assert row['nodes'] == 5 and row['wall_s'] > 0
        assert row['cpu_s'] is not None
        assert row['units'] == row['check_resources']
        if row['units']:
            assert row['statements_per_check_resource'] > 0
    create = steps['create']
    assert create['create_s'] == create['wall_s']
    assert create['exactly_once'] == 'yes' and create['delete_s'] > 0
    assert create['script_runs'] == 5 * len(scenarios.PER_NODE_DEPLOYMENTS)
    assert (steps['noop']['units'], steps['noop']['script_runs']) == (0, 0)
    assert 0 < steps['one_node']['units'] <= 10
    assert steps['one_node']['script_runs'] == 1
    assert steps['converge']['units'] == 2 * create['n']
    assert steps['converge']['script_runs'] == 0
    computes = dict(scenarios.role_sizes(5))[scenarios.UPDATE_ROLE]
    assert steps['one_role']['script_runs'] == \
        computes * len(scenarios.ROLE_DEPLOYMENTS)
    printed = capsys.readouterr().out
    assert 'one_node' in printed and 'x_create' in printed


def test_rolling_shape_and_bound(tmp_path):
    sc = scenarios.make('rolling', 1000, latency=30)
    group = sc.doc['resources']['group']
    assert sc.n == 1000 and sc.batch == 100
    assert group['update_policy']['rolling_update'] == {
        'max_batch_size': 100, 'min_in_service': 900}
    assert group['properties']['count'] == 1000
    assert group['properties']['resource_def']['type'] == 'OS::Nova::Server'
    written = scenarios.write('rolling', 25, str(tmp_path), latency=2.0,
                              batch=10)
    # 3 batches (10, 10, 5), one after the other: the bound is 3 rebuilds
    assert (written.batch, written.batches, written.bound_s) == (10, 3, 6.0)
    assert written.fault_op == 'rebuild'
    assert written.update_params == {'image': scenarios.ROLLING_IMAGES[1]}
    assert scenarios.write('latency', 4, str(tmp_path)).update_params is None
    # --latency defaults by scenario
    args = cli.parse_args(['--scenario', 'rolling', '--batch', '7'])
    assert (args.batch, args.latency) == (7, None)
    assert scenarios.default_latency('rolling') == \
        scenarios.DEFAULT_ROLLING_LATENCY
    assert scenarios.default_latency('latency') == scenarios.DEFAULT_LATENCY


def test_rollout_batches_from_events():
    def ev(name, status, at):
        ev.id += 1
        return dict(name=name, status=status, timestamp=100.0 + at,
                    id=ev.id)
    ev.id = 0
    events = [ev('3', 'IN_PROGRESS', 0.1), ev('2', 'IN_PROGRESS', 0.2),
              ev('3', 'COMPLETE', 1.1), ev('2', 'COMPLETE', 1.3),
              ev('1', 'IN_PROGRESS', 1.5), ev('0', 'IN_PROGRESS', 1.5),
              ev('0', 'COMPLETE', 2.5), ev('1', 'COMPLETE', 2.6)]
    seen, most = rollout.batches(events, 100.0)
    assert most == 2
    assert [b['members'] for b in seen] == [{'3', '2'}, {'1', '0'}]
    assert [b['first_start'] for b in seen] == pytest.approx([0.1, 1.5])
    assert [b['end'] for b in seen] == pytest.approx([1.3, 2.6])
    ids = {'0': 'a', '1': 'b', '2': 'c', '3': 'd'}
    rebuilds = {ids[m]: 1 for m in ids}
    assert rollout.once(events, rebuilds, 4) == 'yes'
    assert rollout.once(events + [ev('0', 'IN_PROGRESS', 3)], rebuilds,
                        4) == 'NO: 1 updated twice'
    assert rollout.once(events, dict(rebuilds, a=2), 4).startswith(
        'NO: rebuilds per server')


def test_rolling_run_updates_each_member_once_a_batch_at_a_time(tmp_path):
    """20 servers in batches of 5, each rebuild 0.3 s: the row tells the
    create, the update, its bound, the batches seen, the most members
    updating at once and that each was updated (rebuilt) once."""
    out = tmp_path / 'rows.json'
    rc = cli.main(['--scenario', 'rolling', '--n', '20', '--batch', '5',
                   '--latency', '0.3', '--json', str(out),
                   '--home', str(tmp_path / 'home')])
    assert rc == 0
    row = json.loads(out.read_text())[0]
    assert row['status'] == 'ok' and row['label'] == 'rolling'
    assert row['n'] == 20 and row['batch'] == 5
    assert row['create_s'] > 0 and row['update_s'] > 0
    assert row['bound_s'] == pytest.approx(4 * 0.3)
    assert row['wall_over_bound'] == pytest.approx(
        row['update_s'] / row['bound_s'])
    assert row['batches'] == '4/4' and row['busy_max'] == 5
    assert row['exactly_once'] == 'yes'
    roll = row['rollout']
    assert roll['batch_sizes'] == [5, 5, 5, 5]
    # highest names first, as Heat orders a group's rolling update
    assert roll['batch_ranges'] == ['15-19', '10-14', '5-9', '0-4']
    assert len(roll['gap_s']) == 3 and len(roll['last_member_s']) == 4
    # the counts are the update's: the group's and its members' units
    assert row['check_resources'] > 20


@pytest.mark.distributed
@pytest.mark.xdist_group('services')
def test_distributed_run_counts_every_worker(tmp_path):
    """Two worker processes: the units, casts and locks of both are counted
    (every leaf once), and each worker's peak RSS is reported."""
    from tests.distributed import require
    require('postgresql', 'rabbitmq', 'redis')
    out = tmp_path / 'rows.json'
    # two rows: each on a deployment of its own, which this process (the
    # API) must cast to, not to the first one's exchange
    rc = cli.main(['--scenario', 'deep', '--n', '40', '20', '--mode',
                   'distributed', '--workers', '2', '--json', str(out)])
    assert rc == 0
    rows = json.loads(out.read_text())
    assert [r['n'] for r in rows] == [40, 20]
    for row in rows:
        n = row['n']
        assert row['status'] == 'ok' and row['engine'] == 'converge/2w'
        # no message lost and sent again by the sweeper: every node's unit
        # ran once (nodes ready together share a message: casts count
        # messages)
        assert row['check_resources'] == n
        assert 0 < row['casts'] <= n and row['locks_per_check_resource'] == 1
        assert row['statements_per_check_resource'] > 0
        assert len(row['peak_rss_mb_each']) == 2
        assert all(r > 0 for r in row['peak_rss_mb_each'])


@pytest.mark.distributed
@pytest.mark.xdist_group('services')
def test_distributed_rolling_run(tmp_path):
    """The rolling scenario on two worker processes: the same row, read
    from the database and the simulated cloud the workers share."""
    from tests.distributed import require
    require('postgresql', 'rabbitmq', 'redis')
    out = tmp_path / 'rows.json'
    rc = cli.main(['--scenario', 'rolling', '--n', '6', '--batch', '2',
                   '--latency', '0.3', '--mode', 'distributed',
                   '--workers', '2', '--json', str(out)])
    assert rc == 0
    row = json.loads(out.read_text())[0]
    assert row['status'] == 'ok' and row['engine'] == 'converge/2w'
    assert row['batches'] == '3/3' and row['busy_max'] == 2
    assert row['exactly_once'] == 'yes'
    assert row['update_s'] > 0 and row['update_cpu_s'] is None


# -- the engine's listeners ---------------------------------------------------

class _Heard(listeners.Listener):
    def __init__(self):
        self.heard = []

    def on_unit(self, traversal_id, node, seconds):
        self.heard.append(('unit', traversal_id, node, seconds))

    def on_cast(self, traversal_id, node):
        self.heard.append(('cast', traversal_id, node))


def test_listeners_hear_each_unit_even_a_failed_one():
    one, two = _Heard(), _Heard()
    engine = types.SimpleNamespace(listeners=listeners.Listeners([one, two]))

    @listeners.timed
    def unit(engine, stack_id, traversal_id, node, fail=False):
        if fail:
            raise RuntimeError('boom')
        return 'done'

    assert unit(engine, 's', 't1', 'n1') == 'done'
    with pytest.raises(RuntimeError):
        unit(engine, 's', 't1', 'n2', fail=True)
    engine.listeners.on_cast('t1', 'n3')
    engine.listeners.on_lock('s', 'r')  # _Heard keeps the no-op default
    for heard in (one.heard, two.heard):
        assert [h[:3] for h in heard] == [('unit', 't1', 'n1'),
                                          ('unit', 't1', 'n2'),
                                          ('cast', 't1', 'n3')]
        assert all(h[3] >= 0 for h in heard[:2])


def test_unknown_listener_is_refused_by_name():
    from converge import exception
    with pytest.raises(exception.ConvergeError) as e:
        listeners.load(['nosuch'], object())
    assert "'nosuch'" in str(e.value) and listeners.GROUP in str(e.value)
    assert listeners.load([], object()) == []


def test_bench_listener_needs_its_directory(monkeypatch):
    from converge import exception
    from converge.bench import probe
    monkeypatch.delenv(probe.ENV, raising=False)
    with pytest.raises(exception.ConvergeError) as e:
        listeners.load([probe.LISTENER], object())
    assert probe.ENV in str(e.value)


def test_engine_imports_nothing_of_the_bench():
    """Workers load the bench's probe as a listener (an entry point); no
    module of converge/ outside converge/bench imports it."""
    import ast
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = []
    for folder, _, files in os.walk(os.path.join(root, 'converge')):
        if os.path.join('converge', 'bench') in folder:
            continue
        for name in files:
            if not name.endswith('.py'):
                continue
            path = os.path.join(folder, name)
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    mods = [node.module or ''] + [
                        '%s.%s' % (node.module, a.name) for a in node.names]
                else:
                    continue
                if any(m == 'converge.bench' or
                       m.startswith('converge.bench.') for m in mods):
                    found.append(os.path.relpath(path, root))
    assert found == []


# -- bench/compare ------------------------------------------------------------

def test_compare_rows_are_performance_md_rows():
    labels = [compare.row_label(*r) for r in compare.ROWS]
    assert labels[0] == 'wide 1000 embedded'
    assert 'tripleo 1000 2w' in labels and 'deep 10000 2w' in labels
    assert compare.row_args('tripleo', 1000, 2) == [
        '--scenario', 'tripleo', '--nodes', '1000', '--mode', 'distributed',
        '--workers', '2']
    assert compare.row_args('wide', 10, None) == ['--scenario', 'wide',
                                                  '--n', '10']


def test_compare_caps_sizes_and_drops_duplicates():
    rows = compare.capped(compare.ROWS, 100)
    assert rows == [('wide', 100, None), ('deep', 100, None),
                    ('wide', 100, 2), ('deep', 100, 2),
                    ('tripleo', 4, None), ('tripleo', 4, 2)]
    assert compare.capped([('tripleo', 1000, None)], 10) == [
        ('tripleo', 1, None)]
    assert compare.capped(compare.ROWS, 0) == compare.ROWS


def test_compare_runs_only_flags_both_revisions_know():
    old = compare.flags_of('usage: [--scenario S] [--n N [N ...]]\n'
                           '  --mode {embedded,distributed}  the-mode --x')
    assert old == {'--scenario', '--n', '--mode', '--x'}
    new = old | {'--shape'}
    kept, dropped = compare.common_args(
        ['--scenario', 'latency', '--shape', 'wide', '--n', '5', '10',
         '--mode=distributed'], old, new)
    assert kept == ['--scenario', 'latency', '--n', '5', '10',
                    '--mode=distributed']
    assert dropped == ['--shape', 'wide']


def test_compare_alternates_which_revision_goes_first():
    assert [compare.order(i) for i in range(3)] == [
        ('old', 'new'), ('new', 'old'), ('old', 'new')]


def test_compare_figures_ratios_and_notes():
    old = dict(status='ok', create_s=2.0, resources_per_s=500.0,
               statements_per_check_resource=8.0, peak_rss_mb=None,
               peak_rss_mb_each=[90.0, 95.0])
    new = dict(old, create_s=2.5, resources_per_s=400.0,
               statements_per_check_resource=8.0, peak_rss_mb=99.0)
    cmp = compare.compared(old, new)
    assert cmp['create_s'] == (2.0, 2.5, 1.25)
    assert cmp['peak_rss_mb'] == (95.0, 99.0, pytest.approx(99 / 95))
    assert cmp['cr_p50_ms'] == (None, None, None)
    assert compare.notes(old, new) == ['slower?']
    assert compare.notes(old, dict(new, resources_per_s=460.0)) == []
    assert compare.notes(old, dict(old, statements_per_check_resource=9)) \
        == ['sql+']
    assert compare.notes(old, dict(status='exit 2')) == ['new: exit 2']
    assert compare.notes(None, new) == ['old: no result']


def test_compare_table_has_old_new_and_ratio_per_figure():
    old = dict(status='ok', create_s=2.0, resources_per_s=500.0)
    new = dict(status='ok', create_s=1.0, resources_per_s=1000.0)
    text = compare.table([dict(label='wide 1000 embedded', old=old,
                               new=new)])
    heads, subs, line = text.splitlines()
    assert heads.split()[:3] == ['row', 'create_s', 'res/s']
    assert subs.split()[:6] == ['old', 'new', 'x', 'old', 'new', 'x']
    cells = line.split()
    assert cells[:9] == ['wide', '1000', 'embedded', '2.00', '1.00',
                         '0.50', '500.0', '1000.0', '2.00']
