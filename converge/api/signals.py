"""Signals to resources (Heat's native signal route): ``POST
/v1/{project}/stacks/{stack name}/{stack id}/resources/{resource}/signal``
with the resource's token in ``X-Auth-Token`` (its ``signal_url``) or in
the query, ``?token=`` (its ``alarm_url``, a signed URL); the body is the
signal's details (an alarm's JSON), optional. An ``Idempotency-Key``
header names the signal: sent again, it is answered from the first
one's record and not applied twice.

The route is Heat's (converge/api/v1/resources.py); a request whose
X-Auth-Token is not an API token is a resource's own signal, answered
here."""

import webob

from converge.api import wsgi
from converge.engine import scaling


class Controller:
    def __init__(self, engine):
        self.engine = engine

    def signal(self, req, project_id, stack_name, stack_id, resource_name):
        token = req.headers.get('X-Auth-Token') or req.params.get('token')
        details = wsgi.read_json(req) if req.body else None
        done = scaling.signal(
            self.engine, stack_id, resource_name, details,
            token=token or '',
            signal_id=req.headers.get('Idempotency-Key') or None)
        return webob.Response(json={
            k: done.get(k) for k in ('status', 'reason', 'capacity',
                                     'repeated')})
