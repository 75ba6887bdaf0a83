"""Secrets stay secret: hidden parameters (and whatever carries their
values) are ****** in every answer of the API and the CLI, in events and
errors; a reader sees no credential a stack handed out (a server's agent
token, a wait condition handle's token); the database keeps them
encrypted; the home and its files are its owner's only."""

import base64
import json
import os
import sqlite3
import stat
import time
import urllib.error
import urllib.request

import pytest

from converge import userdata
from tests.test_heat_api import API, _start_api
from tests.conftest import stop_agents

SECRET = 'S3cr3t-Pa55w0rd-7f1d'

TEMPLATE = {
    'heat_template_version': '2018-08-31',
    'parameters': {
        'pw': {'type': 'string', 'hidden': True},
        'flavor': {'type': 'string', 'default': 'm1.small'}},
    'resources': {
        'box': {'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': {'get_param': 'flavor'},
            'user_data_format': 'SOFTWARE_CONFIG',
            'metadata': {'pw': {'get_param': 'pw'}}}},
        'cfg': {'type': 'OS::Heat::SoftwareConfig', 'properties': {
            'group': 'script', 'inputs': [{'name': 'pw'}],
            'outputs': [{'name': 'said'}],
            # the script says the secret back: its output carries it
            'config': {'str_replace': {
                'template': '#!/bin/sh\n# built for KEY\n'
                            'printf "pw=%s" "$pw" > '
                            '"$heat_outputs_path.said"\n',
                'params': {'KEY': {'get_param': 'pw'}}}}}},
        'dep': {'type': 'OS::Heat::SoftwareDeployment', 'properties': {
            'config': {'get_resource': 'cfg'},
            'server': {'get_resource': 'box'},
            'input_values': {'pw': {'get_param': 'pw'}}}},
        'val': {'type': 'OS::Heat::Value',
                'properties': {'value': {'str_replace': {
                    'template': 'user:admin pass:$pw',
                    'params': {'$pw': {'get_param': 'pw'}}}}}},
        # known only once `val` exists, so refused while the stack is
        # created: the error names the value it refused
        'num': {'type': 'OS::Heat::Value', 'properties': {
            'type': 'number', 'value': {'get_attr': [
                'dep', 'said']}}},
        'handle': {'type': 'OS::Heat::WaitConditionHandle'},
        # what the template made of the secret, beyond recognition
        'shout': {'type': 'OS::Heat::Value', 'properties': {'value': {
            'yaql': {'expression': '$.data.s.toUpper()',
                     'data': {'s': {'get_param': 'pw'}}}}}},
    },
    'outputs': {
        'pw_out': {'value': {'get_param': 'pw'}},
        'joined': {'value': {'get_attr': ['val', 'value']}},
        'said': {'value': {'get_attr': ['dep', 'said']}},
        'curl': {'value': {'get_attr': ['handle', 'curl_cli']}},
        'shouted': {'value': {'get_attr': ['shout', 'value']}},
        'digest': {'value': {'yaql': {
            'expression': '$.data.s.toLower()',
            'data': {'s': {'get_param': 'pw'}}}}},
    },
}


class Caller:
    def __init__(self, url, project, token):
        self.base = '%s/v1/%s' % (url, project)
        self.token = token

    def call(self, method, path, body=None):
        req = urllib.request.Request(
            self.base + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={'X-Auth-Token': self.token,
                     'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def get(self, path):
        status, text = self.call('GET', path)
        assert status == 200, (path, status, text)
        return text, json.loads(text)


def _user_datas(value):
    """Every user_data-like text (an agent part in it) in a JSON value."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _user_datas(v)
    elif isinstance(value, list):
        for v in value:
            yield from _user_datas(v)
    elif isinstance(value, str) and userdata.CONTENT_TYPE in value:
        yield value


def _settled(caller, path, timeout=180):
    deadline = time.monotonic() + timeout
    while True:
        _, body = caller.get(path)
        if not body['stack']['stack_status'].endswith('IN_PROGRESS'):
            return body['stack']
        assert time.monotonic() < deadline, body['stack']['stack_status']
        time.sleep(0.1)


@pytest.fixture(scope='module')
def served(tmp_path_factory):
    d = tmp_path_factory.mktemp('secrets')
    home = str(d / 'home')
    conf = str(d / 'converge.conf')
    with open(conf, 'w') as f:
        f.write('[DEFAULT]\nhome = %s\n' % home)
    log = str(d / 'api.log')
    proc, url = _start_api(conf, log)
    api = API(conf, url)
    member = Caller(url, 'sec', api.token('sec')['token'])
    reader = Caller(url, 'sec', api.token('sec', '--role',
                                          'reader')['token'])
    status, text = member.call('POST', '/stacks', {
        'stack_name': 'vault', 'template': TEMPLATE,
        'parameters': {'pw': SECRET}})
    assert status == 201, text
    stack = _settled(reader, '/stacks/vault')
    # the deployment ran (its agent used its credential), and `num`
    # refused what the script said
    assert stack['stack_status'] == 'CREATE_FAILED', stack
    yield {'member': member, 'reader': reader, 'home': home, 'log': log,
           'stack': stack, 'url': url}
    proc.terminate()
    proc.wait(timeout=30)
    stop_agents(home)


def _everything(caller, stack):
    """Every answer `caller` can fetch about the stack, as text."""
    base = '/stacks/vault/%s' % stack['id']
    texts = {}

    def fetch(path):
        texts[path], body = caller.get(path)
        return body

    fetch('/stacks')
    fetch(base)
    fetch(base + '?resolve_outputs=false')
    names = [r['resource_name'] for r in fetch(
        base + '/resources?with_detail=true')['resources']]
    fetch(base + '/resources?nested_depth=2')
    assert {'box', 'dep', 'val', 'num', 'handle'} <= set(names)
    for name in names:
        fetch('%s/resources/%s' % (base, name))
        fetch('%s/resources/%s/metadata' % (base, name))
        for e in fetch('%s/resources/%s/events' % (base,
                                                   name))['events']:
            fetch('%s/resources/%s/events/%s' % (base, name, e['id']))
    fetch(base + '/events')
    fetch(base + '/events?nested_depth=2')
    for o in fetch(base + '/outputs')['outputs']:
        fetch('%s/outputs/%s' % (base, o['output_key']))
    for tail in ('/template', '/environment', '/files', '/snapshots'):
        fetch(base + tail)
    for c in fetch('/software_configs')['software_configs']:
        fetch('/software_configs/%s' % c['id'])
    for d in fetch('/software_deployments')['software_deployments']:
        fetch('/software_deployments/%s' % d['id'])
        fetch('/software_deployments/metadata/%s' % d['server_id'])
    return texts


def _agent_token(member, stack):
    """The server's agent token, as a member (who may have it) sees it
    in the server's user_data."""
    _, body = member.get('/stacks/vault/%s/resources/box' % stack['id'])
    found = [userdata.decode(u) for u in _user_datas(body)]
    assert found and found[0]['token'] != '******'
    return found[0]['token']


def test_a_reader_sees_no_secret(served):
    """A reader fetches everything it may about a stack whose hidden
    parameter flows into a server's metadata, a deployment's input (and
    the script's output), a Value, outputs and a refused property; none
    of it holds the secret, the agent's token or the handle's token."""
    member, reader, stack = served['member'], served['reader'], \
        served['stack']
    token = _agent_token(member, stack)
    _, handle = member.get('/stacks/vault/%s/resources/handle'
                           % stack['id'])
    handle_token = handle['resource']['attributes']['token']
    assert len(handle_token) == 64
    texts = _everything(reader, stack)
    whole = '\n'.join(texts.values())
    assert len(texts) > 30
    leaked = [p for p, t in texts.items() if SECRET in t or
              SECRET.upper() in t or SECRET.lower() in t]
    assert not leaked, leaked
    leaked = [p for p, t in texts.items() if token in t or
              handle_token in t]
    assert not leaked, leaked
    # the agent's part of the user_data is there, its token masked
    parts = [userdata.decode(u) for u in _user_datas(
        [json.loads(t) for t in texts.values()])]
    assert parts and all(p['token'] == '******' for p in parts)
    assert base64.b64encode(token.encode()).decode()[:40] not in whole
    # what shows where the secret was
    shown = json.loads(texts['/stacks/vault/%s' % stack['id']])['stack']
    assert shown['parameters']['pw'] == '******'
    outs = {o['output_key']: o['output_value'] for o in shown['outputs']}
    assert outs['pw_out'] == '******'
    assert outs['joined'] == 'user:admin pass:******'
    assert outs['said'] == 'pw=******'
    assert '******' in outs['curl'] and handle_token not in outs['curl']
    assert outs['shouted'] == outs['digest'] == '******'
    _, cfg = reader.get('/stacks/vault/%s/resources/cfg' % stack['id'])
    _, cfg = reader.get('/software_configs/%s'
                        % cfg['resource']['physical_resource_id'])
    assert '# built for ******\n' in cfg['software_config']['config']
    box = json.loads(texts['/stacks/vault/%s/resources/box'
                           % stack['id']])['resource']
    assert box['properties']['metadata'] == {'pw': '******'}
    assert box['properties']['flavor'] == 'm1.small'   # the rest as it is
    dep = json.loads(texts['/stacks/vault/%s/resources/dep'
                           % stack['id']])['resource']
    assert dep['properties']['input_values'] == {'pw': '******'}
    num = json.loads(texts['/stacks/vault/%s/resources/num'
                           % stack['id']])['resource']
    assert num['resource_status'] == 'CREATE_FAILED'
    assert "Value 'pw=******' is not a number" in \
        num['resource_status_reason']
    assert 'pw=******' in shown['stack_status_reason']


def test_a_member_sees_credentials_not_secrets(served):
    """A member gets the credentials (a server's agent token, a handle's
    token) but no hidden value either."""
    member, stack = served['member'], served['stack']
    texts = _everything(member, stack)
    assert not [p for p, t in texts.items() if SECRET in t]
    token = _agent_token(member, stack)
    assert any(token in t for t in texts.values()) or any(
        userdata.decode(u)['token'] == token for t in texts.values()
        for u in _user_datas(json.loads(t)))
    _, handle = member.get('/stacks/vault/%s/resources/handle'
                           % stack['id'])
    assert len(handle['resource']['attributes']['token']) == 64


def test_refused_create_quotes_no_secret(served):
    """A template refused when created (400) for a hidden value names
    the property, not the value; nothing is stored."""
    member = served['member']
    bad = json.loads(json.dumps(TEMPLATE))
    bad['resources']['num']['properties']['value'] = {'get_param': 'pw'}
    status, text = member.call('POST', '/stacks', {
        'stack_name': 'refused', 'template': bad,
        'parameters': {'pw': SECRET}})
    assert status == 400, text
    assert 'resources.num.properties.value' in text
    assert SECRET not in text and '******' in text
    status, text = member.call('POST', '/validate', {
        'template': bad, 'parameters': {'pw': SECRET}})
    assert SECRET not in text
    status, _ = member.call('GET', '/stacks/refused')
    assert status == 404


def test_database_and_home_keep_it(served):
    """The database holds no hidden value in clear (encrypted with the
    home's key), nor do the events or the API's log; the home is 0700,
    its database and key 0600."""
    home = served['home']
    for name in os.listdir(home):
        path = os.path.join(home, name)
        if name.startswith('converge.db'):
            with open(path, 'rb') as f:
                assert SECRET.encode() not in f.read(), name
    db = sqlite3.connect(os.path.join(home, 'converge.db'))
    try:
        reasons = [r for (r,) in db.execute('SELECT reason FROM events')]
        sealed = db.execute('SELECT properties FROM resources WHERE '
                            "name = 'dep'").fetchone()[0]
    finally:
        db.close()
    assert any('pw=******' in r for r in reasons)
    assert json.loads(sealed).keys() == {'$fernet'}
    with open(served['log']) as f:
        assert SECRET not in f.read()
    mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)   # noqa: E731
    assert mode(home) == 0o700
    assert mode(os.path.join(home, 'converge.db')) == 0o600
    assert mode(os.path.join(home, 'auth_encryption.key')) == 0o600
    assert mode(os.path.join(home, 'sim.db')) == 0o600


CLI_TEMPLATE = '''\
heat_template_version: 2018-08-31
parameters:
  pw: {type: string, hidden: true}
  pin: {type: number, hidden: true}
resources:
  val:
    type: OS::Heat::Value
    properties:
      value: {str_replace: {template: "pass:$pw", params: {$pw: {get_param: pw}}}}
  pinned:
    type: OS::Heat::Value
    properties: {type: number, value: {get_param: pin}}
  num:
    type: OS::Heat::Value
    properties: {type: number, value: {get_attr: [val, value]}}
outputs:
  pw_out: {value: {get_param: pw}}
  joined: {value: {get_attr: [val, value]}}
  pin_out: {value: {get_param: pin}}
'''


@pytest.mark.long   # 19-37 s: in .ci/run's long group
def test_cli_shows_no_secret_in_any_format(cli, write):
    """Every command that shows the stack, in every format, and the
    lines a create prints as it goes: no hidden value (a number
    neither), the rest as it is."""
    path = write('t.yaml', CLI_TEMPLATE)
    proc = cli.run('stack', 'create', 'cv', '-t', path, '--parameter',
                   'pw=%s' % SECRET, '--parameter', 'pin=73519', '--wait',
                   check=False)
    assert proc.returncode == 1, proc.stderr
    said = [proc.stdout + proc.stderr]
    assert 'pass:******' in said[0]
    commands = [('stack', 'show', 'cv'), ('stack', 'list'),
                ('stack', 'resource', 'list', 'cv'),
                ('stack', 'event', 'list', 'cv'),
                ('stack', 'output', 'list', 'cv'),
                ('stack', 'output', 'show', 'cv', '--all'),
                ('stack', 'output', 'show', 'cv', 'joined'),
                ('stack', 'template', 'show', 'cv'),
                ('stack', 'environment', 'show', 'cv'),
                ('stack', 'failures', 'list', 'cv')]
    commands += [('stack', 'resource', 'show', 'cv', r)
                 for r in ('val', 'pinned', 'num')]
    every = {('stack', 'show', 'cv'), ('stack', 'event', 'list', 'cv'),
             ('stack', 'output', 'show', 'cv', '--all'),
             ('stack', 'resource', 'show', 'cv', 'val')}
    for args in commands:
        for fmt in (('table', 'json', 'yaml', 'value') if args in every
                    else ('json',)):
            proc = cli.run(*args, '-f', fmt, check=False)
            if 'unrecognized arguments: -f' in proc.stderr:
                proc = cli.run(*args)
                fmt = 'plain'
            assert proc.returncode == 0, (args, fmt, proc.stderr)
            said.append('%s %s:\n%s%s' % (' '.join(args), fmt, proc.stdout,
                                          proc.stderr))
    whole = '\n'.join(said)
    assert SECRET not in whole
    assert '73519' not in whole
    shown = cli.json('stack', 'output', 'show', 'cv', '--all')
    got = {o['output_key']: o['output_value'] for o in shown} \
        if isinstance(shown, list) else shown
    assert 'pass:******' in json.dumps(got)
    val = cli.json('stack', 'resource', 'show', 'cv', 'val')
    assert val['attributes'] == {'value': 'pass:******'}


SMALL = '''\
heat_template_version: 2018-08-31
parameters:
  pw: {type: string, hidden: true}
resources:
  val:
    type: OS::Heat::Value
    properties: {value: {get_param: pw}}
outputs:
  out: {value: {get_attr: [val, value]}}
'''


def _in_files(home, text):
    found = []
    for name in os.listdir(home):
        if name.startswith('converge.db'):
            with open(os.path.join(home, name), 'rb') as f:
                if text.encode() in f.read():
                    found.append(name)
    return found


def test_a_database_in_clear_keeps_working(cli, write):
    """A home whose rows were written in clear (the option off) works on
    once encryption is on; `converge-manage db encrypt` seals what is
    left in clear; another key cannot read it and says so."""
    import subprocess
    import sys
    path = write('t.yaml', SMALL)
    off = write('off.conf', '[DEFAULT]\n'
                'encrypt_parameters_and_properties = false\n')
    cli.run('--config-file', off, 'stack', 'create', 'old', '-t', path,
            '--parameter', 'pw=%s' % SECRET, '--wait')
    assert _in_files(cli.home, SECRET)
    assert not os.path.exists(os.path.join(cli.home,
                                            'auth_encryption.key'))
    # on (the default): the old rows read, new ones are sealed
    shown = cli.json('stack', 'output', 'show', 'old', 'out')
    assert shown['output_value'] == '******'
    cli.run('stack', 'update', 'old', '--existing', '--parameter',
            'pw=Second-S3cret-99', '--wait')
    assert cli.json('stack', 'resource', 'show', 'old', 'val')[
        'attributes'] == {'value': '******'}
    assert not _in_files(cli.home, 'Second-S3cret-99')
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), 'converge-manage'),
         '--home', cli.home, 'db', 'encrypt'], capture_output=True,
        text=True, env=cli.env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.split()[0]) > 0
    assert not _in_files(cli.home, SECRET)
    assert cli.json('stack', 'show', 'old')['stack_status'] == \
        'UPDATE_COMPLETE'
    wrong = write('wrong.conf', '[DEFAULT]\nauth_encryption_key = other\n')
    proc = cli.run('--config-file', wrong, 'stack', 'resource', 'show',
                   'old', 'val', check=False)
    assert proc.returncode == 1
    assert 'encrypted with another key' in proc.stderr
    assert 'Traceback' not in proc.stderr


def test_mask_rules():
    """Whole values of any length; parts of texts from MIN_PART
    characters on; numbers as numbers; the data given left as it is;
    user_data's base64 parts and agent token."""
    from converge import masking
    mask = masking.Mask(['abc', 'longer-secret', 73519])
    data = {'a': 'abc', 'b': 'xabcx', 'c': 'say longer-secret twice: '
            'longer-secret', 'd': [73519, 7351, True, None],
            'e': {'n': 1.5}}
    assert mask(data) == {
        'a': '******', 'b': 'xabcx', 'c': 'say ****** twice: ******',
        'd': ['******', 7351, True, None], 'e': {'n': 1.5}}
    assert data['a'] == 'abc'
    ud = userdata.encode('#!/bin/sh\necho longer-secret\n', 'http://e',
                         'agent-1', 'f' * 64)
    seen = masking.Mask(['longer-secret'])(ud)
    assert userdata.decode(seen)['token'] == 'f' * 64
    assert userdata.parts(seen) == [('text/x-shellscript',
                                     '#!/bin/sh\necho ******\n')]
    hidden = masking.Mask(credentials=True)(ud)
    assert userdata.decode(hidden) == {'endpoint': 'http://e',
                                       'agent_id': 'agent-1',
                                       'token': '******'}
    assert not masking.Mask()   # nothing to hide: data passes as it is


def test_a_sealed_value_reads_back_as_a_value_of_its_own(tmp_path):
    """Values read back are kept opened (a row is read by every unit
    that needs it): each reader still gets a value of its own, and what
    one changes the next does not see."""
    from converge import conf as conf_mod
    from converge.db import sealing
    conf_mod.CONF.set_override('auth_encryption_key', 'k')
    try:
        value = {'password': 'a-secret', 'list': [1]}
        stored = sealing.seal(value)
        assert 'a-secret' not in json.dumps(stored)
        first = sealing.unseal(stored)
        first['list'].append(2)
        first['password'] = 'changed'
        assert sealing.unseal(stored) == value
        other = sealing.seal(value)
        assert other != stored     # each token its own IV: no equal texts
    finally:
        conf_mod.CONF.clear_override('auth_encryption_key')


def test_the_engines_secret_is_kept_sealed(tmp_path):
    """The secret agents' tokens derive from is sealed like any hidden
    value (a dump of the database alone forges no agent's token); one
    written in clear (the option off) reads on, `db encrypt` seals it,
    and another key cannot read it."""
    from converge import conf as conf_mod
    from converge import exception
    from converge.db import migrate
    from converge.db import sealing
    from converge.db import session
    from converge.db import software
    CONF = conf_mod.CONF
    db = session.get('sqlite:///%s' % (tmp_path / 'c.db'))
    migrate.ensure(db)

    def stored(name):
        with sqlite3.connect(str(tmp_path / 'c.db')) as conn:
            return conn.execute('SELECT value FROM engine_secrets WHERE '
                                'name = ?', (name,)).fetchone()[0]

    CONF.set_override('auth_encryption_key', 'k')
    try:
        made = software.secret(db, 'sealed')
        assert len(made) == 64 and made not in stored('sealed')
        assert stored('sealed').startswith('fernet:')
        assert software.secret(db, 'sealed') == made
        CONF.set_override('encrypt_parameters_and_properties', False)
        clear = software.secret(db, 'clear')
        assert stored('clear') == clear
        CONF.clear_override('encrypt_parameters_and_properties')
        assert software.secret(db, 'clear') == clear   # reads on
        assert sealing.seal_all(db) >= 1
        assert stored('clear').startswith('fernet:')
        assert software.secret(db, 'clear') == clear
        CONF.set_override('auth_encryption_key', 'another')
        with pytest.raises(exception.ConvergeError,
                           match='encrypted with another key'):
            software.secret(db, 'clear')
    finally:
        CONF.clear_override('auth_encryption_key')
        CONF.clear_override('encrypt_parameters_and_properties')
        session.forget()


def test_log_lines_mask_remembered_secrets():
    """A secret the process met is masked in its log lines, tracebacks
    included."""
    import io
    import logging
    from converge import masking
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    log = logging.getLogger('converge.test_secrets')
    log.addHandler(handler)
    log.propagate = False
    try:
        masking.mask_logs(log)
        masking.remember(['Remembered-S3cret'])
        log.warning('value %s refused', 'Remembered-S3cret')
        try:
            raise ValueError('bad Remembered-S3cret')
        except ValueError:
            log.exception('failed')
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert 'Remembered-S3cret' not in text
    assert 'value ****** refused' in text
    assert 'ValueError: bad ******' in text


@pytest.mark.distributed
def test_distributed_sealed_with_the_configured_key(tmp_path):
    """On PostgreSQL, with [DEFAULT] auth_encryption_key on every
    process: a worker writes the hidden value sealed, the CLI shows it
    masked, no row holds it in clear."""
    from tests.distributed import Deployment, require
    require('postgresql', 'rabbitmq', 'redis')
    dist = Deployment(tmp_path, options={
        'DEFAULT': {'auth_encryption_key': 'a key of the deployment'}})
    try:
        dist.start_worker()
        path = tmp_path / 't.yaml'
        path.write_text(SMALL)
        dist.cli('stack', 'create', 'd', '-t', str(path), '--parameter',
                 'pw=%s' % SECRET, '--wait')
        shown = dist.json('stack', 'resource', 'show', 'd', 'val')
        assert shown['attributes'] == {'value': '******'}
        assert dist.json('stack', 'output', 'show', 'd', 'out')[
            'output_value'] == '******'
        dump = dist.sql("SELECT properties::text, attributes::text FROM "
                        "resources") + dist.sql(
            'SELECT parameters::text, bundle::text FROM templates')
        assert dump and SECRET not in json.dumps(dump)
        assert all('$fernet' in v for row in dump for v in row if v)
    finally:
        dist.close()
