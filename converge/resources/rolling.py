"""Rolling updates: Heat's batch arithmetic, and the in-place plan a
converge group follows.

Heat's (heat/scaling/rolling_update.py, as ../shared/notes describes it)
meets ``min_in_service`` by surging: the group grows above its target
with new members, then shrinks back. That cannot work where capacity is
fixed (bare metal), so a converge group updates its members in place, a
batch at a time, never taking more than ``count - min_in_service`` out
of service at once (`in_place_batches`). Heat's arithmetic is kept here,
tested against Heat's own tables, and serves the group's ``surge`` mode
(`surge_batches`), where capacity allows extra members.
"""


def needs_update(target, current, updated):
    """Whether another batch is needed (Heat)."""
    return not (updated >= current and current == target)


def next_batch(target, current, updated, batch_size, min_in_service):
    """(capacity after the batch, members on the new definition in it)
    (Heat)."""
    minimum = min(min_in_service, target, current)
    size = min(batch_size, max(target - updated, 0))
    return size + max(min(current, target - size), minimum), size


def heat_batches(target, current, batch_size, min_in_service,
                 group='resource'):
    """Heat's whole sequence of (capacity, new members) batches: a
    ResourceGroup ('resource') does not count surge members as updated,
    an InstanceGroup or AutoScalingGroup ('instance') does."""
    updated, out = 0, []
    while needs_update(target, current, updated):
        capacity, size = next_batch(target, current, updated, batch_size,
                                    min_in_service)
        out.append((capacity, size))
        if group == 'resource':
            updated += size - max(capacity - max(current, target), 0)
        else:
            updated += size
        current = capacity
    return out


def in_place_batches(names, size, batch_size, min_in_service, canary=0,
                     domain=None):
    """`names` (the members to update, in the order they go) of a group
    of `size` members cut into batches, in place: at most `batch_size` at
    once, and never fewer than `min_in_service` members of the group in
    service (at least one member goes per batch: a minimum of the whole
    group still moves, one at a time).

    :param canary: the size of the first batch, when not 0 (at most the
        room a batch has)
    :param domain: callable(name) -> the member's failure domain, or
        None: no two members of one domain go in one batch (a batch takes
        the next names in order whose domains it does not hold yet; a
        domain of None is a domain of its own)
    """
    room = max(1, min(batch_size, size - min_in_service))
    left, batches = list(names), []
    while left:
        limit = min(canary, room) if canary and not batches else room
        batch, held, rest = [], set(), []
        for name in left:
            where = domain(name) if domain else None
            if len(batch) < limit and (where is None or where not in held):
                batch.append(name)
                if where is not None:
                    held.add(where)
            else:
                rest.append(name)
        batches.append(batch)
        left = rest
    return batches


ORDERS = ('highest_index', 'lowest_index', 'oldest', 'property')


def sort_key(name):
    """Member names in index order ("2" before "10")."""
    return (int(name) if name.isdigit() else -1, name)


def update_order(names, order='highest_index', key=None):
    """The order members go in: Heat's ResourceGroup order (the highest
    index first), the lowest index first, or by `key` (callable(name) ->
    a value; ``oldest``: its creation time, ``property``: the value of a
    member property), ties by index."""
    if order == 'highest_index':
        return sorted(names, key=sort_key, reverse=True)
    if order == 'lowest_index' or key is None:
        return sorted(names, key=sort_key)

    def by_key(name):
        value = key(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            rank = (0, value, '')
        else:  # numbers before strings; None last
            rank = (1 if value is not None else 2, 0,
                    '' if value is None else str(value))
        return rank + sort_key(name)
    return sorted(names, key=by_key)


def budget(max_failures, total):
    """How many of `total` members may fail before a rollout halts:
    ``max_failures`` as a count (3) or a percentage of them ("20%",
    rounded down)."""
    text = str(max_failures or 0).strip()
    if text.endswith('%'):
        return int(total * float(text[:-1]) // 100)
    return int(text)


def surge_batches(names, target, batch_size, min_in_service, spare):
    """Heat's surge, as batches of names: `names` (every member, in the
    order they go) updated with extra members from `spare` (the names new
    members take, in order) created on the new definition for the
    duration, as Heat's ResourceGroup batches say (`heat_batches`). Each
    batch: (the names it moves to the new definition, the group's
    capacity during it); a batch that only shrinks the group back is left
    to the end of the rollout."""
    out, todo, made = [], list(names), 0
    for capacity, size in heat_batches(target, target, batch_size,
                                       min_in_service):
        extra = max(capacity - target, 0)
        fresh = list(spare[made:extra]) if extra > made else []
        made = max(made, extra)
        take = max(size - len(fresh), 0)
        moved = fresh + todo[:take]
        todo = todo[take:]
        if moved:
            out.append((moved, capacity))
    return out


def instance_surge(names, batch_size, min_in_service):
    """Heat's InstanceGroup and AWS AutoScalingGroup rolling update, as
    batches: `names` (every member, in the order they go: failed first,
    then the oldest). Where ``min_in_service`` and a batch do not fit in
    the group, Heat grows it by new members on the new definition and,
    once the last batch is done, removes as many of the oldest (`Heat's
    next_batch` reaches its peak capacity at once and holds it to the
    end). The members to be removed are not updated first, as Heat's
    arithmetic does: the same members are kept, created and removed,
    and every member left is on the new definition.

    Returns (how many new members, the members removed at the end, the
    batches of the others updated in place; the first batch is the one
    the new members go with, so it holds as many fewer)."""
    size = len(names)
    if not size:
        return 0, [], []
    batch = min(batch_size, size)
    extra = max(0, batch + min(min_in_service, size) - size)
    gone, kept = list(names[:extra]), list(names[extra:])
    first = batch - extra
    batches = [kept[:first]] + [kept[i:i + batch]
                                for i in range(first, len(kept), batch)]
    return extra, gone, batches
