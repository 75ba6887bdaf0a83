"""Limits a cloud driver keeps, across every worker of the deployment.

A real cloud has quotas and rate limits of its own, and an engine of many
workers can trip them all at once: `[compute] max_creates_per_second` and
`[compute] max_builds_in_flight` keep the whole deployment under chosen
figures. Both are counted as leases in the engine database
(db/api.py `lease_take`), so they hold whichever worker on whichever host
makes the call:

- a create takes a one-second lease from the rate's slots (``cap`` per
  second);
- a create also takes a build slot, held by the server's idempotency key
  until the server is seen settled (ACTIVE, SHUTOFF, ERROR) or deleted,
  and expiring by itself after ``[compute] build_slot_lease``.

A call that finds no slot raises `exception.CloudThrottled`, as a cloud's
429 would: the engine waits and tries again, holding no thread.
"""

import uuid

from converge import conf as conf_mod
from converge import exception
from converge.db import api

RATE_KEY = 'compute:creates-per-second'
BUILD_KEY = 'compute:builds-in-flight'
SETTLED = ('ACTIVE', 'SHUTOFF', 'ERROR', 'DELETED', 'SOFT_DELETED')


class LimitedCompute:
    """A compute driver whose creates stay within the configured limits;
    every other call goes straight through."""

    def __init__(self, compute, db):
        self._compute = compute
        self._db = db

    def __getattr__(self, name):
        return getattr(self._compute, name)

    def for_project(self, project_id):
        """The same limits (they are the deployment's) on the cloud as
        `project_id` sees it."""
        return LimitedCompute(self._compute.for_project(project_id),
                              self._db)

    @staticmethod
    def limited():
        c = conf_mod.CONF.compute
        return bool(c.max_creates_per_second or c.max_builds_in_flight)

    def create_server(self, *args, idempotency_key=None, **kwargs):
        c = conf_mod.CONF.compute
        key = str(idempotency_key or uuid.uuid4())
        with self._db.write() as s:
            if c.max_builds_in_flight and not api.lease_take(
                    s, BUILD_KEY, key, c.max_builds_in_flight,
                    c.build_slot_lease):
                raise exception.CloudThrottled(
                    'max_builds_in_flight (%d) servers are building'
                    % c.max_builds_in_flight, retry_after=1.0)
            if c.max_creates_per_second and not api.lease_take(
                    s, RATE_KEY, uuid.uuid4().hex,
                    c.max_creates_per_second, 1.0):
                raise exception.CloudThrottled(
                    'max_creates_per_second (%d) reached'
                    % c.max_creates_per_second,
                    retry_after=1.0 / c.max_creates_per_second)
        server = self._compute.create_server(
            *args, idempotency_key=idempotency_key, **kwargs)
        self._seen(server)
        return server

    def get_server(self, server_id):
        return self._seen(self._compute.get_server(server_id))

    def find_server_by_key(self, idempotency_key):
        return self._seen(self._compute.find_server_by_key(idempotency_key))

    def delete_server(self, server_id):
        server = None
        try:
            server = self._compute.get_server(server_id)
        except exception.CloudNotFound:
            pass
        self._compute.delete_server(server_id)
        if server is not None:
            self._release(server)

    def _seen(self, server):
        if server and server.get('status') in SETTLED:
            self._release(server)
        return server

    def _release(self, server):
        key = server.get('idempotency_key')
        if key and conf_mod.CONF.compute.max_builds_in_flight:
            with self._db.write() as s:
                api.lease_release(s, BUILD_KEY, str(key))
