"""What every route shares: Heat's JSON error body, reading a JSON body."""

import json

import webob
import webob.exc

from converge import conf as conf_mod
from converge import exception


class Error(Exception):
    def __init__(self, code, message, title=None):
        super().__init__(message)
        self.code, self.message = code, message
        self.title = title or webob.exc.status_map[code].title


def error_body(code, message, kind=None, title=None):
    """Heat's JSON error body."""
    title = title or webob.exc.status_map[code].title
    return {'code': code, 'title': title, 'explanation': message,
            'error': {'message': message, 'type': kind or title,
                      'traceback': None}}


def error_response(code, message, kind=None, title=None):
    """An answer with Heat's JSON error body."""
    return webob.Response(json=error_body(code, message, kind, title),
                          status=code, content_type='application/json',
                          charset='utf-8')


def json_response(body, status=200, hint=None):
    """`body` as JSON; refused (Heat's RequestLimitExceeded, 400) when
    larger than [api] max_response_size. `hint`: how to ask for less."""
    text = _encode(body)
    limit = conf_mod.CONF.api.max_response_size
    if len(text) > limit:
        raise exception.RequestLimitExceeded(
            'the answer would be %d bytes, more than %d ([api] '
            'max_response_size)%s' % (len(text), limit,
                                      '; %s' % hint if hint else ''))
    return webob.Response(body=text, status=status,
                          content_type='application/json', charset='utf-8')


def json_list_response(key, items, hint=None):
    """{key: items} as JSON, written an item at a time as it is sent:
    the answer is never whole in memory beside the items (a listing
    with detail of a stack of max_stack_size). Each item is encoded
    once to be counted, against [api] max_response_size, before
    anything is sent, and again as it is sent."""
    head, tail = ('{"%s":[' % key).encode(), b']}'
    size = len(head) + len(tail) + max(0, len(items) - 1)
    limit = conf_mod.CONF.api.max_response_size
    for item in items:
        size += len(_encode(item))
        if size > limit:
            raise exception.RequestLimitExceeded(
                'the answer would be more than %d bytes ([api] '
                'max_response_size)%s' % (limit,
                                          '; %s' % hint if hint else ''))

    def chunks():
        yield head
        for i, item in enumerate(items):
            yield (b',' if i else b'') + _encode(item)
        yield tail
    return webob.Response(app_iter=chunks(), content_length=size,
                          content_type='application/json', charset='utf-8')


def _encode(value):
    return json.dumps(value, separators=(',', ':')).encode()


def read_json(req):
    limit = conf_mod.CONF.api.max_json_body_size
    if req.content_length and req.content_length > limit:
        raise Error(413, 'Request body is larger than %d bytes '
                         '([api] max_json_body_size)' % limit)
    raw = req.body
    if not raw:
        return {}
    from converge.template import bounds
    try:
        data = bounds.loads_json(raw, check=False)
    except bounds.NotPlainJSON as e:
        raise Error(400, 'The request body: %s' % e)
    except ValueError as e:
        raise Error(400, 'The request body is not valid JSON: %s' % e)
    # each value of the body is a document of its own (a template, an
    # environment, parameters, adopt data, a signal's details): each
    # nests as deep as a template may, and the error names it
    for key, value in (data.items() if isinstance(data, dict)
                       else [(None, data)]):
        try:
            bounds.check_json(value)
        except bounds.NotPlainJSON as e:
            raise Error(400, '%s: %s' % ('The request body' if key is None
                                         else key, e))
    return data
