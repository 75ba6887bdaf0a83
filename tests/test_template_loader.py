"""load_bundle / Bundle: files, environments, YAML errors, line lookup."""

import json
import os

import pytest

from converge import exception
from converge.template import Bundle
from converge.template import load_bundle


def write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_versions_stay_strings_and_dates_not_parsed(tmp_path):
    t = write(tmp_path, 't.yaml', 'heat_template_version: 2013-05-23\n'
               'description: when 2001-12-14t21:59:43.10-05:00\n'
              'resources: {}\n'
              'outputs: {o: {value: 2020-01-01}}\n')
    b = load_bundle(t)
    assert b.template['heat_template_version'] == '2013-05-23'
    assert b.template['outputs']['o']['value'] == '2020-01-01'
    json.dumps(b.to_dict())


def test_json_template(tmp_path):
    t = write(tmp_path, 't.json', json.dumps(
        {'heat_template_version': '2015-10-15', 'resources': {}}))
    assert load_bundle(t).template['heat_template_version'] == '2015-10-15'


def test_malformed_yaml_names_file_and_line(tmp_path):
    t = write(tmp_path, 't.yaml', 'heat_template_version: 2015-10-15\n'
              'resources:\n  a: [1, 2\n  b: c\n')
    with pytest.raises(exception.InvalidTemplate) as exc:
        load_bundle(t)
    assert exc.value.filename == t
    assert exc.value.line in (3, 4, 5)
    assert str(exc.value).startswith(t + ':')


def test_template_over_size_limit(tmp_path):
    t = write(tmp_path, 't.yaml', 'heat_template_version: 2015-10-15\n')
    with pytest.raises(exception.InvalidTemplate) as exc:
        load_bundle(t, max_size=10)
    assert 'Template size (34 bytes) exceeds maximum allowed size ' \
        '(10 bytes)' in str(exc.value)
    load_bundle(t, max_size=34)


def url(*parts):
    return 'file://' + os.path.join(*[str(p) for p in parts])


def test_get_file_collected_relative_and_file_url(tmp_path):
    write(tmp_path, 'scripts/a.sh', 'echo a\n')
    write(tmp_path, 'b.txt', 'b')
    t = write(tmp_path, 't.yaml', '''
heat_template_version: 2015-10-15
resources:
  r:
    type: OS::Heat::None
    properties:
      a: {get_file: scripts/a.sh}
      b: {str_replace: {template: {get_file: 'file://%s'}, params: {}}}
      c: [{get_file: scripts/a.sh}]
''' % os.path.join(str(tmp_path), 'b.txt'))
    b = load_bundle(t)
    # keyed by absolute URL, as python-heatclient sends them; the
    # template is left as written
    assert b.files == {url(tmp_path, 'scripts/a.sh'): 'echo a\n',
                       url(tmp_path, 'b.txt'): 'b'}
    assert b.template['resources']['r']['properties']['a'] == {
        'get_file': 'scripts/a.sh'}
    assert b.file_key('scripts/a.sh') == url(tmp_path, 'scripts/a.sh')


def test_get_file_above_the_template_is_read_as_heatclient_does(tmp_path):
    write(tmp_path, 'secret.txt', 'x')
    write(tmp_path, 'lib/data.txt', 'y')
    t = write(tmp_path, 'sub/t.yaml', '''heat_template_version: 2015-10-15
resources:
  r:
    type: OS::Heat::None
    properties:
      a: {get_file: ../secret.txt}
      b: {get_file: ../lib/data.txt}
''')
    b = load_bundle(t)
    assert b.files == {url(tmp_path, 'secret.txt'): 'x',
                       url(tmp_path, 'lib/data.txt'): 'y'}


def test_get_file_missing_names_file_and_line(tmp_path):
    t = write(tmp_path, 'sub/t2.yaml', '''heat_template_version: 2015-10-15
resources:
  r:
    type: OS::Heat::None
    properties:
      a:
        get_file: nothere.txt
''')
    with pytest.raises(exception.InvalidTemplate) as exc:
        load_bundle(t)
    assert 'nothere.txt' in exc.value.message
    assert exc.value.line == 7


def test_environments_merge_in_order(tmp_path):
    t = write(tmp_path, 't.yaml', 'heat_template_version: 2015-10-15\n')
    e1 = write(tmp_path, 'e1.yaml', '''
parameters: {a: 1, b: 1}
parameter_defaults: {x: 1}
resource_registry:
  My::A: OS::Heat::None
  resources:
    r1: {My::B: OS::Heat::None}
event_sinks: []
''')
    e2 = write(tmp_path, 'e2.yaml', '''
parameters: {b: 2}
parameter_defaults: {y: 2}
resource_registry:
  My::A: Test::Value
  resources:
    r1: {My::C: OS::Heat::None}
encrypted_param_names: []
parameter_merge_strategies: {}
''')
    b = load_bundle(t, [e1, e2])
    env = b.environment
    assert env['parameters'] == {'a': 1, 'b': 2}
    assert env['parameter_defaults'] == {'x': 1, 'y': 2}
    assert env['resource_registry']['My::A'] == 'Test::Value'
    assert env['resource_registry']['resources']['r1'] == {
        'My::B': 'OS::Heat::None', 'My::C': 'OS::Heat::None'}


def test_environment_unknown_section(tmp_path):
    t = write(tmp_path, 't.yaml', 'heat_template_version: 2015-10-15\n')
    e = write(tmp_path, 'env.yaml', 'parameters: {}\nbogus: {}\n')
    with pytest.raises(exception.InvalidTemplate) as exc:
        load_bundle(t, [e])
    assert exc.value.filename == e and exc.value.line == 2
    assert 'bogus' in exc.value.message


def test_round_trip_and_line_of(tmp_path):
    t = write(tmp_path, 't.yaml', '''heat_template_version: 2015-10-15
resources:
  web:
    type: OS::Heat::None
    properties:
      image: cirros
      list:
        - a
        - b
''')
    b = load_bundle(t, extra_files={'x': 'y'})
    d = json.loads(json.dumps(b.to_dict()))
    b2 = Bundle.from_dict(d)
    assert b2.template == b.template and b2.files == {'x': 'y'}
    assert b2.template_path == t
    assert b2.line_of(['resources', 'web', 'properties', 'image']) == 6
    assert b2.line_of(['resources', 'web', 'properties', 'list', 1]) == 9
    # a path that does not fully exist gives the deepest line found
    assert b2.line_of(['resources', 'web', 'nothere']) == 3


# -- building from parser events gives what yaml.load gives ------------------

TRICKY = [
    'a: 1\nb: 1.5\nc: true\nd: null\ne: ~\nf: 0x1f\ng: 1_000\nh: -2.5e+3\n',
    'when: 2001-12-14t21:59:43.10-05:00\nday: 2020-01-01\n',
    'q: "quoted: yes"\nn: \'123\'\ns: !!str 123\nt: ! 123\nu: !!int "7"\n',
    'shared: &x {k: [1, 2]}\nagain: *x\nlist: [&y v, *y]\n',
    'base: &b {a: 1, b: 2}\nmerged: {<<: *b, b: 3}\n',
    "quoted_merge: {'<<': 1}\n",
    'set: !!set {a, b}\nomap: !!omap [{a: 1}, {b: 2}]\n',
    'bin: !!binary aGVsbG8=\n',
    '? [1, 2]\n: complex key\n',
    'a: &x 1\nb: &x 2\nc: *x\n',
    'block: |\n  line one\n  line two\nfolded: >\n  a\n  b\n',
    '',
    '# only a comment\n',
    '- a\n- [b, {c: d}]\n',
    'plain',
]


@pytest.mark.parametrize('text', TRICKY)
def test_event_loader_matches_yaml_load(text):
    import yaml
    from converge.template import loader
    try:
        want = yaml.load(text, Loader=loader.Loader)
    except (yaml.YAMLError, exception.InvalidTemplate):
        # both ways refuse it (a type JSON has not: !!binary, !!set)
        with pytest.raises(exception.InvalidTemplate):
            loader.parse_text(text)
    else:
        assert loader.parse_text(text) == want


def test_a_recursive_alias_is_refused_naming_its_line():
    # it stands for an endless document: walking or storing it never ends
    from converge.template import loader
    with pytest.raises(exception.InvalidTemplate) as exc:
        loader.parse_text('a: 1\nr: &r\n  - 1\n  - *r\n', 't.yaml')
    assert exc.value.line == 4 and exc.value.filename == 't.yaml'
    assert '*r' in str(exc.value)


def test_event_loader_errors_like_yaml_load():
    from converge.template import loader
    for text, line in (('a: *nowhere\n', 1), ('a: 1\n---\nb: 2\n', 3),
                       ('a: [1,\n', 2)):
        with pytest.raises(exception.InvalidTemplate) as exc:
            loader.parse_text(text, 't.yaml')
        assert 't.yaml' in str(exc.value)


def test_event_loader_on_every_corpus_file():
    import yaml
    from converge.template import loader
    from tests.conftest import CORPUS
    if not os.path.isdir(CORPUS):
        pytest.skip('corpus not found at %s' % CORPUS)
    checked = 0
    for root, _, files in os.walk(CORPUS):
        for name in files:
            if not name.endswith(('.yaml', '.yml')):
                continue
            with open(os.path.join(root, name)) as f:
                text = f.read()
            try:
                want = yaml.load(text, Loader=loader.Loader)
            except yaml.YAMLError:
                continue
            try:
                got = loader._load_from_events(text)
            except loader._Unusual:
                # a key given twice (yaml.load keeps the last): refused
                # when its values differ, else read as yaml.load reads it
                try:
                    got = loader.parse_text(text, name)
                except exception.InvalidTemplate as exc:
                    assert 'duplicate key' in str(exc)
                    continue
            assert got == want, name
            checked += 1
    assert checked > 50


def test_provider_templates_are_read_where_any_type_names_them(tmp_path):
    # a resource's type, a group's resource_def type (as python-heatclient
    # finds them), and the provider's own files relative to it
    write(tmp_path, 'roles/node.yaml', '''heat_template_version: 2015-10-15
resources:
  r:
    type: OS::Heat::Value
    properties: {value: {get_file: ../scripts/boot.sh}}
''')
    write(tmp_path, 'scripts/boot.sh', 'echo boot\n')
    write(tmp_path, 'db.yaml', 'heat_template_version: 2015-10-15\n')
    t = write(tmp_path, 't.yaml', '''heat_template_version: 2015-10-15
resources:
  db: {type: db.yaml}
  nodes:
    type: OS::Heat::ResourceGroup
    properties:
      resource_def: {type: roles/node.yaml}
''')
    b = load_bundle(t)
    assert set(b.files) == {url(tmp_path, 'roles/node.yaml'),
                            url(tmp_path, 'scripts/boot.sh'),
                            url(tmp_path, 'db.yaml')}


@pytest.mark.parametrize('text,line', [
    ('a: 1\nb: .nan\n', 2), ('a: [1, -.inf]\n', 1),
    ('a: 1\nb: !!float .inf\n', 2),
    ('base: &b {x: .NaN}\nm: {<<: *b}\n', 1), ('{"a": 1.0e+999}', 1)])
def test_a_number_that_is_not_finite_is_refused_naming_its_line(text, line):
    # nan passes every range constraint, and neither it nor an infinity
    # is JSON: the API could not answer with the value, nor store it
    from converge.template import loader
    with pytest.raises(exception.InvalidTemplate) as exc:
        loader.parse_text(text, 'f.yaml')
    assert 'not a finite number' in str(exc.value)
    assert str(exc.value).startswith('f.yaml:%d:' % line)
