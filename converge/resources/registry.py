"""Resource types, found by entry point (group ``converge.resources``)."""

import functools
from importlib import metadata

GROUP = 'converge.resources'


@functools.lru_cache(maxsize=None)
def _all():
    found = {}
    for ep in metadata.entry_points(group=GROUP):
        found[ep.name] = ep
    return found


def names():
    return sorted(_all())


@functools.lru_cache(maxsize=None)
def get(type_name):
    """Return the plug-in class for a type name, or None if unknown."""
    ep = _all().get(type_name)
    return ep.load() if ep is not None else None
