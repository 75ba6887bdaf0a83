"""The benchmark's graphs, as HOT templates.

Each scenario gives a ``Scenario``: the template document, the dependency
dict ``{name: set(names)}`` it encodes, the per-resource action latency the
simulated cloud is set to (0 for logical resources), and a ``prepare`` step
run on the engine before the create.
"""

import dataclasses
import os

import yaml

from converge import template
from converge.bench import measure

HOT_VERSION = '2021-04-16'
LAYERS = 20
HUBS = 3
DEFAULT_N = {'wide': 1000, 'deep': 1000, 'fanin': 1000, 'latency': 40,
             'tripleo': 100, 'rolling': 1000, 'update': 1000}
DEFAULT_LATENCY = 0.5
#: the rolling scenario's default per-member update (rebuild) time: a
#: rebuild is minutes on a real cloud; 30 s keeps the run at ~6 minutes
DEFAULT_ROLLING_LATENCY = 30.0
#: the rolling scenario's batches when --batch is not given: a tenth of n
ROLLING_BATCHES = 10
#: the rolling scenario's image before and after the update
ROLLING_IMAGES = ('cirros-0.6.2', 'cirros-0.6.3')
#: the dependency shapes the latency scenario's servers can take
SHAPES = ('deep', 'wide')
DEFAULT_SHAPE = 'deep'


class Scenario:
    def __init__(self, name, n, doc, deps, latency=0.0, nodes=None,
                 shape=None, batch=0, image=None, transport=None):
        self.name, self.n, self.doc, self.deps = name, n, doc, deps
        self.latency = latency
        self.nodes = nodes
        self.shape = shape
        self.batch = batch
        self.image = image
        self.transport = transport

    def write(self, directory):
        """Write the template; return its path."""
        path = os.path.join(directory, 'bench-%s-%d.yaml' % (self.name,
                                                             self.n))
        with open(path, 'w') as f:
            yaml.safe_dump(self.doc, f, sort_keys=False)
        return path


@dataclasses.dataclass
class Written:
    """A scenario's template on disk, and all the engine's process needs to
    know of it: the bench builds the document in another process than the
    engine's, whose peak RSS it reports."""
    name: str
    n: int
    nodes: int
    latency: float
    chain: int          # resources on the longest dependency chain
    path: str
    shape: str = None   # the latency scenario's: deep or wide
    deployments: int = 0   # script runs the create should make (tripleo)
    batch: int = 0      # the rolling scenario's max_batch_size
    #: the tripleo servers' image and software_config_transport (None:
    #: the defaults, converge-agent's)
    image: str = None
    transport: str = None
    #: the deployments the create runs, by resource name (tripleo)
    deployment_names: tuple = ()

    @property
    def batches(self):
        """The rolling update's batches (0 for other scenarios)."""
        return -(-self.n // self.batch) if self.batch else 0

    @property
    def bound_s(self):
        """The lower bound of the timed traversal, if actions take time:
        the create's critical path; for the rolling scenario, its
        update's batches one after the other, each one member update
        long."""
        if not self.latency:
            return None
        if self.batch:
            return self.batches * self.latency
        return self.chain * self.latency

    @property
    def fault_op(self):
        """The simulated cloud's operation that takes `latency`: a
        create, or (rolling) the rebuild an image change makes."""
        return 'rebuild' if self.batch else 'create'

    @property
    def update_params(self):
        """The parameters of the timed update (rolling), else None."""
        return {'image': ROLLING_IMAGES[1]} if self.batch else None

    @property
    def steps(self):
        """The updates after the create, in order (the update
        scenario's UPDATE_STEPS; none for the other scenarios)."""
        return UPDATE_STEPS if self.name == 'update' else ()

    def bundle(self):
        return template.load_bundle(self.path)

    def prepare(self, engine):
        if self.latency:
            engine.clients.compute.set_fault(self.fault_op,
                                             latency=self.latency)

    def finish(self, engine):
        if self.latency:
            engine.clients.compute.clear_faults(self.fault_op)


def write(name, n, directory, latency=DEFAULT_LATENCY, shape=DEFAULT_SHAPE,
          batch=None, image=None, transport=None):
    """Generate a scenario and write its template into `directory`."""
    sc = make(name, n, latency=latency, shape=shape, batch=batch,
              image=image, transport=transport)
    names = tuple(sorted(
        k for k, r in sc.doc['resources'].items()
        if r['type'] == 'OS::Heat::SoftwareDeployment'))
    return Written(sc.name, sc.n, sc.nodes, sc.latency,
                   measure.longest_chain(sc.deps), sc.write(directory),
                   sc.shape, len(names), sc.batch, sc.image, sc.transport,
                   names)


def default_latency(name):
    """The simulated latency of scenario `name` when --latency is not
    given."""
    return DEFAULT_ROLLING_LATENCY if name == 'rolling' else DEFAULT_LATENCY


def default_batch(n):
    """The rolling scenario's batch size when --batch is not given."""
    return max(1, n // ROLLING_BATCHES)


# -- rolling ---------------------------------------------------------------
#
# One OS::Heat::ResourceGroup of n servers with a rolling update policy
# of `batch` members at a time (min_in_service n - batch: the update
# never takes more than a batch out of service). The bench creates it,
# then updates its image: each member is rebuilt in place (the server's
# image_update_policy REBUILD, a Nova rebuild), which the simulated cloud
# makes take `latency` seconds.

def rolling_doc(n, batch):
    return {
        'heat_template_version': HOT_VERSION,
        'description': '%d servers updated %d at a time' % (n, batch),
        'parameters': {'image': {'type': 'string',
                                 'default': ROLLING_IMAGES[0]}},
        'resources': {'group': {
            'type': 'OS::Heat::ResourceGroup',
            'update_policy': {'rolling_update': {
                'max_batch_size': batch,
                'min_in_service': max(0, n - batch)}},
            'properties': {
                'count': n,
                'resource_def': {
                    'type': 'OS::Nova::Server',
                    'properties': {'image': {'get_param': 'image'},
                                   'flavor': 'm1.tiny'}}}}}}


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


# -- tripleo ---------------------------------------------------------------
#
# A TripleO overcloud flattened into one stack (converge has no nested
# stacks yet): per node a server booted with the agent
# (user_data_format SOFTWARE_CONFIG), its per-node values, and the nine
# deployments TripleO applies to every node: real OS::Heat::SoftwareDeployments
# of script configs, run by the simulated servers' agents, each writing its
# inputs to a file on the server's disk and counting its runs there
# (RUNS_LOG). Then the five deployment steps, each a barrier across all
# nodes (step k starts on any node only when step k-1 finished on every
# node, as TripleO's <Role>Deployment_Step<k> groups do), kept as
# OS::Heat::None: ordering, not scripts.

STEPS = 5
PER_NODE_DEPLOYMENTS = ('Network', 'Hieradata', 'Hosts', 'AllNodes',
                        'Update', 'SshKnownHosts', 'PreNetwork', 'NodeTLS',
                        'PostDeploy')
#: the deployments whose config is not their role's <Role>Config: the
#: node's own, or the one all nodes share
OTHER_CONFIGS = {'Network': '{node}NetworkConfig',
                 'Hieradata': '{node}HieradataConfig',
                 'Hosts': 'AllNodesConfig', 'AllNodes': 'AllNodesConfig'}
#: on each server's disk: one line per script run, "<deployment> <action>"
RUNS_LOG = 'runs.log'
#: the image whose servers run Heat's own tooling (os-collect-config,
#: heat-config's script hook) instead of converge-agent
HEAT_AGENTS = 'heat-agents'
#: the tripleo servers' image when --image is not given (converge-agent)
DEFAULT_IMAGE = 'overcloud-full'
#: where a heat-agents server's scripts write: heat-config's script hook
#: runs them in the root's / (a tmpfs, gone at the next boot), so they go
#: to /var/lib, whose changes are kept on the disk under rootfs/var/lib
HEAT_AGENTS_DIR = '/var/lib'
#: where the bench reads each server's RUNS_LOG, relative to its disk:
#: converge-agent's scripts run in the disk itself; heat-agents' in
#: HEAT_AGENTS_DIR, on the disk under rootfs/
RUNS_LOGS = (RUNS_LOG, 'rootfs' + HEAT_AGENTS_DIR + '/' + RUNS_LOG)
#: Heat's config transports a tripleo server may poll with, and the
#: signal transport its deployments then use (Heat's pairs)
TRANSPORTS = {'POLL_TEMP_URL': 'TEMP_URL_SIGNAL',
              'POLL_SERVER_CFN': 'CFN_SIGNAL',
              'POLL_SERVER_HEAT': 'HEAT_SIGNAL'}
#: os-collect-config's polling interval on the tripleo servers of a
#: Heat transport (the metadata's os-collect-config.polling_interval, as
#: a template sets it): its own default, 30 s, would add up to 30 s to
#: every wave of deployments of a create that takes seconds
POLLING_INTERVAL = 5
#: the script of every deployment: its inputs to a file of its own, and one
#: line in RUNS_LOG (the bench counts them: every deployment ran once).
#: Shell builtins only: the scripts' own processes are not what is measured
SCRIPT = """#!/bin/sh
printf 'deploy_action=%%s\\ndeploy_server_id=%%s\\nnode_name=%%s\\nrole_name=%%s\\n' \\
  "$deploy_action" "$deploy_server_id" "$node_name" "$role_name" \\
  > "inputs-$deploy_resource_name"
echo "$deploy_resource_name $deploy_action" >> %s
echo "$deploy_resource_name done" > "$heat_outputs_path.result"
""" % RUNS_LOG  # noqa: E501 (the script as it runs)


def role_sizes(nodes):
    """nodes split over the roles: 3 controllers (fewer when nodes < 3),
    then 4/5 of the rest computes and 1/5 storage."""
    controllers = min(3, nodes)
    rest = nodes - controllers
    storage = rest // 5
    return [('Controller', controllers), ('Compute', rest - storage),
            ('CephStorage', storage)]


def _in_dir(body, workdir):
    """`body` (a script, or a str_replace of one) run in `workdir`."""
    if workdir is None:
        return body
    cd = 'cd %s || exit 1\n' % workdir
    if isinstance(body, str):
        head, rest = body.split('\n', 1)
        return '%s\n%s%s' % (head, cd, rest)
    inner = body['str_replace']
    return {'str_replace': dict(inner, template=_in_dir(inner['template'],
                                                          workdir))}


def _script(data=None):
    """A script config's body: SCRIPT, and when the config carries data
    (the node's network or hieradata, the list of all nodes: a
    str_replace) a file of that data on the server, as a hook would
    write it. The data goes in one single-quoted printf: every value the
    bench puts there (addresses, host names, roles, RandomString's
    letters and digits) is free of quotes, and a shell's `read` loop
    over a here-document reads a pipe one byte per system call (~10 ms
    for the 1,000-line list of all nodes, more than the hook's own
    start), which would measure the shell, not the engine."""
    if data is None:
        return SCRIPT
    return {'str_replace': {
        'template': SCRIPT + "printf '%s\\n' '$data' "
                             '> "data-$deploy_resource_name"\n',
        'params': {'$data': data}}}


def _config_of(body):
    return {'group': 'script', 'config': body,
            'inputs': [{'name': 'node_name'}, {'name': 'role_name'}],
            'outputs': [{'name': 'result'}]}


def tripleo_doc(nodes, knobs=False, image=None, transport=None):
    """The tripleo scenario's document; with `knobs`, the update
    scenario's: the parameters NODE_PARAM and ROLE_PARAM too, whose
    defaults leave every resource's value as it is without them. Its
    servers boot from `image` (DEFAULT_IMAGE) with the
    software_config_transport `transport` (one of TRANSPORTS, its
    deployments then signalling with the transport's pair; None:
    converge-agent's)."""
    if transport is not None and transport not in TRANSPORTS:
        raise ValueError('unknown transport %r (one of %s)' % (
            transport, ', '.join(TRANSPORTS)))
    workdir = HEAT_AGENTS_DIR if image == HEAT_AGENTS else None
    res = {}

    def _config(body):
        return _config_of(_in_dir(body, workdir))

    def add(name, rtype, props=None, depends_on=None):
        r = {'type': rtype}
        if props:
            r['properties'] = props
        if depends_on:
            r['depends_on'] = depends_on
        res[name] = r

    names = []  # per node: its resource-name prefix
    for role, count in role_sizes(nodes):
        if not count:
            continue
        data = 'role: %s' % role
        if knobs and role == UPDATE_ROLE:
            data = {'list_join': ['', [data, {'get_param': ROLE_PARAM}]]}
        add(role + 'Config', 'OS::Heat::SoftwareConfig',
            _config(_script(data)))
        for i in range(count):
            node = '%s%d' % (role, i)
            names.append(node)
            add(node + 'Hostname', 'OS::Heat::Value',
                {'value': '%s-%d' % (role.lower(), i)})
            add(node + 'Password', 'OS::Heat::RandomString', {'length': 16})
            add(node + 'Port', 'OS::Heat::Value',
                {'value': '192.0.%d.%d' % (len(names) // 250,
                                           len(names) % 250)})
            add(node + 'UserData', 'OS::Heat::SoftwareConfig',
                {'group': 'ungrouped',
                 'config': {'str_replace': {
                     'template': '#cloud-config\nhostname: $h\n',
                     'params': {'$h': {'get_attr': [node + 'Hostname',
                                                    'value']}}}}})
            server = {'name': {'get_attr': [node + 'Hostname', 'value']},
                      'image': image or DEFAULT_IMAGE, 'flavor': 'baremetal',
                      'user_data_format': 'SOFTWARE_CONFIG',
                      'user_data': {'get_resource': node + 'UserData'},
                      'metadata': {'role': role,
                                   'port': {'get_attr': [node + 'Port',
                                                         'value']}}}
            if transport:
                server['software_config_transport'] = transport
                server['metadata']['os-collect-config'] = {
                    'polling_interval': POLLING_INTERVAL}
            add(node, 'OS::Nova::Server', server)
            add(node + 'NetworkConfig', 'OS::Heat::SoftwareConfig',
                _config(_script({'get_attr': [node + 'Port', 'value']})))
            hieradata = {'template': 'role: %s\npassword: $p\n' % role,
                         'params': {'$p': {'get_attr': [node + 'Password',
                                                        'value']}}}
            if knobs and node == UPDATE_NODE:
                hieradata['template'] += '$extra'
                hieradata['params']['$extra'] = {'get_param': NODE_PARAM}
            add(node + 'HieradataValues', 'OS::Heat::Value',
                {'value': {'str_replace': hieradata}})
            add(node + 'HieradataConfig', 'OS::Heat::SoftwareConfig',
                _config(_script({'get_attr': [node + 'HieradataValues',
                                              'value']})))
    # what every node's deployments share: the lists of all nodes
    add('AllNodesHosts', 'OS::Heat::Value',
        {'value': {'list_join': ['\n', [
            {'get_attr': [n + 'Hostname', 'value']} for n in names]]}})
    add('AllNodesConfig', 'OS::Heat::SoftwareConfig',
        _config(_script({'get_attr': ['AllNodesHosts', 'value']})))
    for node in names:
        server = {'get_resource': node}
        for d in PER_NODE_DEPLOYMENTS:
            config = OTHER_CONFIGS.get(
                d, node.rstrip('0123456789') + 'Config').format(node=node)
            props = {'server': server, 'config': {'get_resource': config},
                     'input_values': {
                         'node_name': {'get_attr': [node + 'Hostname',
                                                    'value']},
                         'role_name': node.rstrip('0123456789')}}
            if transport:
                props['signal_transport'] = TRANSPORTS[transport]
            add(node + d + 'Deployment', 'OS::Heat::SoftwareDeployment',
                props)
    for k in range(1, STEPS + 1):
        for node in names:
            before = (['Step%dComplete' % (k - 1)] if k > 1 else
                      [node + d + 'Deployment'
                       for d in PER_NODE_DEPLOYMENTS])
            add('%sDeployment_Step%d' % (node, k), 'OS::Heat::None',
                {'server': {'get_resource': node}, 'step': k},
                depends_on=before)
        add('Step%dComplete' % k, 'OS::Heat::None',
            depends_on=['%sDeployment_Step%d' % (n, k) for n in names])
    doc = {'heat_template_version': HOT_VERSION,
           'description': 'TripleO-like overcloud of %d nodes' % nodes,
           'resources': res}
    if knobs:
        doc['parameters'] = {
            NODE_PARAM: {'type': 'string', 'default': '',
                         'description': 'more hieradata of %s only'
                                        % UPDATE_NODE},
            ROLE_PARAM: {'type': 'string', 'default': '',
                         'description': 'more of the %s role\'s script '
                                        'data' % UPDATE_ROLE}}
    return doc


# -- update ----------------------------------------------------------------
#
# The tripleo stack (tripleo_doc with its knobs), created, then updated
# four times, one after the other, each a traversal of its own: with the
# same template and parameters (noop); with NODE_PARAM changed, which
# only UPDATE_NODE's HieradataValues reads (the change reaches its
# HieradataConfig by get_attr, then its HieradataDeployment, one script
# run); with ROLE_PARAM changed too, which UPDATE_ROLE's Config reads
# (every deployment of every node of that role using it runs again:
# ROLE_DEPLOYMENTS of each); with the same parameters and converge=True
# (Heat's --converge: nothing changes, every resource is observed).

UPDATE_ROLE = 'Compute'
UPDATE_NODE = UPDATE_ROLE + '0'
NODE_PARAM = UPDATE_NODE + 'ExtraHieradata'
ROLE_PARAM = UPDATE_ROLE + 'ExtraConfig'
#: the update scenario's smallest size: UPDATE_NODE must exist
#: (role_sizes: the first 3 nodes are controllers)
UPDATE_MIN_NODES = 4
#: the deployments of each node that use its role's Config
ROLE_DEPLOYMENTS = tuple(d for d in PER_NODE_DEPLOYMENTS
                         if d not in OTHER_CONFIGS)
_ONE_NODE = {NODE_PARAM: 'extra: 1\n'}
_ONE_ROLE = dict(_ONE_NODE, **{ROLE_PARAM: ' (extra: 1)'})
#: the update scenario's updates: (step, parameters, converge)
UPDATE_STEPS = (
    ('noop', {}, False),
    ('one_node', _ONE_NODE, False),
    ('one_role', _ONE_ROLE, False),
    ('converge', _ONE_ROLE, True),
)


def deps_of(doc):
    """The dependency dict of a HOT document, as the engine reads it."""
    defn = template.StackDefinition(template.Bundle(doc, files={}))
    return defn.dependencies()


def make(name, n, latency=DEFAULT_LATENCY, shape=DEFAULT_SHAPE, batch=None,
         image=None, transport=None):
    """The scenario `name` of `n` resources (`nodes` for tripleo, group
    members for rolling); `latency` and `shape` are the latency
    scenario's, `latency` and `batch` the rolling one's, `image` and
    `transport` the tripleo and update ones' (their servers')."""
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
        if shape not in SHAPES:
            raise ValueError('unknown latency shape %r' % shape)
        deps = deep_deps(n) if shape == 'deep' else wide_deps(n)
        doc = hot(deps, 'OS::Nova::Server',
                  {'image': 'cirros', 'flavor': 'm1.tiny'})
        return Scenario(name, n, doc, deps, latency=latency, shape=shape)
    if name in ('tripleo', 'update'):
        doc = tripleo_doc(n, knobs=name == 'update', image=image,
                          transport=transport)
        return Scenario(name, len(doc['resources']), doc, deps_of(doc),
                        nodes=n, image=image, transport=transport)
    if name == 'rolling':
        batch = batch or default_batch(n)
        return Scenario(name, n, rolling_doc(n, batch), {'group': set()},
                        latency=latency, batch=batch)
    raise ValueError('unknown scenario %r' % name)


NAMES = ('wide', 'deep', 'fanin', 'latency', 'tripleo', 'rolling',
         'update')
