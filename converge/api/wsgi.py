"""What every route shares: Heat's JSON error body, reading a JSON body."""

import webob
import webob.exc


class Error(Exception):
    def __init__(self, code, message, title=None):
        super().__init__(message)
        self.code, self.message = code, message
        self.title = title or webob.exc.status_map[code].title


def error_response(code, message, kind=None, title=None):
    """Heat's JSON error body."""
    title = title or webob.exc.status_map[code].title
    body = {'code': code, 'title': title, 'explanation': message,
            'error': {'message': message, 'type': kind or title,
                      'traceback': None}}
    return webob.Response(json=body, status=code,
                          content_type='application/json', charset='utf-8')


def read_json(req):
    from converge import conf
    limit = conf.CONF.api.max_json_body_size
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
