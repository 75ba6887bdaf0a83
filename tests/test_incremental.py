"""Issue 16: an update may skip what it need not visit, and a user can
never tell. For random templates and random changes, a plain
`stack update` (incremental: resources whose definition did not
change and that read nothing that changed are skipped, engine/changes.py)
and `stack update --converge` (a full walk: every resource
visited) end in the same state: the same resources, of the same types,
in the same status, with the same properties, attributes, stored
dependencies and outputs, and the same ones replaced. So do the two
stacks after a second, plain update back to the first template, which
also brings back what that template made at first.

Templates use only types the engine runs at once (OS::Heat::Value,
TestResource, None, RandomString) in chains, fans in and out, edges by
get_attr, get_resource and depends_on, parameters and conditions.
Physical ids and random strings differ from stack to stack, so each is
compared as a name (`<id:r3>`, `<random:r2>`), and "replaced or not"
against the same stack before the update."""

import copy
import io
import itertools

import pytest
import yaml
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import note
from hypothesis import Phase
from hypothesis import settings
from hypothesis import strategies as st

from converge import conf
from converge.engine import request
from converge.engine import service
from converge.engine import views
from tests import enginetools as et

VALUE = 'OS::Heat::Value'
TEST = 'OS::Heat::TestResource'
NONE = 'OS::Heat::None'
RANDOM = 'OS::Heat::RandomString'
TYPES = (VALUE, TEST, NONE, RANDOM)

#: a type change (the same name, another type) among these
CHANGEABLE = (VALUE, TEST, NONE)

PARAMETERS = {
    's0': {'type': 'string', 'default': 'alpha'},
    's1': {'type': 'string', 'default': 'beta'},
    'n0': {'type': 'number', 'default': 1},
    'flag': {'type': 'string', 'default': 'on',
             'constraints': [{'allowed_values': ['on', 'off']}]},
}
PARAM_VALUES = {'s0': ('alpha', 'beta', 'gamma'),
                's1': ('alpha', 'beta', 'gamma'),
                'n0': (1, 2, 2.5),
                'flag': ('on', 'off')}
#: a resource's condition: enabled while flag is on, or while it is off
CONDITIONS = {'on': {'equals': [{'get_param': 'flag'}, 'on']},
              'off': {'not': 'on'}}
LITERALS = ('a', 'b', 'c')

#: the stack names and projects of one test (each example its own
#: project, so however many examples hypothesis runs or shrinks, no
#: project reaches its stack limit)
_serial = itertools.count()


# -- the model of a template -------------------------------------------------
#
# An expression is a tuple: ('lit', text), ('param', name), ('attr', res),
# ('ref', res) or ('join', (expr, ...)). A resource is a dict: type, expr
# (Value's and TestResource's value, RandomString's salt, None's tag),
# depends_on (names), condition (None, 'on', 'off'), replace
# (TestResource's update_replace). A resource reads only resources before
# it, so no template has a cycle.

def _refs(expr):
    kind, arg = expr
    if kind in ('attr', 'ref'):
        return {arg}
    if kind == 'join':
        return set().union(*(_refs(e) for e in arg))
    return set()


def _readers(resources, outputs, name):
    """Who reads or depends on `name` (resources, then outputs)."""
    return ([n for n, r in resources.items()
             if name in _refs(r['expr']) or name in r['depends_on']] +
            ['output %s' % k for k, e in outputs.items()
             if name in _refs(e)])


class Scenario:
    """A template, and the template and parameters of an update."""

    def __init__(self, before, after, params, steps):
        self.before, self.after = before, after
        self.params, self.steps = params, steps

    def __repr__(self):
        def part(model):
            # the parameters and conditions are always PARAMETERS and
            # CONDITIONS
            doc = render(*model)
            return yaml.safe_dump({k: doc[k] for k in ('resources',
                                                       'outputs')
                                   if k in doc}, sort_keys=False)
        return 'changes: %s\n--- template\n%s--- updated to (%s)\n%s' % (
            '; '.join(self.steps) or 'none', part(self.before),
            'parameters %s' % self.params if self.params
            else 'default parameters', part(self.after))


def _render_expr(expr, resources):
    kind, arg = expr
    if kind == 'lit':
        return arg
    if kind == 'param':
        if PARAMETERS[arg]['type'] == 'number':
            return {'str_replace': {'template': 'n=N',
                                    'params': {'N': {'get_param': arg}}}}
        return {'get_param': arg}
    if kind == 'join':
        return {'list_join': ['+', [_render_expr(e, resources)
                                    for e in arg]]}
    target = resources[arg]
    if kind == 'ref' or target['type'] == NONE:  # None's attributes: null
        out = {'get_resource': arg}
    else:
        out = {'get_attr': [arg, 'output' if target['type'] == TEST
                            else 'value']}
    if target['condition']:
        # a disabled resource is read by nobody
        out = {'if': [target['condition'], out, 'no-%s' % arg]}
    return out


def render(resources, outputs):
    """The HOT template of a model."""
    out = {}
    for name, r in resources.items():
        value = _render_expr(r['expr'], resources)
        if r['type'] == RANDOM:
            props = {'length': 24, 'salt': value}
        elif r['type'] == NONE:
            props = {'tag': value}
        else:
            props = {'value': value}
            if r['type'] == TEST and r['replace']:
                props['update_replace'] = True
        res = {'type': r['type'], 'properties': props}
        if r['depends_on']:
            res['depends_on'] = list(r['depends_on'])
        if r['condition']:
            res['condition'] = r['condition']
        out[name] = res
    doc = et.hot(out, parameters=copy.deepcopy(PARAMETERS), outputs={
        k: {'value': _render_expr(e, resources)}
        for k, e in outputs.items()})
    doc['conditions'] = copy.deepcopy(CONDITIONS)
    return doc


# -- strategies ---------------------------------------------------------------

@st.composite
def exprs(draw, readable, depth=0):
    kinds = ['lit', 'param']
    if readable:  # reads weigh more: they are what an update may miss
        kinds += ['attr', 'attr', 'ref']
        if depth == 0:
            kinds.append('join')
    kind = draw(st.sampled_from(kinds))
    if kind == 'lit':
        return ('lit', draw(st.sampled_from(LITERALS)))
    if kind == 'param':
        return ('param', draw(st.sampled_from(sorted(PARAMETERS))))
    if kind in ('attr', 'ref'):
        return (kind, draw(st.sampled_from(readable)))
    return ('join', tuple(draw(st.lists(exprs(readable, depth + 1),
                                        min_size=2, max_size=3))))


@st.composite
def resource_specs(draw, earlier):
    """A new resource reading some of `earlier` (name -> resource)."""
    names = list(earlier)
    plain = [n for n in names if not earlier[n]['condition']]
    kind = draw(st.sampled_from(TYPES))
    return {
        'type': kind,
        'expr': draw(exprs(names)),
        # depends_on names only resources that always exist
        'depends_on': tuple(draw(st.lists(st.sampled_from(plain),
                                          max_size=2, unique=True)))
        if plain else (),
        'condition': draw(st.sampled_from((None,) * 6 + ('on', 'off'))),
        'replace': kind == TEST and draw(st.booleans()),
    }


@st.composite
def templates(draw, min_size=3, max_size=12):
    resources = {}
    for i in range(draw(st.integers(min_size, max_size))):
        resources['r%d' % i] = draw(resource_specs(resources))
    outputs = {'o%d' % i: draw(exprs(list(resources)))
               for i in range(draw(st.integers(0, 3)))}
    return resources, outputs


def _earlier(resources, name):
    names = list(resources)
    return names[:names.index(name)]


@st.composite
def scenarios(draw):
    resources, outputs = draw(templates())
    before = copy.deepcopy((resources, outputs))
    params, steps = {}, []
    # a new value and a replacement are what reach the most readers
    kinds = ('param', 'value', 'value', 'replace', 'replace', 'add',
             'remove', 'depends_on', 'condition', 'type')
    for kind in draw(st.lists(st.sampled_from(kinds), min_size=1,
                              max_size=3)):
        names = list(resources)
        if kind == 'param':
            p = draw(st.sampled_from(sorted(PARAMETERS)))
            params[p] = draw(st.sampled_from([
                v for v in PARAM_VALUES[p]
                if v != PARAMETERS[p]['default']]))
            steps.append('parameter %s=%s' % (p, params[p]))
        elif kind == 'value':
            name = draw(st.sampled_from(names))
            r = resources[name]
            r['expr'] = draw(exprs(_earlier(resources, name)).filter(
                lambda e, old=r['expr']: e != old))
            steps.append('%s reads %s' % (name, r['expr']))
        elif kind == 'replace':
            found = [n for n in names
                     if resources[n]['type'] in (TEST, RANDOM)]
            if not found:
                continue
            name = draw(st.sampled_from(found))
            r = resources[name]
            if r['type'] == TEST and not r['replace']:
                r['replace'] = True  # turning it on replaces
            else:  # a new value with update_replace, a new salt
                r['expr'] = ('join', (r['expr'], ('lit', 'new')))
            steps.append('%s replaced' % name)
        elif kind == 'add':
            name = 'r%d' % (max(int(n[1:]) for n in names) + 1)
            resources[name] = draw(resource_specs(resources))
            steps.append('%s added' % name)
        elif kind == 'remove':
            free = [n for n in names if not _readers(resources, outputs, n)]
            if len(free) < 2:
                continue
            name = draw(st.sampled_from(free))
            del resources[name]
            steps.append('%s removed' % name)
        elif kind == 'depends_on':
            name = draw(st.sampled_from(names))
            plain = [n for n in _earlier(resources, name)
                     if not resources[n]['condition']]
            if not plain:
                continue
            resources[name]['depends_on'] = tuple(draw(st.lists(
                st.sampled_from(plain), max_size=2, unique=True)))
            steps.append('%s depends_on %s' % (
                name, list(resources[name]['depends_on'])))
        elif kind == 'condition':
            # a resource some other depends_on cannot be disabled
            free = [n for n in names if not any(
                n in r['depends_on'] for r in resources.values())]
            if not free:
                continue
            name = draw(st.sampled_from(free))
            r = resources[name]
            r['condition'] = draw(st.sampled_from(
                [c for c in (None, 'on', 'off') if c != r['condition']]))
            steps.append('%s condition %s' % (name, r['condition']))
        else:
            found = [n for n in names if resources[n]['type'] in CHANGEABLE]
            if not found:
                continue
            name = draw(st.sampled_from(found))
            r = resources[name]
            r['type'] = draw(st.sampled_from(
                [t for t in CHANGEABLE if t != r['type']]))
            r['replace'] = r['type'] == TEST and r['replace']
            steps.append('%s is a %s' % (name, r['type']))
    return Scenario(before, (resources, outputs), params, steps)


# -- what a user sees ---------------------------------------------------------

class Side:
    """One stack of a pair, driven through the engine and read through the
    service layer (as `converge stack show`, `stack resource show` and
    `stack output show` read it)."""

    def __init__(self, engine, ctx, tmp_path, name):
        self.engine, self.ctx, self.dir = engine, ctx, tmp_path
        self.svc = service.Service(engine)
        self.name = name
        self.id = None
        self.seen = {}  # the tokens of what came before

    def bundle(self, doc):
        return et.bundle(self.dir, doc, '%s.yaml' % self.name)

    def create(self, doc):
        started = self.svc.stack_create(self.ctx, self.name, self.bundle(doc),
                                        {})
        self.id = started['id']
        return started['traversal_id']

    def update(self, doc, params, converge=False):
        return self.svc.stack_update(self.ctx, self.id, self.bundle(doc),
                                     params, converge=converge)[
                                         'traversal_id']

    def state(self):
        """The stack as a user sees it, with physical ids and random
        strings as names; remembers them for the next look."""
        show = self.svc.stack_show(self.ctx, self.id)
        listed = {r['resource_name']: r
                  for r in self.svc.resource_list(self.ctx, self.id)}
        # what `stack resource show` shows of each (its properties and
        # attributes), and the dependencies recorded with it
        rows = views.resources(self.engine,
                               self.svc.stack_status(self.ctx, self.id))
        by_id = {row.id: name for name, row in rows.items()}
        ids = {name: r['physical_resource_id'] for name, r in listed.items()}
        randoms = {name: (rows[name].attributes or {}).get('value')
                   for name, r in listed.items()
                   if r['resource_type'] == RANDOM}
        tokens = {}
        for kind, old in (('id', self.seen.get('ids', {})),
                          ('random', self.seen.get('randoms', {}))):
            for name, value in old.items():
                tokens[value] = '<old %s:%s>' % (kind, name)
        for kind, now in (('id', ids), ('random', randoms)):
            for name, value in now.items():
                tokens[value] = '<%s:%s>' % (kind, name)
        tokens.pop('', None)
        tokens.pop(None, None)

        def named(value):
            return _substitute(value, tokens)

        resources = {}
        for name, r in listed.items():
            row = rows[name]
            before = self.seen.get('ids', {}).get(name)
            resources[name] = {
                'type': r['resource_type'],
                'status': r['resource_status'],
                'properties': named(row.properties or {}),
                'attributes': named(row.attributes or {}),
                # what a later delete or replacement is ordered by
                'requires (stored)': sorted(
                    by_id.get(i, '<not a current row>')
                    for i in row.requires or ()),
                'replaced': 'new' if before is None else (
                    'replaced' if before != ids[name] else 'kept'),
            }
        self.seen = {'ids': ids, 'randoms': randoms}
        return {'stack_status': show['stack_status'],
                'status_reason': show['stack_status_reason'],
                'outputs': {o['output_key']: named(o['output_value'])
                            for o in show.get('outputs', ())},
                'resources': resources}


def _substitute(value, tokens):
    if isinstance(value, str):
        for raw in sorted(tokens, key=len, reverse=True):
            if raw in value:
                value = value.replace(raw, tokens[raw])
        return value
    if isinstance(value, dict):
        return {k: _substitute(v, tokens) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, tokens) for v in value]
    return value


def differences(a, b, what_a, what_b):
    """Readable lines naming each resource and field that differ."""
    out = []
    for key in ('stack_status', 'outputs'):
        if a[key] != b[key]:
            out.append('%s: %s %r, %s %r' % (key, what_a, a[key], what_b,
                                             b[key]))
    ra, rb = a['resources'], b['resources']
    for name in sorted(set(ra) | set(rb)):
        if name not in ra or name not in rb:
            out.append('resource %s: only after %s' % (
                name, what_a if name in ra else what_b))
            continue
        for field in ra[name]:
            if ra[name][field] != rb[name][field]:
                out.append('resource %s, %s: %s %r, %s %r' % (
                    name, field, what_a, ra[name][field], what_b,
                    rb[name][field]))
    return out


def _shape(state):
    """What the same template and parameters must give again: each
    resource's type, properties and attributes, and the outputs."""
    kept = ('type', 'properties', 'attributes')
    return {'outputs': state['outputs'],
            'resources': {n: {k: r[k] for k in kept}
                          for n, r in state['resources'].items()}}


def check(engine, tmp_path, scenario, wait):
    """Create two stacks of `scenario`'s first template; update one plainly
    and the other with converge=True; both must look the same. Then
    both back to the first template, plainly: the same again, and as
    they were made."""
    note(repr(scenario))
    n = next(_serial)
    ctx = request.make('incremental-%d' % n)
    a = Side(engine, ctx, tmp_path, 'inc%d-plain' % n)
    b = Side(engine, ctx, tmp_path, 'inc%d-converge' % n)
    first, second = render(*scenario.before), render(*scenario.after)

    def both(start_a, start_b, goal):
        # both traversals run at once, then each is waited for
        started = [(side, start()) for side, start in ((a, start_a),
                                                       (b, start_b))]
        states = []
        for side, trav in started:
            wait(engine, side.id, trav, ctx)
            state = side.state()
            assert state['stack_status'] == goal, (
                'stack %s is %s, not %s: %s' % (
                    side.name, state['stack_status'], goal,
                    state['status_reason']))
            states.append(state)
        return states

    made = both(lambda: a.create(first), lambda: b.create(first),
                'CREATE_COMPLETE')
    plain, full = both(
        lambda: a.update(second, scenario.params),
        lambda: b.update(second, scenario.params, converge=True),
        'UPDATE_COMPLETE')
    diff = differences(plain, full, '%s (plain update)' % a.name,
                       '%s (update --converge)' % b.name)
    assert not diff, 'after the update:\n' + '\n'.join(diff)

    back = both(lambda: a.update(first, {}), lambda: b.update(first, {}),
                'UPDATE_COMPLETE')
    diff = differences(*back, a.name, b.name)
    assert not diff, 'after updating both back (plainly):\n' + '\n'.join(
        diff)
    for side, then, now in zip((a, b), made, back):
        diff = differences(dict(_shape(then), stack_status=None),
                           dict(_shape(now), stack_status=None),
                           'as created', 'updated back')
        assert not diff, 'stack %s updated back, not as created:\n%s' % (
            side.name, '\n'.join(diff))


@settings(max_examples=30, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(scenario=scenarios())
def test_incremental_update_ends_as_a_full_walk(engine, tmp_path, scenario):
    wait = et.UnitsEnded(engine)
    engine.listeners.append(wait)
    try:
        check(engine, tmp_path, scenario, wait)
    finally:
        engine.listeners.remove(wait)


# -- distributed --------------------------------------------------------------

@pytest.fixture
def remote(dist):
    """An engine in this process pointed at `dist` (PostgreSQL, RabbitMQ,
    Redis) with no workers of its own: it starts traversals and reads,
    two converge-worker processes walk them."""
    from converge.db import session
    from converge.engine import context
    from converge.messaging import rpc
    dist.start_worker()
    dist.start_worker()
    conf.setup(['--config-file', dist.conf], log=False)
    eng = context.Engine()
    try:
        yield eng
    finally:
        eng.close()
        rpc.transport().cleanup()  # its connections to RabbitMQ
        session.forget()
        conf.setup([], log=False)


def _wait_remote(engine, stack_id, traversal_id, ctx):
    et.follow(engine, stack_id, traversal_id, ctx=ctx, out=io.StringIO(),
              tty=False, local_workers=False)


# not shrunk: an example costs seconds here, shrinking one took minutes;
# the failure names its scenario in full, and the embedded test above
# shrinks the same property
@pytest.mark.distributed
@pytest.mark.xdist_group('services')
@settings(max_examples=4, deadline=None, database=None, print_blob=True,
          phases=(Phase.generate,),
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(scenario=scenarios())
def test_incremental_update_ends_as_a_full_walk_distributed(
        remote, tmp_path, scenario):
    check(remote, tmp_path, scenario, _wait_remote)
