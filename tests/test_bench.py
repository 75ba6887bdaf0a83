"""converge-bench: the arithmetic on tiny graphs, the generated shapes, and
one small in-process run. Nothing here asserts a time."""

import json

import pytest

from converge.bench import cli
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
    bundle = sc.bundle(str(tmp_path))
    assert set(bundle.template['resources']) == set(sc.deps)


def test_distributed_not_implemented(capsys):
    assert cli.main(['--scenario', 'wide', '--mode', 'distributed']) == 2
    assert 'not yet implemented' in capsys.readouterr().err


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
        assert key in row
    for key in ('create_s', 'resources_per_s', 'statements_per_check_resource',
                'messages_per_check_resource', 'locks_per_check_resource',
                'cr_p50_ms', 'cr_p95_ms', 'peak_rss_mb', 'delete_s'):
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
