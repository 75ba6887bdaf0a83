"""Observing one resource: what is really there.

The one way to ask, used by the unit of work before it decides
(workers/reconcile.py) and by `stack drift` (engine/drift.py) alike.
"""

import contextlib
import json

from oslo_log import log as logging

from converge import exception

LOG = logging.getLogger(__name__)


class Observation:
    """What observing found.

    ``state``: the plug-in's observed state (a dict), None when the
    resource does not exist, {} when it could not be seen (``error``).
    """

    def __init__(self, state, error=None):
        self.state = state
        self.error = error

    @property
    def gone(self):
        return self.state is None and self.error is None


def observe(plugin, waiting=contextlib.nullcontext):
    """Ask the plug-in what is there; a cloud error is an observation too
    (the engine still decides, as if the resource were unchanged).
    ``waiting()`` is entered around the cloud call (the engine lets go of
    its gate there)."""
    try:
        with waiting():
            return Observation(plugin.observe())
    except exception.CloudError as exc:
        LOG.warning('%s: observing failed: %s', plugin.name, exc)
        return Observation({}, error=exc)


def observe_all(plugins, waiting=contextlib.nullcontext):
    """Observe many resources: {id(plugin): Observation}. A type that can
    (``observe_many``) is asked once per pass for all of its resources,
    so a pass costs its driver one call, not one per resource; others
    one by one."""
    found, by_type = {}, {}
    for plugin in plugins:
        if type(plugin).observe_many is not None:
            by_type.setdefault(type(plugin), []).append(plugin)
        else:
            found[id(plugin)] = observe(plugin, waiting)
    for cls, group in by_type.items():
        try:
            with waiting():
                states = cls.observe_many(group)
        except exception.CloudError as exc:
            LOG.warning('%s: observing failed: %s', cls.__name__, exc)
            states, error = {}, exc
        else:
            error = None
        for plugin in group:
            if id(plugin) in states:
                found[id(plugin)] = Observation(states[id(plugin)])
            else:
                found[id(plugin)] = Observation({}, error=error)
    return found


def drift(plugin, observation):
    """How the real thing differs from what was applied, in words
    ("gone", "changed: image fedora, not cirros"); None when it does
    not."""
    if observation.error is not None:
        return 'unobservable: %s' % observation.error
    if observation.gone:
        return 'gone'
    changed = plugin.drift(observation.state)
    if not changed:
        return None
    if isinstance(changed, dict):
        return 'changed: ' + '; '.join(
            '%s %s, not %s' % (key, seen, applied)
            for key, (seen, applied) in sorted(changed.items()))
    return 'changed: ' + ', '.join(sorted(changed))


def jsonable(value):
    """An observed state as stored: JSON (a timestamp as its text). One
    that is JSON already (the usual case: what a cloud's API returned)
    is stored as it is: its round trip through the encoder was a fifth of
    recording a server's end."""
    if value is None or _plain(value):
        return value
    return json.loads(json.dumps(value, default=str))


_SCALARS = (str, int, float, bool, type(None))


def _plain(value):
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if kind is list:
        return all(_plain(v) for v in value)
    return kind in _SCALARS
