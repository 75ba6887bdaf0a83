"""Seed 004's overcloud update (examples/overcloud): changing
update_timestamp re-runs every node's update script once, controllers one
at a time, then computes a fifth at a time, each batch through its gate
(its nodes' deployments signalled) before the next; an update that
changes nothing re-runs nothing."""

import os

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

TEMPLATE = os.path.join(REPO, 'examples', 'overcloud', 'overcloud.yaml')
COMPUTES = 5


def _batches(events, stack_prefix):
    """The sets of members updating together, in order, and the most at
    once, for the member stack whose name starts with `stack_prefix`."""
    busy, most, groups, first, last = set(), 0, [], None, None
    for i, e in enumerate(events):
        if not e['stack_name'].startswith(stack_prefix):
            continue
        if e['resource_status'] == 'UPDATE_IN_PROGRESS':
            if not busy:
                groups.append(set())
            busy.add(e['resource_name'])
            groups[-1].add(e['resource_name'])
            most = max(most, len(busy))
            first = i if first is None else first
        elif e['resource_status'] == 'UPDATE_COMPLETE':
            busy.discard(e['resource_name'])
            last = i
    return groups, most, first, last


def _runs(cli):
    runs = {}
    for server in cli.json('sim', 'server', 'list'):
        disk = cli.json('sim', 'server', 'show', server['Name'])['disk']
        path = os.path.join(disk, 'updates.log')
        lines = open(path).read().splitlines() if os.path.exists(path) \
            else []
        runs[server['Name']] = lines
    return runs


@pytest.mark.long
def test_the_overcloud_updates_controllers_one_by_one_then_computes(cli):
    cli.run('stack', 'create', 'overcloud', '-t', TEMPLATE, '--parameter',
            'compute_count=%d' % COMPUTES, '--wait', timeout=600)
    assert all(lines == [] for lines in _runs(cli).values())

    cli.run('stack', 'update', 'overcloud', '--existing', '--parameter',
            'update_timestamp=1700000000', '--wait', timeout=600)
    events = cli.json('stack', 'event', 'list', 'overcloud',
                      '--nested-depth', '1')
    controllers, c_most, _, c_last = _batches(events, 'overcloud-Controller-')
    computes, m_most, m_first, _ = _batches(events, 'overcloud-Compute-')
    # never two controllers at once (two of three always in service)
    assert c_most == 1 and len(controllers) == 3
    # a fifth of the computes at a time (here one), highest names first
    assert m_most == COMPUTES // 5
    assert computes[0] == {str(COMPUTES - 1)}
    assert sorted(n for g in computes for n in g) == sorted(
        str(i) for i in range(COMPUTES))
    # the computes start after the last controller passed its gate
    assert c_last < m_first
    # every node ran its update script exactly once
    runs = _runs(cli)
    assert len(runs) == 3 + COMPUTES
    assert all(len(lines) == 1 and lines[0].endswith(' 1700000000')
               for lines in runs.values()), runs

    # an update that changes nothing re-runs nothing
    cli.run('stack', 'update', 'overcloud', '--existing', '--wait',
            timeout=600)
    assert _runs(cli) == runs
