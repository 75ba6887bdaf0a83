"""How many requests one credential may have in progress at once.

A token (X-Auth-Token) or an agent's credential (X-Agent-Id and
X-Agent-Token) holds at most [api] max_requests_per_credential requests
at a time in this process; one more is answered 429 with Retry-After at
once, before any work. So one caller, however many connections it opens,
holds a bounded share of the threads (an agent's long polls, a script's
loop gone wrong). Requests with neither header (a resource's signal URL
with its signature, noauth) are bounded by the pools alone.

Signals are the exception to "at once". A guest's boot script signalling
one wait condition handle 20 times at once with the handle's one token
(Heat's test_os_wait_condition, `curl_cli` without --fail or --retry)
takes a 429 for sent, and the signal is lost: Heat has no such limit. So
a signal over the limit (POST or PUT to a route ending in /signal, or an
agent host's /v1/agent/signals) waits for a slot of its credential, at
most [api] signal_queue_timeout seconds, then 429. Waiters are bounded
too: at most [api] max_queued_signals_per_credential of one credential
wait at once, and one more is answered 429 at once. A waiting signal
holds a thread of its pool (none of the database), so a flood of one
credential holds at most the limit plus the queue of threads; beyond
them, waitress keeps requests on their connections ([api]
max_connections), as it does every request waiting for a thread.
"""

import hashlib
import threading
import time

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


def is_signal(environ):
    """A signal's request: a resource's (/v1/{project}/stacks/.../
    resources/{name}/signal), a wait condition handle's, a deployment's
    (converge-agent's, Heat's transports'), or an agent host's batch."""
    if environ.get('REQUEST_METHOD') not in ('POST', 'PUT'):
        return False
    path = environ.get('PATH_INFO', '').rstrip('/')
    return path.endswith('/signal') or path == '/v1/agent/signals'


class _Slots:
    """One credential's requests in progress and signals waiting."""

    __slots__ = ('held', 'queued', 'freed')

    def __init__(self, lock):
        self.held = 0
        self.queued = 0
        self.freed = threading.Condition(lock)


class Concurrency:
    def __init__(self, app):
        self.app = app
        self._slots = {}
        self._lock = threading.Lock()

    @property
    def queued(self):
        """Signals waiting for a slot now, of every credential."""
        with self._lock:
            return sum(s.queued for s in self._slots.values())

    def __call__(self, environ, start_response):
        api = conf_mod.CONF.api
        cap = api.max_requests_per_credential
        key = _credential(environ) if cap else None
        if key is None:
            return self.app(environ, start_response)
        with self._lock:
            slots = self._slots.get(key)
            if slots is None:
                slots = self._slots[key] = _Slots(self._lock)
            if slots.held >= cap and not self._queue(slots, cap, environ):
                if not slots.held and not slots.queued:
                    del self._slots[key]
                return self._refused(cap, environ, start_response)
            slots.held += 1
        try:
            answer = self.app(environ, start_response)
        except BaseException:
            self._release(key)
            raise
        # the slot is held until the answer is sent (a listing is
        # written as it is sent): the server closes it then
        return _Held(answer, lambda: self._release(key))

    @staticmethod
    def _queue(slots, cap, environ):
        """Wait for a slot (called with the lock held; it is let go
        while waiting) if this request is a signal and the credential's
        queue has room. True when a slot is free now."""
        api = conf_mod.CONF.api
        wait = api.signal_queue_timeout
        if (wait <= 0 or not is_signal(environ) or
                slots.queued >= api.max_queued_signals_per_credential):
            return False
        deadline = time.monotonic() + wait
        slots.queued += 1
        try:
            while slots.held >= cap:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                slots.freed.wait(left)
            return True
        finally:
            slots.queued -= 1

    def _release(self, key):
        with self._lock:
            slots = self._slots[key]
            slots.held -= 1
            if slots.queued:
                slots.freed.notify()
            elif not slots.held:
                del self._slots[key]

    @staticmethod
    def _refused(cap, environ, start_response):
        if is_signal(environ):
            api = conf_mod.CONF.api
            message = (
                'More than %d requests of this credential at once ([api] '
                'max_requests_per_credential), and %d signals already '
                'waiting for one to end or this one waited %g s ([api] '
                'max_queued_signals_per_credential, signal_queue_timeout); '
                'try again when one has been answered' % (
                    cap, api.max_queued_signals_per_credential,
                    api.signal_queue_timeout))
        else:
            message = ('More than %d requests of this credential at once '
                       '([api] max_requests_per_credential); try again '
                       'when one has been answered' % cap)
        resp = wsgi.error_response(429, message, 'TooMany')
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
