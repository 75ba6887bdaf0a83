"""Bounded template input: alias bombs, nesting, duplicate keys, and
functions whose result or running time could explode."""

import time

import pytest

from converge import exception
from converge.template import Bundle
from converge.template import StackDefinition
from converge.template import load_bundle
from converge.template import loader

HEAD = ('heat_template_version: 2018-08-31\nresources:\n r:\n'
        '  type: OS::Heat::Value\n  properties:\n   value:')


def laughs(levels, fan, one_line=False):
    """A 'billion laughs' template: each anchor a list of `fan` aliases to
    the one before, fan ** levels leaves in all."""
    names = 'bcdefghijk'
    if one_line:
        text = HEAD + ' [&a lol'
        prev = 'a'
        for n in names[:levels]:
            text += ',&%s [%s]' % (n, ','.join(['*' + prev] * fan))
            prev = n
        return text + ']\n'
    lines = [HEAD, '    - &a lol']
    prev = 'a'
    for n in names[:levels]:
        lines.append('    - &%s [%s]' % (n, ','.join(['*' + prev] * fan)))
        prev = n
    return '\n'.join(lines) + '\n'


BOMB_450 = laughs(9, 9)                  # 387,420,489 leaves
BOMB_331 = laughs(8, 8, one_line=True)   # 16,777,216 leaves


def test_the_bombs_are_the_sizes_of_the_report():
    assert 440 <= len(BOMB_450) <= 460
    assert 330 <= len(BOMB_331) <= 345


@pytest.mark.parametrize('text', [BOMB_450, BOMB_331])
def test_alias_bomb_is_refused_naming_file_alias_line_and_limit(
        tmp_path, text):
    path = tmp_path / 'bomb.yaml'
    path.write_text(text)
    start = time.monotonic()
    with pytest.raises(exception.InvalidTemplate) as exc:
        load_bundle(str(path))
    assert time.monotonic() - start < 5
    e = exc.value
    assert e.filename == str(path)
    line = text.splitlines()[e.line - 1]
    assert '*' in line  # the line of an alias
    assert 'at the alias *' in str(e)
    assert 'max_template_nodes' in str(e) and '2000000' in str(e)


def test_the_composing_path_is_bounded_too(tmp_path):
    # a merge key sends the document to the composing loader
    text = laughs(9, 9).replace('   value:\n', '   value:\n    - {<<: {x: 1}}\n')
    with pytest.raises(exception.InvalidTemplate) as exc:
        loader._load_composed(text, 'bomb.yaml')
    assert 'max_template_nodes' in str(exc.value)
    assert '*' in text.splitlines()[exc.value.line - 1]
    with pytest.raises(exception.InvalidTemplate, match='max_template_nodes'):
        loader.parse_text(text, 'bomb.yaml')


def events_build(text, exp):
    """The event loader's document for `text`, counted by `exp`."""
    ldr = loader.Loader(text)
    try:
        ldr.get_event()  # stream start
        ldr.get_event()  # document start
        return loader._build(ldr, ldr.get_event(), {}, exp, 0)
    finally:
        ldr.dispose()


def test_long_values_behind_aliases_are_counted_in_characters():
    from converge.template import bounds
    text = 'a: &a "%s"\nb: [*a, *a, *a, *a]\n' % ('x' * 1000)
    assert len(text) < 3000  # fits as written, not with the copies
    with pytest.raises(exception.InvalidTemplate) as exc:
        events_build(text, bounds.Expansion('t.yaml', max_chars=3000))
    assert 'more than 3000 characters' in str(exc.value)
    assert exc.value.line == 2 and '*a' in str(exc.value)


def test_nesting_deeper_than_the_limit_is_refused(tmp_path):
    deep = 'x: ' + '[' * 100 + ']' * 100 + '\n'
    with pytest.raises(exception.InvalidTemplate,
                       match='max_template_depth'):
        loader.parse_text(deep, 't.yaml')
    # through an alias: the anchor's nesting counts where it is used
    text = 'a: &a [[[[1]]]]\nb: [[[[*a]]]]\n'
    from converge.template import bounds
    with pytest.raises(exception.InvalidTemplate) as exc:
        events_build(text, bounds.Expansion('t.yaml', max_depth=8))
    assert exc.value.line == 2 and '*a' in str(exc.value)
    # and JSON, which has its own fast path
    with pytest.raises(exception.InvalidTemplate,
                       match='max_template_depth'):
        loader.parse_text('{"x": ' + '[' * 2000 + ']' * 2000 + '}', 't.json')


@pytest.mark.long  # 20-30 s beside a busy machine
def test_a_large_template_without_aliases_still_loads(tmp_path):
    from converge.bench import scenarios
    sc = scenarios.make('tripleo', 1000)
    path = sc.write(str(tmp_path))
    bundle = load_bundle(path)
    assert len(bundle.template['resources']) == 22010


DUP_RESOURCE = '''heat_template_version: 2018-08-31
resources:
  server:
    type: OS::Heat::None
  other:
    type: OS::Heat::None
  server:
    type: OS::Heat::Value
'''

DUP_PROPERTY_MERGE = '''heat_template_version: 2018-08-31
resources:
  base: &base {type: OS::Heat::Value}
  a:
    <<: *base
    properties:
      value: 1
      value: 2
'''


def test_duplicate_resource_names_both_lines(tmp_path):
    path = tmp_path / 't.yaml'
    path.write_text(DUP_RESOURCE)
    with pytest.raises(exception.InvalidTemplate) as exc:
        load_bundle(str(path))
    assert str(exc.value) == ("%s:7: duplicate key 'server' at line 7 "
                              "(first at line 3)" % path)


def test_duplicate_key_on_the_composing_path_names_both_lines():
    # the merge key sends this one to the composing loader
    with pytest.raises(exception.InvalidTemplate) as exc:
        loader.parse_text(DUP_PROPERTY_MERGE, 't.yaml')
    assert str(exc.value) == ("t.yaml:8: duplicate key 'value' at line 8 "
                              "(first at line 7)")
    # a merged-in key overridden by the map's own is not a duplicate
    doc = loader.parse_text('b: &b {x: 1}\nm: {<<: *b, x: 2}\n')
    assert doc['m'] == {'x': 2}


def test_duplicate_key_in_json_and_in_an_environment(tmp_path):
    with pytest.raises(exception.InvalidTemplate) as exc:
        loader.parse_text('{"a": 1,\n "b": {"c": 1,\n "c": 2}}', 't.json')
    assert "duplicate key 'c' at line 3 (first at line 2)" in str(exc.value)
    t = tmp_path / 't.yaml'
    t.write_text('heat_template_version: 2018-08-31\n')
    env = tmp_path / 'env.yaml'
    env.write_text('parameters:\n  a: 1\nparameter_defaults: {}\n'
                   'parameters:\n  b: 2\n')
    with pytest.raises(exception.InvalidTemplate) as exc:
        load_bundle(str(t), [str(env)])
    assert exc.value.filename == str(env)
    assert "duplicate key 'parameters' at line 4 (first at line 1)" in \
        str(exc.value)


def test_get_file_over_the_size_limit(tmp_path):
    (tmp_path / 'big.txt').write_text('x' * 200)
    t = tmp_path / 't.yaml'
    t.write_text('heat_template_version: 2018-08-31\nresources:\n'
                 '  r:\n    type: OS::Heat::Value\n'
                 '    properties: {value: {get_file: big.txt}}\n')
    with pytest.raises(exception.InvalidTemplate) as exc:
        load_bundle(str(t), max_size=150)
    assert 'get_file big.txt: file size (200 bytes) exceeds' in \
        str(exc.value)
    assert exc.value.line == 5


# -- evaluation ---------------------------------------------------------------

def definition(value):
    doc = {'heat_template_version': '2018-08-31',
           'resources': {'r': {'type': 'OS::Heat::Value',
                               'properties': {'value': value}}}}
    return lambda: StackDefinition(Bundle(doc, template_path='t.yaml'))


def test_yaql_catastrophic_regex_is_stopped_with_a_clear_error():
    make = definition({'yaql': {'expression':
                                "regex('^(a|aa)+$').matches($.data)",
                                'data': 'a' * 60 + '!'}})
    start = time.monotonic()
    with pytest.raises(exception.InvalidTemplate) as exc:
        make()
    assert time.monotonic() - start < 10
    assert 'resources.r.properties.value: : yaql' in str(exc.value)
    assert 'yaql_time_limit' in str(exc.value)


def test_yaql_regex_of_the_issue_is_answered():
    # the regex package does not backtrack on this one; `re` ran for hours
    from converge.template import functions as fn
    defn = definition({'yaql': {'expression':
                                "regex('^(a+)+$').matches($.data)",
                                'data': 'a' * 36 + '!'}})()
    value = fn.resolve(defn.resources['r']._properties, fn.Context(defn))
    assert value == {'value': False}


@pytest.mark.parametrize('expression', [
    'range(1000000000).len()',
    '$.data.repeat().len()',
    'range(199).select(range(199).select(range(199).len()).sum()).sum()',
])
def test_yaql_loops_are_stopped_by_the_time_limit(expression):
    start = time.monotonic()
    with pytest.raises(exception.InvalidTemplate, match='yaql_time_limit'):
        definition({'yaql': {'expression': expression, 'data': 'x'}})()
    assert time.monotonic() - start < 10


def test_yaql_one_step_explosions_are_refused():
    for expression in ('pow(10, 100000000)', 'shiftBitsLeft(1, 10000000000)'):
        with pytest.raises(exception.InvalidTemplate,
                           match='too much memory'):
            definition({'yaql': {'expression': expression}})()


def test_yaql_regex_functions_still_work():
    from converge.template import functions as fn
    expr = ("[regex('a.c').search('xabc'), 'abcb'.replace(regex('b'), 'X'),"
            " regex('(?P<x>a)(.)c').searchAll('abcadc', [$2.value, $x.start]),"
            " 'abc' =~ 'b', regex('b').split('abcb'), escapeRegex('a.b')]")
    defn = definition({'yaql': {'expression': expr}})()
    value = fn.resolve(defn.resources['r']._properties, fn.Context(defn))
    assert value['value'] == ['abc', 'aXcX', [['a', 0], ['a', 3]], True,
                              ['a', 'c', ''], 'a\\.b']


NUMBERS = [str(i) for i in range(100)]


@pytest.mark.parametrize('value,name', [
    ({'str_replace': {'template': 'x' * 1000,
                      'params': {'x': 'y' * 10000}}}, 'str_replace'),
    ({'list_join': [',', [{'get_param': 'OS::stack_name'}] * 10000]},
     'list_join'),
    ({'list_concat': [[{'get_param': 'OS::stack_name'}] * 5000] * 20},
     'list_concat'),
    ({'repeat': {'for_each': {'a': NUMBERS, 'b': NUMBERS, 'c': NUMBERS},
                 'template': 'abc'}}, 'repeat'),
])
def test_function_results_are_bounded(value, name, monkeypatch):
    from converge.template import bounds
    monkeypatch.setitem(bounds._DEFAULTS, 'max_function_result_size', 50000)
    monkeypatch.setattr(bounds, 'limit', lambda n: bounds._DEFAULTS[n])
    with pytest.raises(exception.InvalidTemplate) as exc:
        definition(value)()
    msg = str(exc.value)
    assert 'resources.r.properties.value' in msg and name + ':' in msg
    assert 'max_function_result_size' in msg and '50000' in msg


def test_a_key_given_twice_with_the_same_value_is_accepted(tmp_path):
    # as TripleO's rendered common/post.yaml has it (Heat accepts it)
    path = tmp_path / 't.yaml'
    path.write_text('heat_template_version: 2018-08-31\nparameters:\n'
                    '  cli:\n    type: string\n    default: podman\n'
                    '  other: {type: string}\n'
                    '  cli:\n    type: string\n    default: podman\n')
    doc = loader.parse_text(path.read_text(), str(path))
    assert sorted(doc['parameters']) == ['cli', 'other']
    path.write_text(path.read_text()[:-len('podman\n')] + 'docker\n')
    with pytest.raises(exception.InvalidTemplate) as exc:
        loader.parse_text(path.read_text(), str(path))
    assert "duplicate key 'cli' at line 7 (first at line 3)" in \
        str(exc.value)
