"""Find resources whose real state has drifted from the applied state."""

import dataclasses

from converge.engine import views
from converge.observers import observe as observe_mod


@dataclasses.dataclass
class Drift:
    name: str
    physical_id: str
    detail: str


def scan(engine, stack):
    """Observe every live resource of the stack; return what drifted."""
    found = []
    for name, row in sorted(views.resources(engine, stack).items()):
        if row.action in ('INIT', 'DELETE') or row.physical_id is None:
            continue
        cls = engine.plugin_class(row.type)
        if cls is None:
            continue
        plugin = engine.plugin(cls, row, row.properties or {}, stack)
        detail = observe_mod.drift(plugin, observe_mod.observe(plugin))
        if detail:
            found.append(Drift(name, row.physical_id, detail))
    return found
