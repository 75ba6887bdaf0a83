"""How many requests one credential may have in progress at once.

A token (X-Auth-Token) or an agent's credential (X-Agent-Id and
X-Agent-Token) holds at most [api] max_requests_per_credential requests
at a time in this process; one more is answered 429 with Retry-After at
once, before any work. So one caller, however many connections it opens,
holds a bounded share of the threads (an agent's long polls, a script's
loop gone wrong). Requests with neither header (a resource's signal URL
with its signature, noauth) are bounded by the pools alone.
"""

import hashlib
import threading

from converge import conf as conf_mod
from converge.api import wsgi


def _credential(environ):
    agent = environ.get('HTTP_X_AGENT_ID')
    if agent:
        secret = 'agent:%s:%s' % (agent, environ.get('HTTP_X_AGENT_TOKEN',
                                                     ''))
    else:
        token = environ.get('HTTP_X_AUTH_TOKEN')
        if not token:
            return None
        secret = 'token:%s' % token
    # keyed by a digest: the table keeps no credential in the clear
    return hashlib.sha256(secret.encode('utf-8', 'replace')).digest()


class Concurrency:
    def __init__(self, app):
        self.app = app
        self._held = {}
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        cap = conf_mod.CONF.api.max_requests_per_credential
        key = _credential(environ) if cap else None
        if key is None:
            return self.app(environ, start_response)
        with self._lock:
            held = self._held.get(key, 0)
            if held >= cap:
                return self._refused(cap, environ, start_response)
            self._held[key] = held + 1
        try:
            answer = self.app(environ, start_response)
        except BaseException:
            self._release(key)
            raise
        # the slot is held until the answer is sent (a listing is
        # written as it is sent): the server closes it then
        return _Held(answer, lambda: self._release(key))

    def _release(self, key):
        with self._lock:
            left = self._held.pop(key) - 1
            if left:
                self._held[key] = left

    @staticmethod
    def _refused(cap, environ, start_response):
        resp = wsgi.error_response(
            429, 'More than %d requests of this credential at once ([api] '
                 'max_requests_per_credential); try again when one has '
                 'been answered' % cap, 'TooMany')
        resp.headers['Retry-After'] = '1'
        return resp(environ, start_response)


class _Held:
    """An answer whose `release` runs once, when the server closes it."""

    def __init__(self, answer, release):
        self._answer, self._release = answer, release

    def __iter__(self):
        return iter(self._answer)

    def close(self):
        try:
            if hasattr(self._answer, 'close'):
                self._answer.close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()
