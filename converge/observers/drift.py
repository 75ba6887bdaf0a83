"""Find resources whose real state has drifted from the applied state."""

import dataclasses

from converge import exception
from converge.engine import views


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
        try:
            observed = plugin.observe()
        except exception.CloudError as exc:
            found.append(Drift(name, row.physical_id, 'unobservable: %s'
                               % exc))
            continue
        if observed is None:
            found.append(Drift(name, row.physical_id, 'gone'))
            continue
        changed = plugin.drift(observed)
        if changed:
            found.append(Drift(name, row.physical_id, 'changed: ' +
                               ', '.join(sorted(changed))))
    return found
