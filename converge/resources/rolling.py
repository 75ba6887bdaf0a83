"""Rolling updates: Heat's batch arithmetic, and the in-place plan a
converge group follows.

Heat's (heat/scaling/rolling_update.py, as ../shared/notes describes it)
meets ``min_in_service`` by surging: the group grows above its target
with new members, then shrinks back. That cannot work where capacity is
fixed (bare metal), so a converge group updates its members in place, a
batch at a time, never taking more than ``count - min_in_service`` out
of service at once (`in_place_batches`). Heat's arithmetic is kept here,
tested against Heat's own tables, as the reference for the surge mode
still to come.
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


def in_place_batches(names, size, batch_size, min_in_service):
    """`names` (the members to update, in the order they go) of a group
    of `size` members cut into batches, in place: at most `batch_size` at
    once, and never fewer than `min_in_service` members of the group in
    service (at least one member goes per batch: a minimum of the whole
    group still moves, one at a time)."""
    room = max(1, min(batch_size, size - min_in_service))
    return [list(names[i:i + room]) for i in range(0, len(names), room)]


def update_order(names):
    """Heat's ResourceGroup order: the highest index first."""
    return sorted(names, key=lambda n: (int(n) if n.isdigit() else -1, n),
                  reverse=True)
