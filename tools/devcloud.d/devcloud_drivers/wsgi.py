"""One WSGI entry point for every API that tools/devcloud runs under gunicorn.

OpenStack's WSGI modules parse ``sys.argv`` with oslo.config when they are
imported; under gunicorn that is gunicorn's own command line, which they
reject.  tools/devcloud therefore points gunicorn at this module and passes
the real application in the environment:

  DEVCLOUD_WSGI_APP   "package.module:attribute" of the WSGI callable
  DEVCLOUD_WSGI_ARGV  JSON list: the argv the application should see
"""
import importlib
import json
import os
import sys


def _load():
    target = os.environ['DEVCLOUD_WSGI_APP']
    argv = json.loads(os.environ.get('DEVCLOUD_WSGI_ARGV') or '[]')
    sys.argv = argv or [target.split(':')[0]]
    module_name, _, attribute = target.partition(':')
    module = importlib.import_module(module_name)
    return getattr(module, attribute or 'application')


application = _load()
