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
    text = json.dumps(body, separators=(',', ':')).encode()
    limit = conf_mod.CONF.api.max_response_size
    if len(text) > limit:
        raise exception.RequestLimitExceeded(
            'the answer would be %d bytes, more than %d ([api] '
            'max_response_size)%s' % (len(text), limit,
                                      '; %s' % hint if hint else ''))
    return webob.Response(body=text, status=status,
                          content_type='application/json', charset='utf-8')


def read_json(req):
    limit = conf_mod.CONF.api.max_json_body_size
    if req.content_length and req.content_length > limit:
        raise Error(413, 'Request body is larger than %d bytes '
                         '([api] max_json_body_size)' % limit)
    raw = req.body
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError as e:
        raise Error(400, 'The request body is not valid JSON: %s' % e)
