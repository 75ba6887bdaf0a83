"""Who is asking: a request's credential turned into a request context.

`[api] auth_strategy = token` (the default): converge's own tokens, in
X-Auth-Token, as python-heatclient and `openstack` send them with an
endpoint and a token. `keystone`: keystonemiddleware validates the token
against keystone and leaves who it is in the request's identity headers
(it strips any a client sent; `wrap` puts it in front of the API).
`noauth`: the URL's project, the roles in X-Roles (for development, as
Heat's noauth pipeline).

The URL names a project (/v1/{project_id}/...). A token of another
project is answered "not found", as a stack of another project is:
nothing tells a caller that a project exists.
"""

import uuid

from converge import conf as conf_mod
from converge import exception
from converge.engine import api_tokens
from converge.engine import request


def _request_id(req):
    given = req.headers.get('X-Openstack-Request-Id', '')
    if given.startswith('req-') and len(given) <= 64:
        return given
    return 'req-%s' % uuid.uuid4()


def context(engine, req, project_id):
    """The request context of `req` on the URL's `project_id` (seeing
    no credentials until the policy says it may: common.action)."""
    strategy = conf_mod.CONF.api.auth_strategy
    rid = _request_id(req)
    if strategy == 'keystone':
        if req.headers.get('X-Identity-Status') != 'Confirmed':
            raise exception.Unauthorized('Authentication required: a '
                                         'valid keystone token')
        project = req.headers.get('X-Project-Id')
        if project != project_id:
            raise exception.NotFound('The resource could not be found')
        roles = [r.strip() for r in req.headers.get('X-Roles', '').split(
            ',') if r.strip()]
        user = req.headers.get('X-User-Id')
        _count(engine, 'keystone:%s:%s' % (project, user))
        # the token: a stack created now may need a trust made with it
        return request.make(project, user, roles, rid,
                            auth_token=req.headers.get('X-Auth-Token'),
                            credentials=False)
    if strategy == 'noauth':
        roles = [r.strip() for r in req.headers.get(
            'X-Roles', 'member,reader').split(',') if r.strip()]
        return request.make(project_id, req.headers.get('X-User-Id'),
                            roles, rid, credentials=False)
    who = api_tokens.authenticate(engine.db,
                                  req.headers.get('X-Auth-Token', ''))
    if who['project_id'] != project_id:
        raise exception.NotFound('The resource could not be found')
    _count(engine, 'token:%s' % who['token_id'])
    return request.make(who['project_id'], who['user_id'], who['roles'],
                        rid, credentials=False)


def _count(engine, caller):
    cap = conf_mod.CONF.api.max_requests_per_minute
    if cap:
        api_tokens.count_request(engine.db, caller, cap)


def wrap(app):
    """The WSGI application as served: with `keystone`, Heat's routes
    behind keystonemiddleware. Its decision is delayed, so a request with
    no valid keystone token still reaches the route (marked Invalid,
    refused by `context`): a resource's signal URL carries the
    resource's own token. The agents' routes have their own credentials
    and skip it."""
    if conf_mod.CONF.api.auth_strategy != 'keystone':
        return app
    try:
        from keystonemiddleware import auth_token
    except ImportError:
        raise RuntimeError('[api] auth_strategy = keystone needs '
                           'keystonemiddleware (pip install '
                           'keystonemiddleware)')
    checked = auth_token.AuthProtocol(app, {
        'delay_auth_decision': True,
        'oslo_config_config': conf_mod.CONF})

    def serve(environ, start_response):
        # and Heat's transports' (a signed URL, a derived key pair:
        # converge/api/transport.py)
        if environ.get('PATH_INFO', '').startswith(
                ('/v1/agent/', '/v1/transport/', '/v1/cfn/')):
            return app(environ, start_response)
        return checked(environ, start_response)
    return serve
