"""The dashboard's files, served at /dashboard/ (docs/dashboard.md).

Plain HTML, JavaScript and CSS shipped in the package
(converge/dashboard/): nothing to build, nothing fetched from elsewhere,
so the pages work where the API does, offline too. They hold no data and
are served to anyone; what they show they read from the orchestration
API with the token the user gives them, as any client does (readers see
everything the dashboard shows: it only reads). The policy of the pages'
own origin forbids any script, style or connection from elsewhere and
any inline script.
"""

import importlib.resources

import webob

from converge.api import wsgi

#: the files, by name -> content type
FILES = {'index.html': 'text/html', 'app.js': 'text/javascript',
         'graph.js': 'text/javascript', 'style.css': 'text/css'}

HEADERS = {
    'Content-Security-Policy': "default-src 'none'; script-src 'self'; "
                               "style-src 'self'; connect-src 'self'; "
                               "img-src 'self' data:; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    # a new release's files are fetched again, not kept from the last
    'Cache-Control': 'no-cache',
}

_cache = {}


def _read(name):
    if name not in _cache:
        _cache[name] = importlib.resources.files('converge').joinpath(
            'dashboard', name).read_bytes()
    return _cache[name]


def _methods(req):
    if req.method not in ('GET', 'HEAD'):
        return wsgi.error_response(405, 'The dashboard\'s files are read '
                                   'with GET')
    return None


def page(req, name='index.html'):
    refused = _methods(req)
    if refused is not None:
        return refused
    if name not in FILES:
        return wsgi.error_response(404, 'The resource could not be found: '
                                   '%s' % req.path)
    resp = webob.Response(body=_read(name), content_type=FILES[name],
                          charset='utf-8')
    resp.headers.update(HEADERS)
    return resp


def moved(req):
    resp = webob.Response(status=301)
    resp.location = req.host_url + '/dashboard/'
    return resp


def add_routes(mapper):
    mapper.connect('/dashboard', handler=moved)
    mapper.connect('/dashboard/', handler=page)
    mapper.connect('/dashboard/{name}', handler=page)
