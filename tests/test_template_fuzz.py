"""Issue 38: hostile templates, environments and parameters through
validate and create (strategies: tests/hostile.py).

What a tenant sends is read as the API reads it (JSON, each value within
max_template_depth, finite numbers) and handed to the service layer of
an embedded engine in a temporary home; corpus templates mutated as
text go through the YAML loader as the CLI reads them. For every input:

- validate accepts it (an answer the API can encode as JSON) or refuses
  it with converge's user-facing error: a ConvergeError answered with a
  4xx, whose message names where (file, path) when it is the
  template's; never another exception (a 500 and a traceback);
- a create that is refused leaves nothing stored (the project has no
  stack, live or deleted); one that is taken ends, COMPLETE or FAILED,
  never stuck IN_PROGRESS, can be read (show, resources, outputs,
  events), and can then be deleted.

A sample goes through a live converge-api over HTTP and through the CLI
in subprocesses.

Bounded in the default run (a fixed seed, a few dozen examples each);
the @long variants run more (.ci/run runs them on their own). By hand:
CONVERGE_FUZZ_TEMPLATES=N sets every test's examples, CONVERGE_FUZZ_SEED
a seed (else derandomised), e.g.

    CONVERGE_FUZZ_TEMPLATES=3000 CONVERGE_FUZZ_SEED=7 \\
        python -m pytest -q tests/test_template_fuzz.py -k validate \\
        -m 'not long' -p no:randomly --hypothesis-show-statistics

(docs/reliability.md, "Fuzzing", has the figures of such runs).
"""

import collections
import copy
import functools
import itertools
import json
import logging
import os
import sys
import time

import pytest
import requests as http
from hypothesis import event
from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import note
from hypothesis import seed
from hypothesis import settings
from hypothesis import strategies as st

from converge import conf
from converge import exception
from converge import template
from converge.db import models
from converge.engine import request
from converge.engine import service
from converge.template import bounds
from tests import enginetools as et
from tests import hostile
from tests import test_heat_api
from tests.conftest import CORPUS, REPO

#: the stack names and projects of one run (each example its own
#: project, so however many run, none reaches a per-project limit)
_serial = itertools.count()

#: what the runs met, by kind (printed at the end of a run with -s)
SEEN = collections.Counter()


def fuzzed(examples):
    """Hypothesis settings of a fuzz test: `examples` (or
    CONVERGE_FUZZ_TEMPLATES) examples, derandomised unless
    CONVERGE_FUZZ_SEED is set, no example database (the run is the
    same wherever it runs)."""
    given_seed = os.environ.get('CONVERGE_FUZZ_SEED')
    chosen = settings(
        max_examples=int(os.environ.get('CONVERGE_FUZZ_TEMPLATES') or
                         examples),
        deadline=None, database=None, print_blob=True,
        derandomize=given_seed is None,
        suppress_health_check=list(HealthCheck))

    def deco(test):
        test = chosen(test)
        return seed(int(given_seed))(test) if given_seed else test
    return deco


# -- what the API reads, what it answers -------------------------------------

class RefusedByReader(Exception):
    """The API's JSON reader refuses the body (a 400): deeper than
    max_template_depth, or a number JSON has not."""


def as_read(body):
    """`body` as converge-api reads it (api/wsgi.py read_json): JSON
    text read back, each of its values a document of its own."""
    data = bounds.loads_json(json.dumps(body), check=False)
    for value in data.values():
        try:
            bounds.check_json(value)
        except bounds.NotPlainJSON as e:
            raise RefusedByReader(str(e))
    return data


def bundle_of(data):
    """The bundle of a create or validate body, as the API makes it."""
    env = data.get('environment')
    if env is not None and not isinstance(env, (dict, str)):
        raise exception.InvalidInput('environment must be a map')
    return template.bundle_from_request(
        data.get('template'), data.get('files'), env,
        max_size=conf.CONF.max_template_size)


def refused_as_a_user_error(exc):
    """`exc` is converge's error for bad input: a ConvergeError answered
    with a 4xx, saying what and (a template's) where."""
    assert isinstance(exc, exception.ConvergeError), exc
    status = exception.http_status(exc)
    assert 400 <= status < 500, (status, exc)
    message = str(exc)
    assert message.strip(), repr(exc)
    assert 'Traceback' not in message, message
    if isinstance(exc, exception.InvalidTemplate):
        assert exc.filename or exc.path, message
    # the API answers it as JSON
    json.dumps({'message': message})
    kind = type(exc).__name__
    SEEN['refused: %s' % kind] += 1
    event('refused: %s' % kind)


def answerable(value):
    """What the API would answer encodes as JSON (a set, a float nan, an
    UNKNOWN in an answer would be a 500)."""
    json.dumps(value, allow_nan=False, default=_stamp)


def _stamp(value):
    # the API writes its datetimes as text; nothing else may be unknown
    import datetime
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    raise TypeError('%r is not JSON' % (value,))


# -- validate -----------------------------------------------------------------

def check_validate(svc, body):
    note('request: %s' % json.dumps(body)[:5000])
    ctx = request.make('fuzz-validate')
    try:
        data = as_read(body)
        info = svc.template_validate(ctx, bundle_of(data),
                                     data.get('parameters') or {})
    except RefusedByReader:
        SEEN['refused: by the API reader'] += 1
        return
    except exception.ConvergeError as exc:
        refused_as_a_user_error(exc)
        return
    answerable(info)
    SEEN['validated'] += 1
    event('validated')


@fuzzed(30)
@given(body=hostile.requests())
def test_validate_accepts_or_refuses_cleanly(engine, body):
    check_validate(service.Service(engine), body)


@pytest.mark.long
@fuzzed(200)
@given(body=hostile.requests())
def test_validate_accepts_or_refuses_cleanly_long(engine, body):
    check_validate(service.Service(engine), body)


# -- create -------------------------------------------------------------------

def _stored(engine, project):
    with engine.db.read() as s:
        return s.query(models.Stack).filter_by(project_id=project).count()


def check_create(engine, wait, body):
    note('request: %s' % json.dumps(body)[:5000])
    svc = service.Service(engine)
    n = next(_serial)
    project = 'fuzz-%d' % n
    ctx = request.make(project)
    name = body.get('stack_name')
    if name == 'fuzzed':
        name = 'fuzzed-%d' % n
    try:
        data = as_read(body)
        started = svc.stack_create(ctx, name, bundle_of(data),
                                   data.get('parameters') or {},
                                   timeout=data.get('timeout_mins'))
    except RefusedByReader:
        SEEN['refused: by the API reader'] += 1
        return
    except exception.ConvergeError as exc:
        refused_as_a_user_error(exc)
        assert _stored(engine, project) == 0, \
            'a refused create left a stack stored'
        return
    sid = started['id']
    wait(engine, sid, started['traversal_id'], ctx)
    show = svc.stack_show(ctx, sid)
    assert show['stack_status'] in ('CREATE_COMPLETE', 'CREATE_FAILED'), \
        show['stack_status']
    SEEN['created: %s' % show['stack_status']] += 1
    event('created: %s' % show['stack_status'])
    answerable(show)
    answerable(svc.resource_list(ctx, sid, nested_depth=5))
    outputs = svc.output_list(ctx, sid)
    answerable(outputs)
    for key in outputs:
        answerable(svc.output_show(ctx, sid, key))
    answerable(svc.event_list(ctx, sid))
    started = svc.stack_delete(ctx, sid)
    wait(engine, sid, started['traversal_id'], ctx)
    assert svc.stack_status(ctx, sid).status == 'COMPLETE', \
        svc.stack_status(ctx, sid).status_reason
    assert svc.stack_list(ctx) == []


class Escapes(logging.Handler):
    """What the engine logged with an exception that is not one of
    converge's own errors: a plug-in's step or a worker's unit that
    failed on something it did not check (its resource shows a Python
    error as its reason), or an error that escaped a unit."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.found = []
        self.logger = logging.getLogger('converge')

    def emit(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and not isinstance(exc,
                                              exception.ConvergeError):
            self.found.append(logging.Formatter().format(record))

    def __enter__(self):
        self.level = self.logger.level
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level)


def _creating(engine, body):
    wait = et.UnitsEnded(engine)
    engine.listeners.append(wait)
    try:
        with Escapes() as escapes:
            check_create(engine, wait, body)
        assert not escapes.found, '\n'.join(escapes.found)[-6000:]
    finally:
        engine.listeners.remove(wait)


@fuzzed(20)
@given(body=hostile.requests(create=True))
def test_create_ends_or_is_refused_with_nothing_stored(engine, body):
    _creating(engine, body)


@pytest.mark.long
@fuzzed(75)
@given(body=hostile.requests(create=True))
def test_create_ends_or_is_refused_with_nothing_stored_long(engine, body):
    _creating(engine, body)


# -- corpus templates, mutated ------------------------------------------------

@functools.lru_cache(maxsize=None)
def corpus_texts():
    """(path, text) of each top-level corpus template."""
    if not os.path.isdir(CORPUS):
        return ()
    sys.path.insert(0, os.path.join(REPO, 'tools'))
    import corpus
    out = []
    for rel in corpus.top_level(CORPUS):
        with open(os.path.join(CORPUS, rel), encoding='utf-8') as f:
            out.append((rel, f.read()))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def corpus_documents():
    """rel -> the parsed document, of each corpus template converge
    reads (TripleO's overcloud.yaml, a reference only, it refuses)."""
    out = {}
    for rel, text in corpus_texts():
        try:
            out[rel] = template.parse_text(text, rel)
        except exception.InvalidTemplate:
            continue
    return out


#: YAML a mutation puts in: tags, aliases, odd scalars, directives
YAML_BITS = (
    '!!python/object/apply:os.system ["true"]', '!!python/name:os.system',
    '*nope', '&a [*a]', '? [a, b]\n: c', '!!binary aGk=', '<<: *x', '<<: 1',
    '9' * 5000, '.nan', '-.inf', '2018-08-31', '2018-08-31 10:00:00',
    '0o777', '0x_1', '1_0', '"\\ud800"', '"\\x00"', '\t', '\x00', '\ufeff',
    '%YAML 1.1\n---', '---\n---', '...', '{', '[', '|', '>-', "'", '"',
    '- - - -', ': :', '!!set {a, b}', '!!omap [a: 1]', '!custom x',
    '{a: 1, a: 2}', '&x {a: *x}', '[' * 70 + ']' * 70, 'y', 'NO', '~',
)


@st.composite
def mutated_texts(draw):
    texts = corpus_texts()
    rel, text = draw(st.sampled_from(texts))
    lines = text.split('\n')
    for _ in range(draw(st.integers(1, 4))):
        what = draw(st.integers(0, 5))
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        if what == 0:     # a line's value becomes something odd
            line = lines[i]
            head = line.split(':', 1)[0] + ': ' if ':' in line else line
            lines[i] = head + draw(st.one_of(
                st.sampled_from(YAML_BITS), st.text(hostile.ANY_CHAR,
                                                    max_size=8)))
        elif what == 1:   # a line goes
            del lines[i:i + 1]
        elif what == 2:   # a line twice
            lines.insert(i, lines[i] if lines else '')
        elif what == 3:   # a line moves in or out
            lines[i] = draw(st.sampled_from(('  ', '', ' ', '\t'))) + \
                lines[i].strip() if lines else ''
        elif what == 4:   # a bit of YAML anywhere
            lines.insert(i, draw(st.sampled_from(YAML_BITS)))
        else:             # characters changed in a line
            line = lines[i] if lines else ''
            at = draw(st.integers(0, len(line)))
            lines[i] = line[:at] + draw(st.text(hostile.ANY_CHAR,
                                                max_size=3)) + line[at + 1:]
    return rel, '\n'.join(lines)


def written(tmp_path, rel, text):
    """The file a mutated corpus template is written to (its undecodable
    characters as they are: a file's bytes need not be UTF-8)."""
    note('from %s:\n%s' % (rel, text[:5000]))
    path = tmp_path / 'mutated.yaml'
    path.write_text(text, encoding='utf-8', errors='surrogatepass')
    return str(path)


def check_text(svc, tmp_path, rel, text):
    """`text` read as the CLI reads a template file, then validated."""
    path = written(tmp_path, rel, text)
    try:
        bundle = template.load_bundle(path)
        info = svc.template_validate(request.make('fuzz-corpus'), bundle, {})
    except exception.ConvergeError as exc:
        refused_as_a_user_error(exc)
        return
    answerable(info)
    SEEN['validated'] += 1
    event('validated')


needs_corpus = pytest.mark.skipif(not os.path.isdir(CORPUS),
                                  reason='corpus not found at %s' % CORPUS)


@needs_corpus
@fuzzed(40)
@given(case=mutated_texts())
def test_mutated_corpus_text_accepted_or_refused_cleanly(engine, tmp_path,
                                                         case):
    check_text(service.Service(engine), tmp_path, *case)


@needs_corpus
@pytest.mark.long
@fuzzed(200)
@given(case=mutated_texts())
def test_mutated_corpus_text_accepted_or_refused_cleanly_long(
        engine, tmp_path, case):
    check_text(service.Service(engine), tmp_path, *case)


@st.composite
def mutated_documents(draw):
    """A corpus template as a map, with values at random places replaced
    by hostile ones (a type, a function's arguments, a section)."""
    rel = draw(st.sampled_from(sorted(corpus_documents())))
    doc = copy.deepcopy(corpus_documents()[rel])
    places = []

    def walk(node, path):
        places.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + (i,))
    walk(doc, ())
    names = hostile.Names(
        sorted(doc.get('resources') or ()), sorted(
            doc.get('parameters') or ()), sorted(doc.get('conditions') or
                                                 ()), ())
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(places[1:] or [()]))
        value = draw(st.one_of(hostile.scalars(), hostile.junk(4),
                               hostile.calls(names),
                               hostile.resource_types()))
        node = doc
        for key in path[:-1]:
            node = node[key] if isinstance(node, (dict, list)) and (
                key in node if isinstance(node, dict) else
                key < len(node)) else None
        if isinstance(node, dict) and path and path[-1] in node:
            if draw(st.integers(0, 4)):
                node[path[-1]] = value
            else:
                del node[path[-1]]
        elif isinstance(node, list) and path and path[-1] < len(node):
            node[path[-1]] = value
    return rel, {'template': _json_keys(doc), 'parameters': {}}


def _json_keys(value):
    """YAML's keys of other types (1:, true:) as JSON has them: text."""
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: _json_keys(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_json_keys(v) for v in value]
    return value


@needs_corpus
@fuzzed(40)
@given(case=mutated_documents())
def test_mutated_corpus_document_accepted_or_refused_cleanly(engine, case):
    rel, body = case
    note('from %s' % rel)
    check_validate(service.Service(engine), body)


@needs_corpus
@pytest.mark.long
@fuzzed(200)
@given(case=mutated_documents())
def test_mutated_corpus_document_accepted_or_refused_cleanly_long(
        engine, case):
    rel, body = case
    note('from %s' % rel)
    check_validate(service.Service(engine), body)


# -- a sample through converge-api and the CLI --------------------------------

#: a converge-api on loopback over an embedded home, this module's own
api = test_heat_api.api


class Tenant:
    """One project's raw requests to the API."""

    def __init__(self, api):
        self.api = api
        self.base = '%s/v1/fuzz' % api.url
        self.headers = {'X-Auth-Token': api.token('fuzz')['token'],
                        'Content-Type': 'application/json'}

    def send(self, method, path, body=None):
        r = http.request(method, self.base + path, headers=self.headers,
                         data=None if body is None else json.dumps(body),
                         timeout=120)
        assert r.status_code < 500, (r.status_code, r.text[:2000])
        if r.status_code >= 400:
            err = r.json()
            assert err['code'] == r.status_code, err
            assert err['error']['traceback'] is None, err
            assert err['error']['message'].strip(), err
        return r

    def until_settled(self, path, timeout=60):
        """The stack at `path` once no longer IN_PROGRESS (None once
        gone)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.send('GET', path)
            if r.status_code == 404:
                return None
            stack = r.json()['stack']
            if not stack['stack_status'].endswith('IN_PROGRESS'):
                return stack
            assert time.monotonic() < deadline, stack
            time.sleep(0.1)   # polling the API, as a client does


@pytest.fixture(scope='module')
def tenant(api):
    yield Tenant(api)
    with open(os.path.join(os.path.dirname(api.conf), 'api.log')) as f:
        text = f.read()
    assert 'Traceback' not in text, text[-5000:]


def check_over_http(tenant, body):
    note('request: %s' % json.dumps(body)[:5000])
    n = next(_serial)
    if body.get('stack_name') == 'fuzzed':
        body = dict(body, stack_name='fuzzed-%d' % n)
    r = tenant.send('POST', '/validate', {
        k: body[k] for k in ('template', 'environment', 'files',
                             'parameters')})
    # 200, or a refusal (400; 413 for a body over max_json_body_size)
    assert r.status_code == 200 or 400 <= r.status_code < 500, \
        (r.status_code, r.text[:2000])
    SEEN['http validate: %d' % r.status_code] += 1
    r = tenant.send('POST', '/stacks', body)
    SEEN['http create: %d' % r.status_code] += 1
    if r.status_code != 201:
        assert 400 <= r.status_code < 500
        listed = tenant.send('GET', '/stacks').json()['stacks']
        assert body.get('stack_name') not in [s['stack_name']
                                              for s in listed]
        return
    path = '/stacks/%s/%s' % (body['stack_name'], r.json()['stack']['id'])
    stack = tenant.until_settled(path)
    assert stack['stack_status'] in ('CREATE_COMPLETE', 'CREATE_FAILED'), \
        stack
    SEEN['http created: %s' % stack['stack_status']] += 1
    tenant.send('GET', path + '/resources?nested_depth=3')
    tenant.send('GET', path + '/outputs')
    tenant.send('DELETE', path)
    gone = tenant.until_settled(path)
    assert gone is None or gone['stack_status'] == 'DELETE_COMPLETE', gone


@fuzzed(6)
@given(body=hostile.requests(create=True))
def test_api_answers_hostile_requests_without_a_server_error(tenant, body):
    check_over_http(tenant, body)


@pytest.mark.long
@fuzzed(20)
@given(body=hostile.requests(create=True))
def test_api_answers_hostile_requests_without_a_server_error_long(tenant,
                                                                  body):
    check_over_http(tenant, body)


def check_cli(cli, tmp_path, rel, text):
    proc = cli.run('template', 'validate', '-t', written(tmp_path, rel, text),
                   check=False)
    assert proc.returncode in (0, 2), (proc.returncode, proc.stderr)
    assert 'Traceback' not in proc.stderr, proc.stderr
    if proc.returncode == 2:
        assert proc.stderr.strip(), proc.stdout


@needs_corpus
@fuzzed(2)
@given(case=mutated_texts())
def test_cli_validates_or_refuses_mutated_corpus_text(cli, tmp_path, case):
    check_cli(cli, tmp_path, *case)


@needs_corpus
@pytest.mark.long
@fuzzed(5)
@given(case=mutated_texts())
def test_cli_validates_or_refuses_mutated_corpus_text_long(cli, tmp_path,
                                                           case):
    check_cli(cli, tmp_path, *case)


def teardown_module():
    if SEEN:
        sys.stdout.write('\nfuzz: %s\n' % ', '.join(
            '%s %d' % kv for kv in sorted(SEEN.items())))


