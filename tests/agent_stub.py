"""A stand-in for converge-api's agent routes (docs/software.md), served
for real over HTTP from the test process, with an in-memory deployment
list per agent and a record of every signal."""

import http.server
import json
import os
import socket
import threading
import time
import urllib.parse
import uuid


class StubAPI:
    def __init__(self):
        self.cond = threading.Condition()
        self.agents = {}          # agent_id -> token
        self.deployments = {}     # agent_id -> {dep id: deployment}
        self.versions = {}        # agent_id -> int
        self.signals = []         # every signal: dict(id, run, payload,
        #                           accepted, agent_id)
        self.polls = 0            # batch polls received
        self.last_poll = set()    # the agent ids of the latest batch poll
        self.gets = {}            # agent_id -> 200 answers to GET
        self.fail_signals = 0     # the next N signals answer 503
        self.held = 0             # requests being held right now
        self.conns = set()        # sockets of the requests being served
        self._serve(0)
        self.url = 'http://127.0.0.1:%d' % self.server.server_address[1]

    def _serve(self, port):
        self.server = _Server(('127.0.0.1', port), _handler(self))
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        daemon=True)
        self._thread.start()

    def close(self):
        """Stop answering, as a converge-api gone between two commands:
        the held requests are cut, new connections refused."""
        self.server.shutdown()
        self.server.server_close()
        with self.cond:
            conns = list(self.conns)
            self.cond.notify_all()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def reopen(self):
        """Answer again at the same address, with the same state."""
        self._serve(self.server.server_address[1])

    # -- set-up, as the engine would ------------------------------------

    def add_agent(self, agent_id=None, token=None):
        agent_id = agent_id or str(uuid.uuid4())
        token = token or uuid.uuid4().hex
        with self.cond:
            self.agents[agent_id] = token
            self.deployments.setdefault(agent_id, {})
            self.versions.setdefault(agent_id, 1)
            self.cond.notify_all()
        return {'endpoint': self.url, 'agent_id': agent_id, 'token': token}

    def revoke(self, agent_id):
        with self.cond:
            self.agents.pop(agent_id, None)
            self.cond.notify_all()

    def deploy(self, agent_id, config, name=None, inputs=(), outputs=(),
               action='CREATE', run=None, group='script', dep_id=None):
        dep_id = dep_id or str(uuid.uuid4())
        dep = {'id': dep_id, 'name': name or dep_id, 'group': group,
               'config': config, 'options': {},
               'inputs': list(inputs) + [
                   {'name': 'deploy_server_id', 'value': agent_id},
                   {'name': 'deploy_action', 'value': action}],
               'outputs': list(outputs), 'action': action,
               'run': run or uuid.uuid4().hex, 'status': 'IN_PROGRESS'}
        with self.cond:
            self.deployments[agent_id][dep_id] = dep
            self.versions[agent_id] += 1
            self.cond.notify_all()
        return dep

    # -- what the tests look at -----------------------------------------

    def wait_for(self, predicate, timeout=30, what='condition'):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError('timed out waiting for %s' % what)
                self.cond.wait(min(left, 0.2))

    def signals_of(self, dep_id, accepted=None):
        with self.cond:
            return [s for s in self.signals if s['id'] == dep_id and (
                accepted is None or s['accepted'] == accepted)]

    def status(self, agent_id, dep_id):
        with self.cond:
            return self.deployments[agent_id][dep_id]['status']

    # -- the routes --------------------------------------------------------

    def _auth(self, agent_id, token):
        return agent_id in self.agents and self.agents[agent_id] == token

    def _view(self, agent_id):
        return {'version': self.versions[agent_id],
                'deployments': sorted(
                    (dict(d) for d in self.deployments[agent_id].values()),
                    key=lambda d: d['name'])}

    def get(self, agent_id, token, etag, wait):
        deadline = time.monotonic() + wait
        with self.cond:
            while True:
                if not self._auth(agent_id, token):
                    return 403, {'message': 'bad credential'}
                version = self.versions[agent_id]
                if etag != '"%d"' % version:
                    self.gets[agent_id] = self.gets.get(agent_id, 0) + 1
                    self.cond.notify_all()
                    return 200, self._view(agent_id)
                left = deadline - time.monotonic()
                if left <= 0:
                    return 304, None
                self.held += 1
                try:
                    self.cond.wait(left)
                finally:
                    self.held -= 1

    def poll(self, body):
        wait = min(float(body.get('wait') or 0), 60)
        deadline = time.monotonic() + wait
        with self.cond:
            self.polls += 1
            self.last_poll = {i.get('agent_id')
                              for i in body.get('agents') or ()}
            self.cond.notify_all()
            while True:
                answer = []
                for item in body.get('agents') or ():
                    agent_id = item.get('agent_id')
                    if not self._auth(agent_id, item.get('token')):
                        answer.append({'agent_id': agent_id, 'error': 403,
                                       'message': 'bad credential'})
                    elif item.get('version') != self.versions[agent_id]:
                        answer.append(dict(self._view(agent_id),
                                           agent_id=agent_id))
                left = deadline - time.monotonic()
                if answer or left <= 0:
                    return 200, {'agents': answer}
                self.held += 1
                try:
                    self.cond.wait(left)
                finally:
                    self.held -= 1

    def signal(self, agent_id, token, dep_id, run, payload):
        with self.cond:
            if self.fail_signals > 0:
                self.fail_signals -= 1
                return 503, {'message': 'unavailable'}
            if not self._auth(agent_id, token):
                return 403, {'message': 'bad credential'}
            owner = [a for a, deps in self.deployments.items()
                     if dep_id in deps]
            if not owner:
                return 404, {'message': 'no deployment %s' % dep_id}
            if owner[0] != agent_id:
                return 403, {'message': 'not your deployment'}
            dep = self.deployments[agent_id][dep_id]
            record = {'id': dep_id, 'run': run, 'payload': payload,
                      'agent_id': agent_id}
            if dep['status'] != 'IN_PROGRESS' or dep['run'] != run:
                record['accepted'] = False
                self.signals.append(record)
                self.cond.notify_all()
                return 200, {'accepted': False, 'reason': 'duplicate'}
            code = payload.get('deploy_status_code')
            dep['status'] = 'COMPLETE' if code == 0 else 'FAILED'
            self.versions[agent_id] += 1
            record['accepted'] = True
            self.signals.append(record)
            self.cond.notify_all()
            return 200, {'accepted': True}

    def batch_signals(self, body):
        """An agent host's batch: a 503 as a whole, else each signal's
        own answer, in order."""
        with self.cond:
            if self.fail_signals > 0:
                self.fail_signals -= 1
                return 503, {'message': 'unavailable'}
        answers = []
        for item in body.get('signals') or ():
            code, answer = self.signal(
                item.get('agent_id'), item.get('token'),
                item.get('deployment_id'), item.get('run'),
                item.get('payload') or {})
            answers.append(answer if code == 200 else
                           {'error': code, 'message': answer['message']})
        return 200, {'signals': answers}


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass   # an agent aborting its held poll is no error


def _handler(stub):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *args):
            pass

        def setup(self):
            super().setup()
            with stub.cond:
                stub.conns.add(self.connection)

        def finish(self):
            with stub.cond:
                stub.conns.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass

        def _body(self):
            length = int(self.headers.get('Content-Length') or 0)
            raw = self.rfile.read(length) if length else b''
            return json.loads(raw.decode('utf-8')) if raw else {}

        def _answer(self, code, body, etag=None):
            data = b'' if body is None else json.dumps(body).encode()
            self.send_response(code)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            if etag:
                self.send_header('ETag', etag)
            self.end_headers()
            self.wfile.write(data)

        def _creds(self):
            return (self.headers.get('X-Agent-Id'),
                    self.headers.get('X-Agent-Token'))

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path != '/v1/agent/deployments':
                return self._answer(404, {'message': 'no route'})
            query = urllib.parse.parse_qs(url.query)
            wait = float(query.get('wait', ['0'])[0])
            code, body = stub.get(*self._creds(),
                                  self.headers.get('If-None-Match'), wait)
            self._answer(code, body, etag='"%d"' % body['version']
                         if code == 200 else None)

        def do_POST(self):
            url = urllib.parse.urlsplit(self.path)
            body = self._body()
            if url.path == '/v1/agent/poll':
                return self._answer(*stub.poll(body))
            if url.path == '/v1/agent/signals':
                return self._answer(*stub.batch_signals(body))
            parts = url.path.split('/')
            if len(parts) == 6 and parts[1:4] == ['v1', 'agent',
                                                  'deployments'] \
                    and parts[5] == 'signal':
                run = urllib.parse.parse_qs(url.query).get('run', [''])[0]
                return self._answer(*stub.signal(
                    *self._creds(), urllib.parse.unquote(parts[4]), run,
                    body))
            self._answer(404, {'message': 'no route'})
    return Handler


def alive(pid):
    """Whether process `pid` runs (a zombie is dead too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().split(')')[-1].split()[0] != 'Z'
    except OSError:
        return False


def host_pid(disk, pid):
    """The host's pid of a hook that said its pid was `pid` (``$$``): a
    simulated server's software runs in a PID namespace of its own
    (converge/agent/rootfs.py), where pids are not the host's. It is the
    process working in `disk` whose innermost pid is `pid`; None when
    none is."""
    want = os.stat(disk)
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/status' % name) as f:
                nspid = [line.split()[1:] for line in f
                         if line.startswith('NSpid:')]
            cwd = os.stat('/proc/%s/cwd' % name)
        except OSError:   # gone, or not ours to look at
            continue
        if nspid and int(nspid[0][-1]) == pid and \
                (cwd.st_dev, cwd.st_ino) == (want.st_dev, want.st_ino):
            return int(name)
    return None
