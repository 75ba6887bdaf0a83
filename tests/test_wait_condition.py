"""OS::Heat::WaitConditionHandle and OS::Heat::WaitCondition through the
in-process engine: signals complete, fail or time a wait out; the waiting
holds no thread; tokens are checked; and the token key is made once."""

import collections
import json
import os
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from converge import conf
from converge import exception
from converge.db import models
from converge.drivers import tokens
from converge.engine import request, service, stacks
from converge.messaging import rpc
from converge.engine import waitconditions
from converge.resources import wait_condition
from converge.workers import pool
from converge.workers import reconcile
from tests import enginetools as et


def _doc(count=1, timeout=600, handle=None, extra=None):
    res = {
        'handle': {'type': 'OS::Heat::WaitConditionHandle'},
        'wait': {'type': 'OS::Heat::WaitCondition', 'properties': {
            'handle': handle or {'get_resource': 'handle'},
            'count': count, 'timeout': timeout}},
    }
    res.update(extra or {})
    return et.hot(res, outputs={
        'id': {'value': {'get_resource': 'handle'}},
        'token': {'value': {'get_attr': ['handle', 'token']}},
        'endpoint': {'value': {'get_attr': ['handle', 'endpoint']}},
        'curl_cli': {'value': {'get_attr': ['handle', 'curl_cli']}},
        'signal': {'value': {'get_attr': ['handle', 'signal']}},
        'data': {'value': {'get_attr': ['wait', 'data']}},
    })


def _output(engine, stack_id, key):
    return service.Service(engine).output_show(
        request.make(), stack_id, key)['output_value']


def _row(engine, stack_id, name):
    with engine.db.read() as s:
        return s.scalars(sa.select(models.Resource).where(
            models.Resource.stack_id == stack_id,
            models.Resource.name == name,
            models.Resource.replaced_by.is_(None))
            .order_by(models.Resource.id.desc())).first()


def _sync_point(engine, trav, node):
    with engine.db.read() as s:
        return s.get(models.SyncPoint, (trav, node))


def _until(predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail('condition not reached in %d s' % timeout)
        time.sleep(0.05)


def _handle(engine, stack_id):
    """The handle's id and token, as a boot script would get them."""
    def created():
        row = _row(engine, stack_id, 'handle')
        if row is not None and (row.action, row.status) == (
                'CREATE', 'COMPLETE'):
            return row
    row = _until(created)
    return row.physical_id, row.attributes['token']


def _waiting(engine, trav):
    return _until(lambda: _sync_point(engine, trav, 'u:wait') is not None
                  and _sync_point(engine, trav, 'u:wait').wait_event)


def test_signals_complete_the_wait(engine, tmp_path):
    conf.CONF.set_override('public_endpoint', 'http://192.0.2.7:8004/',
                           group='api')
    b = et.bundle(tmp_path, _doc(count=2))
    stack_id, trav = stacks.create(engine, 'wc', b, {})
    handle_id, token = _handle(engine, stack_id)
    event = _waiting(engine, trav)
    assert event == 'waitcondition:%s' % handle_id
    # waiting is not running: no unit of work is in flight meanwhile
    assert engine.idle.wait(10) and engine.inflight == 0
    row = _row(engine, stack_id, 'wait')
    assert (row.action, row.status) == ('CREATE', 'IN_PROGRESS')
    assert row.status_reason == 'waiting for signals: 0 of 2 received'

    got = waitconditions.signal(engine, handle_id, token, {
        'status': 'SUCCESS', 'reason': 'web up', 'data': 'port 80'})
    assert got == {'id': '1', 'status': 'SUCCESS', 'reason': 'web up',
                   'data': 'port 80'}
    # one of two: woken, looks, waits again
    _until(lambda: _row(engine, stack_id, 'wait').status_reason ==
           'waiting for signals: 1 of 2 received')
    waitconditions.signal(engine, handle_id, token,
                          {'id': 'db', 'data': {'ready': True}})
    # woken by the signal, not by its next look (RECHECK s away)
    _until(lambda: _row(engine, stack_id, 'wait').status == 'COMPLETE',
           timeout=wait_condition.RECHECK / 2)
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason

    assert json.loads(_output(engine, stack_id, 'data')) == {
        '1': 'port 80', 'db': {'ready': True}}
    endpoint = ('http://192.0.2.7:8004/v1/agent/waitconditions/%s/signal'
                % handle_id)
    assert _output(engine, stack_id, 'id') == handle_id
    assert _output(engine, stack_id, 'endpoint') == endpoint
    assert _output(engine, stack_id, 'token') == token
    assert json.loads(_output(engine, stack_id, 'signal')) == {
        'endpoint': endpoint, 'token': token}
    assert _output(engine, stack_id, 'curl_cli') == (
        "curl -i -X POST -H 'X-Auth-Token: %s' "
        "-H 'Content-Type: application/json' "
        "-H 'Accept: application/json' %s" % (token, endpoint))
    # one IN_PROGRESS and one COMPLETE event, however often it looked
    evs = collections.Counter(e.status for e in et.events(engine, stack_id)
                              if e.resource_name == 'wait')
    assert evs == {'IN_PROGRESS': 1, 'COMPLETE': 1}


def test_a_failure_signal_fails_the_wait(engine, tmp_path):
    b = et.bundle(tmp_path, _doc(count=3))
    stack_id, trav = stacks.create(engine, 'wcf', b, {})
    handle_id, token = _handle(engine, stack_id)
    _waiting(engine, trav)
    waitconditions.signal(engine, handle_id, token, None)  # a success
    waitconditions.signal(engine, handle_id, token, {
        'status': 'FAILURE', 'reason': 'apt-get install failed'})
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'CREATE_FAILED'
    # Heat's words: its WaitConditionFailure, the failures' reasons
    assert stack.status_reason == ('Resource CREATE failed: '
                                   'WaitConditionFailure: resources.wait: '
                                   'apt-get install failed')
    row = _row(engine, stack_id, 'wait')
    assert (row.action, row.status) == ('CREATE', 'FAILED')


def test_no_signal_times_out(engine, tmp_path):
    b = et.bundle(tmp_path, _doc(count=2, timeout=1))
    stack_id, trav = stacks.create(engine, 'wct', b, {})
    handle_id, token = _handle(engine, stack_id)
    waitconditions.signal(engine, handle_id, token, {'reason': 'one'})
    started = time.monotonic()
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'CREATE_FAILED'
    assert stack.status_reason == ('Resource CREATE failed: '
                                   'WaitConditionTimeout: resources.wait: '
                                   '1 of 2 received - one')
    assert time.monotonic() - started < 10


def _walker(engine):
    """Messages go to a queue; the test runs each unit (tests/test_waits)."""
    queue = collections.deque()

    class Client(rpc.Client):
        def check_resource(self, stack_id, t, node, attempt=0):
            queue.append((stack_id, t, node))

    engine.close()
    engine._client = Client()
    return queue


def test_the_wait_is_in_the_database_until_its_timeout(engine, tmp_path):
    """Walked by hand: the condition's unit waits for its event with a
    time; a timer sends it again when that time comes, a signal at once;
    the timeout counts from when the wait began."""
    queue = _walker(engine)
    b = et.bundle(tmp_path, _doc(count=2, timeout=20))
    stack_id, trav = stacks.create(engine, 'hand', b, {})
    kinds = {}
    while queue:
        sid, t, node = queue.popleft()
        kinds[node] = reconcile.check_resource(engine, sid, t, node).kind
    assert kinds == {'u:handle': 'done', 'u:wait': 'wait'}
    sp = _sync_point(engine, trav, 'u:wait')
    handle_id = _row(engine, stack_id, 'handle').physical_id
    assert sp.wait_event == 'waitcondition:%s' % handle_id
    since = _row(engine, stack_id, 'wait').data['waiting']['since']
    assert abs(sp.wake_at - (since + 20)) < 0.5

    # the timer sends it at its time; it looks, nothing came: waits again
    assert pool.Pool(engine).fire_timers(now=sp.wake_at + 1) == [
        (stack_id, trav, 'u:wait')]
    sid, t, node = queue.popleft()
    assert reconcile.check_resource(engine, sid, t, node).kind == 'wait'
    # its clock did not restart
    assert _row(engine, stack_id, 'wait').data['waiting']['since'] == since
    # a signal sends it at once; one of two: it waits again
    token = _row(engine, stack_id, 'handle').attributes['token']
    waitconditions.signal(engine, handle_id, token, None)
    assert list(queue) == [(stack_id, trav, 'u:wait')]
    sid, t, node = queue.popleft()
    assert reconcile.check_resource(engine, sid, t, node).kind == 'wait'
    assert _sync_point(engine, trav, 'u:wait').wait_event == \
        'waitcondition:%s' % handle_id

    # the time is up (moved back, as if 20 s had passed)
    with engine.db.begin() as conn:
        row = _row(engine, stack_id, 'wait')
        conn.execute(sa.update(models.Resource)
                     .where(models.Resource.id == row.id)
                     .values(data={'waiting': {'action': 'CREATE',
                                               'since': since - 25}}))
    sp = _sync_point(engine, trav, 'u:wait')
    assert pool.Pool(engine).fire_timers(now=sp.wake_at + 1) == [
        (stack_id, trav, 'u:wait')]
    sid, t, node = queue.popleft()
    assert reconcile.check_resource(engine, sid, t, node).kind == 'failed'
    row = _row(engine, stack_id, 'wait')
    assert row.status_reason == ('WaitConditionTimeout: resources.wait: '
                                 '1 of 2 received - Signal 1 received')
    assert 'waiting' not in row.data  # a retry starts a new clock
    # a late signal is still taken (the handle lives) but wakes nobody
    waitconditions.signal(engine, handle_id, token, None)
    assert not queue


def test_signals_sent_before_the_wait_count(engine, tmp_path):
    queue = _walker(engine)
    # the condition waits behind 'slow' too: signals may come first
    doc = _doc(count=2, extra={'slow': {'type': 'OS::Heat::None'}})
    doc['resources']['wait']['depends_on'] = ['slow']
    b = et.bundle(tmp_path, doc)
    stack_id, trav = stacks.create(engine, 'early', b, {})
    ran = []
    while queue:
        sid, t, node = queue.popleft()
        if node == 'u:wait' and not ran:
            handle = _row(engine, stack_id, 'handle')
            for _ in range(2):
                waitconditions.signal(engine, handle.physical_id,
                                      handle.attributes['token'], {})
            ran.append(node)
        assert reconcile.check_resource(engine, sid, t, node).kind == \
            'done'
    assert ran == ['u:wait']
    with engine.db.read() as s:
        stack = s.get(models.Stack, stack_id)
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    assert json.loads(_row(engine, stack_id, 'wait').attributes['data']) \
        == {'1': None, '2': None}


def test_tokens_ids_and_bodies_are_checked(engine, tmp_path):
    b = et.bundle(tmp_path, _doc(count=5))
    stack_id, trav = stacks.create(engine, 'tok', b, {})
    handle_id, token = _handle(engine, stack_id)
    store = engine.clients.waitconditions

    for bad in ('', 'x' * 64, token[:-1] + ('0' if token[-1] != '0'
                                            else '1'), None):
        with pytest.raises(waitconditions.Refused) as e:
            waitconditions.signal(engine, handle_id, bad, {})
        assert handle_id in str(e.value)
    # another handle's token is not this one's
    other = '7d1f0d36-22a5-4c5b-9a90-3c3f3b2b7d11'
    with pytest.raises(waitconditions.Refused):
        waitconditions.signal(engine, handle_id, store.token(other), {})
    # a handle that does not exist, with the token it would have
    with pytest.raises(exception.NotFound):
        waitconditions.signal(engine, other, store.token(other), {})
    for body, words in ((['SUCCESS'], 'JSON object'),
                        ({'status': 'DONE'}, 'SUCCESS or FAILURE'),
                        ({'Status': 'SUCCESS'}, 'Unknown key(s)'),
                        ({'id': ''}, '1 to 255 characters'),
                        ({'id': {'a': 1}}, 'string or a number')):
        with pytest.raises(exception.InvalidInput) as e:
            waitconditions.signal(engine, handle_id, token, body)
        assert words in str(e.value)
    assert store.signals(handle_id) == []  # nothing refused was stored

    # the same id again replaces; ids default to the next number
    waitconditions.signal(engine, handle_id, token, {'id': 5, 'data': 'a'})
    waitconditions.signal(engine, handle_id, token, {'id': '5', 'data': 'b'})
    waitconditions.signal(engine, handle_id, token, {'data': 'c'})
    assert [(s['id'], s['data'], s['reason'])
            for s in store.signals(handle_id)] == [
        ('5', 'b', 'Signal 2 received'), ('2', 'c', 'Signal 2 received')]

    stacks.cancel(engine, stack_id, rollback=False)
    stack = et.run(engine, stacks.delete, stack_id)
    assert et.status(stack) == 'DELETE_COMPLETE'
    # the handle is gone with its signals; its token opens nothing now
    assert store.signals(handle_id) == []
    with pytest.raises(exception.NotFound):
        waitconditions.signal(engine, handle_id, token, {})


def test_update_count_in_place_and_replace_on_timeout(engine, tmp_path):
    b = et.bundle(tmp_path, _doc(count=1))
    stack_id, trav = stacks.create(engine, 'upd', b, {})
    handle_id, token = _handle(engine, stack_id)
    _waiting(engine, trav)
    waitconditions.signal(engine, handle_id, token, {'data': 'one'})
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    first = _row(engine, stack_id, 'wait').physical_id

    # count 1 -> 2: updated in place, waits for one more signal
    stack_id, trav = stacks.update(engine, stack_id,
                                   et.bundle(tmp_path, _doc(count=2),
                                             name='t2.yaml'), {})
    _waiting(engine, trav)
    row = _row(engine, stack_id, 'wait')
    assert (row.action, row.status) == ('UPDATE', 'IN_PROGRESS')
    waitconditions.signal(engine, handle_id, token, {'data': 'two'})
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'UPDATE_COMPLETE', stack.status_reason
    assert _row(engine, stack_id, 'wait').physical_id == first
    assert json.loads(_output(engine, stack_id, 'data')) == {
        '1': 'one', '2': 'two'}

    # a new timeout replaces it; the handle stays, and so do its signals
    stack = et.run(engine, stacks.update, stack_id,
                   et.bundle(tmp_path, _doc(count=2, timeout=300),
                             name='t3.yaml'), {})
    assert et.status(stack) == 'UPDATE_COMPLETE', stack.status_reason
    assert _row(engine, stack_id, 'wait').physical_id != first
    assert _row(engine, stack_id, 'handle').physical_id == handle_id


def test_a_condition_needs_a_handle_of_its_stack(engine, tmp_path):
    b = et.bundle(tmp_path, _doc(handle='no-such-handle'))
    stack = et.run(engine, stacks.create, 'nohandle', b, {})
    assert et.status(stack) == 'CREATE_FAILED'
    assert 'no-such-handle is not a valid wait condition handle' in \
        stack.status_reason


@pytest.mark.parametrize('props,path,words', [
    ({'handle': 'h', 'timeout': 0}, 'timeout', 'out of range'),
    ({'handle': 'h', 'timeout': 43201}, 'timeout', 'out of range'),
    ({'handle': 'h', 'timeout': 'soon'}, 'timeout',
     "Value 'soon' is not a number"),
    ({'handle': 'h', 'timeout': 5, 'count': 0}, 'count', 'out of range'),
    ({'timeout': 5}, 'handle', 'not assigned'),
    ({'handle': 'h'}, 'timeout', 'not assigned'),
])
def test_condition_validation_names_the_property(tmp_path, props, path,
                                                 words):
    b = et.bundle(tmp_path, et.hot({'w': {'type': 'OS::Heat::WaitCondition',
                                          'properties': props}}))
    with pytest.raises(exception.InvalidTemplate) as e:
        stacks.validate(b, {})
    assert 'resources.w.properties.%s' % path in str(e.value)
    assert words in str(e.value)


def test_handle_validation_names_the_property(tmp_path):
    b = et.bundle(tmp_path, et.hot({'h': {
        'type': 'OS::Heat::WaitConditionHandle',
        'properties': {'signal_transport': 'CARRIER_PIGEON'}}}))
    with pytest.raises(exception.InvalidTemplate) as e:
        stacks.validate(b, {})
    assert 'resources.h.properties.signal_transport' in str(e.value)


_MAKE_TOKEN = '''
import sys
from converge.db import session
from converge.drivers import tokens
db = session.get(sys.argv[1])
print(tokens.token_for(db, 'agent-1'))
'''


def test_the_token_key_is_made_once_across_processes(engine, tmp_path):
    """Processes racing to make the key agree on one: every token of an
    identity is the same, whoever derived it."""
    url = engine.db.url
    # the engine's home: its key seals the secret (db/sealing.py)
    env = dict(os.environ, CONVERGE_HOME=conf.home_dir())
    procs = [subprocess.Popen([sys.executable, '-c', _MAKE_TOKEN, url],
                              stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(6)]
    outs = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert outs == {tokens.token_for(engine.db, 'agent-1')}
    with engine.db.read() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(
            models.EngineSecret)) == 1
    assert tokens.verify(engine.db, 'agent-1', outs.pop())
    assert not tokens.verify(engine.db, 'agent-2',
                             tokens.token_for(engine.db, 'agent-1'))
