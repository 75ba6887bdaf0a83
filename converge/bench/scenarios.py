"""The benchmark's graphs, as HOT templates.

Each scenario gives a ``Scenario``: the template document, the dependency
dict ``{name: set(names)}`` it encodes, the per-resource action latency the
simulated cloud is set to (0 for logical resources), and a ``prepare`` step
run on the engine before the create.
"""

import os

import yaml

from converge import template

HOT_VERSION = '2021-04-16'
LAYERS = 20
HUBS = 3
DEFAULT_N = {'wide': 1000, 'deep': 1000, 'fanin': 1000, 'latency': 40}
DEFAULT_LATENCY = 0.5


class Scenario:
    def __init__(self, name, n, doc, deps, latency=0.0):
        self.name, self.n, self.doc, self.deps = name, n, doc, deps
        self.latency = latency

    def prepare(self, engine):
        if self.latency:
            engine.clients.compute.set_fault('create', latency=self.latency)

    def finish(self, engine):
        if self.latency:
            engine.clients.compute.clear_faults('create')

    def write(self, directory):
        """Write the template; return its path."""
        path = os.path.join(directory, 'bench-%s-%d.yaml' % (self.name,
                                                             self.n))
        with open(path, 'w') as f:
            yaml.safe_dump(self.doc, f, sort_keys=False)
        return path

    def bundle(self, directory):
        return template.load_bundle(self.write(directory))


def layer_sizes(n, layers=LAYERS):
    """n resources over `layers` layers (fewer when n is smaller), sizes
    differing by at most one, bigger layers first."""
    if n <= 0:
        return []
    layers = min(layers, n)
    base, extra = divmod(n, layers)
    return [base + (1 if i < extra else 0) for i in range(layers)]


def layered_names(n, layers=LAYERS):
    return [['r%02d_%d' % (layer, i) for i in range(size)]
            for layer, size in enumerate(layer_sizes(n, layers))]


def wide_deps(n):
    return {'r%d' % i: set() for i in range(n)}


def deep_deps(n, layers=LAYERS):
    """Each resource needs one resource of the layer before."""
    deps = {}
    grid = layered_names(n, layers)
    for layer, names in enumerate(grid):
        for i, name in enumerate(names):
            prev = grid[layer - 1] if layer else []
            deps[name] = {prev[i % len(prev)]} if prev else set()
    return deps


def fanin_deps(n, layers=LAYERS, hubs=HUBS):
    """Each resource needs every one of the first `hubs` resources (the
    hubs) of the layer before."""
    deps = {}
    grid = layered_names(n, layers)
    for layer, names in enumerate(grid):
        prev = grid[layer - 1][:hubs] if layer else []
        for name in names:
            deps[name] = set(prev)
    return deps


def hot(deps, resource_type='OS::Heat::None', base_props=None):
    """A HOT document with one resource per key of ``deps``; each needs its
    dependencies through get_resource in a property."""
    resources = {}
    for name in deps:
        props = dict(base_props or {})
        needs = sorted(deps[name])
        if needs:
            refs = {'dep%d' % i: {'get_resource': d}
                    for i, d in enumerate(needs)}
            if resource_type == 'OS::Nova::Server':
                props['metadata'] = refs
            else:
                props.update(refs)
        res = {'type': resource_type}
        if props:
            res['properties'] = props
        resources[name] = res
    return {'heat_template_version': HOT_VERSION, 'resources': resources}


def make(name, n, latency=DEFAULT_LATENCY):
    if name == 'wide':
        deps = wide_deps(n)
        return Scenario(name, n, hot(deps), deps)
    if name == 'deep':
        deps = deep_deps(n)
        return Scenario(name, n, hot(deps), deps)
    if name == 'fanin':
        deps = fanin_deps(n)
        return Scenario(name, n, hot(deps), deps)
    if name == 'latency':
        deps = deep_deps(n)
        doc = hot(deps, 'OS::Nova::Server',
                  {'image': 'cirros', 'flavor': 'm1.tiny'})
        return Scenario(name, n, doc, deps, latency=latency)
    raise ValueError('unknown scenario %r' % name)


NAMES = ('wide', 'deep', 'fanin', 'latency')
