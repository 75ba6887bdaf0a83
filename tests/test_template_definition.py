"""StackDefinition: parameters, conditions, resources, registry, errors."""

import os

import pytest

from converge import exception
from converge.template import StackDefinition
from converge.template import UNKNOWN
from tests.template_fakes import Anything, Data, Registry, Server
from converge.template import load_bundle


@pytest.fixture
def make(tmp_path):
    def _make(text, params=None, envs=(), **kw):
        t = tmp_path / 't.yaml'
        t.write_text(text)
        env_paths = []
        for i, env in enumerate(envs):
            p = tmp_path / ('env%d.yaml' % i)
            p.write_text(env)
            env_paths.append(str(p))
        bundle = load_bundle(str(t), env_paths)
        kw.setdefault('registry', Registry)
        return StackDefinition(bundle, params, **kw)
    return _make


def fails(make, text, params=None, **kw):
    with pytest.raises(exception.InvalidTemplate) as exc:
        make(text, params, **kw)
    return exc.value


HDR = 'heat_template_version: 2021-04-16\n'


# -- versions and sections ---------------------------------------------------

@pytest.mark.parametrize('v', ['2013-05-23', '2014-10-16', '2015-04-30',
                               '2015-10-15', '2016-04-08', '2016-10-14',
                               'newton', '2017-02-24', 'ocata', '2017-09-01',
                               'pike', '2018-03-02', 'queens', '2018-08-31',
                               'rocky', '2021-04-16', 'wallaby'])
def test_all_versions_accepted(make, v):
    d = make('heat_template_version: %s\nresources: {}\n' % v)
    assert d.version[:2] == '20'


def test_unknown_version(make):
    e = fails(make, 'heat_template_version: 2012-12-12\n')
    assert '2012-12-12' in e.message and '2021-04-16' in e.message
    assert 'wallaby' in e.message
    assert e.line == 1 and e.filename.endswith('t.yaml')


def test_unknown_top_level_key_and_conditions_in_old_version(make):
    e = fails(make, HDR + 'resources: {}\nblarg: 1\n')
    assert 'blarg' in e.message and e.line == 3
    e = fails(make, 'heat_template_version: 2016-04-08\nconditions: {}\n')
    assert 'conditions' in e.message


# -- parameters --------------------------------------------------------------

PARAMS = HDR + '''parameters:
  s: {type: string, default: abc}
  n: {type: number, default: '5'}
  f: {type: number, default: 2.5}
  b: {type: boolean, default: 'yes'}
  l: {type: comma_delimited_list, default: 'a, b,c'}
  e: {type: comma_delimited_list, default: ''}
  j: {type: json, default: '{"k": [1]}'}
  jm: {type: json, default: {k: v}}
'''


def test_parameter_types_and_coercion(make):
    d = make(PARAMS)
    assert d.parameters == {'s': 'abc', 'n': 5, 'f': 2.5, 'b': True,
                            'l': ['a', ' b', 'c'], 'e': [],
                            'j': {'k': [1]}, 'jm': {'k': 'v'}}


def test_parameter_values_from_cli_strings(make):
    d = make(PARAMS, {'n': '7', 'b': 'off', 'l': 'x,y', 'j': '[1, 2]',
                      's': 12, 'e': ['a', 1]})
    assert d.parameters['n'] == 7 and d.parameters['b'] is False
    assert d.parameters['l'] == ['x', 'y'] and d.parameters['j'] == [1, 2]
    assert d.parameters['s'] == '12' and d.parameters['e'] == ['a', '1']


@pytest.mark.parametrize('name,val,text', [
    ('n', 'abc', 'not a number'),
    ('b', 'maybe', 'Unrecognized value'),
    ('j', '{bad', 'JSON'),
])
def test_parameter_bad_values(make, name, val, text):
    e = fails(make, PARAMS, {name: val})
    assert text in e.message and "'%s'" % name in e.message
    assert e.path == ['parameters', name]
    assert e.line is not None


def test_parameter_sources_precedence(make):
    tmpl = HDR + '''parameters:
  a: {type: string, default: tmpl}
  b: {type: string, default: tmpl}
  c: {type: string, default: tmpl}
  d: {type: string, default: tmpl}
'''
    d = make(tmpl, {'a': 'user'}, envs=[
        'parameters: {a: env, b: env}\n'
        'parameter_defaults: {a: pd, b: pd, c: pd, undeclared: 1}\n'])
    assert d.parameters == {'a': 'user', 'b': 'env', 'c': 'pd',
                            'd': 'tmpl'}


def test_undeclared_and_missing_parameters(make):
    e = fails(make, HDR + 'parameters: {a: {type: string}}\n', {'x': 1})
    assert e.message.endswith('The Parameter (x) was not defined in '
                              'template.')
    e = fails(make, HDR + 'parameters:\n  a: {type: string}\n')
    assert 'The Parameter (a) was not provided.' in e.message
    assert e.line == 3
    d = make(HDR + 'parameters:\n  a: {type: string}\nresources:\n'
             '  r: {type: Test::Value, properties: {value: '
             '{get_param: a}}}\n', validate_values=False)
    assert d.parameters['a'] is UNKNOWN


CONSTRAINED = HDR + '''parameters:
  s:
    type: string
    default: abcd
    constraints:
      - length: {min: 2, max: 4}
      - allowed_pattern: '[a-z]+'
      - allowed_values: [abcd, xy, xyz, zzzzz, 'AB']
  n:
    type: number
    default: 4
    constraints:
      - range: {min: 1, max: 10}
        description: between one and ten
      - modulo: {step: 2, offset: 0}
  l:
    type: comma_delimited_list
    default: a,b
    constraints:
      - allowed_values: [a, b, c]
      - length: {max: 3}
  c:
    type: string
    default: k
    constraints:
      - custom_constraint: nova.keypair
'''


@pytest.mark.parametrize('name,val,text', [
    ('s', 'a', 'length (1) is out of range (min: 2, max: 4)'),
    ('s', 'zzzzz', 'length (5) is out of range (min: 2, max: 4)'),
    ('s', 'AB', '"AB" does not match pattern "[a-z]+"'),
    ('s', 'xyzz', '"xyzz" is not an allowed value'),
    ('n', '11', 'between one and ten'),
    ('n', '3', '3 is not a multiple of 2 with an offset of 0'),
    ('l', 'a,d', '"d" is not an allowed value'),
    ('l', 'a,b,c,a', 'length (4) is out of range (max: 3)'),
])
def test_constraint_violations(make, name, val, text):
    make(CONSTRAINED)
    e = fails(make, CONSTRAINED, {name: val})
    assert "Parameter '%s' is invalid: " % name in e.message
    assert text in e.message
    assert e.path == ['parameters', name] and e.line


def test_default_violating_constraint(make):
    e = fails(make, HDR + '''parameters:
  n:
    type: number
    default: 50
    constraints: [{range: {max: 10}}]
''')
    assert '50 is out of range (max: 10)' in e.message
    assert e.path == ['parameters', 'n', 'default'] and e.line == 5


def test_bad_parameter_schema(make):
    e = fails(make, HDR + 'parameters:\n  a: {type: strung}\n')
    assert 'strung' in e.message
    e = fails(make, HDR + 'parameters:\n  a: {type: string, foo: 1}\n')
    assert 'foo' in e.message
    e = fails(make, HDR + 'parameters:\n  a: {type: number, constraints: '
              '[{length: {min: 1}}]}\n')
    assert 'length' in e.message
    e = fails(make, 'heat_template_version: 2017-09-01\nparameters:\n'
              '  a: {type: string, default: x, tags: [t]}\n')
    assert 'tags' in e.message


def test_parameter_groups(make):
    base = HDR + 'parameters:\n  a: {type: string, default: x}\n' \
        '  b: {type: string, default: x}\n'
    make(base + 'parameter_groups:\n- label: g\n  parameters: [a, b]\n')
    e = fails(make, base + 'parameter_groups:\n- parameters: [a, c]\n')
    assert 'c' in e.message
    e = fails(make, base + 'parameter_groups:\n- parameters: [a]\n'
              '- parameters: [a]\n')
    assert 'one parameter group only' in e.message


def test_validate_info(make):
    d = make(HDR + '''description: my stack
parameter_groups:
- label: g
  parameters: [key]
parameters:
  key:
    type: string
    label: Key
    description: a key
    hidden: true
    constraints:
      - length: {min: 1, max: 8}
        description: short
      - allowed_values: [k1, k2]
  n:
    type: number
    default: 3
    constraints: [{range: {min: 1}}]
  l: {type: comma_delimited_list, default: ''}
  j: {type: json, default: {}}
  b: {type: boolean, default: true}
''', {'key': 'k1'})
    info = d.validate_info()
    assert info['Description'] == 'my stack'
    assert info['ParameterGroups'] == [{'label': 'g', 'parameters': ['key']}]
    p = info['Parameters']
    assert p['key']['Type'] == 'String' and p['key']['NoEcho'] == 'true'
    assert p['key']['Label'] == 'Key' and p['key']['Description'] == 'a key'
    assert p['key']['MinLength'] == 1 and p['key']['MaxLength'] == 8
    assert p['key']['AllowedValues'] == ['k1', 'k2']
    assert p['key']['ConstraintDescription'] == 'short'
    assert 'Value' in p['key'] and 'Default' not in p['key']
    assert p['n'] == {'Type': 'Number', 'Default': 3, 'Description': '',
                      'Label': 'n', 'NoEcho': 'false', 'MinValue': 1}
    assert p['l']['Type'] == 'CommaDelimitedList'
    assert p['j']['Type'] == 'Json' and p['b']['Type'] == 'Boolean'
    assert d.hidden_parameters == {'key'}


# -- conditions --------------------------------------------------------------

COND = HDR + '''parameters:
  env: {type: string, default: prod}
  zones: {type: comma_delimited_list, default: 'a,b'}
conditions:
  prod: {equals: [{get_param: env}, prod]}
  dev: {not: prod}
  both: {and: [prod, {not: dev}]}
  either: {or: [dev, false]}
  has_a: {contains: [a, {get_param: zones}]}
  yq: {yaql: {expression: '$.data.z.len() > 1', data: {z: {get_param: zones}}}}
resources:
  p: {type: Test::Value, condition: prod}
  d: {type: Test::Value, condition: dev}
  i: {type: Test::Value, condition: {equals: [{get_param: env}, dev]}}
outputs:
  o1: {value: {get_resource: p}, condition: both}
  o2: {value: {get_resource: d}, condition: either}
'''


def test_conditions(make):
    d = make(COND)
    assert list(d.resources) == ['p']
    assert d.conditions() == {'prod': True, 'dev': False, 'both': True,
                              'either': False, 'has_a': True, 'yq': True}
    # an output behind a false condition is listed with no value, as Heat
    # lists it; an output described by nothing says so in Heat's words
    outs = d.resolve_outputs(Data())
    assert sorted(outs) == ['o1', 'o2']
    assert outs['o2'] == {'value': None,
                          'description': 'No description given'}
    d = make(COND, {'env': 'dev'})
    assert sorted(d.resources) == ['d', 'i']


def test_condition_errors(make):
    e = fails(make, HDR + 'conditions:\n  a: {not: b}\n  b: {not: a}\n')
    assert 'Circular definition' in e.message
    e = fails(make, HDR + 'conditions:\n  a: {not: nothere}\n')
    assert 'Invalid condition "nothere"' in e.message
    e = fails(make, HDR + 'resources:\n  r: {type: Test::Value, '
              'condition: nothere}\n')
    assert 'nothere' in e.message
    e = fails(make, HDR + 'conditions:\n  a: {get_attr: [x, y]}\n')
    assert 'not allowed in conditions' in e.message
    e = fails(make, 'heat_template_version: 2017-02-24\nconditions:\n'
              '  a: {contains: [a, [a]]}\n')
    assert 'contains' in e.message
    e = fails(make, HDR + 'conditions:\n  a: {equals: [1]}\n')
    assert 'equals' in e.message and e.line == 3


def test_reference_to_disabled_resource(make):
    tmpl = HDR + '''conditions: {skip: false}
resources:
  a: {type: Test::Value, condition: skip}
  b:
    type: Test::Value
    properties:
      value: {get_attr: [a, value]}
'''
    e = fails(make, tmpl)
    assert 'disabled' in e.message and e.line == 8
    # depends_on a disabled resource is dropped, as in Heat
    d = make(HDR + '''conditions: {skip: false}
resources:
  a: {type: Test::Value, condition: skip}
  b: {type: Test::Value, depends_on: [a]}
''')
    assert d.dependencies() == {'b': set()}
    # fine inside the untaken branch of an if
    d = make(tmpl.replace('{get_attr: [a, value]}',
                          '{if: [skip, {get_attr: [a, value]}, 1]}'))
    assert d.dependencies() == {'b': set()}


# -- resources -----------------------------------------------------------------

def test_resource_fields_and_dependencies(make):
    d = make(HDR + '''parameters:
  policy: {type: string, default: retain}
resources:
  a: {type: Test::Value}
  b: {type: Test::Value}
  s:
    type: Test::Server
    description: srv
    depends_on: a
    deletion_policy: {get_param: policy}
    update_policy: {batch: {get_param: policy}}
    external_id: abc
    metadata: {m: {get_attr: [b, value]}}
    properties:
      image: {get_resource: b}
  t:
    type: Test::Server
    depends_on: [a, b]
    deletion_policy: Snapshot
    properties: {image: x, count: '3'}
''')
    assert list(d.resources) == ['a', 'b', 's', 't']
    s = d.resources['s']
    assert s.type == 'Test::Server' and s.plugin is Server
    assert s.depends_on == {'a'} and s.requires == {'a', 'b'}
    assert s.deletion_policy == 'Retain'
    assert s.update_policy == {'batch': 'retain'}
    assert s.external_id == 'abc' and s.description == 'srv'
    assert d.resources['t'].deletion_policy == 'Snapshot'
    assert d.dependencies() == {'a': set(), 'b': set(), 's': {'a', 'b'},
                                't': {'a', 'b'}}
    data = Data({'b': {'value': 'V'}})
    assert d.resolve_properties('s', data) == {'image': 'id-b', 'count': 1}
    assert d.resolve_properties('t', data) == {'image': 'x', 'count': 3}
    assert d.resolve_metadata('s', data) == {'m': 'V'}
    assert d.referenced_attributes('b') == {'value'}


def test_deletion_policy_lower_case_by_version(make):
    d = make(HDR + 'resources:\n  a: {type: Test::Value, '
             'deletion_policy: retain}\n')
    assert d.resources['a'].deletion_policy == 'Retain'
    e = fails(make, 'heat_template_version: 2016-04-08\nresources:\n'
              '  a: {type: Test::Value, deletion_policy: retain}\n')
    assert 'deletion policy' in e.message
    e = fails(make, HDR + 'resources:\n  a: {type: Test::Value, '
              'deletion_policy: dummy}\n')
    assert e.line == 3


@pytest.mark.parametrize('body,text,path', [
    ('  r: {type: Nope::Nope}\n', 'Nope::Nope',
     ['resources', 'r', 'type']),
    ('  r: {properties: {}}\n', 'type', ['resources', 'r']),
    ('  r: {type: Test::Value, wibble: 1}\n', 'wibble',
     ['resources', 'r', 'wibble']),
    ('  r: {type: Test::Server}\n', 'image',
     ['resources', 'r', 'properties', 'image']),
    ('  r:\n    type: Test::Server\n    properties:\n      image: x\n'
     '      bogus: 1\n', 'bogus', ['resources', 'r', 'properties', 'bogus']),
    ('  r:\n    type: Test::Server\n    properties:\n      image: x\n'
     '      count: many\n', 'many', ['resources', 'r', 'properties',
                                      'count']),
    ('  r:\n    type: Test::Server\n    properties:\n      image: x\n'
     '      meta: [1]\n', 'map', ['resources', 'r', 'properties', 'meta']),
    ('  r: {type: Test::Value, depends_on: [zz]}\n', 'zz',
     ['resources', 'r', 'depends_on']),
    ('  r: {type: Test::Value, properties: {value: {get_resource: zz}}}\n',
     'zz', ['resources', 'r', 'properties', 'value', 'get_resource']),
    ('  r: {type: Test::Value}\n  s: {type: Test::Value, properties: '
     '{value: {get_attr: [r, nope]}}}\n', 'nope',
     ['resources', 's', 'properties', 'value', 'get_attr']),
    ('  r: {type: Test::Value, properties: {value: {map_merge: []}}}\n',
     'map_merge', None),
])
def test_bad_resources_report_file_line_and_path(make, body, text, path):
    e = fails(make, 'heat_template_version: 2015-10-15\nresources:\n' + body)
    assert text in e.message
    if path is not None:
        assert e.path == path
    assert e.filename.endswith('t.yaml') and e.line and e.line >= 3
    assert str(e).startswith(e.filename + ':%d: ' % e.line)


def test_wrong_property_type_line(make):
    e = fails(make, HDR + '''resources:
  r:
    type: Test::Server
    properties:
      image: x
      count: lots
''')
    assert e.line == 7


def test_unknown_property_value_skips_validation(make):
    d = make(HDR + '''resources:
  a: {type: Test::Value}
  s:
    type: Test::Server
    properties:
      image: {get_attr: [a, value]}
      count: {get_attr: [a, value]}
''')
    assert d.resolve_properties('s', Data({'a': {'value': 2}})) == {
        'image': '2', 'count': 2}


def test_outputs_validation(make):
    e = fails(make, HDR + 'outputs:\n  o: {description: x}\n')
    assert 'value' in e.message
    e = fails(make, HDR + 'outputs:\n  o: {value: 1, bogus: 2}\n')
    assert 'bogus' in e.message
    e = fails(make, HDR + 'outputs:\n  o: {value: {get_attr: [zz, a]}}\n')
    assert 'zz' in e.message and e.line == 3


def test_max_resources_limit(make):
    tmpl = HDR + 'resources:\n  a: {type: Test::Value}\n' \
        '  b: {type: Test::Value}\n'
    make(tmpl, limits={'max_resources_per_stack': 2})
    e = fails(make, tmpl, limits={'max_resources_per_stack': 1})
    assert 'maximum resources' in e.message


# -- resource_registry ------------------------------------------------------------

def test_registry_aliases_chains_wildcards_and_overrides(make):
    env = '''resource_registry:
  My::Alias: My::Chain
  My::Chain: Test::Value
  OS::TripleO::*: OS::Heat::None
  Old::Srv::*: Test::*
  resources:
    special:
      My::Alias: Test::Server
'''
    d = make(HDR + '''resources:
  a: {type: My::Alias}
  b: {type: OS::TripleO::Services::Foo}
  c: {type: Old::Srv::Server, properties: {image: x}}
  special: {type: My::Alias, properties: {image: y}}
''', envs=[env])
    assert d.resources['a'].type == 'Test::Value'
    assert d.resources['b'].type == 'OS::Heat::None'
    assert d.resources['c'].type == 'Test::Server'
    assert d.resources['special'].type == 'Test::Server'


def test_registry_provider_template_is_read_relative_to_the_environment(
        make, tmp_path):
    (tmp_path / 'lib').mkdir()
    (tmp_path / 'lib' / 'nested.yaml').write_text(
        HDR + 'parameters:\n  size: {type: number}\n'
        'outputs:\n  twice: {value: 2}\n')
    d = make(HDR + 'resources:\n  a: {type: My::Nested, properties: '
             '{size: 3}}\n  b: {type: Test::Value, properties: {value: '
             '{get_attr: [a, twice]}}}\n',
             envs=['resource_registry: {My::Nested: lib/nested.yaml}\n'])
    rd = d.resources['a']
    assert rd.type == 'file://%s' % (tmp_path / 'lib' / 'nested.yaml')
    assert set(rd.plugin.properties_schema) == {'size'}
    # a property the provider has no parameter for, or a missing one
    e = fails(make, HDR + 'resources:\n  a: {type: My::Nested, properties:'
              ' {size: 3, colour: red}}\n',
              envs=['resource_registry: {My::Nested: lib/nested.yaml}\n'])
    assert 'colour' in e.message and e.line == 3
    e = fails(make, HDR + 'resources:\n  a: {type: My::Nested}\n',
              envs=['resource_registry: {My::Nested: lib/nested.yaml}\n'])
    assert 'size' in e.message


def test_a_missing_provider_template_names_the_file_and_line(make):
    e = fails(make, HDR + 'resources:\n  a: {type: My::Nested}\n',
              envs=['resource_registry: {My::Nested: nested.yaml}\n'])
    assert 'provider template nested.yaml: file not found' in e.message
    assert e.filename.endswith('env0.yaml') and e.line == 1
    e = fails(make, HDR + 'resources:\n  a: {type: ./x.yaml}\n')
    assert 'provider template ./x.yaml: file not found' in e.message
    assert e.filename.endswith('t.yaml') and e.line == 3


def test_registry_unknown_type_after_mapping(make):
    e = fails(make, HDR + 'resources:\n  a: {type: My::X}\n',
              envs=['resource_registry: {My::X: Other::Y}\n'])
    assert 'Other::Y' in e.message and 'My::X' in e.message


# -- scale ------------------------------------------------------------------------

def test_ten_thousand_resources(make):
    lines = [HDR, 'resources:\n']
    for i in range(10000):
        if i == 0:
            lines.append('  r0: {type: Test::Value}\n')
            continue
        lines.append(
            '  r%d: {type: %s, properties: {value: [{get_attr: [r%d, value]}, '
            '{get_attr: [r%d, value]}, {get_resource: r%d}]}}\n' % (
                i, 'Test::Value' if i % 2 else 'OS::Heat::None', i - 1,
                i // 2, max(0, i - 3)))
    d = make(''.join(lines))
    assert len(d.resources) == 10000
    assert d.dependencies()['r9999'] == {'r9998', 'r4999', 'r9996'}


# -- corpus -------------------------------------------------------------------------

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'shared', 'corpus', 'hot')


class AnyRegistry:
    @staticmethod
    def get(name):
        return Anything


@pytest.mark.skipif(not os.path.isdir(CORPUS), reason='no corpus')
@pytest.mark.parametrize('rel', [
    'heat-templates/hot/hello_world.yaml',
    'heat-templates/hot/servers_in_new_neutron_net.yaml',
    'heat-templates/hot/software-config/example-templates/'
    'example-deploy-sequence.yaml',
])
def test_corpus_templates_validate(rel):
    path = os.path.join(CORPUS, rel)
    if not os.path.exists(path):
        pytest.skip('missing %s' % rel)
    bundle = load_bundle(path)
    d = StackDefinition(bundle, registry=AnyRegistry, validate_values=False)
    assert d.resources
    d.validate_info()


def test_hidden_parameter_value_not_echoed_in_errors(make):
    e = fails(make, HDR + '''parameters:
  pw:
    type: string
    hidden: true
    constraints: [{allowed_pattern: '[a-z]+'}]
''', {'pw': 'S3cret!'})
    assert 'S3cret' not in str(e)
    assert 'allowed_pattern' in e.message


def test_a_stored_template_is_not_checked_again_when_a_worker_parses_it(
        make):
    # checked when it was stored (stack create, update): a worker's parse
    # of the stored template (engine/definitions.py) skips the properties'
    # checks, half of a parse every worker makes before its first unit
    text = HDR + ('resources:\n  s:\n    type: Test::Server\n'
                  '    properties:\n      image: cirros\n'
                  '      count: many\n')
    err = fails(make, text)
    assert 'count' in str(err)
    defn = make(text, stored=True)
    assert defn.resources['s'].type == 'Test::Server'
