"""converge-api's routes for Heat's transports (converge/transports/):
what a server with Heat's guest tooling calls, authenticated by the
signed URL it was given or its derived key pair, never by a Keystone
user. docs/software.md, "Transports"."""

import webob

from converge.api import wsgi
from converge.engine import software
from converge.transports import metadata
from converge.transports import signals
from converge.transports import urls


def add_routes(mapper, controller):
    # POLL_TEMP_URL: os-collect-config's `request` collector (HEAD, GET)
    mapper.connect('/v1/transport/servers/{agent_id}/metadata',
                   handler=controller.metadata,
                   conditions={'method': ['GET', 'HEAD']})
    # TEMP_URL_SIGNAL (PUT) and CFN_SIGNAL (POST): heat-config-notify,
    # cfn-signal
    mapper.connect('/v1/transport/deployments/{deployment_id}/signal',
                   handler=controller.signal,
                   conditions={'method': ['PUT', 'POST']})


class Controller:
    def __init__(self, engine):
        self.engine = engine

    def metadata(self, req, agent_id):
        urls.check(self.engine.db, 'metadata', [agent_id],
                   req.GET.get('expires'), req.GET.get('signature'))
        found = metadata.for_agent(self.engine, agent_id)
        if found is None:
            raise wsgi.Error(404, 'The server of this URL is gone')
        resp = wsgi.json_response(found)
        if req.method == 'HEAD':
            resp = webob.Response(status=200,
                                  content_type='application/json',
                                  content_length=resp.content_length)
        return resp

    def signal(self, req, deployment_id):
        run = req.GET.get('run', '')
        urls.check(self.engine.db, 'signal', [deployment_id, run],
                   req.GET.get('expires'), req.GET.get('signature'))
        answer = software.signal_run(
            self.engine, deployment_id, run,
            signals.from_cfn(wsgi.read_json(req)))
        return wsgi.json_response(answer)
