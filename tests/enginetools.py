"""Helpers for in-process engine tests."""

import io

import yaml

from converge import template
from converge.cmd import progress
from converge.db import api
from converge.engine import request, service, stacks, views


def bundle(tmp_path, doc, name='t.yaml'):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return template.load_bundle(str(path))


def hot(resources, outputs=None, parameters=None):
    doc = {'heat_template_version': '2021-04-16', 'resources': resources}
    if outputs:
        doc['outputs'] = outputs
    if parameters:
        doc['parameters'] = parameters
    return doc


def follow(engine, stack_id, traversal_id, ctx=None, **kw):
    """progress.follow through the service layer (as the default project
    unless `ctx` says otherwise)."""
    kw.setdefault('local_workers', True)
    return progress.follow(service.Service(engine), ctx or request.make(),
                           stack_id, traversal_id, **kw)


def wait(engine, stack_id, traversal_id):
    return follow(engine, stack_id, traversal_id, out=io.StringIO(),
                  tty=False)


def run(engine, op, *args, **kw):
    """Start an operation and wait for its end; returns the stack row."""
    stack_id, trav = op(engine, *args, **kw)
    return wait(engine, stack_id, trav).stack


def events(engine, stack_id):
    with engine.db.read() as s:
        return api.events_list(s, stack_id)


def resources(engine, stack):
    return views.resources(engine, stack)


def status(stack):
    return '%s_%s' % (stack.action, stack.status)


__all__ = ['bundle', 'hot', 'wait', 'run', 'events', 'resources', 'stacks']
