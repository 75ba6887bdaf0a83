"""The fact store, with the SLURM-like example of examples/slurm: a head
node and compute nodes that need each other's data converge without a
dependency cycle; real agents run real scripts that publish facts, and
scaling out runs again only the deployments that read what changed."""

import json
import os

import pytest

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'examples', 'slurm', 'cluster.yaml')


def _disk(cli, server):
    return cli.json('sim', 'server', 'show', server)['disk']


def _runs(cli, server):
    with open(os.path.join(_disk(cli, server), 'runs.log')) as f:
        return len(f.read().split())


def _read(cli, server, name):
    with open(os.path.join(_disk(cli, server), name)) as f:
        return f.read().strip()


@pytest.mark.long
def test_a_cluster_converges_through_its_facts(cli):
    cli.run('stack', 'create', 'slurm', '-t', EXAMPLE, '--wait',
            timeout=240)
    # the first runs saw no facts yet: the head's node list is empty
    assert json.loads(_read(cli, 'head', 'slurm-nodes.json')) == {}
    # they were published; an observer pass updates what reads them
    [done] = cli.json('observe')
    assert (done['stack_name'], done['outcome']) == ('slurm', 'refreshing')
    key = _read(cli, 'head', 'munge.key')
    assert json.loads(_read(cli, 'head', 'slurm-nodes.json')) == {
        'controller': key, 'node-0': 'compute-0', 'node-1': 'compute-1'}
    assert [_read(cli, n, 'controller.key')
            for n in ('compute-0', 'compute-1')] == [key, key]
    assert [_runs(cli, n) for n in ('head', 'compute-0', 'compute-1')] == \
        [2, 2, 2]
    # settled: nothing changed, nothing runs
    assert cli.json('observe') == []

    # one more compute node: it runs once; the head, which reads every
    # node, once more; the other compute nodes read only the controller's
    # key, which did not change, and do not run again
    cli.run('stack', 'update', 'slurm', '--existing', '--parameter',
            'computes=3', '--wait', timeout=240)
    assert [o['outcome'] for o in cli.json('observe')] == ['refreshing']
    assert json.loads(_read(cli, 'head', 'slurm-nodes.json'))['node-2'] == \
        'compute-2'
    assert _read(cli, 'compute-2', 'controller.key') == key
    assert [_runs(cli, n) for n in ('head', 'compute-0', 'compute-1',
                                    'compute-2')] == [3, 2, 2, 1]
    assert cli.json('observe') == []
    shown = cli.json('stack', 'resource', 'show', 'slurm', 'facts')
    assert sorted(shown['attributes']['all']) == [
        'controller', 'node-0', 'node-1', 'node-2']
    changed = [e['resource_status_reason'] for e in cli.json(
        'stack', 'event', 'list', 'slurm')
        if e['resource_status'] == 'OBSERVE_FACTS_CHANGED']
    assert changed == [
        'facts changed: controller, node-0, node-1; updating what reads '
        'them',
        'facts changed: node-2; updating what reads them']


def test_a_refresh_is_taken_once_and_survives_its_takers_death(
        engine, tmp_path):
    """One engine takes a marked stack; a mark made after the take is not
    cleared with it; a take whose taker died (the update never started)
    is taken again once its lease ends."""
    from converge.drivers import facts
    from tests import enginetools as et
    stack = et.run(engine, et.stacks.create, 's', et.bundle(
        tmp_path, et.hot({'v': {'type': 'OS::Heat::Value',
                                'properties': {'value': 1}}})), {})
    with engine.db.begin() as conn:
        facts.record(conn, stack.id, {'a': '1'}, 'test')
    now = 1000.0 + facts.LEASE
    with engine.db.begin() as conn:
        [(sid, keys, lease)] = facts.take_refreshes(conn, now)
    assert (sid, keys) == (stack.id, ['a'])
    with engine.db.begin() as conn:
        assert facts.take_refreshes(conn, now) == []   # taken: not again
        facts.record(conn, stack.id, {'b': '2'}, 'test')  # a new mark
        facts.done_refresh(conn, stack.id, lease)
    with engine.db.begin() as conn:   # the new mark stayed
        [(_sid, keys, lease)] = facts.take_refreshes(conn, now)
    assert keys == ['a', 'b']
    # its taker died: after the lease, another engine takes it
    with engine.db.begin() as conn:
        assert facts.take_refreshes(conn, now + facts.LEASE - 1) == []
        [(_sid, keys, _lease)] = facts.take_refreshes(
            conn, now + facts.LEASE + 1)
    assert keys == ['a', 'b']
