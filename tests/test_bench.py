"""converge-bench: the arithmetic on tiny graphs, the generated shapes, and
one small in-process run. Nothing here asserts a time."""

import json

import pytest

from converge.bench import cli
from converge.bench import heat
from converge.bench import measure
from converge.bench import scenarios

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
             locks=3, statements=30, peak_rss_mb=60)
    b = dict(units={'t1': [0.3]}, casts={'t1': 1}, locks=1, statements=5,
             peak_rss_mb=None)  # an API process: not an engine
    after = measure.combine([a, b])
    assert after['rss_each'] == [60]
    w = measure.window(before, after, 't1')
    assert w == dict(units=3, casts=3, locks=3, statements=25,
                     unit_seconds=[0.1, 0.2, 0.3])
    f = measure.figures(w)
    assert f['statements_per_check_resource'] == pytest.approx(25 / 3)
    assert f['messages_per_check_resource'] == 1


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
    # every leaf of a wide graph is cast once, and each unit locks once
    assert row['check_resources'] == 20
    assert row['casts'] == row['check_resources']
    assert row['messages_per_check_resource'] == 1
    assert row['locks_per_check_resource'] == 1
    assert row['peak_rss_mb'] > 0
    printed = capsys.readouterr().out
    assert 'wide' in printed and 'sql/cr' in printed


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
        assert row['check_resources'] == n
        # no message lost and sent again by the sweeper
        assert row['casts'] == n and row['locks_per_check_resource'] == 1
        assert row['statements_per_check_resource'] > 0
        assert len(row['peak_rss_mb_each']) == 2
        assert all(r > 0 for r in row['peak_rss_mb_each'])
