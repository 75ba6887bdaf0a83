"""The dependency graph of a template's resources.

networkx is imported where a graph is built: it is a tenth of a second of
the start of every command, and most commands (show, list, events) build
none; validating a template (check) needs it only to describe a cycle."""

from converge import exception


def build(requires):
    """Return a DiGraph with an edge required -> requirer.

    :param requires: name -> iterable of names it depends on
    :raises InvalidTemplate: on a cycle, naming every resource on it
    """
    import networkx as nx
    g = nx.DiGraph()
    g.add_nodes_from(requires)
    g.add_edges_from((dep, name) for name, deps in requires.items()
                     for dep in deps)
    if not nx.is_directed_acyclic_graph(g):
        raise cycle_error(g)
    return g


def check(requires):
    """Raise what build() raises on a cycle; else return None, without
    building a graph (Kahn's algorithm over `requires`)."""
    dependents, waiting = {}, {}
    for name, deps in requires.items():
        deps = set(deps)
        waiting[name] = len(deps)
        for dep in deps:
            waiting.setdefault(dep, 0)
            dependents.setdefault(dep, []).append(name)
    ready = [n for n, count in waiting.items() if count == 0]
    done = 0
    while ready:
        done += 1
        for name in dependents.get(ready.pop(), ()):
            waiting[name] -= 1
            if waiting[name] == 0:
                ready.append(name)
    if done < len(waiting):
        build(requires)  # raises, naming every resource on the cycle


def cycle_error(g):
    import networkx as nx
    cycles = []
    for component in nx.strongly_connected_components(g):
        if len(component) == 1:
            node = next(iter(component))
            if not g.has_edge(node, node):
                continue
            cycles.append([node, node])
            continue
        sub = g.subgraph(component)
        edges = nx.find_cycle(sub)
        order = [u for u, _v in edges]
        seen = set(order)
        # name every resource in the knot, not just one loop through it
        order += sorted(component - seen)
        cycles.append(order + [order[0]] if not component - seen else order)
    parts = ['%s' % ' -> '.join(c) for c in cycles]
    names = sorted({n for c in cycles for n in c})
    return exception.InvalidTemplate(
        'Circular dependency between resources %s: %s'
        % (', '.join(names), '; '.join(parts)),
        path=['resources', cycles[0][0]])
