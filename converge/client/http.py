"""HTTP to converge-api: JSON in and out, a token, and the API's error
body turned back into the converge.exception the local service raises,
so that a command exits with the same code (docs/cli.md) either way."""

import functools
import json
import time
import urllib.error
import urllib.parse
import urllib.request

from converge import exception

#: seconds a request may take: a drift observes every resource, an
#: abandon writes a whole stack
TIMEOUT = 300

#: connection failures in a row a read (GET) survives: converge-api
#: restarting, a load balancer moving it (a write is not repeated: it
#: may have been done)
DROPPED_RETRIES = 5
#: seconds before the first retry of a read (doubling, at most 2 s)
RETRY_PAUSE = 0.2

#: the error class by status, when the body names no converge error
_BY_STATUS = {400: exception.InvalidInput, 401: exception.Unauthorized,
              403: exception.Forbidden, 404: exception.NotFound,
              409: exception.Conflict, 413: exception.InvalidInput}


def split_url(url):
    """(the API's root, the project its /v1/{project} names or None):
    `--os-url` may be the root or Heat's endpoint (as OS_ENDPOINT)."""
    parts = urllib.parse.urlsplit(url.rstrip('/'))
    if parts.scheme not in ('http', 'https') or not parts.netloc:
        raise exception.InvalidInput(
            '--os-url %s: give converge-api\'s address, e.g. '
            'http://127.0.0.1:8004/v1/PROJECT' % url)
    segments = [s for s in parts.path.split('/') if s]
    project = None
    if len(segments) >= 2 and segments[-2] == 'v1':
        project = urllib.parse.unquote(segments[-1])
        segments = segments[:-2]
    elif segments and segments[-1] == 'v1':
        segments = segments[:-1]
    root = urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, '/'.join([''] + segments), '', ''))
    return root, project


def error(status, body, url):
    """The converge.exception a JSON error answer stands for."""
    err = body.get('error') if isinstance(body, dict) else None
    err = err if isinstance(err, dict) else {}
    message = err.get('message') or (
        body.get('explanation') if isinstance(body, dict) else None) or \
        'converge-api answered %d' % status
    if status == 401:
        message = 'converge-api at %s refused the token: %s' % (url,
                                                                message)
    return exception.from_answer(
        err.get('type'), message,
        default=_BY_STATUS.get(status, exception.ConvergeError))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer here (Heat's name lookup), not an order."""

    def redirect_request(self, *args, **kwargs):
        return None


@functools.lru_cache(maxsize=None)
def _answered_early(connection_class):
    """`connection_class` reading the server's answer when the server
    closed the connection while the body was still going out.

    A server may refuse a request from its headers alone (a 413 for a
    body over its limit, a 401) and close without reading the body:
    sending the rest then fails with a broken pipe, and http.client
    would report that instead of the answer, which is in the socket
    already. Here the failed send ends the request; the answer is read
    as usual (no answer: the connection error as before)."""
    class Connection(connection_class):
        def send(self, data):
            try:
                super().send(data)
            except (BrokenPipeError, ConnectionResetError):
                if self.sock is None:
                    raise
    Connection.__name__ = connection_class.__name__
    return Connection


class _EarlyAnswers:
    def do_open(self, http_class, req, **kwargs):
        return super().do_open(_answered_early(http_class), req, **kwargs)


class _HTTP(_EarlyAnswers, urllib.request.HTTPHandler):
    pass


class _HTTPS(_EarlyAnswers, urllib.request.HTTPSHandler):
    pass


class Answer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body


class Client:
    """Requests to one converge-api for one project."""

    def __init__(self, root, project, token=None, timeout=TIMEOUT):
        self.root, self.project = root, project
        self.token, self.timeout = token, timeout
        self._opener = urllib.request.build_opener(_NoRedirect, _HTTP,
                                                   _HTTPS)

    @property
    def endpoint(self):
        return '%s/v1/%s' % (self.root, urllib.parse.quote(self.project,
                                                           safe=''))

    def request(self, method, path, body=None, query=None):
        """An Answer for `path` below the project's endpoint; a 2xx or
        3xx, else the error raised."""
        url = self.endpoint + path
        if query:
            url += '?' + urllib.parse.urlencode(
                [(k, v) for k, v in _pairs(query)])
        headers = {'Accept': 'application/json',
                   'User-Agent': 'converge-cli'}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers['Content-Type'] = 'application/json'
        if self.token:
            headers['X-Auth-Token'] = self.token
        req = urllib.request.Request(url, data=data, headers=headers,
                                     method=method)
        dropped = 0
        while True:
            try:
                return self._send(req)
            except exception.ConvergeError as e:
                if method != 'GET' or not getattr(e, 'unreachable', False) \
                        or dropped >= DROPPED_RETRIES:
                    raise
                time.sleep(min(RETRY_PAUSE * 2 ** dropped, 2.0))
                dropped += 1

    def _send(self, req):
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                return Answer(resp.status, resp.headers,
                              _json(resp.read()))
        except urllib.error.HTTPError as e:
            answer = Answer(e.code, e.headers, _json(e.read()))
            if 300 <= e.code < 400:
                return answer
            raise error(e.code, answer.body, self.root)
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, 'reason', e)
            raise exception.ConvergeError(
                'Cannot reach converge-api at %s: %s' % (self.root, reason),
                unreachable=True)

    def get(self, path, **query):
        return self.request('GET', path, query=query).body


def _pairs(query):
    """Query pairs; a list value repeats its key, None leaves it out."""
    for k, v in query.items():
        if v is None:
            continue
        for one in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(one, bool):
                one = 'true' if one else 'false'
            yield k, one


def _json(raw):
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return {'error': {'message': raw.decode(errors='replace')[:500]}}
