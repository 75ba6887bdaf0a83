"""converge-api's agent routes, as the agent calls them (docs/software.md).

Plain HTTP with the standard library: the agent runs on servers where
little may be installed. Errors are sorted for the caller: `Unavailable`
(no connection, a timeout, 5xx, 429: try again later), `Refused` (403,
404: the credential was revoked or the server or deployment is gone) and
`Rejected` (any other answer that trying again will not change).
"""

import collections
import http.client
import json
import logging
import socket
import threading
import urllib.parse

LOG = logging.getLogger(__name__)

#: seconds a request may take beyond the long poll's own wait
SLACK = 30.0

#: requests this process made, by route kind (poll, deployments, signal,
#: waitcondition): the agent host reports them when it stops
#: (converge-bench's agent requests per deployment)
REQUESTS = collections.Counter()
_COUNT_LOCK = threading.Lock()


def _count(path):
    kind = ('poll' if path.endswith('/poll') else
            'signal' if '/deployments/' in path or
            path.endswith('/signals') else
            'waitcondition' if '/waitconditions/' in path else
            'deployments')
    with _COUNT_LOCK:
        REQUESTS[kind] += 1


class Unavailable(Exception):
    """The endpoint did not answer usefully; worth trying again."""


class Refused(Exception):
    """403 or 404: this server's credential, or the thing asked about,
    is no more."""

    def __init__(self, code, message):
        super().__init__('%d: %s' % (code, message))
        self.code = code


class Rejected(Exception):
    """Another 4xx: asking again the same way will not help."""

    def __init__(self, code, message):
        super().__init__('%d: %s' % (code, message))
        self.code = code


class Endpoint:
    """One converge-api endpoint. `abort()` breaks the request in flight
    (from another thread): it raises Unavailable at once."""

    def __init__(self, url):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ('http', 'https') or not parsed.hostname:
            raise ValueError('Not an http(s) endpoint URL: %r' % (url,))
        self.url = url.rstrip('/')
        self._parsed = parsed
        self._lock = threading.Lock()
        self._conns = set()

    def _connection(self, timeout):
        cls = (http.client.HTTPSConnection if self._parsed.scheme == 'https'
               else http.client.HTTPConnection)
        return cls(self._parsed.hostname, self._parsed.port, timeout=timeout)

    def abort(self):
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def request(self, method, path, body=None, headers=None, timeout=SLACK,
                cancelled=None):
        """(status, headers, parsed JSON or None) of one request.
        `cancelled()`, asked once connected, true: give up at once (an
        `abort` before the socket existed)."""
        prefix = self._parsed.path.rstrip('/')
        data = None if body is None else json.dumps(body).encode('utf-8')
        hdrs = {'Accept': 'application/json'}
        if data is not None:
            hdrs['Content-Type'] = 'application/json'
        hdrs.update(headers or {})
        _count(path)
        conn = self._connection(timeout)
        with self._lock:
            self._conns.add(conn)
        try:
            conn.connect()
            if cancelled is not None and cancelled():
                raise OSError('cancelled')
            conn.request(method, prefix + path, body=data, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
            status, rhead = resp.status, resp.headers
        except (OSError, http.client.HTTPException) as e:
            raise Unavailable('%s %s%s: %s' % (method, self.url, path,
                                               e or type(e).__name__))
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()
        parsed = None
        if raw:
            try:
                parsed = json.loads(raw.decode('utf-8'))
            except ValueError:
                parsed = None
        error = error_for(status, _message(parsed, raw),
                          '%s %s%s' % (method, self.url, path))
        if error is not None:
            raise error
        return status, rhead, parsed


def error_for(status, message, what):
    """The exception an answer of HTTP `status` is to its caller (None
    for a success): Unavailable, Refused or Rejected."""
    if status >= 500 or status in (408, 409, 429):
        return Unavailable('%s: HTTP %d' % (what, status))
    if status in (403, 404):
        return Refused(status, message)
    if status >= 400:
        return Rejected(status, message)
    return None


def _message(parsed, raw):
    if isinstance(parsed, dict):
        for key in ('message', 'error', 'reason'):
            if isinstance(parsed.get(key), (str, int)):
                return str(parsed[key])
    return raw[:200].decode('utf-8', 'replace') if raw else ''


def _auth(creds):
    return {'X-Agent-Id': creds['agent_id'], 'X-Agent-Token': creds['token']}


def deployments(endpoint, creds, version=None, wait=0):
    """GET /v1/agent/deployments: (version, deployments), or None when
    nothing changed since `version` within `wait` seconds (304)."""
    headers = _auth(creds)
    if version is not None:
        headers['If-None-Match'] = '"%s"' % version
    path = '/v1/agent/deployments'
    if wait:
        path += '?wait=%d' % wait
    status, _h, body = endpoint.request('GET', path, headers=headers,
                                        timeout=wait + SLACK)
    if status == 304:
        return None
    if not isinstance(body, dict) or 'deployments' not in body:
        raise Unavailable('GET %s%s: not a deployment list' % (
            endpoint.url, path))
    return body.get('version'), body['deployments']


def poll(endpoint, agents, wait=0, cancelled=None):
    """POST /v1/agent/poll for many agents [{agent_id, token, version}]:
    the entries of the changed or refused ones."""
    _s, _h, body = endpoint.request(
        'POST', '/v1/agent/poll', body={'agents': agents, 'wait': wait},
        timeout=wait + SLACK, cancelled=cancelled)
    if not isinstance(body, dict) or not isinstance(body.get('agents'),
                                                    list):
        raise Unavailable('POST %s/v1/agent/poll: not a poll answer'
                          % endpoint.url)
    return body['agents']


def signal(endpoint, creds, dep_id, run, payload, traceparent=None):
    """POST the result of run `run` of deployment `dep_id`: the answer
    ({"accepted": bool, "reason"?}). `traceparent`: the trace converge-api
    gave the run (W3C Trace Context), sent back as that header."""
    path = '/v1/agent/deployments/%s/signal?run=%s' % (
        urllib.parse.quote(dep_id, safe=''), urllib.parse.quote(run, safe=''))
    headers = _auth(creds)
    if traceparent:
        headers['traceparent'] = traceparent
    _s, _h, body = endpoint.request('POST', path, body=payload,
                                    headers=headers)
    return body if isinstance(body, dict) else {'accepted': True}


def signals(endpoint, items):
    """POST /v1/agent/signals: many agents' signals [{deployment_id,
    agent_id, token, run, payload}] in one request; an answer per item,
    in order ({"accepted", "reason"} or {"error": code, "message"}).
    An item's `traceparent` (signal's) is not sent in it: the request
    carries it as its header when every item has the same one (a batch of
    one stack operation's runs)."""
    traces = {item.get('traceparent') for item in items}
    items = [{k: v for k, v in item.items() if k != 'traceparent'}
             for item in items]
    headers = {}
    if len(traces) == 1 and None not in traces:
        headers['traceparent'] = traces.pop()
    _s, _h, body = endpoint.request('POST', '/v1/agent/signals',
                                    body={'signals': items},
                                    headers=headers)
    answers = body.get('signals') if isinstance(body, dict) else None
    if not isinstance(answers, list) or len(answers) != len(items):
        raise Unavailable('POST %s/v1/agent/signals: not an answer per '
                          'signal' % endpoint.url)
    return answers
