"""Differential test: the same generated templates through Heat and
through converge-api, compared as a client sees them.

Needs the devcloud with Heat beside converge (`tools/devcloud up
--with-converge --with-heat`): one user (alice) drives both with
python-heatclient, Heat at the `devcloud-alice-heat` cloud's endpoint,
converge-api at the catalog's public `orchestration`.  Each example is a
resource graph of OS::Heat::RandomString, Value, None, TestResource,
ResourceGroup and provider templates (nested stacks in `files`), with
conditions and get_attr/get_param/str_replace/list_join/if/equals; it is
created, maybe refused first in a broken form (the error code compared),
updated (a second graph over the same names, or new parameters) and
deleted, one operation at a time on each side, and after each the two
views are compared: the stack's status, its outputs, its resources
(names, types, statuses, attributes), its events' reasons in full.
Only what must differ is normalised: ids, times, random strings (kept as
their length and alphabet); the deliberate differences of
docs/compatibility.md are left out, each where it is (`_deliberate_*`,
`_nested_unvisited`, EXTRA_EVENTS, DELIBERATE_REFUSALS), and so is what
is a race in either engine once a resource failed (`_after_failure`).

CONVERGE_DIFF_EXAMPLES sets how many examples (10 by default: Heat's
engine makes ~13 resources a second on two cores);
CONVERGE_DIFF_SEED a seed, to replay a run; CONVERGE_DIFF_CLOUDS a
clouds.yaml (another checkout's devcloud, used as it runs: no `up`),
CONVERGE_DIFF_CONVERGE_URL another converge-api on its Keystone
(`http://127.0.0.1:PORT/v1/%(project_id)s`: this checkout's, say);
CONVERGE_DIFF_REPORT a JSON file where every example's differences are
written, the run going on past them (exploring).  Every difference is
reported (all of them, not the first) with the templates that showed it.
"""

import copy
import json
import os
import re
import string
import uuid

import pytest
import yaml
from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import given
from hypothesis import note
from hypothesis import seed as hseed
from hypothesis import settings
from hypothesis import strategies as st

from tests import realcloud

pytestmark = [pytest.mark.realcloud, pytest.mark.slow,
              pytest.mark.xdist_group('realcloud')]

EXAMPLES = int(os.environ.get('CONVERGE_DIFF_EXAMPLES', '10'))
SEED = os.environ.get('CONVERGE_DIFF_SEED')
#: seconds an operation may take on either side before it counts as hung
OP_TIMEOUT = 180
#: at most this many resources in one stack, nested ones included
MAX_RESOURCES = 8

#: the figures of a run (the module's last test prints them)
FIGURES = {'templates': 0, 'operations': 0, 'differences': 0,
           'refused by both': 0}
FOUND = []
#: the refusals' messages (the report's, to see what was refused)
MESSAGES = []


# -- the two endpoints --------------------------------------------------------

def _heat_missing(why):
    msg = ('needs Heat beside converge (tools/devcloud up --with-converge '
           '--with-heat): %s' % why)
    if realcloud._ci():
        pytest.fail('CI=true: ' + msg)
    pytest.skip(msg)


@pytest.fixture(scope='module')
def clients():
    """(Heat's client, converge's client), both as alice."""
    from heatclient import client as heat_client
    if os.environ.get('CONVERGE_DIFF_CLOUDS'):
        # another devcloud's clouds.yaml (another checkout's), used as it is
        env = {'OS_CLIENT_CONFIG_FILE': os.environ['CONVERGE_DIFF_CLOUDS']}
    else:
        env = realcloud.up('--with-converge')
    with open(env['OS_CLIENT_CONFIG_FILE']) as f:
        clouds = yaml.safe_load(f)['clouds']
    if 'devcloud-alice-heat' not in clouds:
        _heat_missing('clouds.yaml has no devcloud-alice-heat')
    conn = realcloud.connect(env, 'devcloud-alice')
    sess = conn.session
    project = conn.current_project_id
    heat_url = clouds['devcloud-alice-heat'][
        'orchestration_endpoint_override'] % {'project_id': project}
    ours = os.environ.get('CONVERGE_DIFF_CONVERGE_URL', '') % {
        'project_id': project} or sess.get_endpoint(
        service_type='orchestration', interface='public')
    heat = heat_client.Client('1', session=sess, endpoint_override=heat_url)
    conv = heat_client.Client('1', session=sess, endpoint_override=ours)
    try:
        list(heat.stacks.list(limit=1))
    except Exception as e:  # no Heat answering: name it
        _heat_missing('%s answers %s' % (heat_url, e))
    for side in (heat, conv):       # what a run that died left behind
        for stack in list(side.stacks.list()):
            if stack.stack_name.startswith('diff-'):
                side.stacks.delete(stack.id)
    return heat, conv


# -- templates ----------------------------------------------------------------

#: the provider template of nested stacks (a file in `files`)
INNER = {
    'heat_template_version': '2018-08-31',
    'parameters': {'x': {'type': 'string', 'default': 'd'}},
    'resources': {'v': {'type': 'OS::Heat::Value', 'properties': {
        'value': {'str_replace': {'template': 'in-X',
                                  'params': {'X': {'get_param': 'x'}}}}}}},
    'outputs': {'out': {'value': {'get_attr': ['v', 'value']}}},
}
FILES = {'inner.yaml': yaml.safe_dump(INNER)}

KINDS = ('random', 'value', 'none', 'test', 'group', 'nested')
TYPES = {'random': 'OS::Heat::RandomString', 'value': 'OS::Heat::Value',
         'none': 'OS::Heat::None', 'test': 'OS::Heat::TestResource',
         'group': 'OS::Heat::ResourceGroup', 'nested': 'inner.yaml'}
#: the attribute a kind's value is read from (None has none)
ATTR = {'random': 'value', 'value': 'value', 'test': 'output',
        'nested': 'out', 'group': 'value'}
NAMES = ['r%d' % i for i in range(6)]
CONDITIONS = {
    'on': {'equals': [{'get_param': 'flag'}, 'on']},
    'off': {'not': 'on'},
}
words = st.text(alphabet='abcxyz-', min_size=0, max_size=5)


@st.composite
def expressions(draw, refs, depth=0):
    """A string-valued expression over the parameters and `refs`
    (earlier resources: name -> kind)."""
    leaves = [words, st.just({'get_param': 'word'})]
    readable = sorted(n for n, k in refs.items()
                      if k.partition(':')[0] in ATTR)
    if readable:
        leaves.append(st.sampled_from(readable).map(
            lambda n: _read(n, refs[n])))
    leaf = st.one_of(*leaves)
    if depth >= 2:
        return draw(leaf)
    sub = expressions(refs, depth + 1)
    return draw(st.one_of(
        leaf,
        st.builds(lambda t, a: {'str_replace': {
            'template': 'T%s' % t, 'params': {'T': a}}}, words, sub),
        st.builds(lambda a: {'str_replace': {
            'template': 'n=N', 'params': {'N': {'get_param': 'num'}}}},
            st.none()),
        st.builds(lambda sep, xs: {'list_join': [sep, xs]},
                  st.sampled_from(['', ',', '-']),
                  st.lists(sub, min_size=0, max_size=3)),
        st.builds(lambda c, a, b: {'if': [c, a, b]},
                  st.sampled_from(sorted(CONDITIONS)), sub, sub),
        # a condition reads parameters only (get_attr is refused there)
        st.builds(lambda a, b: {'if': [{'equals': [a, b]}, 'same', 'other']},
                  st.one_of(words, st.just({'get_param': 'word'})),
                  st.one_of(words, st.just({'get_param': 'word'}))),
    ))


def _read(name, kind):
    if kind.startswith('group'):    # the members' values, as one string
        member = kind.partition(':')[2] or 'value'
        return {'list_join': ['+', {'get_attr': [name, ATTR[member]]}]}
    return {'get_attr': [name, ATTR[kind]]}


@st.composite
def resource(draw, kind, refs, budget, cond):
    """One resource of `kind` reading `refs`, under condition `cond`;
    its size (resources it makes, its own and its members')."""
    expr = expressions(refs)
    props, size = {}, 1
    if kind == 'random':
        props['length'] = draw(st.integers(8, 16))
        if draw(st.booleans()):
            props['salt'] = draw(expr)
    elif kind == 'value':
        props['value'] = draw(expr)
    elif kind == 'none':
        if draw(st.booleans()):
            props['anything'] = draw(expr)
    elif kind == 'test':
        # never empty: Heat's TestResource ignores an update to '' (a
        # deliberate difference, docs/compatibility.md)
        props['value'] = {'list_join': ['', ['v', draw(expr)]]}
        props['fail'] = draw(st.sampled_from([False] * 7 + [True]))
        props['update_replace'] = draw(st.booleans())
    elif kind == 'nested':
        props['x'] = draw(expr)
        size = 2
    elif kind == 'group':
        member = draw(st.sampled_from(['value', 'nested']))
        per = 1 if member == 'value' else 2
        count = draw(st.integers(0, max(0, min(3, (budget - 1) // per))))
        size = 1 + count * per
        if member == 'value':
            mdef = {'type': 'OS::Heat::Value', 'properties': {
                'value': {'str_replace': {'template': 'm%index%-X',
                                          'params': {'X': draw(expr)}}}}}
        else:
            mdef = {'type': 'inner.yaml', 'properties': {'x': draw(expr)}}
        props = {'count': count, 'resource_def': mdef}
        kind = 'group:' + member
    body = {'type': TYPES[kind.partition(':')[0]]}
    if props:
        body['properties'] = props
    if cond:
        body['condition'] = cond
    return body, size, kind


@st.composite
def templates(draw):
    """A HOT template of at most MAX_RESOURCES resources (NAMES, so that
    a second one shares names with the first)."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5,
                          unique=True))
    refs, resources, outputs, budget = {}, {}, {}, MAX_RESOURCES
    conds = {}
    for name in names:
        if budget <= 0:
            break
        kinds = [k for k in KINDS if k != 'nested' or budget >= 2]
        kind = draw(st.sampled_from(kinds))
        # a resource (an output) reads only those that exist whenever it
        # does: both engines refuse a read of one its condition disables
        cond = draw(st.sampled_from([None] * 4 + sorted(CONDITIONS)))
        visible = {n: k for n, k in refs.items() if conds[n] in (None, cond)}
        body, size, kind = draw(resource(kind, visible, budget, cond))
        if draw(st.integers(0, 5)) == 0 and visible:
            body['depends_on'] = [draw(st.sampled_from(sorted(visible)))]
        resources[name] = body
        budget -= size
        refs[name], conds[name] = kind, cond
        if kind.partition(':')[0] in ATTR:
            outputs['o_' + name] = {'value': _read(name, kind)}
            if cond:
                outputs['o_' + name]['condition'] = cond
    outputs['mix'] = {'value': draw(expressions(
        {n: k for n, k in refs.items() if conds[n] is None}))}
    return {
        'heat_template_version': '2018-08-31',
        'parameters': {
            'word': {'type': 'string', 'default': 'w'},
            'num': {'type': 'number', 'default': 1},
            'flag': {'type': 'string', 'default': 'on', 'constraints': [
                {'allowed_values': ['on', 'off']}]},
        },
        'conditions': copy.deepcopy(CONDITIONS),
        'resources': resources,
        'outputs': outputs,
    }


params = st.fixed_dictionaries({}, optional={
    'word': words, 'num': st.integers(-3, 99).map(str),
    'flag': st.sampled_from(['on', 'off'])})


#: (Heat's answer, converge's) to a broken template, where converge
#: refuses on purpose what Heat takes (docs/compatibility.md): none now
#: (an output naming a parameter the template does not declare is made,
#: its error shown with the output, as Heat does)
DELIBERATE_REFUSALS = {}


def _break(tmpl, how):
    """`tmpl` made invalid in a way both must refuse."""
    bad = copy.deepcopy(tmpl)
    first = sorted(bad['resources'])[0]
    res = bad['resources'][first]
    if how == 'type':
        res['type'] = 'OS::Nope::Nothing'
    elif how == 'attr':
        bad['outputs']['broken'] = {'value': {'get_attr': ['ghost', 'x']}}
    elif how == 'param':
        bad['outputs']['broken'] = {'value': {'get_param': 'ghost'}}
    elif how == 'function':
        bad['outputs']['broken'] = {'value': {'get_nothing': 'x'}}
    elif how == 'property':
        res.setdefault('properties', {})['no_such_property'] = 1
    elif how == 'version':
        bad['heat_template_version'] = '2099-01-01'
    elif how == 'condition':
        res['condition'] = 'undefined_condition'
    return bad


@st.composite
def scenarios(draw):
    first = draw(templates())
    if draw(st.booleans()):
        second, how = draw(templates()), 'template'
    else:
        second, how = first, 'parameters'
    return {
        'broken': draw(st.sampled_from(
            [None] * 3 + ['type', 'attr', 'param', 'function', 'property',
                          'version', 'condition'])),
        'template': first, 'parameters': draw(params),
        'update': second, 'update_how': how,
        'update_parameters': draw(params),
    }


# -- what a client sees, normalised -------------------------------------------

UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                  r'[0-9a-f]{12}')


def _classes(text):
    """The alphabet `text` is drawn from (which classes happen to occur
    in a short string is chance: 8 characters miss the digits one time
    in four)."""
    alnum = string.ascii_letters + string.digits
    return 'alnum' if all(ch in alnum for ch in text) else 'other'


class View:
    """One side's stack as a client reads it, normalised."""

    def __init__(self, client, stack_id, name):
        self.client, self.id, self.name = client, stack_id, name
        self.randoms = {}

    def _norm(self, value):
        if isinstance(value, str):
            for raw, token in self.randoms.items():
                value = value.replace(raw, token)
            return UUID.sub('<uuid>', value.replace(self.id, '<stack_id>'))
        if isinstance(value, list):
            return [self._norm(v) for v in value]
        if isinstance(value, dict):
            return {k: self._norm(v) for k, v in value.items()}
        return value

    def _learn_randoms(self, resources):
        """Each RandomString's value, as a token of its length and
        character classes (the values differ by design)."""
        self.randoms = {}
        for res in resources:
            if res.resource_type != TYPES['random'] or \
                    not res.physical_resource_id:
                continue
            try:
                attrs = self.client.resources.get(
                    self.id, res.resource_name).attributes
            except Exception:
                continue
            raw = attrs.get('value')
            if isinstance(raw, str) and raw:
                self.randoms[raw] = '<random %s len=%d %s>' % (
                    res.resource_name, len(raw), _classes(raw))
        self.randoms[self.name] = '<stack_name>'

    def look(self):
        from heatclient import exc
        try:
            stack = self.client.stacks.get(self.id)
        except exc.HTTPNotFound:
            return {'stack': 'not found'}
        seen = {'status': stack.stack_status,
                'reason': reason_kind(stack.stack_status_reason)}
        if stack.stack_status == 'DELETE_COMPLETE':
            return seen
        resources = list(self.client.resources.list(self.id))
        self._learn_randoms(resources)
        seen['outputs'] = {
            o['output_key']: ('error' if o.get('output_error') else
                              self._norm(o.get('output_value')))
            for o in (stack.outputs or [])}
        seen['resources'] = {}
        for res in resources:
            row = {'type': res.resource_type,
                   'status': res.resource_status,
                   'reason': reason_kind(res.resource_status_reason)}
            if res.resource_status.endswith('COMPLETE') and \
                    not res.resource_status.startswith('INIT'):
                try:
                    attrs = self.client.resources.get(
                        self.id, res.resource_name).attributes
                except exc.HTTPException as e:
                    attrs = {'error': e.code}
                row['attributes'] = {k: self._norm(v) for k, v in
                                     attrs.items() if k != 'show'}
            seen['resources'][res.resource_name] = row
        return seen

    def events(self):
        """The kinds of the stack's events: (resource, status, reason),
        but for converge's deliberate extra ones (docs/compatibility.md)."""
        return sorted(kind for kind in {
            (self._norm(e.resource_name), e.resource_status,
             reason_kind(e.resource_status_reason))
            for e in self.client.events.list(self.id)}
            if not kind[2].startswith(EXTRA_EVENTS.get(kind[:2], '\0')))


#: events only converge sends, on purpose (docs/compatibility.md, "Where
#: converge answers otherwise"): an update's change set, by the start of
#: its reason (what follows names what it visits)
EXTRA_EVENTS = {('<stack_name>', 'UPDATE_IN_PROGRESS'):
                'Stack UPDATE change set: '}


def _after_failure(seen, events):
    """Once a resource failed, which others had started, and so were
    made, is a race in either engine (both stop starting resources, at
    different moments): the stack's status and events, and the failed
    resources, are compared; the others by name and type only, and the
    outputs (they read them) not at all, while the stack is FAILED."""
    failed = {n for v in seen.values()
              for n, row in (v.get('resources') or {}).items()
              if row['status'].endswith('FAILED')}
    for view in seen.values():
        if view.get('status', '').endswith('FAILED'):
            view.pop('outputs', None)
            for name, row in (view.get('resources') or {}).items():
                if name not in failed:
                    view['resources'][name] = {'type': row['type']}
    for side in events:
        events[side] = [e for e in events[side]
                        if e[0] == '<stack_name>' or e[1].endswith('FAILED')]


def _deliberate_attributes(heat, conv):
    """Resource show's attributes as compared: converge resolves every
    one and lists more (docs/compatibility.md), so only the names Heat
    shows, and their values where Heat's is not null."""
    for name, row in (heat.get('resources') or {}).items():
        other = (conv.get('resources') or {}).get(name) or {}
        if 'attributes' not in row or 'attributes' not in other:
            continue
        theirs = other['attributes']
        for key, value in list(row['attributes'].items()):
            if value is None and key in theirs:
                del row['attributes'][key]
        other['attributes'] = {k: v for k, v in theirs.items()
                               if k in row['attributes']}


REPLACEMENT = re.compile(r'^The Resource .* requires replacement\.$')


def reason_kind(reason):
    """A status reason without what names one run (ids, numbers), in
    full: a failure's is Heat's `ValueError: resources.NAME: message`
    on both sides, class, path and message compared."""
    if not reason:
        return ''
    # a plug-in that finds it must replace while updating names itself
    # in Heat as its class, physical id and stack; converge says the name
    reason = REPLACEMENT.sub('The Resource NAME requires replacement.',
                             reason)
    return re.sub(r'\d+', 'N', UUID.sub('<uuid>', reason)).strip()


def differences(a, b, path=''):
    """Where `a` (Heat's) and `b` (converge's) differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in b:
                out.append('%s/%s: only Heat has %r' % (path, k, a[k]))
            elif k not in a:
                out.append('%s/%s: only converge has %r' % (path, k, b[k]))
            else:
                out += differences(a[k], b[k], '%s/%s' % (path, k))
        return out
    if a != b:
        return ['%s: Heat %r, converge %r' % (path, a, b)]
    return []


# -- operations ---------------------------------------------------------------

def _settled(client, stack_id):
    from heatclient import exc

    def done():
        try:
            stack = client.stacks.get(stack_id)
        except exc.HTTPNotFound:
            return 'gone'
        return not stack.stack_status.endswith('IN_PROGRESS') and \
            stack.stack_status
    return realcloud.wait_for(done, timeout=OP_TIMEOUT, interval=0.2)


def _refused(fn):
    """The HTTP code of the refusal, or None when accepted."""
    from heatclient import exc
    try:
        fn()
    except exc.HTTPException as e:
        MESSAGES.append(str(e)[:300])
        return e.code
    return None


class Run:
    def __init__(self, heat, conv, name):
        self.sides = {'heat': heat, 'converge': conv}
        self.name = name
        self.views = {}
        self.found = []
        self.types = {}     # resource name -> the types it had
        self.raced = False  # an operation failed: see _after_failure

    def _nested_unvisited(self, seen, events):
        """Heat updates every nested stack resource (a provider's, a
        group) on every update; converge's change set leaves one whose
        inputs did not change as it was (docs/compatibility.md): its
        status and Heat's UPDATE events for it are not compared."""
        heat, conv = seen['heat'], seen['converge']
        nested = {n for n, types in self.types.items()
                  if types & {TYPES['nested'], TYPES['group']}}
        for name in nested:
            theirs = (conv.get('resources') or {}).get(name)
            ours = (heat.get('resources') or {}).get(name)
            if ours and theirs and ours['status'] == 'UPDATE_COMPLETE' \
                    and theirs['status'] == 'CREATE_COMPLETE':
                theirs['status'] = ours['status']
        return [e for e in events['heat'] if not (
            e[0] in nested and e[1] in ('UPDATE_IN_PROGRESS',
                                        'UPDATE_COMPLETE')
            and e[2] == 'state changed' and e not in events['converge'])]

    def compare(self, op, **extra):
        FIGURES['operations'] += 1
        seen = {side: dict(v.look(), **extra.get(side, {}))
                for side, v in self.views.items()}
        events = {side: v.events() for side, v in self.views.items()}
        for view in seen.values():
            for name, row in (view.get('resources') or {}).items():
                self.types.setdefault(name, set()).add(row['type'])
        if any(v.get('status', '').endswith('FAILED')
               for v in seen.values()):
            self.raced = True
        if self.raced:
            _after_failure(seen, events)
        _deliberate_attributes(seen['heat'], seen['converge'])
        events['heat'] = self._nested_unvisited(seen, events)
        diff = differences(seen['heat'], seen['converge'])
        diff += differences({'events': events['heat']},
                            {'events': events['converge']})
        for d in diff:
            self.found.append('%s: %s' % (op, d))
        note('%s: heat %s' % (op, json.dumps(seen['heat'], sort_keys=True)))
        return seen

    def refusal(self, op, deliberate, fn):
        FIGURES['operations'] += 1
        codes = {side: _refused(lambda c=c: fn(c))
                 for side, c in self.sides.items()}
        if codes['heat'] != codes['converge'] and \
                (codes['heat'], codes['converge']) != deliberate:
            self.found.append('%s: Heat %s, converge %s' % (
                op, codes['heat'] or 'accepted',
                codes['converge'] or 'accepted'))
        return codes

    def create(self, template, parameters):
        fields = {'stack_name': self.name, 'template': template,
                  'files': FILES, 'parameters': parameters}
        ids = {}
        codes = self.refusal('create', None, lambda c: ids.__setitem__(
            c, c.stacks.create(**fields)['stack']['id']))
        FIGURES['operations'] -= 1      # counted by compare() below
        for side, c in self.sides.items():
            if c in ids:
                _settled(c, ids[c])
        self.views = {side: View(c, ids[c], self.name)
                      for side, c in self.sides.items() if c in ids}
        return codes

    def update(self, template, parameters):
        from heatclient import exc
        codes = {}
        for side, c in self.sides.items():
            try:
                c.stacks.update(self.views[side].id, template=template,
                                files=FILES, parameters=parameters)
            except exc.HTTPException as e:
                codes[side] = e.code
                continue
            _settled(c, self.views[side].id)
        return codes

    def delete(self):
        for side, view in self.views.items():
            view.client.stacks.delete(view.id)
            _settled(view.client, view.id)


def run_scenario(heat, conv, sc, name):
    run = Run(heat, conv, name)
    if sc['broken']:
        bad = _break(sc['template'], sc['broken'])
        codes = run.refusal('create %s-broken' % sc['broken'],
                            DELIBERATE_REFUSALS.get(sc['broken']),
                            lambda c: c.stacks.create(
                                stack_name=run.name + '-bad', template=bad,
                                files=FILES))
        for side, code in codes.items():    # accepted: not kept
            if code is None:
                c = run.sides[side]
                for s in c.stacks.list():
                    if s.stack_name == run.name + '-bad':
                        c.stacks.delete(s.id)
                        _settled(c, s.id)
    codes = run.create(sc['template'], sc['parameters'])
    if None not in codes.values():      # refused on both: compared
        FIGURES['operations'] += 1
        FIGURES['refused by both'] += 1
        return run.found
    if set(codes.values()) != {None}:   # refused on one side only
        run.delete()
        return run.found
    run.compare('create')
    upd = sc['update_parameters'] if sc['update_how'] == 'parameters' \
        else dict(sc['parameters'], **sc['update_parameters'])
    codes = run.update(sc['update'], upd)
    run.compare('update (%s)' % sc['update_how'], **{
        side: {'refused': code} for side, code in codes.items()})
    run.delete()
    run.compare('delete')
    return run.found


#: stack names of this run (one a stack of an earlier run still being
#: deleted keeps is not taken)
_names = ('diff-%s-%d' % (uuid.uuid4().hex[:6], n) for n in range(10 ** 6))


def _given_settings():
    return settings(
        max_examples=EXAMPLES, deadline=None, database=None,
        print_blob=True, phases=(Phase.explicit, Phase.generate),
        suppress_health_check=[HealthCheck.function_scoped_fixture,
                               HealthCheck.too_slow,
                               HealthCheck.data_too_large])


def _seeded(fn):
    return hseed(int(SEED))(fn) if SEED else fn


# not shrunk: an example costs tens of seconds against two engines; every
# difference of every example is listed with its templates instead
@_seeded
@_given_settings()
@given(sc=scenarios())
def test_heat_and_converge_answer_alike(clients, sc):
    heat, conv = clients
    FIGURES['templates'] += 1 + (sc['update_how'] == 'template') + \
        bool(sc['broken'])
    found = run_scenario(heat, conv, sc, next(_names))
    if found:
        FIGURES['differences'] += len(found)
        FOUND.append({'scenario': sc, 'differences': found})
    report = os.environ.get('CONVERGE_DIFF_REPORT')
    if report:
        with open(report, 'w') as f:
            json.dump({'figures': FIGURES, 'found': FOUND,
                       'refusals': MESSAGES}, f, indent=1,
                      sort_keys=True, default=str)
        return      # exploring: every example, each one's findings
    assert not found, '\n'.join(found) + '\n\nscenario:\n' + yaml.safe_dump(
        sc, sort_keys=False)
