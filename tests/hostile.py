"""Hypothesis strategies for hostile input: what a tenant can put where a
template, an environment, parameters and the other values of a create
request go (tests/test_template_fuzz.py drives them).

Every value is one JSON can carry (string keys, str/int/float/bool/None,
lists, maps; any code point, lone surrogates and NUL included, as JSON's
\\u escapes allow), since that is what reaches the engine through the API
and, as YAML, through the CLI. The shapes are those of a template,
mostly, so that generated documents get past the first checks and reach
the deeper ones: sections with the wrong types, intrinsic functions with
the wrong arity and arguments, references to names that do not exist,
depends_on cycles, conditions that name each other, parameter
constraints with odd patterns, real plug-ins' properties (their schemas
read from the plug-ins) with values of every type.

`requests()` draws a whole create request, narrowed (`Quick`) so that
validating or creating it costs the test seconds, not minutes (waits
and counts cut down), without making it less hostile otherwise.
"""

import copy
import json

from hypothesis import strategies as st

from converge.resources import properties as p
from converge.resources import registry
from converge.template import functions as fn

# -- scalars -----------------------------------------------------------------

ODD_STRINGS = (
    '', ' ', 'nan', 'NaN', '-nan', 'inf', '-inf', 'Infinity', '1e999',
    '-0', '0x1F', '1_000', '\u0663', '\u00b2', 'true', 'yes', 'off', 'null',
    '~', '\x00', 'a\x00b', '\ud800', '\udfff', 'x\udc80y', '\U0001f600',
    '\u202e', '\ufeff', 'a/b', '../../etc/passwd', 'file:///etc/passwd',
    'http://169.254.169.254/latest', '%s%s%n', '{0}{1}', '<%x%>', '$x',
    '${x}', '*', '::', 'OS::', 'OS::Heat::', 'get_param', '\n', '\r\n',
    '\t', '[', '{', "'", '"', '\\', 'A' * 256, '-' * 300, '0' * 400,
    '2018-08-31', 'heat_template_version', 'resources', '%index%',
)
ODD_NUMBERS = (
    0, -1, 1, 2 ** 31, 2 ** 63, -2 ** 63 - 1, 2 ** 64, 10 ** 100,
    10 ** 4000, -10 ** 4000, 0.5, -0.0, 1e308, -1e308, 5e-324, 1e-300,
    True, False,
)

#: any code point, control characters included; lone surrogates (which
#: JSON's escapes give, and the API refuses) only in ODD_STRINGS and
#: odd names, so that most documents get past the reader
ANY_CHAR = st.characters(codec=None, exclude_categories=('Cs',))


def mostly(usual, odd, one_in=10):
    """`usual`, and one time in `one_in` `odd`: what is refused at the
    first look stays rare enough that most documents reach the deeper
    checks (hypothesis shrinks towards `usual`)."""
    return st.integers(0, one_in - 1).flatmap(
        lambda n: odd if n == one_in - 1 else usual)


def long_strings():
    return st.builds(lambda c, n: c * n, st.sampled_from(
        ('a', '\x00', '\u00e9', '(', '%')), st.sampled_from(
        (256, 4097, 65537)))


def scalars():
    return st.one_of(
        st.none(), st.booleans(),
        st.integers(min_value=-2 ** 70, max_value=2 ** 70),
        st.sampled_from(ODD_NUMBERS),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(ODD_STRINGS),
        st.text(ANY_CHAR, max_size=12),
        st.text('abc01-_.', min_size=1, max_size=6),
        long_strings(),
    )


def keys():
    """A map's key: JSON's are strings, of any kind."""
    return st.one_of(st.sampled_from(ODD_STRINGS),
                     st.text(ANY_CHAR, max_size=8),
                     st.text('abcxyz_', min_size=1, max_size=5))


def nested(leaf, depth):
    """`leaf` inside `depth` maps and lists."""
    def build(value, shapes):
        for shape in shapes:
            value = [value] if shape else {'k': value}
        return value
    return st.builds(build, leaf, st.lists(st.booleans(), min_size=depth,
                                           max_size=depth))


def wide():
    """A map of thousands of keys, a list of thousands of items: small
    as JSON, many for whatever walks them one by one (or one level of
    recursion each)."""
    return st.builds(
        lambda n, as_map, value: {'k%d' % i: value for i in range(n)}
        if as_map else [value] * n,
        st.sampled_from((1500, 5000)), st.booleans(),
        st.sampled_from(('v', '', 1, '<%x%>', None)))


def junk(max_leaves=12):
    """Any JSON value, small."""
    return st.recursive(
        scalars(), lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(keys(), inner, max_size=4)),
        max_leaves=max_leaves)


# -- names -------------------------------------------------------------------

class Names:
    """The names a template's parts may refer to: those it declares, and
    some it does not."""

    DANGLING = ('nope', '', 'r0/x', 'OS::stack_name', 'OS::stack_id',
                'OS::project_id', 'OS::region', '\x00', '\ud800')

    def __init__(self, resources, parameters, conditions, files,
                 nested=False):
        #: a nested stack's template (which makes no nested stacks of
        #: its own: the strategies stay finite)
        self.nested = nested
        self.resources = resources
        self.parameters = parameters
        self.conditions = conditions
        self.files = files

    def resource(self):
        return st.one_of(st.sampled_from(self.resources or ('r0',)),
                         st.sampled_from(self.DANGLING),
                         scalars())

    def parameter(self):
        return st.one_of(st.sampled_from(self.parameters or ('p0',)),
                         st.sampled_from(self.DANGLING), scalars())

    def condition(self):
        return st.one_of(st.sampled_from(self.conditions or ('c0',)),
                         st.sampled_from(('nope', '')))

    def file(self):
        return st.one_of(st.sampled_from(self.files or ('f.txt',)),
                         st.sampled_from(('missing.yaml', '/etc/passwd',
                                          'file:///etc/passwd')))


def resource_names():
    return mostly(
        st.one_of(st.sampled_from(('r0', 'r1', 'r2', 'r3', 'r4')),
                  st.sampled_from((' ', 'resources', '0', '-1', 'a.b',
                                   '\u00e9', 'x' * 255))),
        st.one_of(st.sampled_from(('', 'a/b', 'x' * 256, '\x00', '\ud800')),
                  st.text(ANY_CHAR, min_size=1, max_size=6)), one_in=20)


# -- intrinsic functions ---------------------------------------------------

YAQL = (
    '$.data', '$.data.a', '1 + 1', 'range(10)', 'range(100000).sum()',
    'pow(10, 5000)', 'pow(2, 100000)', 'float("nan")', 'float("inf")',
    'let(x => 1) -> $x', '$.data.select($ * 2)', ')(', '', '$',
    'regex("(a+)+$").matches("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!")',
    'dict(a => 1)', '"x" * 100000000', 'list(1, 2) + list(3)',
    'len($.data)', 'sequence()', 'sequence().take(1000000).len()',
    '$.data.keys()', 'format("{0}", $)', 'format("{0:>99999999}", 1)',
    '1 / 0', 'int("x")', 'str($.data)', '$.data[0]', '$.data.x.y.z',
)

FUNCTION_NAMES = (
    'get_param', 'get_attr', 'get_resource', 'str_replace',
    'str_replace_strict', 'str_replace_vstrict', 'list_join', 'repeat',
    'map_merge', 'map_replace', 'yaql', 'if', 'contains', 'filter',
    'make_url', 'list_concat', 'list_concat_unique', 'str_split', 'digest',
    'get_file', 'resource_facade', 'Fn::Select', 'Fn::Join', 'Ref',
    'Fn::GetAZs', 'equals', 'not', 'and', 'or', 'get_params', 'Fn::Base64',
)


@st.composite
def expressions(draw, names, depth=0):
    """A value where a property, an output or a function's argument goes:
    hostile scalars, calls, and lists and maps of them."""
    kind = draw(st.integers(0, 9)) if depth < 4 else 0
    if kind <= 3:
        return draw(scalars())
    if kind <= 6:
        return draw(calls(names, depth + 1))
    if kind == 7:
        return draw(st.lists(expressions(names, depth + 1), max_size=3))
    if kind == 8:
        return draw(st.dictionaries(keys(), expressions(names, depth + 1),
                                    max_size=3))
    if draw(st.booleans()):
        return draw(wide())
    # deep-ish, below the depth limit (or a little over, now and then)
    return draw(nested(expressions(names, 4), draw(st.sampled_from(
        (8, 20, 40, 55, 70)))))


@st.composite
def calls(draw, names, depth=0):
    """One intrinsic function call: the right shape with odd arguments,
    or any arguments at all."""
    name = draw(st.sampled_from(FUNCTION_NAMES))
    e = expressions(names, depth)
    if draw(st.integers(0, 7)) == 7:
        return {name: draw(e)}   # any argument: the wrong arity, types
    shaped = {
        'get_param': st.one_of(
            names.parameter(),
            st.lists(st.one_of(names.parameter(), e), min_size=1,
                     max_size=4)),
        'get_attr': st.lists(st.one_of(
            names.resource(), st.sampled_from(('value', 'output', 'show',
                                               'refs', 'resource.0',
                                               'attributes', 'nope', 0,
                                               -1, '0'))), min_size=0,
            max_size=5),
        'get_resource': names.resource(),
        'str_replace': st.fixed_dictionaries(
            {}, optional={'template': e, 'params': st.one_of(
                st.dictionaries(keys(), e, max_size=3), wide(), e)}),
        'list_join': st.lists(st.one_of(st.sampled_from((',', '', None)),
                                        st.lists(e, max_size=3), e),
                              max_size=4),
        'repeat': st.fixed_dictionaries(
            {}, optional={'for_each': st.one_of(
                st.dictionaries(st.sampled_from(('<%x%>', '%y%', '')),
                                st.one_of(st.lists(e, max_size=3), e),
                                max_size=2), e),
                'template': e, 'permutations': st.one_of(st.booleans(),
                                                         e)}),
        'map_merge': st.lists(e, max_size=3),
        'map_replace': st.lists(st.one_of(
            e, st.fixed_dictionaries({}, optional={'keys': e,
                                                   'values': e})),
            max_size=3),
        'yaql': st.fixed_dictionaries(
            {'expression': st.one_of(st.sampled_from(YAQL), e)},
            optional={'data': e}),
        'if': st.lists(st.one_of(names.condition(), conditions(names,
                                                               depth), e),
                       min_size=0, max_size=4),
        'make_url': st.fixed_dictionaries({}, optional={
            k: e for k in ('scheme', 'host', 'port', 'path', 'query',
                           'fragment', 'username', 'password')}),
        'str_split': st.lists(e, max_size=4),
        'digest': st.lists(st.one_of(st.sampled_from(('md5', 'sha512',
                                                      'rot13')), e),
                           max_size=3),
        'get_file': st.one_of(names.file(), e),
        'resource_facade': st.one_of(st.sampled_from(
            ('metadata', 'deletion_policy', 'update_policy', 'nope')), e),
        'Fn::Select': st.lists(e, max_size=3),
    }.get(name)
    return {name: draw(shaped if shaped is not None else
                       st.lists(e, max_size=3))}


@st.composite
def conditions(draw, names, depth=0):
    kind = draw(mostly(st.integers(0, 5), st.integers(6, 7))) \
        if depth < 4 else draw(st.integers(0, 1))
    if kind == 0:
        return draw(st.booleans())
    if kind == 1:
        return draw(names.condition())
    c = conditions(names, depth + 1)
    if kind == 2:
        return {'equals': draw(st.lists(st.one_of(
            expressions(names, depth + 1), calls(names, depth + 1)),
            max_size=3))}
    if kind == 3:
        return {'not': draw(c)}
    if kind == 4:
        return {draw(st.sampled_from(('and', 'or'))): draw(st.one_of(
            st.lists(c, max_size=3), c))}
    if kind == 5:
        return {draw(st.sampled_from(('contains', 'yaql', 'get_param'))):
                draw(expressions(names, depth + 1))}
    if kind == 6:
        return draw(calls(names, depth + 1))
    return draw(scalars())


# -- parameters ------------------------------------------------------------

PATTERNS = (
    '(a+)+$', '(?=.*[0-9])(?=.*[a-z]).{8,}', '(a|aa)*b', r'\d+',
    '[[:alpha:]]+', 'a{,3}', 'a{99999999999}', 'a{1000}{1000}',
    '(' * 300 + ')' * 300, '(' * 1200 + ')' * 1200, '[', '(?P<x>a)(?P=x)',
    r'\b\w+\b', '^$', r'a\Z', '.*\ud800', '\x00', '[^]a]', 'a{5,3}',
    '(?i)A', '(?x) a b # c', '(?<=a)b', r'\p{L}', r'\N{DIGIT ONE}',
    r'\u00e9', '$a', '.*', '', r'[\W\d]', r'\1', '(?', '*', 'x{2,}?',
)


def patterns():
    return st.one_of(st.sampled_from(PATTERNS),
                     st.text('()[]{}|*+?.^$\\ad,9:=!<-P', max_size=24))


PARAM_TYPES = ('string', 'number', 'json', 'boolean',
               'comma_delimited_list')


@st.composite
def constraints(draw):
    kind = draw(mostly(st.sampled_from(('range', 'length', 'modulo',
                                        'allowed_values', 'allowed_pattern',
                                        'custom_constraint')),
                       st.just('nope')))
    bound = st.one_of(st.integers(-5, 5), st.sampled_from(ODD_NUMBERS),
                      st.sampled_from(('1', 'x', 'nan', 'inf')), scalars())
    arg = {
        'range': st.fixed_dictionaries({}, optional={'min': bound,
                                                     'max': bound}),
        'length': st.fixed_dictionaries({}, optional={'min': bound,
                                                      'max': bound}),
        'modulo': st.fixed_dictionaries({}, optional={'step': bound,
                                                      'offset': bound}),
        'allowed_values': st.lists(scalars(), max_size=4),
        'allowed_pattern': patterns(),
        'custom_constraint': st.sampled_from(('nova.flavor',
                                              'glance.image',
                                              'neutron.network', 'bogus')),
    }.get(kind, scalars())
    c = {kind: draw(st.one_of(arg, junk(4)) if draw(st.integers(0, 5)) == 5
                    else arg)}
    if draw(st.booleans()):
        c['description'] = draw(scalars())
    return c


def parameter_values(kind):
    """A value for a parameter of type `kind`: one it takes, or not."""
    plausible = {
        'string': st.text(ANY_CHAR, max_size=10),
        'number': st.one_of(st.integers(-10, 10), st.floats(
            allow_nan=False, allow_infinity=False), st.sampled_from(
            ('1', '2.5', 'nan', 'inf', '1e999', '0x1'))),
        'json': st.one_of(junk(6), st.sampled_from((
            '{}', '[1]', '{"a":', 'NaN', '[' * 100,
            '[' * 3000 + ']' * 3000, '9' * 5000))),
        'boolean': st.sampled_from((True, False, 'yes', 'on', 'maybe', 1,
                                    2)),
        'comma_delimited_list': st.one_of(st.lists(scalars(), max_size=3),
                                          st.text('a,b ', max_size=6)),
    }.get(kind, scalars())
    return st.one_of(plausible, plausible, scalars(), junk(4))


@st.composite
def parameter_decls(draw, kind):
    decl = {'type': kind}
    if draw(st.booleans()):
        decl['default'] = draw(parameter_values(kind))
    if draw(st.booleans()):
        decl['constraints'] = draw(st.one_of(
            st.lists(constraints(), max_size=3), junk(3)))
    for key, values in (('hidden', st.one_of(st.booleans(),
                                             st.sampled_from(('yes', 'x',
                                                              1)))),
                        ('label', scalars()), ('description', scalars()),
                        ('immutable', scalars()),
                        ('tags', st.one_of(st.lists(scalars(),
                                                    max_size=2),
                                           scalars())),
                        ('nope', scalars())):
        if draw(st.integers(0, 6)) == 6:
            decl[key] = draw(values)
    return decl


# -- resources ---------------------------------------------------------------

#: types that run in this process at once (the create test's), the ones
#: that nest stacks, and what the simulated cloud has
QUICK = ('OS::Heat::Value', 'OS::Heat::RandomString',
         'OS::Heat::TestResource', 'OS::Heat::None',
         'OS::Heat::SoftwareConfig', 'OS::Heat::StructuredConfig',
         'OS::Heat::CloudConfig', 'OS::Heat::MultipartMime',
         'OS::Heat::WaitConditionHandle', 'OS::Converge::FactStore')
NESTING = ('OS::Heat::ResourceGroup', 'OS::Heat::ResourceChain',
           'OS::Heat::Stack', 'OS::Heat::AutoScalingGroup')
CLOUD = ('OS::Nova::Server', 'OS::Neutron::Net', 'OS::Neutron::Port',
         'OS::Cinder::Volume', 'OS::Heat::WaitCondition',
         'OS::Heat::SoftwareDeployment', 'OS::Nova::KeyPair')
UNKNOWN_TYPES = ('OS::Foo::Bar', 'My::Mapped', 'AWS::EC2::Instance',
                 'nested.yaml', 'missing.yaml', 'file:///etc/passwd.yaml',
                 'OS::Heat::', '', 'os::heat::value')


def _schema_value(schema, names, depth):
    """A value for a property of `schema` (properties.Schema): of its
    type and shape mostly, anything now and then."""
    e = expressions(names, depth + 1)
    t = schema.type
    if t == p.STRING:
        base = st.one_of(st.sampled_from(schema.allowed_values or ('x',)),
                         st.text(ANY_CHAR, max_size=10), scalars())
    elif t in (p.INTEGER, p.NUMBER):
        base = st.one_of(st.integers(-2, 4), st.sampled_from(ODD_NUMBERS),
                         st.sampled_from(('3', '1.5', 'nan', '1e999')))
    elif t == p.BOOLEAN:
        base = st.sampled_from((True, False, 'yes', 'no', 'x', 0, 2))
    elif t == p.MAP:
        if isinstance(schema.schema, dict) and depth < 3:
            base = properties_for(schema.schema, names, depth + 1)
        else:
            base = st.dictionaries(keys(), e, max_size=3)
    elif t == p.LIST:
        item = schema.schema
        if isinstance(item, dict) and depth < 3:
            base = st.lists(properties_for(item, names, depth + 1),
                            max_size=2)
        elif isinstance(item, p.Schema) and depth < 3:
            base = st.lists(_schema_value(item, names, depth + 1),
                            max_size=3)
        else:
            base = st.lists(e, max_size=3)
    else:
        base = e
    value = st.one_of(base, base, base, e)
    # a required one given as null is "not assigned": rare, so that most
    # resources get past that first check
    return mostly(value.filter(lambda v: v is not None), value) \
        if schema.required else value


def properties_for(schemas, names, depth=0):
    """Properties of a plug-in's schema (name -> Schema): some of its
    keys with values of their kind or not, and now and then one it has
    not."""
    @st.composite
    def build(draw):
        out = {}
        keys_ = draw(st.lists(st.sampled_from(sorted(schemas)), unique=True,
                              max_size=len(schemas))) if schemas else []
        # the required ones, mostly (else the first check refuses it)
        if draw(st.integers(0, 9)) < 9:
            keys_ += [k for k in sorted(schemas)
                      if schemas[k].required and k not in keys_]
        for key in keys_:
            out[key] = draw(_schema_value(schemas[key], names, depth))
        if draw(st.integers(0, 9)) == 9:
            out[draw(keys())] = draw(scalars())
        return out
    return build()


@st.composite
def nested_template(draw, names):
    """A small template for a nested stack (OS::Heat::Stack's template, a
    provider file, a group's member type), as a map or as text."""
    doc = draw(templates(max_resources=2, nested=True))
    if draw(st.booleans()):
        return doc
    return json.dumps(doc) if draw(st.booleans()) else draw(junk(4))


@st.composite
def resource_defs(draw, names, rtype):
    plugin = registry.get(rtype) if isinstance(rtype, str) else None
    schemas = getattr(plugin, 'properties_schema', None) or {}
    res = {'type': rtype}
    if draw(st.integers(0, 5)) < 5:
        if rtype == 'OS::Heat::Stack' and not names.nested and \
                draw(st.booleans()):
            props = {'template': draw(nested_template(names))}
        elif rtype in ('OS::Heat::ResourceGroup',
                       'OS::Heat::AutoScalingGroup') and draw(st.booleans()):
            member = {'type': draw(st.sampled_from(QUICK + UNKNOWN_TYPES)),
                      'properties': draw(st.dictionaries(
                          st.sampled_from(('value', 'length', 'salt',
                                           'config', 'nope')),
                          expressions(names, 2), max_size=2))}
            key = 'resource_def' if rtype.endswith('ResourceGroup') \
                else 'resource'
            props = {key: member, 'count': draw(st.sampled_from(
                (0, 1, 2, 3, -1, 10 ** 9, '2', 2.0, 2.5, None)))}
            if rtype.endswith('AutoScalingGroup'):
                props = {key: member, 'min_size': draw(st.sampled_from(
                    (0, 1, 2, -1, 10 ** 9))), 'max_size': draw(
                    st.sampled_from((0, 1, 3, 10 ** 9, 'x')))}
        else:
            props = draw(properties_for(schemas, names))
        res['properties'] = props if draw(st.integers(0, 9)) < 9 else \
            draw(scalars())
    extras = {
        'depends_on': st.one_of(names.resource(),
                                st.lists(names.resource(), max_size=3)),
        'condition': conditions(names),
        'metadata': st.one_of(st.dictionaries(keys(), expressions(names, 2),
                                              max_size=2), scalars()),
        'deletion_policy': st.one_of(st.sampled_from(
            ('Delete', 'Retain', 'Snapshot', 'delete', 'retain', 'Keep')),
            expressions(names, 2)),
        'update_policy': st.one_of(st.dictionaries(
            st.sampled_from(('batch_create', 'rolling_update', 'nope')),
            junk(4), max_size=2), scalars()),
        'external_id': st.one_of(st.sampled_from(('abc', '')),
                                 expressions(names, 2)),
        'description': scalars(),
    }
    for key in draw(st.lists(st.sampled_from(sorted(extras)), unique=True,
                             max_size=3)):
        res[key] = draw(extras[key])
    if draw(st.integers(0, 39)) == 39:
        res['nope'] = draw(scalars())
    return res


def resource_types():
    return mostly(st.one_of(st.sampled_from(QUICK), st.sampled_from(QUICK),
                            st.sampled_from(NESTING), st.sampled_from(CLOUD)),
                  st.one_of(st.sampled_from(UNKNOWN_TYPES), scalars()),
                  one_in=12)


# -- templates, environments, requests -----------------------------------

VERSIONS = fn.VERSIONS + tuple(fn.ALIASES) + (
    '2099-01-01', '2013-05-24', 20180831, None, '')


@st.composite
def templates(draw, max_resources=5, nested=False, files=()):
    """A template: its sections of the right types mostly, their contents
    hostile; `files`: the names its get_file may name."""
    # as many as 1..max_resources (a list strategy's would be mostly
    # none or one), now and then none
    count = draw(mostly(st.integers(1, max_resources), st.just(0),
                        one_in=15))
    rnames = draw(st.lists(resource_names(), min_size=count,
                           max_size=count, unique=True))
    pnames = draw(st.lists(mostly(st.sampled_from(('p0', 'p1', 'p2')),
                                  keys()), max_size=3, unique=True))
    cnames = draw(st.lists(st.sampled_from(('c0', 'c1', 'c2')), max_size=2,
                           unique=True))
    names = Names(rnames, pnames, cnames, tuple(files), nested)
    doc = {'heat_template_version': draw(mostly(
        st.sampled_from(('2021-04-16', '2018-08-31', 'wallaby')),
        st.sampled_from(VERSIONS)))}
    sections = {
        'description': scalars(),
        'parameters': st.fixed_dictionaries({
            n: mostly(st.sampled_from(PARAM_TYPES).flatmap(
                parameter_decls), junk(3)) for n in pnames}),
        'conditions': st.fixed_dictionaries({
            n: conditions(names) for n in cnames}),
        'resources': st.fixed_dictionaries({
            n: resource_types().flatmap(
                lambda t: resource_defs(names, t)) for n in rnames}),
        'outputs': st.dictionaries(keys(), st.one_of(
            st.fixed_dictionaries({'value': expressions(names)}, optional={
                'condition': conditions(names), 'description': scalars()}),
            scalars()), max_size=3),
        'parameter_groups': st.lists(st.one_of(st.fixed_dictionaries(
            {'parameters': st.lists(names.parameter(), max_size=3)},
            optional={'label': scalars()}), scalars()), max_size=2),
        'nope': scalars(),
    }
    wanted = ['resources', 'parameters', 'conditions', 'outputs',
              'description', 'parameter_groups']
    if draw(st.integers(0, 29)) == 29:
        wanted.append('nope')
    for key in wanted:
        odds = {'resources': 12, 'parameters': 7, 'conditions': 4,
                'outputs': 5, 'nope': 14}.get(key, 1)
        roll = draw(st.integers(0, 13))
        # 0, what hypothesis shrinks towards, is the usual: resources,
        # and no other section
        if (roll < odds) if key == 'resources' else (roll >= 14 - odds):
            # a section of the right type, now and then one of any
            doc[key] = draw(sections[key] if draw(st.integers(0, 15)) < 15
                            else junk(3))
    if draw(st.integers(0, 30)) == 30:
        doc.pop('heat_template_version')
    return doc


@st.composite
def environments(draw, doc):
    """An environment for `doc`: its parameters, parameter_defaults,
    resource_registry (mappings, loops, wildcards, per-resource entries),
    event_sinks ..., of the right types mostly."""
    declared = doc.get('parameters')
    pnames = sorted(declared) if isinstance(declared, dict) and \
        declared else ['p0']
    rnames = sorted(doc.get('resources') or {}) \
        if isinstance(doc.get('resources'), dict) else []
    values = st.dictionaries(mostly(st.sampled_from(pnames), keys()),
                             st.one_of(scalars(), junk(3)), max_size=3)
    if pnames == ['p0']:   # the template declares none
        values = mostly(st.just({}), values)
    target = st.one_of(st.sampled_from(QUICK + UNKNOWN_TYPES + (
        'My::Mapped', 'My::Loop', 'nested.yaml')), scalars())
    registry_map = st.dictionaries(
        st.sampled_from(('My::Mapped', 'My::Loop', 'OS::Heat::Value',
                         'OS::Foo::*', '*', 'base_url', 'resources')),
        st.one_of(target, st.dictionaries(
            st.sampled_from(rnames + ['r*', '*']) if rnames else
            st.sampled_from(('r*', '*')), st.one_of(
                st.dictionaries(st.sampled_from(('hooks', 'My::Mapped',
                                                 'OS::Heat::None')),
                                st.one_of(target, st.sampled_from(
                                    ('pre-create', 'pre-update'))),
                                max_size=2), scalars()), max_size=2),
            junk(3)), max_size=3)
    sections = {
        'parameters': values,
        'parameter_defaults': values,
        'resource_registry': registry_map,
        'event_sinks': st.one_of(st.lists(st.one_of(st.fixed_dictionaries(
            {'type': st.sampled_from(('zaqar-queue', 'nope')),
             'target': scalars()}), scalars()), max_size=2), scalars()),
        'parameter_merge_strategies': st.dictionaries(
            st.sampled_from(pnames + ['default']), st.sampled_from(
                ('merge', 'overwrite', 'deep_merge', 'x')), max_size=2),
        'encrypted_param_names': st.one_of(st.lists(scalars(), max_size=2),
                                           scalars()),
        'converge': st.dictionaries(st.sampled_from(('policy', 'nope')),
                                    st.one_of(st.sampled_from(
                                        ('observe', 'repair:60', 'off',
                                         'repair:-1', 'x')), scalars()),
                                    max_size=2),
        'nope': scalars(),
    }
    env = {}
    usual = sorted(k for k in sections if k != 'nope')
    for key in draw(st.lists(mostly(st.sampled_from(usual), st.just('nope'),
                                    one_in=40), unique=True, max_size=4)):
        env[key] = draw(mostly(sections[key], junk(3), one_in=20))
    return env


TIMEOUTS = (0, -1, 1.5, '5', True, 10 ** 20, 10081)


def parameter_maps(doc):
    """Parameters for `doc`: values for those it declares, of their
    types or not, and now and then one it does not declare."""
    declared = doc.get('parameters')
    if not isinstance(declared, dict) or not declared:
        return mostly(st.just({}), st.dictionaries(keys(), scalars(),
                                                   max_size=2))
    return st.dictionaries(
        mostly(st.sampled_from(sorted(declared)), keys()),
        st.one_of(scalars(), junk(3), *(
            parameter_values(d.get('type')) for d in declared.values()
            if isinstance(d, dict) and isinstance(d.get('type'), str))),
        max_size=3)


@st.composite
def requests(draw, create=False):
    """A create request: {stack_name, template, environment, files,
    parameters, timeout_mins}, as a client would send it (the template a
    map, or now and then its text), narrowed by Quick (`create`: for a
    create)."""
    files = {}
    names = draw(st.lists(st.sampled_from(('f.txt', 'nested.yaml',
                                           'env.yaml')), unique=True,
                          max_size=3))
    for name in names:
        if name == 'nested.yaml':
            files[name] = json.dumps(draw(templates(max_resources=2,
                                                    nested=True)))
        else:
            files[name] = draw(st.one_of(st.text(ANY_CHAR, max_size=20),
                                         long_strings()))
    doc = draw(templates(files=names))
    body = {'stack_name': draw(mostly(st.just('fuzzed'), st.one_of(
        st.sampled_from(('', '1abc', 'a/b', 'a' * 256, '\u00e9t\u00e9',
                         'a b')), scalars()))),
        'template': doc, 'files': files,
        'environment': draw(environments(doc)),
        'parameters': draw(parameter_maps(doc)),
        'timeout_mins': draw(mostly(st.sampled_from((None, 1, 60)),
                                    st.sampled_from(TIMEOUTS)))}
    if draw(st.integers(0, 9)) == 9:
        body['template'] = json.dumps(doc)
    Quick(create=create).request(body)
    return body


class Quick:
    """Narrows a request so that validating it, or creating it
    (`create`), costs the test seconds: the waits a template may ask for
    (TestResource's, at validate as well as create) cut to nothing
    where they would be taken, and for a create only types that run at
    once in this process (a cloud type becomes OS::Heat::None, which
    takes any properties), groups of at most three members. A value the
    engine should refuse (a wait or count beyond its limit, of the wrong
    type) is left as it is: hostile values stay."""

    WAITS = ('wait_secs', 'attr_wait_secs', 'constraint_prop_secs')
    COUNTS = ('count', 'min_size', 'max_size', 'desired_capacity')

    def __init__(self, create=False):
        self.create = create

    def request(self, body):
        if isinstance(body.get('template'), dict):
            self.template(body['template'])
        elif isinstance(body.get('template'), str):
            body['template'] = self.text(body['template'])
        files = body.get('files') or {}
        for key, text in list(files.items()):
            files[key] = self.text(text)

    def text(self, text):
        try:
            doc = json.loads(text)
        except ValueError:
            return text
        if not isinstance(doc, dict):
            return text
        self.template(doc)
        return json.dumps(doc)

    def template(self, doc):
        res = doc.get('resources')
        if not isinstance(res, dict):
            return
        for r in res.values():
            if isinstance(r, dict):
                self.resource(r)

    @staticmethod
    def _number(value):
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return value
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return None
        return None

    def resource(self, r):
        if self.create and r.get('type') in CLOUD:
            r['type'] = 'OS::Heat::None'
        props = r.get('properties')
        if not isinstance(props, dict):
            return
        for key in self.WAITS:
            secs = self._number(props.get(key))
            if secs is not None and -10 ** 6 < secs < 10 ** 6:
                props[key] = 0
        waits = props.get('action_wait_secs')
        if isinstance(waits, dict):
            for action in list(waits):
                secs = self._number(waits[action])
                if secs is not None and -10 ** 6 < secs < 10 ** 6:
                    waits[action] = 0
        for key in self.COUNTS if self.create else ():
            count = self._number(props.get(key))
            if count is not None and 3 < count < 10 ** 6:
                props[key] = 3
        for key in ('resource_def', 'resource'):
            if isinstance(props.get(key), dict):
                self.resource(props[key])
        if isinstance(props.get('template'), dict):
            self.template(props['template'])
        elif isinstance(props.get('template'), str):
            props['template'] = self.text(props['template'])
        if self.create and isinstance(props.get('resources'), list):
            props['resources'] = [
                'OS::Heat::None' if t in CLOUD else t
                for t in props['resources']]


def copy_of(body):
    return copy.deepcopy(body)
