"""Observe a whole stack, nested stacks included, without acting: what is
really there, recorded on each resource with when it was seen and how it
had drifted from what was applied.

One pass asks each driver once for all of its resources where the type
can (``observe_many``: a server list, not a call per server). A resource
whose drift appears or goes away gets an event (OBSERVE DRIFTED, OBSERVE
IN_SYNC), so drift is seen in `stack event list` as well as in
`stack drift` and `stack resource list --drift`.
"""

import dataclasses

from converge.db import api
from converge.engine import views
from converge.resources import observe as observe_mod

#: a resource in one of these actions is not compared: never made, being
#: deleted, or suspended on purpose (its server is SHUTOFF by design)
_NOT_COMPARED = ('INIT', 'DELETE', 'SUSPEND')


@dataclasses.dataclass
class Drift:
    name: str
    stack_name: str
    physical_id: str
    detail: str

    @property
    def kind(self):
        """gone, changed or unobservable."""
        return self.detail.split(':', 1)[0]


def scan(engine, stack, record=True, checks=None):
    """Observe every live resource of `stack` and of the stacks nested in
    it; record what was seen (unless `record` is false) and return what
    drifted, parents' resources first. `checks`, a list, gets the
    resources observed by running a CHECK config on their servers (a
    software deployment's), which only a stack check can do."""
    items, memo = [], {}
    for st in tree(engine, stack):
        for name, row in sorted(views.resources(engine, st).items()):
            if row.action in _NOT_COMPARED or row.physical_id is None or \
                    row.status == 'IN_PROGRESS':  # a unit is on it
                continue
            cls = engine.plugin_class(row.type)
            if cls is None or not cls.observed_drift:
                continue
            plugin = engine.plugin(cls, row, row.properties or {}, st)
            items.append((st, row, plugin))
            if checks is not None and _runs_check(plugin, memo):
                checks.append((st.name, row.name))
    seen = observe_mod.observe_all([plugin for _, _, plugin in items])
    found, records, events = [], [], []
    for st, row, plugin in items:
        observation = seen[id(plugin)]
        detail = observe_mod.drift(plugin, observation)
        if detail:
            found.append(Drift(row.name, st.name, row.physical_id, detail))
        if detail != row.drift:
            events.append(api.event(
                st.id, None, row.name, api.shown_type(row), row.physical_id,
                'OBSERVE',
                'DRIFTED' if detail else 'IN_SYNC',
                detail or 'matches what was applied again'))
        state = observe_mod.jsonable(observation.state) \
            if observation.error is None else row.observed
        records.append((row.id, row.atomic_key, state, detail))
    if record and records:
        with engine.db.begin() as conn:
            api.resources_observed(conn, records)
            if events:
                api.events_add(conn, *events)
    return found


def _runs_check(plugin, memo):
    """Whether the plug-in runs a CHECK config, asked once per config
    and actions (thousands of deployments share a few configs)."""
    runs_check = getattr(plugin, 'runs_check', None)
    if runs_check is None:
        return False
    props = plugin.properties
    key = (props.get('config'), tuple(props.get('actions') or ()))
    if key not in memo:
        try:
            memo[key] = runs_check()
        except Exception:   # its config is gone: nothing to run
            memo[key] = False
    return memo[key]


def tree(engine, stack):
    """The stack and its live nested stacks, parents first, as records."""
    with engine.db.read() as s:
        ids = api.stack_tree(s, stack.id)
    with engine.db.connect() as conn:
        return [stack] + [st for st in (api.stack_record(conn, i)
                                        for i in ids[1:]) if st]
