"""converge-api's routes for Heat's transports (converge/transports/):
what a server with Heat's guest tooling calls, authenticated by the
signed URL it was given or its derived key pair, never by a Keystone
user. docs/software.md, "Transports"."""

import json
from xml.sax import saxutils

import webob

from converge.api import wsgi
from converge.engine import software
from converge.transports import cfn_keys
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
    # POLL_SERVER_CFN: os-collect-config's `cfn` collector asks Heat's CFN
    # API for its server's metadata (DescribeStackResource, EC2-signed)
    mapper.connect('/v1/cfn/', handler=controller.cfn,
                   conditions={'method': ['GET', 'POST']})


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

    def cfn(self, req):
        """DescribeStackResource, Heat's CFN API call, for the server the
        request's key pair was derived for only (its stack and resource
        name): what os-collect-config's `cfn` collector reads its
        metadata with. Any other action, key or resource: refused, in
        the CFN API's XML error form."""
        params = dict(req.GET)
        if req.method == 'POST':
            params.update(req.POST)
        agent_id = cfn_keys.verify(self.engine.db, req.method, req.host,
                                   req.path, params)
        if agent_id is None:
            return _cfn_error(403, 'AccessDenied', 'The request\'s '
                              'signature or key is not valid')
        if params.get('Action') != 'DescribeStackResource':
            return _cfn_error(400, 'InvalidAction', 'Only '
                              'DescribeStackResource is served here')
        found = metadata.for_agent(self.engine, agent_id, with_stack=True)
        if found is None:
            return _cfn_error(403, 'AccessDenied', 'The server of this '
                              'key is gone')
        meta, stack = found
        if params.get('StackName') not in (stack.name, stack.id) or \
                params.get('LogicalResourceId') != stack.resource_name:
            return _cfn_error(403, 'AccessDenied', 'This key may describe '
                              'its own server only')
        detail = {
            'LogicalResourceId': stack.resource_name,
            'PhysicalResourceId': stack.server_id,
            'ResourceType': 'OS::Nova::Server',
            'StackId': stack.id, 'StackName': stack.name,
            'Metadata': json.dumps(meta)}
        body = ''.join('<%s>%s</%s>' % (k, saxutils.escape(str(v)), k)
                       for k, v in detail.items())
        return webob.Response(
            status=200, content_type='application/xml', charset='utf-8',
            body=('<DescribeStackResourceResponse><DescribeStackResource'
                  'Result><StackResourceDetail>%s</StackResourceDetail>'
                  '</DescribeStackResourceResult></DescribeStackResource'
                  'Response>' % body).encode())


def _cfn_error(status, code, message):
    return webob.Response(
        status=status, content_type='application/xml', charset='utf-8',
        body=('<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code>'
              '<Message>%s</Message></Error></ErrorResponse>' % (
                  code, saxutils.escape(message))).encode())
