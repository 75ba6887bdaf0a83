"""The agents' routes (docs/software.md): a server's agent pulls its
deployments (long poll, by version) and signals each result."""

import webob

from converge import conf as conf_mod
from converge.api import wsgi
from converge.engine import software
from converge.engine import waitconditions


def add_routes(mapper, controller):
    mapper.connect('/v1/agent/deployments', handler=controller.deployments,
                   conditions={'method': ['GET']})
    mapper.connect('/v1/agent/poll', handler=controller.poll,
                   conditions={'method': ['POST']})
    mapper.connect('/v1/agent/signals', handler=controller.signals,
                   conditions={'method': ['POST']})
    mapper.connect('/v1/agent/deployments/{deployment_id}/signal',
                   handler=controller.signal,
                   conditions={'method': ['POST']})
    # PUT: cfn-signal's request to an AWS::CloudFormation handle's URL
    mapper.connect('/v1/agent/waitconditions/{handle_id}/signal',
                   handler=controller.wait_condition_signal,
                   conditions={'method': ['POST', 'PUT']})


def _credential(req):
    return (req.headers.get('X-Agent-Id', ''),
            req.headers.get('X-Agent-Token', ''))


def _wait(value):
    try:
        wait = float(value or 0)
    except ValueError:
        raise wsgi.Error(400, 'wait must be a number of seconds')
    return max(0.0, min(wait, conf_mod.CONF.api.max_poll_wait))


class Controller:
    def __init__(self, engine, stopping):
        self.engine = engine
        #: set when the service stops: held polls answer at once
        self.stopping = stopping

    def deployments(self, req):
        agent_id, token = _credential(req)
        seen = (req.headers.get('If-None-Match') or '').strip('"') or None
        wait = _wait(req.params.get('wait'))
        version = software.version(self.engine, agent_id, token)
        if seen is not None and str(version) == seen and wait > 0:
            changed = software.poll(self.engine, [{
                'agent_id': agent_id, 'token': token, 'version': version}],
                wait=wait, stopping=self.stopping)
            if not changed:
                return webob.Response(status=304)
        version, docs = software.deployments(self.engine, agent_id, token)
        if seen is not None and str(version) == seen:
            return webob.Response(status=304)
        resp = wsgi.json_response({'version': version,
                                   'deployments': docs})
        resp.etag = str(version)
        return resp

    def poll(self, req):
        body = wsgi.read_json(req)
        agents = body.get('agents') if isinstance(body, dict) else None
        if not isinstance(agents, list) or not all(
                isinstance(a, dict) and a.get('agent_id') for a in agents):
            raise wsgi.Error(400, 'poll needs {"agents": [{"agent_id", '
                                  '"token", "version"}, ...]}')
        changed = software.poll(self.engine, agents,
                                wait=_wait(body.get('wait')),
                                stopping=self.stopping)
        return wsgi.json_response({'agents': changed})

    def signal(self, req, deployment_id):
        agent_id, token = _credential(req)
        payload = wsgi.read_json(req)
        accepted, reason = software.signal(
            self.engine, deployment_id, agent_id, token,
            req.params.get('run', ''), payload)
        return wsgi.json_response({'accepted': accepted, 'reason': reason})

    def signals(self, req):
        """Many agents' signals in one request (an agent host's), each
        with its own credential; an answer per signal, in order."""
        body = wsgi.read_json(req)
        items = body.get('signals') if isinstance(body, dict) else None
        if not isinstance(items, list) or not all(
                isinstance(i, dict) and i.get('deployment_id') and
                i.get('agent_id') for i in items):
            raise wsgi.Error(400, 'signals needs {"signals": [{'
                                  '"deployment_id", "agent_id", "token", '
                                  '"run", "payload"}, ...]}')
        most = conf_mod.CONF.api.max_signals_per_request
        if len(items) > most:
            raise wsgi.Error(400, '%d signals in one request; at most %d '
                                  '([api] max_signals_per_request)'
                             % (len(items), most))
        return wsgi.json_response({
            'signals': software.signals(self.engine, items)})

    def wait_condition_signal(self, req, handle_id):
        """curl_cli's request: the handle's token in X-Auth-Token; or a
        request to an AWS::CloudFormation::WaitConditionHandle's
        pre-signed URL, the token in its query (cfn-signal's body:
        Status, Reason, UniqueId, Data)."""
        token = req.headers.get('X-Auth-Token') or \
            req.GET.get('token', '')
        stored = waitconditions.signal(
            self.engine, handle_id, token,
            waitconditions.from_cfn(wsgi.read_json(req)))
        return wsgi.json_response(stored)
