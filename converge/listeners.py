"""Listeners: what the engine tells an observer of its work.

An engine process holds ``engine.listeners``, a list of objects told of
three things as they happen:

- ``on_unit(traversal_id, node, seconds)``: a check_resource unit of work
  ended (however it ended), after ``seconds`` of wall time;
- ``on_cast(traversal_id, node)``: a check_resource message is being cast
  (for one carrying several nodes, its first);
- ``on_lock(stack_id, resource_name)``: a resource lock was taken.

A listener derives from ``Listener`` and overrides what it wants. It is
called on the engine's own threads, inside the unit of work, so it must be
quick, thread-safe and must not raise. SQL statements are not a hook:
SQLAlchemy's ``before_cursor_execute`` event already tells whoever listens.

Listeners are plug-ins: ``[DEFAULT] listeners`` names entry points of the
group ``converge.listeners``; each is a callable ``factory(engine)`` that
returns a listener, called once the engine is built. converge-bench counts
what its workers do this way (entry point ``bench``), so the engine never
imports the benchmark.
"""

import functools
from importlib import metadata
import time

from converge import exception

GROUP = 'converge.listeners'


class Listener:
    """Every hook, doing nothing."""

    def on_unit(self, traversal_id, node, seconds):
        pass

    def on_cast(self, traversal_id, node):
        pass

    def on_lock(self, stack_id, resource_name):
        pass


class Listeners(list):
    """The listeners of one engine, told of each event in turn. Empty (the
    usual case), each hook is a loop over nothing."""

    def on_unit(self, traversal_id, node, seconds):
        for listener in self:
            listener.on_unit(traversal_id, node, seconds)

    def on_cast(self, traversal_id, node):
        for listener in self:
            listener.on_cast(traversal_id, node)

    def on_lock(self, stack_id, resource_name):
        for listener in self:
            listener.on_lock(stack_id, resource_name)


def timed(check_resource):
    """Decorate ``check_resource(engine, stack_id, traversal_id, node, ...)``
    so that ``engine.listeners`` hear of each call and its duration. (A
    decorator keeps the hook to one line above the unit of work.)"""
    @functools.wraps(check_resource)
    def unit(engine, stack_id, traversal_id, node, *args, **kwargs):
        if not engine.listeners:
            return check_resource(engine, stack_id, traversal_id, node,
                                  *args, **kwargs)
        start = time.perf_counter()
        try:
            return check_resource(engine, stack_id, traversal_id, node,
                                  *args, **kwargs)
        finally:
            engine.listeners.on_unit(traversal_id, node,
                                     time.perf_counter() - start)
    return unit


def load(names, engine):
    """The listeners named (entry points of ``converge.listeners``), each
    made for `engine`."""
    out = Listeners()
    if not names:  # the usual case: no need to read every entry point
        return out
    found = {ep.name: ep for ep in metadata.entry_points(group=GROUP)}
    for name in names:
        if name not in found:
            raise exception.ConvergeError(
                '[DEFAULT] listeners: no listener named %r (entry points '
                'of %s: %s)' % (name, GROUP, ', '.join(sorted(found))
                                or 'none'))
        out.append(found[name].load()(engine))
    return out
