"""The `converge` CLI in remote mode (--os-url, --os-token) against a live
converge-api on loopback (an embedded home, the API process being the
engine), beside the same commands embedded on a home of their own: the
same columns, the same values but ids and times, the same exit codes."""

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.conftest import CLI, stop_agents
from tests import test_heat_api
from tests.test_heat_api import NESTED, TOP
from tests.test_top import WAITING

pytestmark = pytest.mark.xdist_group('heat_api')

#: values that differ between two stacks made alike: ids, times, the
#: physical ids (random suffixes), a stack's project
VARYING = ('id', 'creation_time', 'updated_time', 'event_time',
           'physical_resource_id', 'project', 'Creation Time',
           'Updated Time', 'ID', 'observed_time')

#: a converge-api on loopback over an embedded home, this module's own
api = test_heat_api.api

FAILING = '''\
heat_template_version: 2018-08-31
resources:
  ok:
    type: OS::Heat::Value
    properties: {value: fine}
  bad:
    type: OS::Heat::TestResource
    properties: {fail: true}
    depends_on: ok
'''


class Remote:
    """Runs `converge --os-url URL --os-token T` in a subprocess; its
    --home is an empty directory, so nothing local can answer."""

    def __init__(self, url, token, home):
        self.url, self.token, self.home = url, token, home

    def argv(self, args, url=None, token=None):
        return [sys.executable, '-m', 'converge.cmd.cli', '--home',
                self.home, '--os-url', url or self.url, '--os-token',
                token or self.token] + list(args)

    @staticmethod
    def env():
        env = dict(os.environ)
        for k in ('CONVERGE_HOME', 'CONVERGE_URL', 'CONVERGE_TOKEN',
                  'OS_PROJECT_ID'):
            env.pop(k, None)
        return env

    def popen(self, *args):
        return subprocess.Popen(self.argv(args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=self.env())

    def run(self, *args, check=True, url=None, token=None):
        proc = subprocess.run(
            self.argv(args, url, token), capture_output=True, text=True,
            env=self.env(), timeout=300)
        if check and proc.returncode != 0:
            raise AssertionError('converge %s failed (%d):\n%s\n%s' % (
                ' '.join(args), proc.returncode, proc.stdout, proc.stderr))
        return proc

    def json(self, *args, **kw):
        return json.loads(self.run(*(list(args) + ['-f', 'json']),
                                   **kw).stdout)


def _remote(api, tmp_path, project):
    token = api.token(project)['token']
    return Remote('%s/v1/%s' % (api.url, project), token,
                  str(tmp_path / 'nohome'))


def _same(remote, local):
    """`remote` and `local` (rows or one mapping, as -f json prints them)
    alike but for VARYING values."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in VARYING}
        if isinstance(value, list):
            return [strip(v) for v in value]
        if isinstance(value, str):
            # a nested stack's name ends in part of its id
            return re.sub(r'-[0-9a-f]{12}\b', '-<id>', value)
        return value
    assert strip(remote) == strip(local)
    if isinstance(remote, list):
        assert [sorted(r) for r in remote] == [sorted(r) for r in local]
    else:
        assert sorted(remote) == sorted(local)


def _lines(out):
    """What following printed, one line per event, without the time."""
    return sorted(line.split(' ', 2)[2] for line in out.splitlines()
                  if line.startswith('20'))


@pytest.mark.long   # 19-37 s: in .ci/run's long group
def test_a_stack_through_its_life_remote_as_embedded(api, tmp_path, write):
    """create --wait with get_file, a provider template and an
    environment; list, show, resource list (and a level down), event
    list, output show; update --existing --parameter --wait; check;
    converge; delete --wait: remote and embedded print the same and exit
    the same."""
    remote = _remote(api, tmp_path, 'life')
    local = CLI(str(tmp_path / 'home'))
    write('motd.txt', 'welcome\n')
    write('inner.yaml', NESTED)
    top = write('top.yaml', TOP)
    env = write('env.yaml', 'parameters:\n  greeting: bonjour\n')
    try:
        both = {}
        for side, cli in (('remote', remote), ('local', local)):
            made = cli.run('stack', 'create', '-t', top, '-e', env,
                           '--wait', 'app')
            both[side] = made
        # following printed every event of the traversal, once
        assert _lines(both['remote'].stdout) == _lines(both['local'].stdout)
        assert '[box]: CREATE_COMPLETE' in both['remote'].stdout

        listed = remote.json('stack', 'list')
        assert [r['Stack Status'] for r in listed] == ['CREATE_COMPLETE']
        _same(listed, local.json('stack', 'list'))

        shown = remote.json('stack', 'show', 'app')
        assert shown['stack_status'] == 'CREATE_COMPLETE'
        assert shown['parameters'] == {'greeting': 'bonjour'}
        assert {o['output_key']: o['output_value']
                for o in shown['outputs']} == {'motd': 'welcome\n',
                                               'said': 'bonjour'}
        _same(shown, local.json('stack', 'show', 'app'))
        # by id too
        assert remote.json('stack', 'show', shown['id'])['stack_name'] \
            == 'app'

        for args in (('stack', 'resource', 'list', 'app'),
                     ('stack', 'resource', 'list', 'app', '-n', '1'),
                     ('stack', 'output', 'show', 'app', 'said'),
                     ('stack', 'output', 'show', 'app', '--all'),
                     ('stack', 'output', 'list', 'app'),
                     ('stack', 'resource', 'show', 'app', 'motd')):
            _same(remote.json(*args), local.json(*args))

        events = remote.json('stack', 'event', 'list', 'app')
        assert [(e['resource_name'], e['resource_status'])
                for e in events if e['resource_name'] == 'box'] == [
            ('box', 'CREATE_IN_PROGRESS'), ('box', 'CREATE_COMPLETE')]
        assert sorted((e['resource_name'], e['resource_status'])
                      for e in events) == sorted(
            (e['resource_name'], e['resource_status'])
            for e in local.json('stack', 'event', 'list', 'app'))
        assert list(events[0]) == list(local.json(
            'stack', 'event', 'list', 'app', '--limit', '1')[0])
        assert len(remote.json('stack', 'event', 'list', 'app',
                               '--limit', '2')) == 2

        for side, cli in (('remote', remote), ('local', local)):
            both[side] = cli.json('stack', 'update', 'app', '--existing',
                                  '--parameter', 'greeting=hej', '--wait')
        assert both['remote']['stack_status'] == 'UPDATE_COMPLETE'
        _same(both['remote'], both['local'])
        assert remote.json('stack', 'output', 'show', 'app', 'said')[
            'output_value'] == 'hej'

        # check prints OSC's row a stack; converge, converge's own, the
        # stack
        [got] = remote.json('stack', 'check', 'app', '--wait')
        assert got['Stack Status'] == 'CHECK_COMPLETE', got
        _same([got], local.json('stack', 'check', 'app'))
        got = remote.json('stack', 'converge', 'app', '--wait')
        assert got['stack_status'] == 'UPDATE_COMPLETE', got
        _same(got, local.json('stack', 'converge', 'app'))

        for cli in (remote, local):
            stack_id = cli.json('stack', 'show', 'app')['id']
            cli.run('stack', 'delete', 'app', '--wait', '--yes')
            assert cli.json('stack', 'list') == []
            # listed when asked (Heat's show_deleted), with when it went
            [gone] = cli.json('stack', 'list', '--deleted')
            assert (gone['ID'], gone['Stack Status']) == (
                stack_id, 'DELETE_COMPLETE')
            assert gone['Deletion Time'] >= gone['Creation Time']
            # a deleted stack is shown by its id (as Heat's lookup)
            assert cli.json('stack', 'show', stack_id)['stack_status'] == \
                'DELETE_COMPLETE'
            gone = cli.run('stack', 'resource', 'list', 'app', check=False)
            assert gone.returncode == 3, gone.stderr
            assert 'Stack not found: app' in gone.stderr
        # the remote CLI kept nothing local: not even its home was made
        assert not os.path.exists(remote.home)
    finally:
        stop_agents(local.home)


@pytest.mark.long   # 19-37 s: in .ci/run's long group
def test_refusals_exit_as_embedded(api, tmp_path, write):
    """A failed create (rolled back), an invalid template, a name taken,
    a missing resource and output: the same codes and messages."""
    remote = _remote(api, tmp_path, 'refusals')
    local = CLI(str(tmp_path / 'home'))
    bad = write('bad.yaml', 'heat_template_version: 2018-08-31\n'
                'resources:\n  x: {type: OS::Heat::Nope}\n')
    failing = write('failing.yaml', FAILING)
    ok = write('ok.yaml', 'heat_template_version: 2018-08-31\n'
               'resources:\n  v: {type: OS::Heat::Value, '
               'properties: {value: 1}}\n')
    cases = [
        (('stack', 'create', '-t', bad, 'bad', '--wait'), 2,
         'Unknown resource type "OS::Heat::Nope"'),
        (('stack', 'create', '-t', failing, 'f', '--enable-rollback',
          '--wait'), 1, 'failed and was rolled back'),
        (('stack', 'create', '-t', ok, 'ok', '--wait'), 0, ''),
        (('stack', 'create', '-t', ok, 'ok', '--wait'), 4,
         'Stack ok already exists'),
        (('stack', 'create', '-t', ok, 'a/b', '--wait'), 2, 'a/b'),
        (('stack', 'resource', 'show', 'ok', 'nope'), 3,
         'Resource nope not found in stack ok'),
        (('stack', 'output', 'show', 'ok', 'nope'), 3,
         'Output nope not found'),
        (('stack', 'cancel', 'ok'), 4, ''),
        (('stack', 'show', 'nope'), 3, 'Stack not found: nope'),
    ]
    try:
        for args, code, needle in cases:
            got = {}
            for side, cli in (('remote', remote), ('local', local)):
                proc = cli.run(*args, check=False)
                assert proc.returncode == code, (side, args, proc.stderr)
                assert needle in proc.stderr, (side, args, proc.stderr)
                got[side] = proc.stderr.strip().splitlines()[-1:]
            assert got['remote'] == got['local'], args
    finally:
        stop_agents(local.home)


@pytest.mark.long  # among the slowest of ./run-tests
def test_tokens_and_projects(api, tmp_path, write):
    """A wrong token exits non-zero saying the token was refused;
    another project's stack, by name or id, is not found; the project
    given twice, differently, is refused; an API not there is said so."""
    alice = _remote(api, tmp_path, 'alice')
    bob = _remote(api, tmp_path, 'bob')
    ok = write('ok.yaml', 'heat_template_version: 2018-08-31\n'
               'resources:\n  v: {type: OS::Heat::Value, '
               'properties: {value: 1}}\n')
    made = alice.json('stack', 'create', '-t', ok, 'mine', '--wait')

    wrong = alice.run('stack', 'list', token='not-a-token', check=False)
    assert wrong.returncode not in (0, 3), wrong
    assert 'refused the token' in wrong.stderr

    for ident in ('mine', made['id']):
        proc = bob.run('stack', 'show', ident, check=False)
        assert proc.returncode == 3, proc.stderr
        assert 'Stack not found: %s' % ident in proc.stderr
        proc = bob.run('stack', 'delete', ident, '--yes', check=False)
        assert proc.returncode == 3, proc.stderr
    assert bob.json('stack', 'list') == []
    # bob's token on alice's URL finds nothing either
    proc = bob.run('stack', 'show', 'mine', url=alice.url, check=False)
    assert proc.returncode == 3, proc.stderr
    assert alice.json('stack', 'show', 'mine')['stack_status'] == \
        'CREATE_COMPLETE'

    # a reader reads, and is refused a write
    reader = api.token('alice', '--role', 'reader')['token']
    assert [r['Stack Name'] for r in alice.json(
        'stack', 'list', token=reader)] == ['mine']
    proc = alice.run('stack', 'delete', 'mine', '--yes', token=reader,
                     check=False)
    assert proc.returncode == 5, proc.stderr
    assert 'Policy does not allow stacks:delete' in proc.stderr
    proc = alice.run('stack', 'converge', 'mine', token=reader, check=False)
    assert proc.returncode == 5, proc.stderr
    assert 'converge:stack_converge' in proc.stderr

    proc = alice.run('--os-project-id', 'bob', 'stack', 'list',
                     check=False)
    assert proc.returncode == 2 and 'give one' in proc.stderr
    # the project from --os-project-id, the URL naming none
    assert [r['Stack Name'] for r in alice.json(
        '--os-project-id', 'alice', 'stack', 'list', url=api.url)] == [
            'mine']

    down = alice.run('stack', 'list', url='http://127.0.0.1:9/v1/alice',
                     check=False)
    assert down.returncode == 1
    assert 'Cannot reach converge-api at http://127.0.0.1:9' in down.stderr


HEAL = '''\
heat_template_version: 2018-08-31
resources:
  srv:
    type: OS::Nova::Server
    properties: {image: cirros, flavor: m1.tiny, name: healme}
  word:
    type: OS::Heat::Value
    properties: {value: {get_attr: [srv, first_address]}}
'''


def _servers(cloud, name):
    """How many servers of that name the API's simulated cloud has (other
    tests' servers are there too)."""
    return sum(1 for s in cloud.json('sim', 'server', 'list')
               if s['Name'] == name)


@pytest.mark.long
def test_converge_extensions_and_osc_verbs(api, tmp_path, write):
    """What Heat's API has no route for, remotely: graph, drift, converge
    healing a server deleted behind the engine's back, abandon and adopt;
    and the OSC verbs (template, environment and files of a stack, mark
    unhealthy, event show, template versions, resource types), printed
    as embedded prints them."""
    remote = _remote(api, tmp_path, 'ext')
    local = CLI(str(tmp_path / 'home'))
    # the API's own home: its simulated cloud
    cloud = CLI(os.path.join(os.path.dirname(api.conf), 'home'))
    tmpl = write('heal.yaml', HEAL)
    env = write('env.yaml', 'parameter_defaults: {}\n')
    try:
        for cli in (remote, local):
            cli.run('stack', 'create', '-t', tmpl, '-e', env, 'h', '--wait')
        assert 'digraph "h"' in remote.run('stack', 'graph', 'h').stdout
        assert remote.run('stack', 'graph', 'h').stdout == local.run(
            'stack', 'graph', 'h').stdout
        assert remote.json('stack', 'drift', 'h') == []

        cloud.run('sim', 'server', 'delete', 'healme')
        drift = remote.json('stack', 'drift', 'h')
        assert [d['resource_name'] for d in drift] == ['srv'], drift
        healed = remote.json('stack', 'converge', 'h', '--wait')
        assert healed['stack_status'] == 'UPDATE_COMPLETE', healed
        assert _servers(cloud, 'healme') == 1
        assert remote.json('stack', 'drift', 'h') == []

        for args in (('stack', 'template', 'show', 'h'),
                     ('stack', 'environment', 'show', 'h'),
                     ('stack', 'file', 'list', 'h'),
                     ('orchestration', 'template', 'version', 'list'),
                     ('orchestration', 'resource', 'type', 'list',
                      '--filter', 'name=Server', '--long'),
                     ('orchestration', 'resource', 'type', 'show',
                      'OS::Heat::Value')):
            assert remote.json(*args) == local.json(*args), args
        assert remote.json('stack', 'template', 'show', 'h')[
            'resources']['srv']['type'] == 'OS::Nova::Server'

        for cli in (remote, local):
            cli.run('stack', 'resource', 'mark', 'unhealthy', 'h', 'word',
                    'by hand')
            word = cli.json('stack', 'resource', 'show', 'h', 'word')
            assert word['resource_status'] == 'CHECK_FAILED', word
            assert word['resource_status_reason'] == 'by hand'
            uuid = cli.json('stack', 'event', 'list', 'h', '--resource',
                            'srv')[0]['id']
            shown = cli.json('stack', 'event', 'show', 'h', 'srv', uuid)
            assert shown['id'] == uuid
            assert shown['resource_status'] == 'CREATE_IN_PROGRESS'
            assert shown['resource_type'] == 'OS::Nova::Server'
            missing = cli.run('stack', 'event', 'show', 'h', 'srv',
                              'no-such-event', check=False)
            assert missing.returncode == 3, missing.stderr
        assert sorted(shown) == sorted(remote.json(
            'stack', 'event', 'show', 'h', 'srv', remote.json(
                'stack', 'event', 'list', 'h', '--resource', 'srv')[0][
                    'id']))

        # abandon writes the stack's state and forgets it; adopt takes
        # the same server back, creating nothing
        saved = str(tmp_path / 'h.json')
        server = remote.json('stack', 'resource', 'show', 'h', 'srv')[
            'physical_resource_id']
        remote.run('stack', 'abandon', 'h', '--output-file', saved)
        assert remote.json('stack', 'list') == []
        with open(saved) as f:
            assert json.load(f)['resources']['srv']['resource_id'] == server
        adopted = remote.json('stack', 'adopt', 'h', '--adopt-file', saved,
                              '--wait')
        assert adopted['stack_status'] == 'ADOPT_COMPLETE', adopted
        assert remote.json('stack', 'resource', 'show', 'h', 'srv')[
            'physical_resource_id'] == server
        assert _servers(cloud, 'healme') == 1
        remote.run('stack', 'delete', 'h', '--yes', '--wait')
    finally:
        stop_agents(local.home)


def test_suspend_resume_and_a_deployment_action_remote(api, tmp_path,
                                                       write):
    """A component's stack suspended and resumed, then its day-2 action
    run with --wait, listed and shown: converge-api's agent routes serve
    the server's agent, the CLI only follows."""
    from tests.test_software_e2e import COMPONENT
    remote = _remote(api, tmp_path, 'day2')
    remote.run('stack', 'create', '-t', write('app.yaml', COMPONENT),
               'app', '--wait')
    for verb, status in (('suspend', 'SUSPEND_COMPLETE'),
                         ('resume', 'RESUME_COMPLETE')):
        assert remote.json('stack', verb, 'app', '--wait')[0][
            'Stack Status'] == status
    before = remote.json('stack', 'show', 'app')
    [done] = remote.json('deployment', 'action', 'run', 'app', 'deployment',
                         'backup', '--input', 'target=/mnt/b', '--wait')
    assert done['status'] == 'COMPLETE', done
    assert done['output_values']['archive'] == '/mnt/b/app.tgz'
    assert remote.json('stack', 'show', 'app')['updated_time'] == \
        before['updated_time']
    [listed] = remote.json('deployment', 'action', 'list', 'app')
    assert (listed['id'], listed['action']) == (done['id'], 'backup')
    shown = remote.json('deployment', 'action', 'show', done['id'])
    assert shown['output_values'] == done['output_values']
    refused = remote.run('deployment', 'action', 'run', 'app', 'deployment',
                         'nosuch', check=False)
    assert refused.returncode == 2 and 'no config for action nosuch' in \
        refused.stderr
    remote.run('stack', 'delete', 'app', '--yes', '--wait')


def test_update_resume_moves_a_canary_rollout_on_remote(api, tmp_path):
    """`stack update --wait` follows a rolling update through
    converge-api while its canary batch waits for the operator; `stack
    update --resume --wait` from another terminal moves it on, and both
    end 0; a second --resume is refused (exit 4)."""
    from tests.test_nested import ROLLING
    remote = _remote(api, tmp_path, 'canary')
    (tmp_path / 'c.yaml').write_text(ROLLING.replace(
        'count: 6', 'count: 5').replace(
        'min_in_service: 4, pause_time: 0',
        'min_in_service: 0, canary_size: 1'))
    remote.run('stack', 'create', 'c', '-t', str(tmp_path / 'c.yaml'),
               '--wait')
    following = remote.popen('stack', 'update', 'c', '--existing',
                             '--parameter', 'stamp=two', '--wait')
    try:
        deadline = time.monotonic() + 120
        while not remote.json('stack', 'resource', 'show', 'c', 'group')[
                'resource_status_reason'].startswith('canary batch done'):
            assert time.monotonic() < deadline, 'the canary never finished'
        [rollout] = remote.json('stack', 'show', 'c')['rollouts']
        assert (rollout['batch'], rollout['batches']) == (2, 3)
        remote.run('stack', 'update', '--resume', 'c', '--wait')
        out, err = following.communicate(timeout=120)
        assert following.returncode == 0, err
        assert '[group]: UPDATE_COMPLETE' in out
    finally:
        if following.poll() is None:
            following.kill()
            following.wait()
    shown = remote.json('stack', 'show', 'c')
    assert shown['stack_status'] == 'UPDATE_COMPLETE'
    again = remote.run('stack', 'update', '--resume', 'c', check=False)
    assert again.returncode == 4, again.stderr
    assert 'Stack c has no rolling update waiting to be resumed' in \
        again.stderr


def _activity(api, project, token, **query):
    """GET /v1/PROJECT/activity: (status, body)."""
    url = '%s/v1/%s/activity' % (api.url, project)
    if query:
        url += '?' + urllib.parse.urlencode(query)
    req = urllib.request.Request(url, headers={'X-Auth-Token': token})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.long  # 5-9 s: five commands (tests/test_top.py has the fast one)
def test_top_once_shows_the_projects_work_only(api, tmp_path):
    """`converge top --once` against converge-api (GET /activity): the
    project's running traversal with its progress and its wait coming
    due. Another project sees none of it; every project's only an admin,
    who asks."""
    carol = _remote(api, tmp_path, 'carol')
    tmpl = str(tmp_path / 'slow.yaml')
    with open(tmpl, 'w') as f:
        f.write(WAITING)
    carol.run('stack', 'create', '-t', tmpl, 'slow')
    deadline = time.monotonic() + 60
    while True:
        out = carol.run('top', '--once', '--due', '60').stdout
        if re.search(r'^slow +CREATE +running +1/3 ', out, re.M) and \
                re.search(r'^slow +sleepy +in \d+\.\d s', out, re.M):
            break
        assert time.monotonic() < deadline, out
        time.sleep(0.2)
    assert out.startswith('converge top  project carol  %s' % carol.url)

    status, body = _activity(api, 'carol', carol.token, all_projects='true')
    assert status == 403, body
    assert 'converge:activity_all_projects' in body['error']['message']
    admin = api.token('ops', '--role', 'admin')['token']
    status, body = _activity(api, 'ops', admin)
    assert status == 200 and body['activity']['traversals'] == [], body
    status, body = _activity(api, 'ops', admin, all_projects='true')
    assert status == 200, body
    seen = body['activity']
    assert [(t['stack_name'], t['done'], t['total'])
            for t in seen['traversals'] if t['project'] == 'carol'] == [
                ('slow', 1, 3)]
    # every live engine: the API's own (embedded, it is the engine)
    assert seen['engines'] and all(e['live'] for e in seen['engines'])
    carol.run('stack', 'delete', 'slow', '--yes')
