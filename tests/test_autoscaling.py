"""OS::Heat::AutoScalingGroup and OS::Heat::ScalingPolicy as a user meets
them: a group created at its desired capacity, scaled by its policies'
signals (the CLI's `stack resource signal`, and an HTTP POST to the
policy's alarm_url on converge-api) within min_size and max_size, the
cooldown ignoring a signal, the oldest member removed first, a repeated
signal applied once, a member-definition change rolling through the
members in batches, and bad input refused naming the resource and
property."""

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from converge.resources import autoscaling
from tests.test_nested import _most_at_once, outputs

pytestmark = pytest.mark.slow

HOT = 'heat_template_version: 2018-08-31\n'

GROUP = HOT + '''
parameters:
  stamp: {type: string, default: one}
resources:
  asg:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 3
      desired_capacity: 2
      rolling_updates: {max_batch_size: 2, min_in_service: 1}
      resource:
        type: OS::Heat::TestResource
        properties:
          value: {get_param: stamp}
          action_wait_secs: {update: 0.3}
  up:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: asg}
      adjustment_type: change_in_capacity
      scaling_adjustment: 1
  down:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: asg}
      adjustment_type: percent_change_in_capacity
      scaling_adjustment: -50
      cooldown: 600
outputs:
  size: {value: {get_attr: [asg, current_size]}}
  refs: {value: {get_attr: [asg, refs]}}
  by_ref: {value: {get_attr: [asg, refs_map]}}
  values: {value: {get_attr: [asg, outputs_list, output]}}
  by_name: {value: {get_attr: [asg, outputs, output]}}
  up_url: {value: {get_attr: [up, alarm_url]}}
  up_signal_url: {value: {get_attr: [up, signal_url]}}
  down_url: {value: {get_attr: [down, alarm_url]}}
'''


def _signals(cli, name):
    """The policies' SIGNAL events, oldest first: (resource, status,
    reason)."""
    return [(e['resource_name'], e['resource_status'],
             e['resource_status_reason'])
            for e in cli.json('stack', 'event', 'list', name)
            if e['resource_status'].startswith('SIGNAL_')]


def _names(out):
    """The group's member names in order (oldest first), from the
    outputs `refs` (reference ids in order) and `by_ref` (refs_map)."""
    by_ref = {ref: name for name, ref in out['by_ref'].items()}
    return [by_ref[r] for r in out['refs']]


def test_policies_scale_the_group_within_its_bounds(cli, tmp_path):
    (tmp_path / 'g.yaml').write_text(GROUP)
    cli.run('stack', 'create', 'g', '-t', str(tmp_path / 'g.yaml'),
            '--wait')
    out = outputs(cli, 'g')
    assert out['size'] == 2
    assert out['values'] == ['one', 'one']
    first = _names(out)
    # Heat's member names: 12 characters of a short id
    assert all(len(n) == 12 and n.isalnum() and n.islower() for n in first)
    assert sorted(out['by_name']) == sorted(first)

    done = cli.run('stack', 'resource', 'signal', 'g', 'up')
    assert 'scaling group asg from 2 to 3' in done.stdout
    out = outputs(cli, 'g')
    assert out['size'] == 3
    grown = _names(out)
    assert grown[:2] == first and grown[2] not in first

    # at max_size: nothing to do, and the stack is not touched
    done = cli.run('stack', 'resource', 'signal', 'g', 'up', '--data',
                   '{"current": "alarm"}')
    assert 'ignored: group asg stays at 3' in done.stdout

    # -50 % of 3 is -1.5: one member goes, the oldest
    done = cli.run('stack', 'resource', 'signal', 'g', 'down')
    assert 'scaling group asg from 3 to 2' in done.stdout
    out = outputs(cli, 'g')
    assert out['size'] == 2 and _names(out) == grown[1:]

    # inside the 600 s cooldown `down` began, `down` is ignored
    done = cli.run('stack', 'resource', 'signal', 'g', 'down')
    assert 'ignored: group asg is in cooldown' in done.stdout
    events = _signals(cli, 'g')
    assert [(r, s) for r, s, _ in events] == [
        ('up', 'SIGNAL_COMPLETE')] * 2 + [('down', 'SIGNAL_COMPLETE')] * 2
    assert 'from 2 to 3' in events[0][2]
    assert 'ignored' in events[1][2] and 'alarm' in events[1][2]
    assert 'from 3 to 2' in events[2][2]
    assert 'ignored' in events[3][2] and 'cooldown' in events[3][2]


ROLLING = HOT + '''
parameters:
  stamp: {type: string, default: one}
resources:
  asg:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 5
      max_size: 6
      rolling_updates: {max_batch_size: 2, min_in_service: 1}
      resource:
        type: OS::Heat::TestResource
        properties:
          value: {get_param: stamp}
          action_wait_secs: {update: 0.3}
  up:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: asg}
      adjustment_type: exact_capacity
      scaling_adjustment: 6
outputs:
  refs: {value: {get_attr: [asg, refs]}}
  by_ref: {value: {get_attr: [asg, refs_map]}}
  values: {value: {get_attr: [asg, outputs_list, output]}}
'''


def test_a_member_definition_change_rolls_in_batches_oldest_first(
        cli, tmp_path):
    (tmp_path / 'r.yaml').write_text(ROLLING)
    cli.run('stack', 'create', 'r', '-t', str(tmp_path / 'r.yaml'),
            '--wait')
    cli.run('stack', 'resource', 'signal', 'r', 'up')
    out = outputs(cli, 'r')
    names = _names(out)
    assert len(names) == 6
    cli.run('stack', 'update', 'r', '--existing', '--parameter',
            'stamp=two', '--wait')
    out = outputs(cli, 'r')
    # no desired_capacity: the size the signal gave is kept
    assert out['values'] == ['two'] * 6
    assert _names(out) == names
    events = cli.json('stack', 'event', 'list', 'r', '--nested-depth', '1')
    updates = [e for e in events if e.get('stack_name', 'r') != 'r' and
               e['resource_status'].startswith('UPDATE_')]
    most, order = _most_at_once(updates, 'UPDATE')
    # two at a time, in creation order, each pair done before the next
    assert most == 2
    assert [set(order[i:i + 2]) for i in (0, 2, 4)] == [
        set(names[i:i + 2]) for i in (0, 2, 4)]


def _post(url, token=None, key=None, body=b''):
    req = urllib.request.Request(url, data=body, method='POST')
    if token:
        req.add_header('X-Auth-Token', token)
    if key:
        req.add_header('Idempotency-Key', key)
    req.add_header('Content-Type', 'application/json')
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _settled(engine, name, deadline=60):
    """The stack's row once it is no longer IN_PROGRESS."""
    from converge.db import api
    end = time.monotonic() + deadline
    while True:
        with engine.db.read() as s:
            st = api.stack_get(s, name)
            state = (st.action, st.status)
        if state[1] != 'IN_PROGRESS':
            return state
        assert time.monotonic() < end, 'stack %s still %s' % (name, state)
        time.sleep(0.05)


def test_an_http_signal_scales_once_whoever_receives_it(cli, engine,
                                                        tmp_path):
    """The stack is made by one process (the CLI); the signal is received
    by converge-api in another (this one, with its engine), and the CLI
    reads the result: the handoff is the database. A signal sent again
    under its Idempotency-Key is not applied twice."""
    from converge.api import server
    (tmp_path / 'h.yaml').write_text(GROUP)
    cli.run('stack', 'create', 'h', '-t', str(tmp_path / 'h.yaml'),
            '--wait')
    out = outputs(cli, 'h')
    served = server.Served(engine, '127.0.0.1', 0, threads=4)
    try:
        alarm = urllib.parse.urlsplit(out['up_url'])
        url = served.url + alarm.path + '?' + alarm.query
        status, body = _post(url, key='alarm-1',
                             body=b'{"current": "alarm"}')
        assert status == 200, body
        assert body['status'] == 'SCALING' and body['capacity'] == 3
        assert _settled(engine, 'h') == ('UPDATE', 'COMPLETE')
        # redelivered: answered from its record, not applied again
        status, again = _post(url, key='alarm-1')
        assert status == 200 and again['repeated'] is True
        assert again['capacity'] == 3
        # the signal_url with the token in X-Auth-Token; at max_size
        token = urllib.parse.parse_qs(alarm.query)['token'][0]
        plain = served.url + urllib.parse.urlsplit(
            out['up_signal_url']).path
        status, body = _post(plain, token=token)
        assert status == 200 and body['status'] == 'IGNORED'
        status, body = _post(plain, token='not-the-token')
        assert status == 403, body
        # down's cooldown (600 s) holds the whole group: up is ignored
        down = urllib.parse.urlsplit(out['down_url'])
        status, body = _post(served.url + down.path + '?' + down.query)
        assert status == 200 and body['capacity'] == 2
        assert _settled(engine, 'h') == ('UPDATE', 'COMPLETE')
        status, body = _post(url)
        assert body['status'] == 'IGNORED' and 'cooldown' in body['reason']
    finally:
        served.stop()
    assert outputs(cli, 'h')['size'] == 2
    assert [r for r, _, _ in _signals(cli, 'h')] == ['up', 'up', 'down',
                                                     'up']


BAD_POLICY = HOT + '''
resources:
  v:
    type: OS::Heat::Value
    properties: {value: x}
  p:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: v}
      adjustment_type: %s
      scaling_adjustment: 1
'''


def _refused(cli, path, text):
    """The error output of validating the template `text` (which must be
    refused)."""
    path.write_text(text)
    proc = cli.run('template', 'validate', '-t', str(path), check=False)
    assert proc.returncode == 2, proc.stdout
    return proc.stderr


GROUP_OF = HOT + '''
resources:
  g:
    type: OS::Heat::AutoScalingGroup
    %s
    properties:
      min_size: %d
      max_size: 2
      resource: {type: OS::Heat::None}
'''


def test_bad_input_names_the_resource_and_property(cli, tmp_path):
    err = _refused(cli, tmp_path / 'bad.yaml', BAD_POLICY % 'change_capacity')
    assert 'resources.p.properties.adjustment_type' in err
    assert 'change_capacity' in err
    err = _refused(cli, tmp_path / 'g.yaml', GROUP_OF % ('', 3))
    assert 'resources.g.properties.min_size' in err
    # Heat's AutoScalingGroup takes no update_policy: rolling_updates
    err = _refused(cli, tmp_path / 'u.yaml', GROUP_OF % (
        'update_policy: {rolling_update: {max_batch_size: 2}}', 1))
    assert 'resources.g.update_policy.rolling_update' in err
    assert 'rolling_updates' in err

    # a policy whose group is no AutoScalingGroup: its signal fails,
    # naming the policy and the property, with an event saying so
    (tmp_path / 'p.yaml').write_text(BAD_POLICY % 'change_in_capacity')
    cli.run('stack', 'create', 'p', '-t', str(tmp_path / 'p.yaml'),
            '--wait')
    proc = cli.run('stack', 'resource', 'signal', 'p', 'p', check=False)
    assert proc.returncode != 0
    assert 'Resource p (OS::Heat::ScalingPolicy) of stack p: property ' \
        'auto_scaling_group_id' in proc.stderr
    assert 'names v, an OS::Heat::Value' in proc.stderr
    [(name, status, reason)] = _signals(cli, 'p')
    assert (name, status) == ('p', 'SIGNAL_FAILED')
    assert 'auto_scaling_group_id' in reason
    # only a scaling policy takes signals
    proc = cli.run('stack', 'resource', 'signal', 'p', 'v', check=False)
    assert proc.returncode != 0 and 'only OS::Heat::ScalingPolicy' in \
        proc.stderr


@pytest.mark.parametrize('current,adjustment,kind,step,expected', [
    # Heat's rounding: under one member away from zero, else towards it
    (4, 1, 'change_in_capacity', None, 5),
    (4, -10, 'change_in_capacity', None, 1),     # min_size 1
    (4, 20, 'change_in_capacity', None, 10),     # max_size 10
    (4, 7, 'exact_capacity', None, 7),
    (4, 10, 'percent_change_in_capacity', None, 5),    # +0.4 -> +1
    (4, -10, 'percent_change_in_capacity', None, 3),   # -0.4 -> -1
    (9, 50, 'percent_change_in_capacity', None, 10),   # +4.5 -> +4, max
    (5, 50, 'percent_change_in_capacity', None, 7),    # +2.5 -> +2
    (5, -50, 'percent_change_in_capacity', None, 3),   # -2.5 -> -2
    (5, 10, 'percent_change_in_capacity', 3, 8),       # +1 -> step 3
    (5, -10, 'percent_change_in_capacity', 3, 2),      # -1 -> step -3
])
def test_new_capacity_rounds_as_heat(current, adjustment, kind, step,
                                     expected):
    assert autoscaling.new_capacity(current, adjustment, kind, step,
                                    1, 10) == expected


CORPUS_ASG = 'heat-templates/hot/asg_of_servers.yaml'


def test_the_corpus_asg_of_servers_converges_and_scales(cli):
    from tests.conftest import CORPUS
    path = os.path.join(CORPUS, CORPUS_ASG)
    if not os.path.exists(path):
        pytest.skip('corpus not found at %s' % CORPUS)
    cli.run('stack', 'create', 'c', '-t', path, '--parameter',
            'key_name=demo', '--parameter', 'image=cirros', '--wait')
    out = outputs(cli, 'c')
    assert out['asg_size'] == 3
    assert len(out['server_list']) == 3
    cli.run('stack', 'resource', 'signal', 'c', 'scale_up_policy')
    assert outputs(cli, 'c')['asg_size'] == 4


def test_policies_made_ready_together_are_recorded_together_embedded(
        tmp_path):
    """Two policies made ready by their group go to the one busy thread
    of an embedded engine as one message, and their records share one
    transaction: a policy's alarm_url holds a token whose secret the
    policy makes in the database as it is recorded. On SQLite's one
    writer, made inside the shared transaction, it waited for that
    transaction for ever."""
    import threading
    from converge import conf
    from converge.db import session
    from converge.engine import context
    from converge.engine import stacks
    from converge.workers import pool
    from tests import enginetools as et
    from tests.conftest import stop_agents
    home = str(tmp_path / 'home')
    conf.setup([], home=home, log=False)
    conf.CONF.set_override('worker_threads', 1)
    engine = context.Engine()
    pool.start(engine)
    ended = []
    try:
        runner = threading.Thread(target=lambda: ended.append(et.run(
            engine, stacks.create, 'policies',
            et.bundle(tmp_path, GROUP), {})), daemon=True)
        runner.start()
        runner.join(60)
        assert ended, 'the stack did not end within 60 s'
        assert et.status(ended[0]) == 'CREATE_COMPLETE'
        rows = et.resources(engine, ended[0])
        for name in ('up', 'down'):
            assert '?token=' in rows[name].attributes['alarm_url'], name
    finally:
        conf.CONF.clear_override('worker_threads')
        engine.close()
        stop_agents(home)
        session.forget()


def test_a_groups_metadata_says_scaling_in_progress_until_it_ends(
        engine, tmp_path):
    """Heat's `scaling_in_progress` in the group's metadata, set from the
    signal until the traversal scaling the group ends: Heat's functional
    tests (test_heat_autoscaling) wait for it to clear before they signal
    again (a signal meanwhile is ignored). The scaling's messages are
    lost here, so it stays in progress until the sweeper sends them."""
    from converge.engine import scaling
    from converge.engine import stacks
    from converge.engine import views
    from converge.workers import sweeper
    from tests import enginetools as et
    from tests.test_engine import _Dropping

    def meta(name):
        return views.resource_metadata(engine, et.stack_of(engine, stack.id),
                                       name)
    stack = et.run(engine, stacks.create, 'g', et.bundle(tmp_path, GROUP),
                   {})
    assert meta('asg')['scaling_in_progress'] is False
    real = engine.client
    engine._client = _Dropping()
    try:
        record = scaling.signal(engine, stack.id, 'up')
    finally:
        engine._client = real
    assert record['status'] == 'SCALING'
    assert meta('asg')['scaling_in_progress'] is True
    assert 'scaling_in_progress' not in meta('up')   # a group's alone
    # signalled again meanwhile: ignored, as Heat's
    again = scaling.signal(engine, stack.id, 'up')
    assert again['status'] == 'IGNORED'
    sweeper.sweep(engine, {engine.engine_id}, stall_timeout=0,
                  now=time.time() + 1)
    et.wait(engine, stack.id, record['traversal_id'])
    assert meta('asg')['scaling_in_progress'] is False
    out = views.outputs(engine, et.stack_of(engine, stack.id))
    assert out['size']['value'] == 3

