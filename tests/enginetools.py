"""Helpers for in-process engine tests."""

import io
import threading
import time

import yaml

from converge import listeners
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


def stack_of(engine, stack_id):
    """The stack's record (a nested stack's too)."""
    with engine.db.read() as s:
        return api.stack_record(s, stack_id)


def status(stack):
    return '%s_%s' % (stack.action, stack.status)


class UnitsEnded(listeners.Listener):
    """Wakes a waiter each time this engine ends a unit of work (after
    its transaction): a traversal ends with one, so the stack's status
    is read again exactly then, not on a poll's clock. Append it to the
    engine's listeners, then call it to wait for a traversal's end."""

    def __init__(self, engine):
        self.svc = service.Service(engine)
        self.ended = 0
        self.cond = threading.Condition()

    def on_unit(self, traversal_id, node, seconds):
        with self.cond:
            self.ended += 1
            self.cond.notify_all()

    def __call__(self, engine, stack_id, traversal_id, ctx, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            with self.cond:
                seen = self.ended
            now = self.svc.traversal_status(ctx, stack_id, traversal_id)
            if now['superseded_by'] is not None or \
                    now['stack'].status != 'IN_PROGRESS':
                return
            left = deadline - time.monotonic()
            assert left > 0, 'stack %s still %s_IN_PROGRESS after %d s' % (
                now['stack'].name, now['stack'].action, timeout)
            with self.cond:
                self.cond.wait_for(lambda: self.ended != seen, timeout=left)


__all__ = ['bundle', 'hot', 'wait', 'run', 'events', 'resources', 'stacks',
           'UnitsEnded']
