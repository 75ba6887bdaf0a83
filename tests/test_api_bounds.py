"""converge-api under hostile clients, over real sockets: clients that
send their headers a byte at a time, an agent credential long-polling on
many connections, one token with many requests at once. The normal
request of someone else still answers at once (a generous bound, 1 s,
where these clients used to make it wait 18 s or time out)."""

import json
import queue
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from converge import conf
from converge import userdata
from converge.api import server as api_server
from converge.engine import api_tokens
from converge.engine import stacks
from tests import enginetools as et

SERVER = et.hot({'box': {'type': 'OS::Nova::Server', 'properties': {
    'image': 'cirros', 'flavor': 'm1.tiny',
    'user_data_format': 'SOFTWARE_CONFIG'}}})


@pytest.fixture
def api(engine):
    # the test plays the server's agent: no real one competes
    conf.CONF.set_override('boot_agents', False, 'sim')
    served = api_server.Served(engine, '127.0.0.1', 0)
    conf.CONF.set_override('public_endpoint', served.url, 'api')
    yield served
    served.stop()
    for name in ('public_endpoint', 'max_requests_per_credential',
                 'header_timeout'):
        conf.CONF.clear_override(name, 'api')
    conf.CONF.clear_override('boot_agents', 'sim')


def _get(url, headers, timeout=30):
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


class Dribblers:
    """Connections sending a request's headers a byte at a time, for as
    long as they are let (a slowloris)."""

    def __init__(self, served, count, every=0.2):
        self.stop = threading.Event()
        self.socks = [socket.create_connection((served.host, served.port))
                      for _ in range(count)]
        self._thread = threading.Thread(target=self._dribble, args=(every,),
                                        daemon=True)
        self._thread.start()

    def _dribble(self, every):
        line = b'GET /v1/p/stacks HTTP/1.1\r\nHost: x\r\n' + \
            b'X-Padding: ' + b'a' * 10000
        for i in range(len(line)):
            for s in self.socks:
                try:
                    s.send(line[i:i + 1])
                except OSError:
                    pass
            if self.stop.wait(every):
                return

    def close(self):
        self.stop.set()
        self._thread.join()
        for s in self.socks:
            s.close()


def _agent(engine, tmp_path):
    stacks.create(engine, 'box', et.bundle(tmp_path, SERVER), {})
    deadline = time.monotonic() + 30
    while not engine.clients.compute.list_servers():
        assert time.monotonic() < deadline, 'the server was not booted'
        time.sleep(0.02)  # polling the cloud, not synchronising
    [server] = engine.clients.compute.list_servers()
    creds = userdata.decode(server['user_data'])
    headers = {'X-Agent-Id': creds['agent_id'],
               'X-Agent-Token': creds['token']}
    code, _, body = _get(creds['endpoint'] + '/v1/agent/deployments',
                         headers)
    assert code == 200, body
    headers['If-None-Match'] = '"%s"' % json.loads(body)['version']
    return creds['endpoint'], headers


def _long_polls(url, headers, count):
    """`count` long polls at once; their answers come in `answers`."""
    answers = queue.Queue()

    def poll():
        answers.put(_get(url + '/v1/agent/deployments?wait=30', headers,
                         timeout=60))
    threads = [threading.Thread(target=poll, daemon=True)
               for _ in range(count)]
    for t in threads:
        t.start()
    return answers


def _timed_stacks(served, token):
    began = time.monotonic()
    code, _, body = _get(served.url + '/v1/converge/stacks',
                         {'X-Auth-Token': token}, timeout=30)
    return code, body, time.monotonic() - began


def test_slow_clients_and_long_polls_take_no_one_elses_threads(
        engine, api, tmp_path):
    url, agent = _agent(engine, tmp_path)
    _, token = api_tokens.create(engine.db, 'converge')
    slow = Dribblers(api, 40)
    try:
        answers = _long_polls(url, agent, 40)
        # one credential holds at most max_requests_per_credential (8)
        # requests at once: the 32 others are refused at once, told when
        # to try again, in Heat's error body
        refused = [answers.get(timeout=30) for _ in range(32)]
        assert {code for code, _, _ in refused} == {429}
        code, headers, body = refused[0]
        assert headers['Retry-After'] == '1'
        assert 'max_requests_per_credential' in json.loads(
            body)['error']['message']
        code, body, took = _timed_stacks(api, token)
        assert code == 200 and json.loads(body)['stacks'][0][
            'stack_name'] == 'box'
        assert took < 1.0, took
        assert answers.empty(), 'a held long poll answered early'
    finally:
        slow.close()


def test_agents_long_polls_have_a_pool_of_their_own(engine, api, tmp_path):
    """Without the per-credential cap, 40 long polls take every thread of
    the agents' pool (16) and wait for one, and none of the API's."""
    conf.CONF.set_override('max_requests_per_credential', 0, 'api')
    url, agent = _agent(engine, tmp_path)
    _, token = api_tokens.create(engine.db, 'converge')
    answers = _long_polls(url, agent, 40)
    deadline = time.monotonic() + 30
    while api._agents.active_count < 16:
        assert time.monotonic() < deadline, api._agents.active_count
        time.sleep(0.02)  # waiting for the polls to be held
    code, _, took = _timed_stacks(api, token)
    assert code == 200 and took < 1.0, (code, took)
    assert answers.empty(), 'a held long poll answered early'


def test_event_streams_have_a_pool_of_their_own(engine, api, tmp_path):
    """40 dashboards following a stack's event stream (without the
    per-credential cap) take every thread of the streams' pool (16) and
    wait for one, and none of the API's: a listing answers at once."""
    conf.CONF.set_override('max_requests_per_credential', 0, 'api')
    stack_id, trav = stacks.create(engine, 'watched', et.bundle(
        tmp_path, et.hot({'v': {'type': 'OS::Heat::Value',
                                'properties': {'value': 1}}})), {})
    et.wait(engine, stack_id, trav)
    _, token = api_tokens.create(engine.db, 'converge')
    url = '%s/v1/converge/stacks/watched/%s/event_stream' % (api.url,
                                                           stack_id)
    socks = []
    try:
        for _ in range(40):
            sock = socket.create_connection((api.host, api.port))
            sock.sendall(('GET %s HTTP/1.1\r\nHost: x\r\n'
                          'X-Auth-Token: %s\r\n\r\n' % (
                              url[len(api.url):], token)).encode())
            socks.append(sock)
        deadline = time.monotonic() + 30
        while api._streams.active_count < 16:
            assert time.monotonic() < deadline, api._streams.active_count
            time.sleep(0.02)  # waiting for the streams to be held
        code, body, took = _timed_stacks(api, token)
        assert code == 200 and took < 1.0, (code, took)
        assert json.loads(body)['stacks'][0]['stack_name'] == 'watched'
        # a stream held answers as a stream does
        socks[0].settimeout(10)
        assert socks[0].recv(4096).startswith(b'HTTP/1.1 200 OK')
    finally:
        for sock in socks:
            sock.close()


def test_headers_too_slow_are_cut_off(api):
    """A connection still sending its headers after [api] header_timeout
    is closed (slow clients cannot keep a connection for ever)."""
    conf.CONF.set_override('header_timeout', 0.5, 'api')
    served = api_server.Served(api.app.engine, '127.0.0.1', 0)
    try:
        slow = Dribblers(served, 1, every=0.05)
        try:
            sock = slow.socks[0]
            sock.settimeout(30)
            began = time.monotonic()
            # closed by the server: the read ends (or is reset)
            try:
                assert sock.recv(1024) == b''
            except ConnectionResetError:
                pass
            assert time.monotonic() - began < 10
        finally:
            slow.close()
    finally:
        served.stop()


def _amplified(fill):
    """30 resources, each a str_replace of a 2 KB template with a 4 KB
    value: 4 MB each (within max_function_result_size), 240 MB stored
    with their attributes, from a request of about 8 KB. `fill`: where
    the value comes from."""
    return {
        'heat_template_version': '2018-08-31',
        'parameters': {
            'shape': {'type': 'string', 'default': '$a' * 1000},
            'fill': {'type': 'string', 'default': 'y' * 4000}},
        'resources': dict({
            'v%02d' % i: {'type': 'OS::Heat::Value', 'properties': {
                'value': {'str_replace': {
                    'template': {'get_param': 'shape'},
                    'params': {'$a': fill}}}}}
            for i in range(30)}, seed={
                'type': 'OS::Heat::Value',
                'properties': {'value': {'get_param': 'fill'}}})}


#: the values known when the stack is created
AMPLIFIED = _amplified({'get_param': 'fill'})
#: known only once another resource is made
AMPLIFIED_LATER = _amplified({'get_attr': ['seed', 'value']})


def _peak_rss_mb(pid):
    """The process's peak resident size (VmHWM), in MB."""
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) / 1024
    raise AssertionError('no VmHWM for %d' % pid)


def _until_settled(url, headers, name, timeout=300):
    deadline = time.monotonic() + timeout
    while True:
        code, _, body = _get('%s/stacks/%s' % (url, name), headers)
        assert code == 200, body
        st = json.loads(body)['stack']
        if not st['stack_status'].endswith('_IN_PROGRESS'):
            return st
        assert time.monotonic() < deadline, st['stack_status']
        time.sleep(0.2)  # polling the stack's status, as a client does


class _Served:
    """converge-api in its own process on a home of `tmp_path` (its
    memory measured alone), and a token of project amp."""

    def __init__(self, tmp_path, conf_text=''):
        from tests.test_heat_api import API, _start_api
        cfg = tmp_path / 'converge.conf'
        cfg.write_text('[DEFAULT]\nhome = %s\n%s' % (tmp_path / 'home',
                                                    conf_text))
        self.proc, url = _start_api(str(cfg), str(tmp_path / 'api.log'))
        self.base = url + '/v1/amp'
        self.headers = {
            'X-Auth-Token': API(str(cfg), url).token('amp')['token'],
            'Content-Type': 'application/json'}

    def create(self, template):
        import requests
        return requests.post(self.base + '/stacks', headers=self.headers,
                             data=json.dumps({'stack_name': 'amp',
                                              'template': template}))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def test_an_amplifying_template_is_refused_in_bounded_memory(tmp_path):
    """A request of 8 KB whose functions would build 120 MB (240 MB
    stored with the attributes) is refused at create (400, naming the
    limit), nothing stored, converge-api's memory under 300 MB (it took
    2.3 GB, and the database 320 MB)."""
    import requests
    api = _Served(tmp_path)
    try:
        body = json.dumps({'stack_name': 'amp', 'template': AMPLIFIED})
        assert len(body) < 16 * 1024
        r = api.create(AMPLIFIED)
        assert r.status_code == 400, r.text
        assert 'max_stack_size' in r.json()['error']['message']
        assert requests.get(api.base + '/stacks', headers=api.headers
                            ).json()['stacks'] == []
        peak = _peak_rss_mb(api.proc.pid)
        assert peak < 300, peak
    finally:
        api.stop()


def test_values_known_late_stop_at_the_stack_size(tmp_path):
    """The same values known only as the resources are made: the stack
    stores at most [DEFAULT] max_stack_size (32 MiB here), the resources
    beyond it fail naming the limit, their values stored nowhere; the
    listing with detail answers; converge-api stays under 300 MB."""
    import requests
    api = _Served(tmp_path, 'max_stack_size = %d\n' % (32 * 2 ** 20))
    try:
        r = api.create(AMPLIFIED_LATER)
        assert r.status_code == 201, r.text
        st = _until_settled(api.base, api.headers, 'amp')
        assert st['stack_status'] == 'CREATE_FAILED'
        assert 'max_stack_size' in st['stack_status_reason']
        r = requests.get(api.base + '/stacks/amp/%s/resources?with_detail='
                         'true' % st['id'], headers=api.headers,
                         timeout=120)
        assert r.status_code == 200, r.text
        resources = r.json()['resources']
        failed = [x for x in resources
                  if x['resource_status'] == 'CREATE_FAILED']
        assert failed and all(
            'max_stack_size' in x['resource_status_reason'] and
            not x['properties'] and not x['attributes'] for x in failed)
        stored = sum(len(json.dumps(x['properties'])) +
                     len(json.dumps(x['attributes'])) for x in resources)
        # the limit, and what the worker threads recording at the same
        # moment may each add beyond it (one resource each)
        assert stored <= 32 * 2 ** 20 + 8 * 8.1e6, stored
        peak = _peak_rss_mb(api.proc.pid)
        assert peak < 300, peak
    finally:
        api.stop()


def _post(url, body, headers):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers=dict(headers, **{
                                     'Content-Type': 'application/json'}))
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_a_template_beyond_the_stack_size_is_refused_storing_nothing(
        engine, api):
    """max_stack_size counts the template, files, environment and
    parameters at create: beyond it, Heat's 400 RequestLimitExceeded,
    and no stack."""
    conf.CONF.set_override('max_stack_size', 4096)
    try:
        _, token = api_tokens.create(engine.db, 'converge')
        headers = {'X-Auth-Token': token}
        code, body = _post(api.url + '/v1/converge/stacks', {
            'stack_name': 'big', 'template': {
                'heat_template_version': '2018-08-31',
                'resources': {}},
            'files': {'notes.txt': 'n' * 5000}}, headers)
        assert code == 400, body
        err = json.loads(body)
        assert err['error']['type'] == 'RequestLimitExceeded'
        assert 'max_stack_size' in err['error']['message']
        code, _, body = _get(api.url + '/v1/converge/stacks', headers)
        assert json.loads(body)['stacks'] == []
    finally:
        conf.CONF.clear_override('max_stack_size')


def test_an_answer_beyond_the_response_size_is_refused(engine, api,
                                                        tmp_path):
    """[api] max_response_size: a listing with detail that would be
    larger is refused (400) and says how to ask for less; without
    detail it answers."""
    doc = et.hot({'v': {'type': 'OS::Heat::Value',
                        'properties': {'value': 'x' * 3000}}})
    et.wait(engine, *stacks.create(engine, 'wide', et.bundle(tmp_path, doc),
                                   {}))
    _, token = api_tokens.create(engine.db, 'converge')
    headers = {'X-Auth-Token': token}
    conf.CONF.set_override('max_response_size', 4096, 'api')
    try:
        url = api.url + '/v1/converge/stacks/wide/resources'
        code, _, body = _get(url + '?with_detail=true', headers)
        assert code == 400, body
        message = json.loads(body)['error']['message']
        assert 'max_response_size' in message
        assert 'without with_detail' in message
        code, _, body = _get(url, headers)
        assert code == 200, body
    finally:
        conf.CONF.clear_override('max_response_size', 'api')


def test_a_body_too_large_is_refused_in_heats_shape(engine, api):
    """A body announced beyond [api] max_json_body_size is refused as
    soon as its headers arrive, before any of it is read, with Heat's
    413 error body."""
    _, token = api_tokens.create(engine.db, 'converge')
    with socket.create_connection((api.host, api.port), timeout=30) as s:
        s.sendall(b'POST /v1/converge/stacks HTTP/1.1\r\nHost: x\r\n'
                  b'X-Auth-Token: %s\r\nContent-Type: application/json'
                  b'\r\nContent-Length: %d\r\n\r\n'
                  % (token.encode(), 1024 * 1024 + 1))
        answer = b''
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b'\r\n\r\n')
    assert head.split()[1] == b'413', answer
    err = json.loads(body)
    assert err['code'] == 413 and 'max_json_body_size' in err['error'][
        'message']


def test_many_function_calls_in_one_resource_are_bounded_together(
        engine, api):
    """Each call is held to max_function_result_size; the calls of one
    resolution (a resource's properties) together to max_stack_size: a
    list of ten 200 KB str_replace under a 1 MB limit is refused at
    create (400, naming the limit and where), and nothing stored."""
    conf.CONF.set_override('max_stack_size', 1024 * 1024)
    try:
        _, token = api_tokens.create(engine.db, 'converge')
        headers = {'X-Auth-Token': token}
        call = {'str_replace': {'template': '$a' * 100,
                                'params': {'$a': 'y' * 2000}}}
        code, body = _post(api.url + '/v1/converge/stacks', {
            'stack_name': 'fanout', 'template': et.hot({'v': {
                'type': 'OS::Heat::Value',
                'properties': {'value': [call] * 10}}})}, headers)
        assert code == 400, body
        message = json.loads(body)['error']['message']
        assert 'max_stack_size' in message
        assert 'resources.v.properties.value' in message
        code, _, body = _get(api.url + '/v1/converge/stacks', headers)
        assert json.loads(body)['stacks'] == []
    finally:
        conf.CONF.clear_override('max_stack_size')


def test_requests_counted_in_batches_hold_the_cap_across_processes(
        engine, monkeypatch):
    """`[api] max_requests_per_minute` is counted in each API process
    and written in batches (a fiftieth of the cap): one process meets
    the cap exactly; a second process, knowing nothing yet, passes it by
    at most a batch before the minute's row refuses it too."""
    from converge import exception
    from converge.engine import api_tokens
    now = 60.0 * 29000000 + 1   # early in a minute: no turn mid-test
    cap = 200                    # batches of 4

    def count(n):
        allowed = 0
        for _ in range(n):
            try:
                api_tokens.count_request(engine.db, 'token:t', cap, now)
            except exception.TooMany:
                continue
            allowed += 1
        return allowed
    monkeypatch.setattr(api_tokens, '_TALLY', {})
    assert count(cap + 10) == cap
    monkeypatch.setattr(api_tokens, '_TALLY', {})   # another process
    assert count(10) <= cap // 50


def test_past_callers_are_dropped_from_a_process_tally(engine, monkeypatch):
    from converge.engine import api_tokens
    monkeypatch.setattr(api_tokens, '_TALLY', {})
    monkeypatch.setattr(api_tokens, 'TALLY_CALLERS', 3)
    for i in range(3):
        api_tokens.count_request(engine.db, 'token:%d' % i, 100, 60.0 * 5)
    api_tokens.count_request(engine.db, 'token:new', 100, 60.0 * 6)
    assert set(api_tokens._TALLY) == {'token:new'}
