"""A module imported when first used, not when its importer is.

The CLI is a process per command: a read-only command (`stack list`,
`stack show`...) must not pay for importing the template engine, the
resource plug-ins and the rest of what only a create or an update uses
(issue 41: such a command answers in a quarter of a second). A module
that imports many others for a few of its functions names them

    abandon = lazy.module('converge.engine.abandon')

and uses `abandon.x` as before: the first attribute read imports it
(under Python's import lock, so two threads are safe), later reads are a
dict lookup. `from x import y` of a lazy module is not lazy; write
`x.y` at the point of use.
"""

import importlib


class _Lazy:
    __slots__ = ('_name', '_module')

    def __init__(self, name):
        object.__setattr__(self, '_name', name)
        object.__setattr__(self, '_module', None)

    def _load(self):
        mod = self._module
        if mod is None:
            mod = importlib.import_module(self._name)
            object.__setattr__(self, '_module', mod)
        return mod

    def __getattr__(self, attr):
        return getattr(self._load(), attr)

    def __setattr__(self, attr, value):
        # a test's monkeypatch of `service.abandon.x` patches the module
        setattr(self._load(), attr, value)

    def __delattr__(self, attr):
        delattr(self._load(), attr)

    def __repr__(self):
        return '<lazy module %s>' % self._name


def module(name):
    """`name` (a dotted module path), imported at its first use."""
    return _Lazy(name)
