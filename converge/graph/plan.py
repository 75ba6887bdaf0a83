"""The node graph of one traversal.

Two kinds of node, as in Heat's convergence:

- ``u:<name>`` (update): make the resource named ``name`` match the
  template: create, update in place, or replace.
- ``c:<row id>:<name>`` (cleanup): delete that resource row unless it is
  the one its update node settled on. Every existing row gets one. The
  name is in the key so a worker knows which resource to lock before it
  reads anything.

Edges: an update node follows the update nodes of what it requires; a
row's cleanup follows its own name's update; a row's cleanup precedes the
cleanup of what it required (dependents go first) and of the row it
replaced. So on a replacement the new resource is created, dependents are
switched over, and only then is the old one deleted.
"""

import collections
import dataclasses

STACK_NODE = 'stack'

#: a node with more inputs than this counts them in shards ...
FAN_IN = 32
#: ... this many: each input counts down one shard, and each shard that
#: reaches zero counts down the node. An input's count and its own result
#: commit together, holding the counted row's lock until the commit's WAL
#: flush (~2.6 ms here): on one row, the 2,000 leaves of a wide stack
#: ended at most ~350 a second, whatever the number of workers
SHARDS = 16
_SHARD = '#'


def update_key(name):
    return 'u:' + name


def cleanup_key(row_id, name):
    return 'c:%d:%s' % (row_id, name)


def node_of(row):
    """The node a resource row in progress is being worked on as: its
    cleanup node while it is deleted, else its name's update node."""
    if row.action == 'DELETE':
        return cleanup_key(row.id, row.name)
    return update_key(row.name)


def is_update(key):
    return key.startswith('u:')


def resource_name(key):
    """The name of the resource a node acts on."""
    if key.startswith('u:'):
        return key[2:]
    return key.split(':', 2)[2]


def shard_key(shard, node):
    """How an input names the shard of `node` it counts down."""
    return '%s%d:%s' % (_SHARD, shard, node)


def is_shard(key):
    return key.startswith(_SHARD)


def split_shard(key):
    """(node, shard) of a shard key, else None."""
    if not is_shard(key):
        return None
    shard, node = key[1:].split(':', 1)
    return node, int(shard)


def shard_fan_in(dependents, fan_in=FAN_IN, shards=SHARDS):
    """Spread the inputs of every node with more than `fan_in` of them
    over `shards` shards, in turn.

    :param dependents: node -> the nodes that wait for it (changed in
        place: an input of a wide node names its shard instead)
    :returns: {wide node: {shard: inputs}}; such a node waits for its
        shards, one count each
    """
    inputs = collections.defaultdict(list)
    for key, after in dependents.items():
        for node in after:
            inputs[node].append(key)
    counts = {}
    for node, keys in inputs.items():
        if len(keys) <= fan_in:
            continue
        counts[node] = collections.Counter()
        for i, key in enumerate(keys):
            shard = i % shards
            counts[node][shard] += 1
            after = dependents[key]
            after[after.index(node)] = shard_key(shard, node)
    return counts


@dataclasses.dataclass
class Row:
    """What planning needs to know of an existing resource row."""

    id: int
    name: str
    #: ids of the rows it depended on when last converged
    requires: tuple = ()
    replaces: int | None = None


@dataclasses.dataclass
class Node:
    resource_id: int | None
    predecessors: int = 0
    dependents: list = dataclasses.field(default_factory=list)


class Plan:
    def __init__(self):
        self.nodes = {}

    def add(self, key, resource_id):
        self.nodes[key] = Node(resource_id)

    def edge(self, before, after):
        """`after` waits for `before`."""
        self.nodes[before].dependents.append(after)
        self.nodes[after].predecessors += 1

    @property
    def leaves(self):
        return [k for k, n in self.nodes.items() if n.predecessors == 0]

    @property
    def roots(self):
        return [k for k, n in self.nodes.items() if not n.dependents]


def make(requires, rows, selected, reverse=False):
    """Build the plan.

    :param requires: desired name -> set of names it requires (the
        template's dependency graph; empty for a delete)
    :param rows: existing resource rows (Row), all versions
    :param selected: name -> row id each update node starts from
    :param reverse: update nodes in the reverse order, dependents first
        (a suspend, as Heat orders it)
    """
    plan = Plan()
    for name in requires:
        plan.add(update_key(name), selected.get(name))
    for name, deps in requires.items():
        for dep in deps:
            if reverse:
                plan.edge(update_key(name), update_key(dep))
            else:
                plan.edge(update_key(dep), update_key(name))

    keys = {row.id: cleanup_key(row.id, row.name) for row in rows}
    for row in rows:
        plan.add(keys[row.id], row.id)
    for row in rows:
        c = keys[row.id]
        if row.name in requires:
            plan.edge(update_key(row.name), c)
        for dep in set(row.requires) | {row.replaces}:
            if dep in keys and dep != row.id:
                plan.edge(c, keys[dep])
    _check_acyclic(plan)
    return plan


def _check_acyclic(plan):
    pending = {k: n.predecessors for k, n in plan.nodes.items()}
    ready = collections.deque(k for k, v in pending.items() if v == 0)
    seen = 0
    while ready:
        key = ready.popleft()
        seen += 1
        for dep in plan.nodes[key].dependents:
            pending[dep] -= 1
            if pending[dep] == 0:
                ready.append(dep)
    if seen != len(plan.nodes):
        stuck = sorted(k for k, v in pending.items() if v > 0)
        raise ValueError('traversal plan has a cycle through %s'
                         % ', '.join(stuck[:20]))
