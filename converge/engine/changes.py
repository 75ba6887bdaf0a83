"""An update's change set: which resources it visits.

An update costs what it changes, not what the stack holds. A resource is
visited (gets a unit of work) when

- it is new, or an earlier version of it is still to be cleaned up;
- its last action did not complete (a failed or interrupted update, a
  failed check): it is converged again;
- its definition's digest (template/definition.py: its snippet, the
  parameter values and files it reads, its type) is not the one its row
  last converged to (stored with the row by the unit of work);
- it was observed drifted (the drift recorded on its row by an
  observer's pass, `stack drift` or a dry run): the update repairs it;
- its type is always visited (`always_visit`: state its definition does
  not describe, as a fact store's);
- it reads a resource that is visited, is ordered between two, or right
  after one (graph/changes.py).

Every other resource keeps what it has: its node starts done. Removed
resources are cleaned up as always. `stack update --converge`, `stack
converge`, check, suspend and resume visit everything (traversal.start
asks only for a plain update). A new kind of edge joins the change set by
being a read: a function that reads another resource adds it to the
reader's ``reads`` (template/functions.py), and a nested stack's outputs
are its owner's attributes, read with get_attr like any other.
"""

import collections
import dataclasses

from converge import breakpoints
from converge.graph import changes as graph_changes

#: a row whose last action is one of these, and COMPLETE, holds what its
#: digest says
SETTLED = ('CREATE', 'UPDATE', 'ADOPT', 'CHECK', 'RESUME')


@dataclasses.dataclass
class ChangeSet:
    #: name -> why it is visited
    visit: dict
    #: names whose rows are no longer in the template (cleaned up)
    removed: set
    #: how many resources the template has
    total: int

    def summary(self, names=0):
        """One line: how many are visited, of how many, and why; with
        `names`, up to that many names of each kind too."""
        kinds = collections.defaultdict(list)
        for name, why in self.visit.items():
            kinds[_kind(why)].append(name)
        if self.removed:
            kinds['removed'] = list(self.removed)
        line = '%d of %d resources to visit%s' % (
            len(self.visit), self.total, ' (%s)' % ', '.join(
                '%d %s' % (len(v), k) for k, v in sorted(kinds.items()))
            if kinds else '')
        if names:
            line += ''.join('; %s: %s%s' % (
                k, ', '.join(sorted(v)[:names]),
                ' and %d more' % (len(v) - names) if len(v) > names else '')
                for k, v in sorted(kinds.items()))
        return line


#: how the summary names each kind of reason (its first word)
_KINDS = {'reads': 'reading what is visited',
          'comes': 'ordered between visited ones',
          'depends': 'ordered after visited ones'}


def _kind(why):
    word = why.split(' ', 1)[0].split(':', 1)[0]
    return _KINDS.get(word, word)


def decide(defn, rows, current, visit=None):
    """The change set of an update to `defn`.

    :param rows: every row of the stack (as laid out: name, status,
        action, applied_digest)
    :param current: name -> the row that stands for it
    :param visit: {name: why} to visit whatever their digests say
    """
    versions = collections.Counter(r.name for r in rows)
    seeds = {name: why for name, why in (visit or {}).items()
             if name in defn.resources}
    env = defn.bundle.environment
    hooked = bool(((env or {}).get('resource_registry') or {}).get(
        'resources'))
    for name, rdef in defn.resources.items():
        row = current.get(name)
        if name in seeds:
            continue
        if row is None or row.action == 'INIT':
            seeds[name] = 'added'
        elif versions[name] > 1:
            seeds[name] = 'unfinished: an earlier version is still to be ' \
                          'cleaned up'
        elif row.status != 'COMPLETE' or row.action not in SETTLED:
            seeds[name] = 'unfinished: its last action ended %s_%s' % (
                row.action, row.status)
        elif row.drift:
            # observed (an observer's pass, stack drift, a dry run) and
            # recorded: the update repairs it
            seeds[name] = 'drifted: %s' % row.drift
        elif rdef.plugin.always_visit:
            seeds[name] = 'always: its type is visited by every update'
        elif hooked and breakpoints.matches(env, name, 'pre-update'):
            # Heat stops at it though nothing changes
            seeds[name] = 'hooked: a pre-update hook is set on it'
        elif row.applied_digest != defn.digest(name):
            seeds[name] = 'changed: its definition' if row.applied_digest \
                else 'changed: not converged since updates compare ' \
                     'definitions'
    visit = graph_changes.expand(
        defn.dependencies(),
        {name: rdef.reads for name, rdef in defn.resources.items()}, seeds)
    removed = {r.name for r in rows if r.name not in defn.resources}
    return ChangeSet(visit, removed, len(defn.resources))
