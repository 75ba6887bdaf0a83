"""Who is asking: a request's credential turned into a request context.

`[api] auth_strategy = token` (the default): converge's own tokens, in
X-Auth-Token, as python-heatclient and `openstack` send them with an
endpoint and a token. `noauth`: the URL's project, the roles in X-Roles
(for development, as Heat's noauth pipeline).

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
    """The request context of `req` on the URL's `project_id`."""
    strategy = conf_mod.CONF.api.auth_strategy
    rid = _request_id(req)
    if strategy == 'noauth':
        roles = [r.strip() for r in req.headers.get(
            'X-Roles', 'member,reader').split(',') if r.strip()]
        return request.make(project_id, req.headers.get('X-User-Id'),
                            roles, rid)
    who = api_tokens.authenticate(engine.db,
                                  req.headers.get('X-Auth-Token', ''))
    if who['project_id'] != project_id:
        raise exception.NotFound('The resource could not be found')
    return request.make(who['project_id'], who['user_id'], who['roles'],
                        rid)
