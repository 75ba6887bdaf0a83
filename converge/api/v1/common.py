"""What the orchestration API's controllers share: the action decorator
(who is asking, may they), JSON answers, Heat's links, query values."""

import functools
import json
import re

import webob

from converge import exception
from converge.api import auth
from converge.api import policy
from converge.api import wsgi
from converge.engine import service as service_mod


def action(rule):
    """A route of the API: authenticate the request against the URL's
    project, check `rule` in the policy, call the handler with the
    request context, and tag the answer with the request id."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(self, req, project_id, **kwargs):
            ctx = auth.context(self.engine, req, project_id)
            policy.check(ctx, rule)
            # what the service masks for this caller (engine/secrecy.py)
            ctx.credentials = policy.allowed(ctx, policy.CREDENTIALS)
            # an admin acts on any project's stack by its id, as in Heat
            # (engine/service.py _scope)
            ctx.is_admin = policy.allowed(ctx, 'context_is_admin')
            # the resource types it may use (engine/exposure.py)
            ctx.may_use_type = functools.partial(policy.may_use_type, ctx)
            resp = fn(self, req, ctx, **kwargs)
            if resp is None:
                resp = webob.Response(status=204)
            resp.headers['x-openstack-request-id'] = ctx.request_id
            return resp
        return wrapper
    return deco


class Controller:
    def __init__(self, engine):
        self.engine = engine
        self.service = service_mod.Service(engine)


def reply(body, status=200):
    return wsgi.json_response(body, status)


def accepted(body=None):
    """202: the traversal started (Heat answers updates and actions so)."""
    return reply(body if body is not None else {}, 202)


#: the header an answer that started a traversal names it in: a client
#: following the operation (converge's CLI in remote mode) follows that
#: traversal, not whichever owns the stack by the time it looks
TRAVERSAL_HEADER = 'X-Converge-Traversal-Id'


def started(resp, begun):
    """`resp` naming the traversal `begun` ({'id', 'traversal_id'}, as
    the service's methods that start one return) started."""
    resp.headers[TRAVERSAL_HEADER] = begun['traversal_id']
    return resp


def base_url(req, ctx):
    return '%s/v1/%s' % (req.host_url, ctx.project_id)


def stack_url(req, ctx, name, stack_id):
    return '%s/stacks/%s/%s' % (base_url(req, ctx), name, stack_id)


def stack_links(req, ctx, name, stack_id):
    return [{'href': stack_url(req, ctx, name, stack_id), 'rel': 'self'}]


def body(req):
    data = wsgi.read_json(req)
    if not isinstance(data, dict):
        raise wsgi.Error(400, 'The request body must be a JSON object')
    return data


def string(data, key, required=False):
    """A body's string value (None when absent and not required)."""
    value = data.get(key)
    if value is None or value == '':
        if required:
            raise exception.InvalidInput('No %s given' % key)
        return None
    if not isinstance(value, str):
        raise exception.InvalidInput('%s must be a string, not %s'
                                     % (key, type(value).__name__))
    return value


def mapping(data, key):
    """A body's map value ({} when absent)."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise exception.InvalidInput('%s must be a map, not %s'
                                     % (key, type(value).__name__))
    return value


def flag(value, name):
    """A query or body boolean, as Heat reads them."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    text = str(value).strip().lower()
    if text in ('1', 'true', 't', 'yes', 'y', 'on'):
        return True
    if text in ('0', 'false', 'f', 'no', 'n', 'off', ''):
        return False
    raise exception.InvalidInput('Unrecognized value "%s" for "%s", '
                                 'acceptable values are: true, false'
                                 % (value, name))


#: the largest integer a query or body value may be (SQL's INTEGER)
_INT_MAX = 2 ** 31 - 1
#: an integer's text (ASCII digits: str.isdigit takes '²', which int()
#: does not; and few enough for int() to read)
_DIGITS = re.compile(r'\s*[+-]?[0-9]{1,30}\s*')


def integer(value, name, minimum=0, maximum=None, option=None):
    """A query or body integer, as Heat reads them: an integer or its
    digits; a boolean or a fraction (1.5, 1e20) is refused, not cut.
    `option` names the setting `maximum` comes from; without one, what
    a database's integer column holds."""
    if maximum is None:
        maximum = _INT_MAX
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _DIGITS.fullmatch(value):
        number = int(value)
    if number is None:
        raise exception.InvalidInput('%s must be an integer, not %s' % (
            name, json.dumps(value, ensure_ascii=False)[:60]))
    if number < minimum:
        raise exception.InvalidInput('%s must be at least %d'
                                     % (name, minimum))
    if number > maximum:
        raise exception.InvalidInput('%s must be at most %d%s' % (
            name, maximum, ' (%s)' % option if option else ''))
    return number


def listed(req, name):
    """Every value of a repeated query key (filters, sort keys)."""
    values = req.GET.getall(name)
    return values[0] if len(values) == 1 else (values or None)


def json_value(value, name):
    """A value a client may send as JSON text or as the object itself
    (Heat's adopt_stack_data, a template)."""
    if isinstance(value, str):
        from converge.template import bounds
        try:
            return bounds.loads_json(value)
        except bounds.NotPlainJSON as e:
            raise exception.InvalidInput('%s: %s' % (name, e))
        except ValueError as e:
            raise exception.InvalidInput('%s is not valid JSON: %s'
                                         % (name, e))
    return value
