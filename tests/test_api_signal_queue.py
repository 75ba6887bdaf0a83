"""Signals beyond [api] max_requests_per_credential wait for a slot
instead of being answered 429 at once (issue 39): a boot script posting
one wait condition handle's `curl_cli` many times at once, with the
handle's one token and no retry, loses no signal; a flood beyond the
queue ([api] max_queued_signals_per_credential) is still refused at
once, and a queued signal waits at most [api] signal_queue_timeout.

Real HTTP clients (threads posting at once) against a served
converge-api; the signals are held in the handler until the test has
seen how many are running and how many are queued, so "at once" is
certain rather than a matter of timing."""

import json
import queue
import threading
import time
import urllib.error
import urllib.request

import pytest

from converge import conf
from converge.api import agent
from converge.api import server as api_server
from converge.engine import stacks
from tests import enginetools as et
from tests.test_wait_condition import _doc, _handle, _output


class _Gate:
    """Holds every wait condition signal reaching its handler until
    opened; counts those held."""

    def __init__(self, monkeypatch):
        self.opened = threading.Event()
        self._lock = threading.Lock()
        self.held = 0
        original = agent.Controller.wait_condition_signal

        def held(controller, req, handle_id):
            with self._lock:
                self.held += 1
            # bounded: a test that fails leaves no thread waiting for ever
            self.opened.wait(60)
            return original(controller, req, handle_id)
        monkeypatch.setattr(agent.Controller, 'wait_condition_signal', held)


@pytest.fixture
def gated(engine, monkeypatch):
    """A gate on the handles' signals, and converge-api serving them
    (built after the gate: its routes take the handler then)."""
    gate = _Gate(monkeypatch)
    served = api_server.Served(engine, '127.0.0.1', 0)
    conf.CONF.set_override('public_endpoint', served.url, 'api')
    yield gate, served
    gate.opened.set()
    served.stop()
    for name in ('public_endpoint', 'max_requests_per_credential',
                 'max_queued_signals_per_credential',
                 'signal_queue_timeout'):
        conf.CONF.clear_override(name, 'api')


def _signals(engine, tmp_path, count):
    """A stack waiting for `count` signals; the handle's URL and the
    headers of its curl_cli."""
    stack_id, trav = stacks.create(
        engine, 'wc', et.bundle(tmp_path, _doc(count=count)), {})
    handle_id, token = _handle(engine, stack_id)
    url = json.loads(_output(engine, stack_id, 'signal'))['endpoint']
    return stack_id, trav, url, {'X-Auth-Token': token,
                                 'Content-Type': 'application/json'}


def _post_at_once(url, headers, bodies):
    """Each body posted by a thread of its own; (code, body) answers in
    the queue returned, in the order they come."""
    answers = queue.Queue()

    def post(body):
        req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers=headers, method='POST')
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                answers.put((resp.status, resp.read()))
        except urllib.error.HTTPError as e:
            answers.put((e.code, e.read()))
    for body in bodies:
        threading.Thread(target=post, args=(body,), daemon=True).start()
    return answers


def _until(predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)  # polling the server's counters, not synchronising


def test_signals_beyond_the_limit_wait_and_a_flood_is_refused(
        engine, gated, tmp_path):
    gate, served = gated
    conf.CONF.set_override('max_requests_per_credential', 4, 'api')
    conf.CONF.set_override('max_queued_signals_per_credential', 6, 'api')
    stack_id, trav, url, headers = _signals(engine, tmp_path, 10)
    limits = served.concurrency

    # 13 at once with the handle's one token: 4 run (held in the
    # handler), 6 wait for a slot, the 3 beyond the queue are refused at
    # once, while the others are still held
    answers = _post_at_once(url, headers, [
        {'id': 'n%02d' % i, 'data': 'signal %d' % i} for i in range(13)])
    refused = [answers.get(timeout=30) for _ in range(3)]
    assert {code for code, _ in refused} == {429}, refused
    message = json.loads(refused[0][1])['error']['message']
    assert 'max_queued_signals_per_credential' in message, message
    _until(lambda: gate.held == 4 and limits.queued == 6,
           (gate.held, limits.queued))
    assert answers.empty(), 'a held or queued signal answered early'

    gate.opened.set()
    done = [answers.get(timeout=60) for _ in range(10)]
    assert [code for code, _ in done] == [200] * 10, done
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    # the ten that waited or ran were recorded, the three refused not
    data = json.loads(_output(engine, stack_id, 'data'))
    ok = {json.loads(body)['id'] for _, body in done}
    assert set(data) == ok and len(ok) == 10
    assert data == {k: 'signal %d' % int(k[1:]) for k in ok}


def test_a_queued_signal_waits_at_most_signal_queue_timeout(
        engine, gated, tmp_path):
    gate, served = gated
    conf.CONF.set_override('max_requests_per_credential', 1, 'api')
    conf.CONF.set_override('signal_queue_timeout', 0.2, 'api')
    stack_id, trav, url, headers = _signals(engine, tmp_path, 1)
    first = _post_at_once(url, headers, [{'id': 'first'}])
    _until(lambda: gate.held == 1, gate.held)
    # the slot stays held: the second waits, then is told to try again
    code, body = _post_at_once(url, headers, [{'id': 'late'}]).get(
        timeout=30)
    assert code == 429, body
    assert 'signal_queue_timeout' in json.loads(body)['error']['message']
    gate.opened.set()
    assert first.get(timeout=30)[0] == 200
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    assert json.loads(_output(engine, stack_id, 'data')) == {'first': None}


def test_twenty_signals_at_once_are_all_recorded_by_default(
        engine, gated, tmp_path):
    """Heat's test_os_wait_condition's 20 signals at once with one token,
    the default limits: every one recorded."""
    gate, served = gated
    gate.opened.set()
    stack_id, trav, url, headers = _signals(engine, tmp_path, 20)
    answers = _post_at_once(url, headers, [
        {'id': str(i), 'data': i} for i in range(20)])
    got = [answers.get(timeout=60) for _ in range(20)]
    assert [code for code, _ in got] == [200] * 20, got
    stack = et.wait(engine, stack_id, trav).stack
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    assert json.loads(_output(engine, stack_id, 'data')) == {
        str(i): i for i in range(20)}
