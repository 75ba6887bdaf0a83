"""Intrinsic function semantics per HOT version (converge.template)."""

import hashlib
import json

import pytest
import yaml

from converge import exception
from converge.template import Bundle
from converge.template import StackDefinition
from converge.template import UNKNOWN
from tests.template_fakes import Data, Registry


def build(tmpl, params=None, files=None, **kw):
    text = yaml.safe_dump(tmpl) if isinstance(tmpl, dict) else tmpl
    doc = yaml.safe_load(text)
    bundle = Bundle(doc, files or {}, {}, 't.yaml', text)
    return StackDefinition(bundle, params, registry=Registry, **kw)


def value(version, snippet, params=None, files=None, attrs=None,
          extra=None):
    tmpl = {'heat_template_version': version,
            'parameters': params or {},
            'resources': {'r': {'type': 'Test::Value',
                                'properties': {'value': snippet}},
                          'other': {'type': 'Test::Value'}}}
    if extra:
        tmpl.update(extra)
    d = build(tmpl, files=files)
    return d.resolve_properties('r', Data(attrs)).get('value', '<omitted>')


def error(version, snippet, params=None, **kw):
    with pytest.raises(exception.InvalidTemplate) as exc:
        value(version, snippet, params, **kw)
    return exc.value


NEW = '2021-04-16'


# -- get_param ------------------------------------------------------------

def test_get_param_path_and_misses():
    params = {'p': {'type': 'json',
                    'default': {'a': [10, {'b': 'x'}], 'n': None}}}
    assert value(NEW, {'get_param': ['p', 'a', 1, 'b']}, params) == 'x'
    assert value(NEW, {'get_param': ['p', 'a', '0']}, params) == 10
    assert value(NEW, {'get_param': ['p', 'missing']}, params) == ''
    assert value(NEW, {'get_param': ['p', 'a', 5]}, params) == ''
    assert value(NEW, {'get_param': ['p', 'a', 0, 'deeper']}, params) == ''


def test_get_param_path_with_function():
    params = {'p': {'type': 'json', 'default': {'k1': 'v1'}},
              'key': {'type': 'string', 'default': 'k1'}}
    assert value(NEW, {'get_param': ['p', {'get_param': 'key'}]},
                 params) == 'v1'


def test_get_param_bad_list_index():
    params = {'p': {'type': 'json', 'default': [1, 2]}}
    e = error(NEW, {'get_param': ['p', 'x']}, params)
    assert 'get_param' in e.path


def test_get_param_undefined():
    e = error(NEW, {'get_param': 'nope'})
    assert 'nope' in e.message
    assert e.path == ['resources', 'r', 'properties', 'value', 'get_param']
    assert e.filename == 't.yaml' and e.line == 9  # the get_param line


def test_pseudo_parameters():
    tmpl = {'heat_template_version': NEW, 'resources': {'r': {
        'type': 'Test::Value', 'properties': {'value': [
            {'get_param': 'OS::stack_name'}, {'get_param': 'OS::stack_id'},
            {'get_param': 'OS::project_id'}, {'get_param': 'OS::region'}]}}}}
    d = build(tmpl, stack_name='s1', stack_id='abc', project_id='p')
    assert d.resolve_properties('r', Data())['value'] == [
        's1', 'abc', 'p', 'RegionOne']


# -- get_resource / get_attr ------------------------------------------------

def test_get_resource_and_attr():
    attrs = {'other': {'value': {'a': [1, 2]}, 'list': [5],
                       'show': {'x': 1}}}
    assert value(NEW, {'get_resource': 'other'}) == 'id-other'
    assert value(NEW, {'get_attr': ['other', 'value', 'a', 1]},
                 attrs=attrs) == 2
    # a path miss gives null (wrapped in a list: a null property is unset)
    assert value(NEW, [{'get_attr': ['other', 'value', 'zz']}],
                 attrs=attrs) == [None]
    assert value(NEW, [{'get_attr': ['other', 'list', 3]}],
                 attrs=attrs) == [None]
    assert value(NEW, {'get_attr': ['other', 'show']}, attrs=attrs) == {
        'x': 1}
    assert value(NEW, {'get_attr': ['other']}, attrs=attrs) == \
        attrs['other']
    # not created yet
    assert value(NEW, [{'get_attr': ['other', 'value']}]) == [None]


def test_get_attr_whole_resource_needs_2015_10_15():
    e = error('2015-04-30', {'get_attr': ['other']})
    assert 'get_attr' in e.message
    value('2015-10-15', {'get_attr': ['other']})


def test_get_attr_errors():
    e = error(NEW, {'get_attr': ['nothere', 'value']})
    assert 'nothere' in e.message
    assert e.path[-1] == 'get_attr'
    e = error(NEW, {'get_attr': ['other', 'bogus']})
    assert 'bogus' in e.message
    e = error(NEW, {'get_resource': 'nothere'})
    assert 'nothere' in e.message and e.line


def test_get_attr_allows_anything_on_unknown_property_plugin():
    tmpl = {'heat_template_version': NEW, 'resources': {
        'n': {'type': 'OS::Heat::None'},
        'r': {'type': 'Test::Value',
              'properties': {'value': {'get_attr': ['n', 'whatever']}}}}}
    d = build(tmpl)
    assert d.dependencies()['r'] == {'n'}
    assert d.referenced_attributes('n') == {'whatever'}


# -- str_replace ------------------------------------------------------------

def test_str_replace_longest_first_no_rescan():
    snippet = {'str_replace': {'template': 'var varname $a',
                               'params': {'var': 'X', 'varname': 'var',
                                          '$a': '$a$a'}}}
    assert value(NEW, snippet) == 'X var $a$a'


def test_str_replace_equal_length_lexicographic():
    snippet = {'str_replace': {'template': 'abc',
                               'params': {'bc': '1', 'ab': '2'}}}
    assert value(NEW, snippet) == '2c'


def test_str_replace_value_types():
    snippet = {'str_replace': {'template': 'a b c d e',
                               'params': {'a': None, 'b': True, 'c': 1.0,
                                          'd': {'z': 1, 'y': [1]},
                                          'e': 7}}}
    assert value(NEW, snippet) == ' True 1.0 {"y": [1], "z": 1} 7'


def test_str_replace_json_params_old_version_error():
    snippet = {'str_replace': {'template': 'a', 'params': {'a': [1]}}}
    e = error('2015-04-30', snippet)
    assert e.path[-1] == 'str_replace'
    assert value('2015-10-15', snippet) == '[1]'


def test_str_replace_shape_errors():
    e = error(NEW, {'str_replace': ['a']})
    assert e.path == ['resources', 'r', 'properties', 'value',
                      'str_replace']
    e = error(NEW, {'str_replace': {'template': 'a'}})
    assert 'params' in e.message


def test_str_replace_strict_and_vstrict():
    ok = {'template': 'ab', 'params': {'a': 'x'}}
    assert value(NEW, {'str_replace_strict': ok}) == 'xb'
    e = error(NEW, {'str_replace_strict': {'template': 'ab',
                                           'params': {'z': 'x'}}})
    assert 'z' in e.message
    e = error(NEW, {'str_replace_vstrict': {'template': 'ab',
                                            'params': {'a': ''}}})
    assert 'a' in e.message
    e = error('2016-10-14', {'str_replace_strict': ok})
    assert 'not supported in this version' in e.message


# -- list_join ----------------------------------------------------------------

def test_list_join_versions():
    assert value('2013-05-23', {'list_join': [',', ['a', None, 'b']]}) == \
        'a,,b'
    e = error('2013-05-23', {'list_join': [',', ['a'], ['b']]})
    assert 'list_join' in e.path
    assert value('2015-10-15', {'list_join': [',', ['a'], None, [],
                                              ['b', {'k': 1}]]}) == \
        'a,b,{"k": 1}'
    e = error('2015-10-15', {'list_join': [',', ['a', 1]]})
    assert 'list_join' in e.message
    e = error('2013-05-23', {'list_join': [',', [{'a': 1}]]})
    e = error(NEW, {'list_join': [',', 'abc']})
    e = error(NEW, {'list_join': [1, ['a']]})
    assert 'delimiter' in e.message


# -- get_file ----------------------------------------------------------------

def test_get_file():
    assert value(NEW, {'get_file': 'a.txt'}, files={'a.txt': 'hi\n'}) == \
        'hi\n'
    e = error(NEW, {'get_file': 'b.txt'}, files={'a.txt': 'hi'})
    assert 'b.txt' in e.message


# -- repeat --------------------------------------------------------------------

def test_repeat_product_and_keys():
    snippet = {'repeat': {'for_each': {'%a%': ['1', '2'], '%b%': ['x', 'y']},
                          'template': {'k-%a%': '%a%%b%'}}}
    assert value(NEW, snippet) == [{'k-1': '1x'}, {'k-1': '1y'},
                                   {'k-2': '2x'}, {'k-2': '2y'}]


def test_repeat_permutations_false():
    snippet = {'repeat': {'for_each': {'%a%': ['1', '2'], '%b%': ['x', 'y']},
                          'template': '%a%-%b%', 'permutations': False}}
    assert value(NEW, snippet) == ['1-x', '2-y']
    snippet['repeat']['for_each']['%b%'] = ['x']
    error(NEW, snippet)


def test_repeat_map_and_errors():
    snippet = {'repeat': {'for_each': {'%k%': {'a': 1, 'b': 2}},
                          'template': '%k%'}}
    assert value(NEW, snippet) == ['a', 'b']
    error('2016-04-08', snippet)
    e = error(NEW, {'repeat': {'for_each': {'%k%': 'abc'},
                               'template': '%k%'}})
    assert 'repeat' in e.path
    assert value(NEW, {'repeat': {'for_each': {'%k%': None},
                                  'template': '%k%'}}) == []
    e = error('2015-04-30', {'repeat': {'template': 'x'}})
    assert 'repeat' in e.message
    e = error('2014-10-16', {'repeat': {'for_each': {'%k%': ['a']},
                                        'template': '%k%'}})
    assert 'not supported in this version' in e.message


# -- digest / str_split --------------------------------------------------------

def test_digest():
    assert value(NEW, {'digest': ['SHA256', 'caf\u00e9']}) == \
        hashlib.sha256('caf\u00e9'.encode('latin-1')).hexdigest()
    error(NEW, {'digest': ['nope', 'x']})
    error(NEW, {'digest': ['md5']})


def test_str_split():
    assert value(NEW, {'str_split': [',', 'a,b,c']}) == ['a', 'b', 'c']
    assert value(NEW, {'str_split': [',', 'a,b,c', 1]}) == 'b'
    assert value(NEW, {'str_split': [',', 'a,b,c', '-1']}) == 'c'
    e = error(NEW, {'str_split': [',', 'a,b', 5]})
    assert 'range' in e.message
    error(NEW, {'str_split': 'a,b'})
    error('2015-04-30', {'str_split': [',', 'a']})


# -- maps and lists ------------------------------------------------------------

def test_map_merge():
    assert value(NEW, {'map_merge': [{'a': 1, 'b': 1}, None, {'b': 2}]}) == {
        'a': 1, 'b': 2}
    error(NEW, {'map_merge': [{'a': 1}, [1]]})
    e = error('2015-10-15', {'map_merge': [{'a': 1}]})
    assert 'not supported in this version of HOT' in e.message


def test_map_replace():
    snippet = {'map_replace': [{'k1': 'v1', 'k2': 'v2'},
                               {'keys': {'k1': 'K1'},
                                'values': {'v2': 'V2'}}]}
    assert value(NEW, snippet) == {'K1': 'v1', 'k2': 'V2'}
    e = error(NEW, {'map_replace': [{'k1': 1, 'k2': 2},
                                    {'keys': {'k1': 'k2'}}]})
    assert 'collides' in e.message
    e = error(NEW, {'map_replace': [{'k1': 1, 'k2': 2},
                                    {'keys': {'k1': 'x', 'k2': 'x'}}]})
    assert 'duplicate' in e.message
    e = error(NEW, {'map_replace': [{}, {'nope': {}}]})
    assert 'nope' in e.message
    error(NEW, {'map_replace': [{}]})


def test_list_concat():
    assert value(NEW, {'list_concat': [[1, 2], None, [2]]}) == [1, 2, 2]
    assert value(NEW, {'list_concat_unique': [[1, {'a': 1}], [{'a': 1}, 3,
                                                               1]]}) == [
        1, {'a': 1}, 3]
    e = error(NEW, {'list_concat': [[1], 'ab']})
    assert '"ab"' in e.message
    error('2017-02-24', {'list_concat': [[1]]})


def test_contains_and_filter():
    assert value(NEW, {'contains': ['a', ['a', 'b']]}) is True
    assert value(NEW, {'contains': ['bc', 'abcd']}) is True
    error(NEW, {'contains': ['a', {'a': 1}]})
    assert value(NEW, {'filter': [[1, None], [1, 2, None, 3]]}) == [2, 3]
    assert value(NEW, {'filter': [[], [1]]}) == [1]
    assert value(NEW, {'filter': [[1], []]}) == []


def test_make_url():
    snippet = {'make_url': {'scheme': 'http', 'username': 'u s',
                            'password': 'p@ss', 'host': 'example.com',
                            'port': '8080', 'path': '/a b/c',
                            'query': {'k': 'v/w x'}, 'fragment': 'f g'}}
    assert value(NEW, snippet) == \
        'http://u%20s:p%40ss@example.com:8080/a%20b/c?k=v/w+x#f%20g'
    assert value(NEW, {'make_url': {'scheme': 'https', 'host': '::1',
                                    'path': '/'}}) == 'https://[::1]/'
    assert value(NEW, {'make_url': {'scheme': 'https',
                                    'host': '[fe80::1]', 'port': 443}}) == \
        'https://[fe80::1]:443'
    e = error(NEW, {'make_url': {'host': 'x', 'port': 70000}})
    assert 'port' in e.message
    error(NEW, {'make_url': {'host': 'x', 'bogus': 1}})
    error(NEW, {'make_url': {'scheme': 'ht:tp'}})
    error('2017-02-24', {'make_url': {'host': 'x'}})


# -- if ------------------------------------------------------------------------

def test_if_three_args_and_untaken_branch_is_not_parsed():
    extra = {'conditions': {'yes': True, 'no': False}}
    assert value('2016-10-14', {'if': ['yes', 'a', 'b']}, extra=extra) == 'a'
    assert value('2016-10-14', {'if': ['no', 'a', 'b']}, extra=extra) == 'b'
    assert value('2016-10-14', {'if': [{'not': 'yes'}, 'a', 'b']},
                 extra=extra) == 'b'
    # a reference to a non-existing resource in the untaken branch is fine
    assert value('2016-10-14', {'if': ['yes', 'a',
                                       {'get_resource': 'nothere'}]},
                 extra=extra) == 'a'
    e = error('2018-08-31', {'if': ['yes', 'a']}, extra=extra)
    assert 'if' in e.path
    e = error('2016-04-08', {'if': [True, 'a', 'b']})
    assert 'not supported in this version' in e.message


def test_if_two_args_omits_enclosing_item():
    extra = {'conditions': {'no': False}}
    assert value(NEW, {'a': {'if': ['no', 1]}, 'b': 2}, extra=extra) == {
        'b': 2}
    assert value(NEW, [1, {'if': ['no', 2]}, 3], extra=extra) == [1, 3]
    # the property itself is omitted: treated as not given
    assert value(NEW, {'if': ['no', 'x']}, extra=extra) == '<omitted>'
    assert value('wallaby', {'if': [True, 'x']}) == 'x'


def test_if_dependencies_only_from_taken_branch():
    tmpl = {'heat_template_version': NEW,
            'conditions': {'no': False},
            'resources': {
                'a': {'type': 'Test::Value'},
                'b': {'type': 'Test::Value'},
                'r': {'type': 'Test::Value', 'properties': {'value': {
                    'if': ['no', {'get_resource': 'a'},
                           {'get_attr': ['b', 'value']}]}}}}}
    d = build(tmpl)
    assert d.dependencies()['r'] == {'b'}


# -- yaql ----------------------------------------------------------------------

def test_yaql():
    snippet = {'yaql': {'expression': '$.data.l.select($ * 2).sum()',
                        'data': {'l': [1, 2, 3]}}}
    assert value(NEW, snippet) == 12
    snippet = {'yaql': {'expression': '$.data.keys()',
                        'data': {'a': 1}}}
    assert value(NEW, snippet) == ['a']
    e = error(NEW, {'yaql': {'expression': '$.data.'}})
    assert 'yaql' in e.path
    error(NEW, {'yaql': {'expression': '1', 'bogus': 1}})
    error('2016-04-08', {'yaql': {'expression': '1'}})


def test_yaql_expressions_parsed_on_many_threads_at_once():
    """A group's members are resolved by several workers at once: each
    valid expression parses (yaql's parser read another thread's text:
    "Parse error" now and then for a valid expression)."""
    import sys
    import threading
    errors = []
    snippet = {'yaql': {'expression': 'str(int($.data.i) mod 2)',
                        'data': {'i': '7'}}}

    def resolve():
        for _ in range(40):
            try:
                assert value(NEW, snippet) == '1'
            except Exception as exc:   # reported below, by the main thread
                errors.append(exc)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # threads interleave at every chance
    try:
        threads = [threading.Thread(target=resolve) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(switch)
    assert errors == []


def test_yaql_methods_go_by_their_camel_case_names():
    # as Heat's (and TripleO's templates: puppet/controller-role.yaml's
    # server name) call them
    snippet = {'yaql': {
        'expression': '$.data.map.get($.data.name, $.data.name).toLower()',
        'data': {'name': 'Controller-0', 'map': {}}}}
    assert value(NEW, snippet) == 'controller-0'
    snippet = {'yaql': {'expression': '$.data.selectMany([$, $ * 10])',
                        'data': [1, 2]}}
    assert value(NEW, snippet) == [1, 10, 2, 20]


def test_yaql_string_format_fills_fields_but_reaches_no_attribute():
    # yaql 3 dropped format (CVE-2024-29156); TripleO's roles call it
    snippet = {'yaql': {
        'expression': 'str("{0}".format($.data).split("/")[-1])',
        'data': '192.168.24.0/24'}}
    assert value(NEW, snippet) == '24'
    snippet = {'yaql': {'expression': '"{n}-{0}".format($.data, n => 1)',
                        'data': 'a'}}
    assert value(NEW, snippet) == '1-a'
    for bad in ('"{0.__class__}".format($.data)',
                '"{0[0]}".format($.data)',
                '"{0:>99999999999}".format($.data)'):
        error(NEW, {'yaql': {'expression': bad, 'data': 'a'}})


def test_yaql_with_get_attr_unknown_at_validation():
    tmpl = {'heat_template_version': NEW, 'resources': {
        'other': {'type': 'Test::Value'},
        'r': {'type': 'Test::Value', 'properties': {'value': {'yaql': {
            'expression': '$.data.v.len()',
            'data': {'v': {'get_attr': ['other', 'list']}}}}}}}}
    d = build(tmpl)
    assert d.resolve_properties('r', Data({'other': {'list': [1, 2]}})) == {
        'value': 2}


# -- function tables -------------------------------------------------------------

def test_function_like_maps_with_more_keys_are_data():
    assert value(NEW, {'get_param': 'x', 'other': 1}) == {
        'get_param': 'x', 'other': 1}
    assert value(NEW, {'foo': 'bar'}) == {'foo': 'bar'}


def test_fn_select_only_2013():
    assert value('2013-05-23', {'Fn::Select': [1, ['a', 'b']]}) == 'b'
    e = error('2015-10-15', {'Fn::Select': [1, ['a', 'b']]})
    assert 'not supported in this version' in e.message


def test_cfn_functions_rejected_after_2013():
    e = error('2014-10-16', {'Fn::Join': [',', ['a']]})
    assert 'not supported in this version' in e.message


def test_unknown_propagates_through_functions():
    tmpl = {'heat_template_version': NEW, 'resources': {
        'other': {'type': 'Test::Value'},
        'r': {'type': 'Test::Value', 'properties': {'value': {
            'str_replace': {'template': 'x=$x',
                            'params': {'$x': {'get_attr': [
                                'other', 'value']}}}}}}}}
    d = build(tmpl)
    # real data
    assert d.resolve_properties('r', Data({'other': {'value': 5}})) == {
        'value': 'x=5'}
    from converge.template import functions
    parsed = d.resources['r']._properties
    assert functions.resolve(parsed, functions.Context(d)) == {
        'value': UNKNOWN}


def test_outputs_errors_do_not_raise():
    tmpl = {'heat_template_version': NEW,
            'resources': {'other': {'type': 'Test::Value'}},
            'outputs': {
                'good': {'value': {'get_attr': ['other', 'value']},
                         'description': 'd'},
                'bad': {'value': {'str_split': [',', {'get_attr': [
                    'other', 'value']}, 9]}},
                'off': {'value': 1, 'condition': False}}}
    d = build(tmpl)
    out = d.resolve_outputs(Data({'other': {'value': 'a,b'}}))
    assert out['good'] == {'value': 'a,b', 'description': 'd'}
    assert 'range' in out['bad']['error']
    # behind a false condition: listed, no value (as Heat)
    assert out['off'] == {'value': None,
                          'description': 'No description given'}
    assert json.dumps(out)
