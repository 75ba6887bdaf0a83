"""Dependency graphs, cycle errors, traversal plans and DOT output."""

import pytest

from converge import exception
from converge.graph import dependencies, dot, plan


def test_cycle_error_names_every_resource_on_it():
    with pytest.raises(exception.InvalidTemplate) as err:
        dependencies.build({'a': {'c'}, 'b': {'a'}, 'c': {'b'}, 'd': {'a'}})
    msg = str(err.value)
    for name in ('a', 'b', 'c'):
        assert name in msg
    assert 'd,' not in msg and 'Circular dependency' in msg


def test_self_dependency_is_a_cycle():
    with pytest.raises(exception.InvalidTemplate, match='x'):
        dependencies.build({'x': {'x'}})


@pytest.mark.parametrize('requires,cycle', [
    ({'a': {'c'}, 'b': {'a'}, 'c': {'b'}, 'd': {'a'}}, True),
    ({'x': {'x'}}, True),
    ({'a': set(), 'b': {'a'}, 'c': ['a', 'b', 'a'], 'd': {'outside'}},
     False),
])
def test_check_refuses_what_build_refuses(requires, cycle):
    """check() validates without networkx, with build()'s error."""
    if not cycle:
        assert dependencies.check(requires) is None
        dependencies.build(requires)
        return
    with pytest.raises(exception.InvalidTemplate) as built:
        dependencies.build(requires)
    with pytest.raises(exception.InvalidTemplate) as checked:
        dependencies.check(requires)
    assert str(checked.value) == str(built.value)


def test_acyclic_graph_has_edges_from_required_to_requirer():
    g = dependencies.build({'a': set(), 'b': {'a'}})
    assert list(g.edges) == [('a', 'b')]


def _order(p):
    """A valid execution order of the plan (Kahn), to assert ordering."""
    pending = {k: n.predecessors for k, n in p.nodes.items()}
    ready = [k for k, v in pending.items() if v == 0]
    order = []
    while ready:
        k = ready.pop(0)
        order.append(k)
        for d in p.nodes[k].dependents:
            pending[d] -= 1
            if pending[d] == 0:
                ready.append(d)
    return order


def test_create_plan_is_the_template_graph():
    p = plan.make({'a': set(), 'b': {'a'}, 'c': {'a'}}, [], {})
    assert sorted(p.leaves) == ['u:a']
    assert sorted(p.roots) == ['u:b', 'u:c']
    assert p.nodes['u:b'].predecessors == 1


def test_delete_plan_removes_dependents_first():
    rows = [plan.Row(1, 'a'), plan.Row(2, 'b', requires=(1,)),
            plan.Row(3, 'c', requires=(2,))]
    p = plan.make({}, rows, {})
    order = _order(p)
    assert order.index('c:3:c') < order.index('c:2:b') < order.index('c:1:a')
    assert p.leaves == ['c:3:c']


def test_replacement_cleanup_waits_for_dependents_to_switch_over():
    # b depends on a; a is replaced (new row 3 replaces 1) during update
    rows = [plan.Row(1, 'a'), plan.Row(2, 'b', requires=(1,))]
    p = plan.make({'a': set(), 'b': {'a'}}, rows, {'a': 1, 'b': 2})
    order = _order(p)
    # a's new version first, then b re-pointed, then old rows cleaned
    assert order.index('u:a') < order.index('u:b') < order.index('c:2:b') \
        < order.index('c:1:a')


def test_removed_resource_cleanup_runs_in_parallel_with_updates():
    rows = [plan.Row(1, 'a'), plan.Row(2, 'gone')]
    p = plan.make({'a': set()}, rows, {'a': 1})
    assert 'c:2:gone' in p.leaves and 'u:a' in p.leaves


def test_node_keys_name_their_resource():
    assert plan.resource_name(plan.update_key('web')) == 'web'
    # resource names may hold colons
    assert plan.resource_name(plan.cleanup_key(12, 'a:b')) == 'a:b'
    assert plan.is_update('u:x') and not plan.is_update('c:1:x')


def test_dot_output_lists_nodes_and_edges():
    text = dot.render('demo', {'a': set(), 'b': {'a'}}, {'a': 'OS::Heat::None'},
                      {'a': 'CREATE_COMPLETE'})
    assert text.startswith('digraph "demo" {')
    assert '"b" -> "a";' in text
    assert 'OS::Heat::None' in text and 'palegreen' in text


def test_the_inputs_of_a_wide_node_count_down_its_shards():
    """A node with more inputs than FAN_IN waits for SHARDS shards, each
    counting its share of the inputs; narrow nodes are left as they are."""
    wide = ['i%d' % i for i in range(plan.FAN_IN + 9)]
    dependents = {key: ['join'] for key in wide}
    dependents.update(join=['end'], few=['end'], end=[])
    counts = plan.shard_fan_in(dependents)
    assert list(counts) == ['join']
    assert sorted(counts['join']) == list(range(plan.SHARDS))
    assert sum(counts['join'].values()) == len(wide)
    told = [plan.split_shard(dependents[key][0]) for key in wide]
    assert {node for node, _ in told} == {'join'}
    assert sorted(told) == sorted(('join', shard) for shard, n in
                                  counts['join'].items() for _ in range(n))
    assert dependents['join'] == ['end'] and dependents['few'] == ['end']
    assert plan.split_shard('u:a') is None
