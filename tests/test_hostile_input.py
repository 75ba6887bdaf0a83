"""What a hostile tenant can send converge-api and the CLI: patterns
that backtrack, documents nested past any sense, numbers that are not
numbers (NaN, infinities), timeouts that are not whole minutes, resource
and stack names no URL can hold, bodies over the API's limit. Each is
refused with Heat's error body (a 400 naming the field; the CLI: exit 2,
naming the file), nothing is stored, and the API keeps answering others.

Over real HTTP against a converge-api on loopback (an embedded home),
the CLI through subprocesses."""

import json
import os
import threading
import time

import pytest
import requests

from converge import exception
from tests import test_heat_api
from tests.test_remote_cli import Remote

VERSION = '2018-08-31'


#: a converge-api on loopback over an embedded home, this module's own
api = test_heat_api.api


@pytest.fixture(scope='module', autouse=True)
def no_traceback(api):
    """Nothing escaped the API's error handling (into its log)."""
    yield
    with open(os.path.join(os.path.dirname(api.conf), 'api.log')) as f:
        text = f.read()
    assert 'Traceback' not in text, text[-5000:]


class Session:
    """One project's requests to the API, raw (as any client could send
    them)."""

    #: (API url, project) -> its token: one converge-manage run each
    #: (half a second), not one per test
    _tokens = {}

    def __init__(self, api, project):
        self.base = '%s/v1/%s' % (api.url, project)
        key = (api.url, project)
        if key not in self._tokens:
            self._tokens[key] = api.token(project)['token']
        self.headers = {'X-Auth-Token': self._tokens[key],
                        'Content-Type': 'application/json'}

    def send(self, method, path, body=None, raw=None, timeout=60):
        data = raw if raw is not None else (
            None if body is None else json.dumps(body))
        return requests.request(method, self.base + path, data=data,
                                headers=self.headers, timeout=timeout)

    def refused(self, method, path, body=None, raw=None, *named):
        """The answer: a 400 in Heat's error shape whose message names
        every one of `named`; returns the message."""
        r = self.send(method, path, body, raw)
        assert r.status_code == 400, (r.status_code, r.text[:500])
        err = r.json()
        assert err['code'] == 400 and err['title'] == 'Bad Request'
        assert err['error']['traceback'] is None
        message = err['error']['message']
        for word in named:
            assert word in message, message
        return message

    def stacks(self):
        r = self.send('GET', '/stacks')
        assert r.status_code == 200, r.text
        return [s['stack_name'] for s in r.json()['stacks']]


def _template(**sections):
    return dict({'heat_template_version': VERSION}, **sections)


def _pattern_template(pattern):
    return _template(parameters={'word': {
        'type': 'string', 'constraints': [{'allowed_pattern': pattern}]}})


def _value_template(value):
    return _template(resources={'v': {'type': 'OS::Heat::Value',
                                      'properties': {'value': value}}})


def _while_validating(s, body):
    """POST /validate with `body` in a thread and, meanwhile, GET
    /stacks: (validate's answer, its seconds, GET's seconds)."""
    out = {}

    def validate():
        start = time.monotonic()
        try:
            out['answer'] = s.send('POST', '/validate', body, timeout=60)
        except requests.RequestException as e:
            out['answer'] = e
        out['seconds'] = time.monotonic() - start
    worker = threading.Thread(target=validate)
    worker.start()
    start = time.monotonic()
    r = s.send('GET', '/stacks')
    listed = time.monotonic() - start
    assert r.status_code == 200
    worker.join()
    return out['answer'], out['seconds'], listed


# -- patterns -----------------------------------------------------------------

def test_a_backtracking_pattern_runs_in_linear_time(api):
    """'(a+)+$' takes Python's re minutes on thirty characters, holding
    every thread of the API; RE2 answers at once. The bounds (2 s and
    1 s) are generous: both answers take milliseconds."""
    s = Session(api, 'regex')
    answer, seconds, listed = _while_validating(s, {
        'template': _pattern_template('(a+)+$'),
        'parameters': {'word': 'a' * 30 + '!'}})
    assert not isinstance(answer, Exception), answer
    assert answer.status_code == 400, answer.text
    message = answer.json()['error']['message']
    assert "Parameter 'word'" in message and 'does not match' in message
    assert seconds < 2, seconds
    assert listed < 1, listed
    # and a value that matches is taken
    r = s.send('POST', '/validate', {'template': _pattern_template(
        '(a+)+$'), 'parameters': {'word': 'a' * 30}})
    assert r.status_code == 200, r.text


def test_a_pattern_re2_cannot_run_still_works_and_is_cut_off(api):
    """Heat's patterns are Python's: look-aheads (password rules) are
    kept and enforced. One that backtracks without end is stopped at
    [DEFAULT] pattern_time_limit (0.5 s) with an error naming the
    parameter, and the API answers others meanwhile. Bounds generous:
    10 s (minutes before) and 1 s."""
    s = Session(api, 'regex')
    rule = _pattern_template(r'(?=.*[0-9])(?=.*[A-Z]).{8,}')
    r = s.send('POST', '/validate', {'template': rule,
                                     'parameters': {'word': 'Passw0rdX'}})
    assert r.status_code == 200, r.text
    s.refused('POST', '/validate', {'template': rule, 'parameters': {
        'word': 'password'}}, None, "Parameter 'word'", 'does not match')

    answer, seconds, listed = _while_validating(s, {
        'template': _pattern_template(r'((a|a)+)+\1$'),
        'parameters': {'word': 'a' * 40 + '!'}})
    assert not isinstance(answer, Exception), answer
    assert answer.status_code == 400, answer.text
    message = answer.json()['error']['message']
    assert "Parameter 'word'" in message, message
    assert 'pattern_time_limit' in message, message
    assert seconds < 10, seconds
    assert listed < 1, listed


@pytest.mark.parametrize('pattern,value', [
    (r'\d+', '\u0661\u0662'), (r'\w+', 'h\u00e9llo_1'),
    (r'\s*x\s*', '\u2003x\u2003'), (r'[^\w]+', '!?'), (r'\D+', 'abc'),
    (r'[[:alpha:]]+', ':a]'), (r'[[:alpha:]]+', 'a'),
    (r'a{,3}', 'aa'), (r'a{,3}', 'a{,3}'), (r'\bfoo\b', 'foo'),
    (r'[]a]+', ']a'), (r'[^]a]+', 'bc'), (r'a\Z', 'a'), (r'(?i)abc', 'ABC'),
    (r'a$\n?', 'a\n'), (r'(a)\1', 'aa'), (r'[\W]+', '!'),
])
def test_patterns_mean_what_pythons_re_means(pattern, value):
    """Heat's patterns are Python's: whichever engine runs one (RE2 or
    the fallback), a value is taken exactly when re takes it."""
    import re
    import warnings
    from converge import template
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')   # re's about '[['
        expected = re.fullmatch(pattern, value) is not None
    bundle = template.Bundle(_pattern_template(pattern))
    if expected:
        template.StackDefinition(bundle, {'word': value})
    else:
        with pytest.raises(exception.InvalidTemplate, match='does not match'):
            template.StackDefinition(bundle, {'word': value})


# -- nesting ------------------------------------------------------------------

def _nested(levels):
    value = 'bottom'
    for _ in range(levels):
        value = {'a': value}
    return value


def test_json_nested_past_the_template_limit_is_refused(api):
    """The YAML limit ([DEFAULT] max_template_depth, 64) holds for JSON:
    a template mapping 900 deep (it was stored, then retried a
    RecursionError for ever), a body 100,000 deep (a 500), a json
    parameter's text, adopt data as text. Nothing is stored."""
    s = Session(api, 'deep')
    deep = _template(resources={'v': {'type': 'OS::Heat::Value',
                                      'properties': {'value': _nested(900)}}})
    s.refused('POST', '/stacks', {'stack_name': 'deep', 'template': deep},
              None, 'template', 'max_template_depth')
    s.refused('POST', '/validate', {'template': deep}, None, 'template',
              'max_template_depth')
    s.refused('POST', '/stacks', None,
              '{"stack_name": "deeper", "template": %s1%s}' % (
                  '{"a":' * 100000, '}' * 100000), 'max_template_depth')
    s.refused('POST', '/stacks', {'stack_name': 'env', 'template': _template(),
                                  'environment': {'parameters': _nested(80)}},
              None, 'environment', 'max_template_depth')
    as_text = _template(
        parameters={'blob': {'type': 'json'}},
        resources={'v': {'type': 'OS::Heat::Value',
                         'properties': {'value': {'get_param': 'blob'}}}})
    s.refused('POST', '/stacks', {
        'stack_name': 'param', 'template': as_text,
        'parameters': {'blob': '[' * 100000 + ']' * 100000}}, None,
        "Parameter 'blob'", 'max_template_depth')
    s.refused('POST', '/stacks', {
        'stack_name': 'param', 'template': as_text,
        'parameters': {'blob': json.dumps(_nested(100))}}, None,
        "Parameter 'blob'", 'max_template_depth')
    s.refused('POST', '/stacks', {
        'stack_name': 'adopted',
        'adopt_stack_data': '{"template": %s}' % json.dumps(_nested(200))},
        None, 'adopt_stack_data', 'max_template_depth')
    assert s.stacks() == []
    # 64 deep is a template still
    ok = _template(resources={'v': {'type': 'OS::Heat::Value',
                                    'properties': {'value': _nested(60)}}})
    r = s.send('POST', '/validate', {'template': ok})
    assert r.status_code == 200, r.text


def test_cli_refuses_deep_json_files_naming_them(cli, write):
    deep = write('deep.json', json.dumps(_template(resources={'v': {
        'type': 'OS::Heat::Value', 'properties': {'value': _nested(900)}}})))
    deeper = write('deeper.json', '{"heat_template_version": "%s", '
                   '"description": %s%s}' % (VERSION, '[' * 100000,
                                             ']' * 100000))
    adopt = write('adopt.json', '{"template": %s1%s}' % (
        '{"a":' * 100000, '}' * 100000))
    for args, path in ((['stack', 'create', '-t', deep, 'one'], deep),
                       (['stack', 'create', '-t', deeper, 'two'], deeper),
                       (['stack', 'adopt', '--adopt-file', adopt, 'three'],
                        adopt)):
        proc = cli.run(*args, check=False)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        assert path in proc.stderr and 'max_template_depth' in proc.stderr
        assert 'Traceback' not in proc.stderr
    assert cli.json('stack', 'list') == []


# -- numbers ------------------------------------------------------------------

def test_numbers_are_finite(api):
    """'nan' passed a range constraint and the API then answered NaN,
    which is not JSON. Every number read refuses NaN and infinities:
    number parameters, constraints' bounds, a body's literal NaN, a
    template's .nan, a yaql result."""
    s = Session(api, 'nan')
    ranged = _template(
        parameters={'n': {'type': 'number',
                          'constraints': [{'range': {'min': 1, 'max': 5}}]}},
        outputs={'o': {'value': {'get_param': 'n'}}})
    for value in ('nan', 'NaN', 'inf', '-Infinity', '1e999'):
        s.refused('POST', '/validate', {'template': ranged,
                                        'parameters': {'n': value}},
                  None, "Parameter 'n'", 'not a finite number')
        s.refused('POST', '/stacks', {'stack_name': 'nan', 'template': ranged,
                                      'parameters': {'n': value}},
                  None, "Parameter 'n'", 'not a finite number')
    s.refused('POST', '/stacks', None,
              '{"stack_name": "nan", "template": %s, "parameters": '
              '{"n": NaN}}' % json.dumps(ranged), 'parameters',
              'not a finite number')
    bound = _template(parameters={'n': {
        'type': 'number', 'constraints': [{'range': {'min': 'nan'}}]}})
    s.refused('POST', '/validate', {'template': bound}, None,
              'parameters.n.constraints', 'not a finite number')
    s.refused('POST', '/validate', {'template': 'heat_template_version: %s\n'
                                    'parameters:\n  n:\n    type: number\n'
                                    '    default: .inf\n' % VERSION},
              None, 'template:5', '.inf is not a finite number')
    s.refused('POST', '/validate', {'template': _template(resources={'v': {
        'type': 'OS::Heat::Value', 'properties': {'value': {'yaql': {
            'expression': "float('nan')", 'data': {}}}}}})}, None,
        'resources.v.properties.value', 'not a finite number')
    assert s.stacks() == []


# -- timeouts -----------------------------------------------------------------

def test_timeout_mins_is_a_whole_number_of_minutes_within_the_limit(api):
    """1e20 answered 500; true and 1.5 were stored as 1."""
    s = Session(api, 'timeouts')
    for bad in (1e20, True, 1.5, '1.5', 10 ** 30, 0, -3, 'soon', [5],
                10081):
        s.refused('POST', '/stacks', {'stack_name': 'timed',
                                      'template': _template(),
                                      'timeout_mins': bad},
                  None, 'timeout_mins')
    assert s.stacks() == []
    r = s.send('POST', '/stacks', {'stack_name': 'timed',
                                   'template': _template(),
                                   'timeout_mins': '30'})
    assert r.status_code == 201, r.text
    stack = r.json()['stack']
    path = '/stacks/timed/%s' % stack['id']
    s.refused('PATCH', path, {'timeout_mins': True}, None, 'timeout_mins')
    s.refused('PUT', path, {'template': _template(), 'timeout_mins': 1e20},
              None, 'timeout_mins')
    shown = s.send('GET', path).json()['stack']
    assert shown['timeout_mins'] == 30


def test_cli_timeout_over_the_limit_exits_2(cli, write):
    path = write('t.yaml', 'heat_template_version: %s\n' % VERSION)
    proc = cli.run('stack', 'create', '-t', path, '--timeout', '99999999',
                   'big', check=False)
    assert proc.returncode == 2, proc.stderr
    assert 'max_timeout_mins' in proc.stderr
    proc = cli.run('stack', 'create', '-t', path, '--timeout', '1.5', 'frac',
                   check=False)
    assert proc.returncode == 2, proc.stderr
    assert '--timeout' in proc.stderr
    assert cli.json('stack', 'list') == []


# -- names --------------------------------------------------------------------

@pytest.mark.parametrize('name', ['', 'a/b', 'a\x00b', 'x' * 256])
def test_resource_names_heat_refuses_are_refused(api, name):
    """'a/b' was stored and then could not be reached (a URL segment);
    '' and NUL were stored too."""
    s = Session(api, 'names')
    tmpl = _template(resources={name: {'type': 'OS::Heat::None'}})
    shown = json.dumps(name)[1:-1][:40]
    s.refused('POST', '/validate', {'template': tmpl}, None,
              'Invalid resource name', shown)
    s.refused('POST', '/stacks', {'stack_name': 'named', 'template': tmpl},
              None, 'Invalid resource name', shown)
    s.refused('POST', '/stacks/preview', {'stack_name': 'named',
                                          'template': tmpl},
              None, 'Invalid resource name', shown)
    assert s.stacks() == []


@pytest.mark.parametrize('name', ['a/b', '1stack', 'a b', 'a\x00b',
                                  'x' * 256])
def test_stack_names_hold_at_every_entry(api, name):
    s = Session(api, 'stacknames')
    tmpl = _template(resources={'r': {'type': 'OS::Heat::None'}})
    s.refused('POST', '/stacks', {'stack_name': name, 'template': tmpl},
              None, 'Invalid stack name')
    s.refused('POST', '/stacks/preview', {'stack_name': name,
                                          'template': tmpl},
              None, 'Invalid stack name')
    s.refused('POST', '/stacks', {'stack_name': name, 'adopt_stack_data': {
        'template': tmpl, 'resources': {}, 'environment': {}}}, None,
        'Invalid stack name')
    assert s.stacks() == []


# -- the remote CLI and the API's body limit ----------------------------------

def test_remote_cli_reports_the_servers_413(api, tmp_path, write):
    """A body over [api] max_json_body_size is answered 413 before the
    API reads it: the CLI, still sending, reported a broken pipe
    ("Cannot reach converge-api"); it reports the server's message, exit
    2. The server (waitress) refuses a body over the limit before any
    token is read, so a bad token with it is answered the same 413."""
    remote = Remote('%s/v1/big' % api.url, api.token('big')['token'],
                    str(tmp_path / 'nohome'))
    path = write('big.yaml', 'heat_template_version: %s\ndescription: %s\n'
                 % (VERSION, 'x' * (12 * 1024 * 1024)))
    proc = remote.run('stack', 'create', '-t', path, 'big', check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert 'max_json_body_size' in proc.stderr, proc.stderr
    assert 'Cannot reach' not in proc.stderr
    proc = remote.run('stack', 'create', '-t', path, 'big', check=False,
                      token='not-a-token')
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert 'max_json_body_size' in proc.stderr, proc.stderr
    assert remote.json('stack', 'list') == []


# -- found by the fuzzer (tests/test_template_fuzz.py) ------------------------

@pytest.mark.parametrize('pattern,why', [
    ('a{99999999999}', 'repetition number is too large'),
    ('(' * 1200 + ')' * 1200, 'nested too deeply'),
])
def test_patterns_re_cannot_read_are_template_errors(api, pattern, why):
    """re raised OverflowError (a repeat past its largest) and
    RecursionError (groups a thousand deep), which only re.error was
    caught of: a 500."""
    s = Session(api, 'regex')
    s.refused('POST', '/validate', {'template': _pattern_template(pattern)},
              None, 'parameters.word.constraints', 'allowed_pattern', why)


def test_text_that_is_not_unicode_is_refused(api, cli, write):
    """JSON's "\\ud800" (and yaql's '\\ud800') is a lone surrogate, which
    no UTF-8 encodes: a resource named so failed the create's insert (a
    500), and a pattern or value holding one failed RE2. Refused where
    it enters, naming where; nothing is stored."""
    s = Session(api, 'surrogates')
    named = _template(resources={'\ud800': {'type': 'OS::Heat::None'}})
    for path in ('/validate', '/stacks'):
        s.refused('POST', path, {'stack_name': 'odd', 'template': named},
                  None, 'template', 'lone surrogate (\\ud800)')
    s.refused('POST', '/stacks', {
        'stack_name': 'odd', 'template': _pattern_template('a+'),
        'parameters': {'word': 'a\udc80'}}, None, 'parameters',
        'lone surrogate')
    s.refused('POST', '/validate', {'template': json.dumps(named)}, None,
              'template:1')
    s.refused('POST', '/validate', {'template': _value_template(
        {'yaql': {'expression': "'\\ud800'"}})}, None,
        'resources.v.properties.value: : yaql', 'lone surrogate')
    assert s.stacks() == []
    # the CLI: a JSON file (read as UTF-8, its escapes give one) and a
    # command line's bytes that are not UTF-8
    path = write('t.json', json.dumps(named))
    proc = cli.run('stack', 'create', '-t', path, 'odd', check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert 't.json:1' in proc.stderr, proc.stderr
    path = write('p.yaml', json.dumps(_pattern_template('a+')))
    proc = cli.run('stack', 'create', '-t', path, '--parameter',
                   'word=a\udc80', 'odd', check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert 'not UTF-8' in proc.stderr, proc.stderr
    assert 'Traceback' not in proc.stderr
    assert cli.json('stack', 'list') == []


def _typed_template(value):
    return ('heat_template_version: %s\nresources:\n  v:\n    type: '
            'OS::Heat::Value\n    properties:\n      value: %s\n'
            % (VERSION, value))


@pytest.mark.parametrize('value,said', [
    ('!!binary aGk=', '!!binary'), ('!!set {a, b}', '!!set'),
    ('!!omap [a: 1]', '!!omap'), ('9' * 5000, '5000 characters'),
])
def test_yaml_values_json_has_not_are_refused(api, value, said):
    """YAML's bytes, sets and ordered maps were taken into a template
    (the create then failed storing it: a 500), and an integer of more
    digits than Python reads from text raised ValueError (a 500). Each
    is the template's error, with its line."""
    s = Session(api, 'yamltypes')
    for path in ('/validate', '/stacks'):
        s.refused('POST', path, {'stack_name': 'typed',
                                 'template': _typed_template(value)},
                  None, 'template:6', said)
    assert s.stacks() == []


def test_cli_refuses_yaml_values_json_has_not(cli, write):
    """The same from a file: the long integer was a traceback."""
    proc = cli.run('stack', 'create', '-t', write(
        't.yaml', _typed_template('9' * 5000)), 'typed', check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert 't.yaml:6' in proc.stderr and '5000 characters' in proc.stderr, \
        proc.stderr
    assert cli.json('stack', 'list') == []


def test_a_group_of_more_members_than_a_stack_holds_is_refused(api):
    """A ResourceGroup's count of a billion was taken: its create built
    the names of a billion members (the engine's memory) before the
    nested stack's resource limit was looked at. Refused at validate, as
    an AutoScalingGroup's sizes are."""
    s = Session(api, 'groups')
    group = _template(resources={'g': {
        'type': 'OS::Heat::ResourceGroup', 'properties': {
            'count': 10 ** 9, 'resource_def': {'type': 'OS::Heat::None'}}}})
    for path in ('/validate', '/stacks'):
        s.refused('POST', path, {'stack_name': 'big', 'template': group},
                  None, 'resources.g.properties.count',
                  'max_resources_per_stack')
    scaled = _template(resources={'a': {
        'type': 'OS::Heat::AutoScalingGroup', 'properties': {
            'min_size': 0, 'max_size': 10 ** 9,
            'resource': {'type': 'OS::Heat::None'}}}})
    s.refused('POST', '/stacks', {'stack_name': 'big', 'template': scaled},
              None, 'resources.a.properties.max_size',
              'max_resources_per_stack')
    assert s.stacks() == []


def test_test_resource_sleeps_are_bounded(api):
    """TestResource's constraint_prop_secs sleeps in the API's thread
    that validates it: 1e100 was an OverflowError (a 500), 10**9 held
    the thread for 31 years. At most 10 s."""
    s = Session(api, 'sleeps')
    for key in ('constraint_prop_secs', 'attr_wait_secs'):
        for secs in (1e100, 10 ** 9, 11):
            s.refused('POST', '/validate', {'template': _template(
                resources={'t': {'type': 'OS::Heat::TestResource',
                                 'properties': {key: secs}}})}, None,
                'resources.t.properties.%s' % key, 'out of range')


def test_a_str_replace_of_thousands_of_params_is_answered(api):
    """str_replace replaced its params one level of recursion each: 3,000
    params (40 KB) was a RecursionError, a 500."""
    s = Session(api, 'functions')
    params = {'<%%k%d%%>' % i: 'v%d' % i for i in range(3000)}
    r = s.send('POST', '/validate', {'template': _value_template({
        'str_replace': {'template': '<%k0%> <%k2999%>',
                        'params': params}})})
    assert r.status_code == 200, r.text


def test_a_repeat_that_grows_past_the_limit_is_refused_before_it_grows(
        api):
    """repeat replaced a key in its template before the item was
    measured: a key of '' in 200 KB of text, replaced by 200 KB, was 40
    GB (the API's memory) before anything counted it."""
    s = Session(api, 'functions')
    big = 'x' * 200000
    s.refused('POST', '/validate', {'template': _value_template({
        'repeat': {'for_each': {'': [big]}, 'template': big}})}, None,
        'resources.v.properties.value: : repeat', 'max_function_result_size')


def test_conditions_naming_conditions_hundreds_deep_are_refused(api):
    """A chain of conditions, each the `not` of the next (3,000 of them,
    60 KB), was a RecursionError: a 500."""
    s = Session(api, 'conditions')
    chain = {'c%d' % i: {'not': 'c%d' % (i + 1)} for i in range(3000)}
    chain['c3000'] = True
    s.refused('POST', '/validate', {'template': _template(
        conditions=chain, resources={'r': {'type': 'OS::Heat::None',
                                           'condition': 'c0'}})},
        None, 'conditions.c', 'Conditions nest more than 100 deep')
    short = {'c%d' % i: {'not': 'c%d' % (i + 1)} for i in range(10)}
    short['c10'] = True
    r = s.send('POST', '/validate', {'template': _template(
        conditions=short, resources={'r': {'type': 'OS::Heat::None',
                                           'condition': 'c0'}})})
    assert r.status_code == 200, r.text


def test_a_template_file_that_is_not_utf8_is_refused_naming_its_line(
        cli, tmp_path):
    """It was refused, naming the file but no line (and with no place
    in the error's file and line, where every other template error has
    them)."""
    path = tmp_path / 'latin1.yaml'
    path.write_bytes(b'heat_template_version: 2018-08-31\n'
                     b'description: caf\xe9\n')
    proc = cli.run('template', 'validate', '-t', str(path), check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert '%s:2: Template is not UTF-8 text' % path in proc.stderr, \
        proc.stderr


def test_a_constraints_description_that_is_not_text_is_refused(api):
    """A constraint's description of true (or a list, a number) reached
    validate's answer, which joins them: a TypeError, a 500 (found by
    the template fuzzer, through the API)."""
    s = Session(api, 'constraints')
    for desc in (True, ['a'], 3):
        s.refused('POST', '/validate', {'template': _template(parameters={
            'p': {'type': 'string', 'constraints': [
                {'allowed_values': ['a'], 'description': desc}]}})}, None,
            'parameters.p.constraints.0.description', 'must be a string')
    r = s.send('POST', '/validate', {'template': _template(parameters={
        'p': {'type': 'string', 'constraints': [
            {'allowed_values': ['a'], 'description': 'one of a'}]}})})
    assert r.status_code == 200, r.text
    assert r.json()['Parameters']['p']['ConstraintDescription'] == \
        'one of a'
