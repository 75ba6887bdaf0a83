"""OS::Heat::SoftwareDeploymentGroup as a user runs it: the CLI (embedded,
serving the agents' routes while it runs), the simulated cloud booting a
real agent per server, a real script on each server's disk.

The script appends "start"/"end" lines with its member name, action and
the time to a log on its server's disk (a simulated server's /tmp is its
own), and the test reads every disk's, so it sees from the servers' side
which members ran, when, and how many at once; the engine's side is the
members' events (`stack event list --nested-depth 1`) and rows
(`stack resource list --nested-depth 1`), as Heat shows a group's nested
stack.
"""

import glob
import json
import os

import pytest

MEMBERS = ['s0', 's1', 's2', 's3', 's4']
PAUSE = 0.5

SCRIPT = '''#!/bin/sh
run="$deploy_resource_name $deploy_action $stamp"
echo "start $run $(date +%s.%N)" >> "$log"
if [ "$stamp" = "$fail_at" ] && [ "$deploy_resource_name" = s1 ]; then
  echo "s1 cannot take $stamp" >&2
  echo "end $run $(date +%s.%N)" >> "$log"
  exit 3
fi
sleep 0.3
echo "end $run $(date +%s.%N)" >> "$log"
echo -n "$deploy_resource_name got $stamp" > "$heat_outputs_path.result"
'''


def _template(log, policy, stamp='one', fail_at='never'):
    resources = {n: {'type': 'OS::Nova::Server', 'properties': {
        'image': 'cirros', 'flavor': 'm1.tiny', 'name': n,
        'user_data_format': 'SOFTWARE_CONFIG'}} for n in MEMBERS}
    resources['config'] = {'type': 'OS::Heat::SoftwareConfig', 'properties': {
        'group': 'script', 'config': SCRIPT,
        'inputs': [{'name': 'log'}, {'name': 'stamp'}, {'name': 'fail_at'}],
        'outputs': [{'name': 'result'}]}}
    resources['group'] = {
        'type': 'OS::Heat::SoftwareDeploymentGroup',
        'update_policy': policy,
        'properties': {
            'config': {'get_resource': 'config'},
            'servers': {n: {'get_resource': n} for n in MEMBERS},
            'input_values': {'log': log, 'stamp': stamp,
                             'fail_at': fail_at}}}
    return json.dumps({
        'heat_template_version': '2016-10-14', 'resources': resources,
        'outputs': {'results': {'value': {'get_attr': ['group',
                                                       'result']}}}})


#: the scripts' log, on each server's disk (the script's directory)
LOG = 'runs.log'


def _runs(home):
    """[(member, action, stamp, start, end)] from the scripts' logs on
    every server's disk, in the order they started (a member runs an
    action on a stamp once)."""
    found = {}
    for path in glob.glob(os.path.join(home, 'sim-disks', '*', LOG)):
        with open(path) as f:
            for line in f:
                what, name, action, stamp, when = line.split()
                found.setdefault((name, action, stamp), {})[what] = \
                    float(when)
    return sorted((k + (v['start'], v.get('end')) for k, v in found.items()),
                  key=lambda r: r[3])


def _most_at_once(runs):
    """The largest number of runs whose hooks overlapped in time."""
    edges = sorted([(r[3], 1) for r in runs] +
                   [(r[4], -1) for r in runs if r[4] is not None])
    busy = most = 0
    for _, step in edges:
        busy += step
        most = max(most, busy)
    return most


BATCHES = [['s0', 's1'], ['s2', 's3'], ['s4']]


def _assert_batches(runs, pause):
    """Each batch of two (in member order) started only once the previous
    one had ended, `pause` seconds later at least."""
    by_name = {r[0]: r for r in runs}
    for before, after in zip(BATCHES, BATCHES[1:]):
        ended = max(by_name[n][4] for n in before)
        assert min(by_name[n][3] for n in after) >= ended + pause, runs


def _member_rows(rows):
    return {r['resource_name']: r for r in rows
            if r['parent_resource'] == 'group'}


def test_batch_create_runs_two_at_a_time_pausing_between_batches(
        cli, write, tmp_path):
    log = LOG
    # a bad policy is refused, naming the resource and the key
    bad = cli.run('stack', 'create', 'bad', '-t', write('bad.yaml', _template(
        log, {'batch_create': {'max_batch_size': 0}})), check=False)
    assert bad.returncode != 0
    assert 'resources.group.update_policy.batch_create.max_batch_size' in \
        bad.stderr, bad.stderr
    assert 'out of range' in bad.stderr

    cli.run('stack', 'create', 'grp', '-t', write('grp.yaml', _template(
        log, {'batch_create': {'max_batch_size': 2, 'pause_time': PAUSE}})),
        '--wait', timeout=240)

    # the servers' side: batches of two in member order, never three at
    # once, each batch started after the previous one ended plus the pause
    runs = _runs(cli.home)
    assert sorted(r[:3] for r in runs) == [(n, 'CREATE', 'one')
                                           for n in MEMBERS]
    assert _most_at_once(runs) <= 2
    _assert_batches(runs, PAUSE)

    # the engine's side: each member's events, under the group's nested
    # stack; the next batch written only a pause after the last signal
    events = cli.json('stack', 'event', 'list', 'grp', '--nested-depth', '1')
    nested = [e for e in events if e['stack_name'] != 'grp']
    assert {e['stack_name'] for e in nested} == {
        next(e['stack_name'] for e in nested)}
    assert next(e['stack_name'] for e in nested).startswith('grp-group-')
    # each once, though the group's step ran again at every signal
    assert sorted((e['resource_name'], e['resource_status'])
                  for e in nested) == sorted(
        (n, s) for n in MEMBERS
        for s in ('CREATE_IN_PROGRESS', 'CREATE_COMPLETE'))
    stamps = _event_times(nested)
    for before, after in zip(BATCHES, BATCHES[1:]):
        ended = max(stamps[(n, 'CREATE_COMPLETE')] for n in before)
        for n in after:
            assert stamps[(n, 'CREATE_IN_PROGRESS')] >= ended + PAUSE
    # top level: the members are not the stack's own resources
    assert not [e for e in cli.json('stack', 'event', 'list', 'grp')
                if e['resource_name'] in MEMBERS and
                'Deploy data' in e['resource_status_reason']]

    rows = cli.json('stack', 'resource', 'list', 'grp', '--nested-depth',
                    '1')
    members = _member_rows(rows)
    assert sorted(members) == MEMBERS
    for name, row in members.items():
        assert row['resource_type'] == 'OS::Heat::SoftwareDeployment'
        assert row['resource_status'] == 'CREATE_COMPLETE'
        assert row['stack_name'].startswith('grp-group-')
        assert row['physical_resource_id']
    top = [r for r in rows if r['parent_resource'] is None]
    assert sorted(r['resource_name'] for r in top) == sorted(
        MEMBERS + ['config', 'group'])
    assert {r['stack_name'] for r in top} == {'grp'}
    out = cli.json('stack', 'output', 'show', 'grp', 'results')
    assert out['output_value'] == {n: '%s got one' % n for n in MEMBERS}


def _event_times(events):
    """(member, status) -> epoch seconds of its event."""
    import calendar
    import time
    out = {}
    for e in events:
        whole, frac = e['event_time'].rstrip('Z').split('.')
        secs = calendar.timegm(time.strptime(whole, '%Y-%m-%dT%H:%M:%S'))
        out[(e['resource_name'], e['resource_status'])] = \
            secs + float('0.' + frac)
    return out


@pytest.mark.long  # among the slowest of ./run-tests
def test_rolling_update_stops_at_a_failed_batch_and_resumes_on_a_fix(
        cli, write, tmp_path):
    log = LOG
    policy = {'rolling_update': {'max_batch_size': 2}}
    cli.run('stack', 'create', 'grp', '-t', write('grp.yaml', _template(
        log, policy, fail_at='two')), '--wait', timeout=240)
    created = _runs(cli.home)
    assert sorted(r[0] for r in created) == MEMBERS

    # an input change: UPDATE, two members at a time; s1 fails in the
    # first batch, and the next batch never starts
    failed = cli.run('stack', 'update', 'grp', '-t', write(
        'two.yaml', _template(log, policy, stamp='two', fail_at='two')),
        '--wait', check=False, timeout=240)
    assert failed.returncode != 0
    shown = cli.json('stack', 'show', 'grp')
    assert shown['stack_status'] == 'UPDATE_FAILED'
    assert 'member s1 failed' in shown['stack_status_reason']
    assert 's1 cannot take two' in shown['stack_status_reason']
    assert 'member s0' not in shown['stack_status_reason']
    updates = [r for r in _runs(cli.home) if r[1] == 'UPDATE']
    assert sorted(r[0] for r in updates) == ['s0', 's1']   # one batch
    members = _member_rows(cli.json('stack', 'resource', 'list', 'grp',
                                    '--nested-depth', '1'))
    assert {n: r['resource_status'] for n, r in members.items()} == {
        's0': 'UPDATE_COMPLETE', 's1': 'UPDATE_FAILED',
        's2': 'CREATE_COMPLETE', 's3': 'CREATE_COMPLETE',
        's4': 'CREATE_COMPLETE'}
    shown = cli.json('stack', 'resource', 'show', 'grp', 'group')
    assert shown['resource_status'] == 'UPDATE_FAILED'
    assert shown['members']['s1']['resource_status'] == 'UPDATE_FAILED'
    assert 's1 cannot take two' in \
        shown['members']['s1']['resource_status_reason']
    assert shown['members']['s2']['resource_status'] == 'CREATE_COMPLETE'
    assert shown['members']['s0']['attributes']['result'] == 's0 got two'
    assert shown['members']['s2']['attributes']['result'] == 's2 got one'

    # fixed: every member updated, in batches of two
    cli.run('stack', 'update', 'grp', '-t', write('three.yaml', _template(
        log, policy, stamp='three', fail_at='two')), '--wait', timeout=240)
    third = [r for r in _runs(cli.home) if r[2] == 'three']
    assert sorted(r[:2] for r in third) == [(n, 'UPDATE') for n in MEMBERS]
    assert _most_at_once(third) <= 2
    _assert_batches(third, 0)
    out = cli.json('stack', 'output', 'show', 'grp', 'results')
    assert out['output_value'] == {n: '%s got three' % n for n in MEMBERS}


@pytest.mark.parametrize('policy, where, says', [
    ({'rolling_update': {'pause_time': -1}},
     'rolling_update.pause_time', 'out of range'),
    ({'batch_create': {'max_batch_size': 'two'}},
     'batch_create.max_batch_size', 'not an integer'),
    ({'rolling_update': {'min_in_service': 1}},
     'rolling_update.min_in_service', 'Unknown property'),
    ({'batch_creat': {}}, 'batch_creat', 'Unknown property'),
    ({'batch_create': [2]}, 'batch_create', 'must be a map'),
])
def test_a_bad_update_policy_names_the_resource_and_key(
        write, policy, where, says):
    from converge import exception
    from converge.template import StackDefinition
    from converge.template import load_bundle
    bundle = load_bundle(write('t.yaml', _template('/dev/null', policy)), [])
    with pytest.raises(exception.InvalidTemplate) as e:
        StackDefinition(bundle, None)
    assert 'resources.group.update_policy.%s' % where in str(e.value)
    assert says in str(e.value)


def test_a_good_update_policy_gets_heats_defaults(write):
    from converge.template import StackDefinition
    from converge.template import load_bundle
    bundle = load_bundle(write('t.yaml', _template(
        '/dev/null', {'batch_create': {}, 'rolling_update': {
            'max_batch_size': '3', 'pause_time': '1.5'}})), [])
    policy = StackDefinition(bundle, None).resources['group'].update_policy
    assert policy == {'batch_create': {'max_batch_size': 1, 'pause_time': 0},
                      'rolling_update': {'max_batch_size': 3,
                                         'pause_time': 1.5}}
