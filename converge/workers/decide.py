"""What a unit of work should do: a pure function of desired and observed."""

CREATE, UPDATE, REPLACE, DELETE, CHECK, NOTHING = (
    'CREATE', 'UPDATE', 'REPLACE', 'DELETE', 'CHECK', 'NOTHING')
SUSPEND, RESUME, SNAPSHOT = 'SUSPEND', 'RESUME', 'SNAPSHOT'


def for_update(stack_action, row, plugin, observed):
    """Decide for an update node.

    :param row: the resource row the node settled on
    :param plugin: the plug-in built with the desired properties
    :param observed: what plugin.observe() saw (None: does not exist)
    """
    if stack_action in (CHECK, SUSPEND, RESUME, SNAPSHOT):
        return stack_action
    never_created = row.action == 'INIT' or (
        row.action == 'CREATE' and row.status != 'COMPLETE')
    if never_created or observed is None:
        return CREATE
    prior = row.properties or {}
    if prior != plugin.properties and plugin.needs_update(prior):
        return REPLACE if plugin.needs_replace(prior) else UPDATE
    # an action that failed, or did not finish (its unit died, or its wait
    # was stopped), may have changed the real thing halfway: do it again
    if row.status in ('FAILED', 'IN_PROGRESS') or plugin.changed() or \
            plugin.drift(observed):
        return UPDATE
    return NOTHING


def for_cleanup(row, is_current):
    """Decide for a cleanup node: delete every row that is not current."""
    return NOTHING if is_current else DELETE
