"""Which resources an update visits: the change set, from the seeds.

A graph function, knowing nothing of resources: given what each name
requires, which of those it reads (its inputs: get_attr, get_resource;
the rest is order only: depends_on) and the seeds (names whose own
definition or state asks for a visit, engine/changes.py), it returns every
name the update must visit, each with why:

- a seed, for its own reason;
- a name that reads a visited one: what it reads may change;
- a name that is only ordered between two visited ones (a depends_on
  chain through it): visited so that the order of the two still holds
  (it decides "nothing" quickly), since a name that is not visited starts
  done and its dependents do not wait for it;
- a name ordered right after a visited one (depends_on): should that one
  be replaced, what it requires is recorded anew, so a later delete
  still goes dependents first. One step only: its own row stays.

Everything else keeps what it last converged to: its node starts done.
"""

import collections


def expand(requires, reads, seeds):
    """{name: why} of the names to visit.

    :param requires: name -> names it requires (its inputs and order)
    :param reads: name -> names it reads (a subset of its requires)
    :param seeds: {name: why} of the names that must be visited
    """
    why = dict(seeds)
    readers = collections.defaultdict(list)
    for name, inputs in reads.items():
        for dep in inputs:
            readers[dep].append(name)
    queue = collections.deque(why)
    while queue:
        name = queue.popleft()
        for reader in readers.get(name, ()):
            if reader not in why:
                why[reader] = 'reads %s, which is visited' % name
                queue.append(reader)
    if len(why) > 1:
        for name in _between(requires, set(why)):
            why[name] = 'comes between resources that are visited ' \
                        '(depends_on), so their order holds'
    # what is ordered right after a visited one: a replacement there
    # leaves it requiring the old row, which is deleted before it is
    # then; its visit records the new one (one step: its own row does
    # not change)
    visited = set(why)
    for name, deps in requires.items():
        if name not in visited:
            after = sorted(deps & visited)
            if after:
                why[name] = 'depends on %s, which is visited' % after[0]
    return why


def _between(requires, visited):
    """Names not in `visited` on a path from one visited name to another."""
    dependents = collections.defaultdict(list)
    for name, deps in requires.items():
        for dep in deps:
            dependents[dep].append(name)
    after = _reach(visited, dependents)    # what comes after a visited one
    before = _reach(visited, requires)     # what comes before one
    return (after & before) - visited


def _reach(start, edges):
    seen, stack = set(), list(start)
    while stack:
        for nxt in edges.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen
