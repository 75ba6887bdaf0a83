"""Observing one resource: what is really there.

The one way to ask, used by the unit of work before it decides
(workers/reconcile.py) and by `stack drift` (drift.py) alike.
"""

import contextlib

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


def drift(plugin, observation):
    """How the real thing differs from what was applied, in words; None
    when it does not."""
    if observation.error is not None:
        return 'unobservable: %s' % observation.error
    if observation.gone:
        return 'gone'
    changed = plugin.drift(observation.state)
    if changed:
        return 'changed: ' + ', '.join(sorted(changed))
    return None
