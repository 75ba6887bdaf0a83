"""Heat's hooks (breakpoints) set in an environment's resource_registry:
a resource pauses before its create, update or delete, `stack hook poll`
lists it, and clearing the hook (`stack hook clear`, or the signal
{"unset_hook": ...}) lets it go on. Through converge-api with heatclient
and `openstack`, and through the embedded `converge` CLI, as users run
them (subprocesses)."""

import json
import signal

import pytest

from tests import test_heat_api
from tests.test_remote_cli import Remote
from tests.test_wait_condition import _until

#: a converge-api on loopback over an embedded home (test_heat_api's)
api = test_heat_api.api

INNER = '''\
heat_template_version: 2018-08-31
resources:
  word: {type: OS::Heat::Value, properties: {value: hi}}
outputs:
  said: {value: {get_attr: [word, value]}}
'''

TOP = '''\
heat_template_version: 2018-08-31
parameters:
  v: {type: string, default: a}
resources:
  first: {type: OS::Heat::Value, properties: {value: {get_param: v}}}
  inner: {type: inner.yaml}
  last:
    type: OS::Heat::Value
    properties: {value: {get_attr: [inner, said]}}
'''

#: a hook on the nested stack's resource, by nested path and glob
NESTED_HOOK = '''\
resource_registry:
  resources:
    inner:
      "w*": {hooks: pre-create}
'''

POLL_COLUMNS = ['Resource Name', 'ID', 'Resource Status Reason',
                'Resource Status', 'Event Time']


@pytest.fixture
def started(cli):
    """start(*args): `converge *args` in the background, killed at the
    test's end if it is still running (a failed test leaves no engine)."""
    procs = []

    def start(*args):
        procs.append(cli.popen(*args))
        return procs[-1]
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _poll(cli, stack, *args):
    """`converge stack hook poll`'s rows; none before the stack is
    there."""
    proc = cli.run('stack', 'hook', 'poll', stack, *args, '-f', 'json',
                   check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else []


def _files(write):
    return write('top.yaml', TOP), write('inner.yaml', INNER)


def test_nested_pre_create_hook_polled_and_cleared_with_openstack(
        api, tmp_path):
    token = api.token('hooks')['token']
    osc = lambda *a, **kw: api.openstack('hooks', token, *a, **kw)  # noqa
    hc = api.client('hooks', token)
    env = NESTED_HOOK + '    last: {hooks: [pre-create]}\n'
    hc.stacks.create(stack_name='hk', **test_heat_api._sent(
        tmp_path, TOP, files={'inner.yaml': INNER}, env_text=env))

    def polled():
        out = osc('stack', 'hook', 'poll', 'hk', '--nested-depth', '2',
                  '-f', 'json')
        return json.loads(out.stdout)
    rows = _until(polled, timeout=60)
    assert [(r['Resource Name'], r['Resource Status'],
             r['Resource Status Reason']) for r in rows] == [
        ('word', 'INIT_COMPLETE',
         'CREATE paused until Hook pre-create is cleared')]
    assert rows[0]['Stack Name'].startswith('hk-inner-')
    # the converge CLI over the API lists the same
    remote = Remote('%s/v1/hooks' % api.url, token, str(tmp_path / 'nohome'))
    assert remote.json('stack', 'hook', 'poll', 'hk', '--nested-depth',
                       '2') == rows
    assert hc.stacks.get('hk').stack_status == 'CREATE_IN_PROGRESS'
    # what waits for it waits: `last` reads the nested stack's output
    assert hc.resources.get('hk', 'last').resource_status == \
        'INIT_COMPLETE'
    osc('stack', 'hook', 'clear', 'hk', 'inner/wo*')
    # then `last` reaches its own hook; its signal clears it
    rows = _until(lambda: [r for r in polled()
                           if r['Resource Name'] == 'last'], timeout=60)
    assert len(polled()) == 1
    osc('stack', 'resource', 'signal', 'hk', 'last', '--data',
        '{"unset_hook": "pre-create"}')
    assert test_heat_api._settled(hc, 'hk').stack_status == \
        'CREATE_COMPLETE'
    assert hc.resources.get('hk', 'last').attributes['value'] == 'hi'
    events = [e.resource_status_reason for e in hc.events.list(
        'hk', nested_depth=2)]
    assert events.count('Hook pre-create is cleared') == 2
    # an update's hook, polled by OSC (which looks for "Stack UPDATE
    # started" exactly) and cleared by it
    hc.stacks.update('hk', parameters={'v': 'b'}, **test_heat_api._sent(
        tmp_path, TOP, files={'inner.yaml': INNER},
        env_text='resource_registry:\n  resources:\n'
                 '    first: {hooks: pre-update}\n'))
    rows = _until(lambda: json.loads(osc('stack', 'hook', 'poll', 'hk',
                                         '-f', 'json').stdout), timeout=60)
    assert [(r['Resource Name'], r['Resource Status Reason'])
            for r in rows] == [
        ('first', 'UPDATE paused until Hook pre-update is cleared')]
    osc('stack', 'hook', 'clear', 'hk', 'first')
    assert test_heat_api._settled(hc, 'hk').stack_status == \
        'UPDATE_COMPLETE'
    assert hc.resources.get('hk', 'first').attributes['value'] == 'b'
    # a hook that is not pending, or of no known type, is refused (400)
    bad = osc('stack', 'resource', 'signal', 'hk', 'first', '--data',
              '{"unset_hook": "pre-create"}', check=False)
    assert bad.returncode and 'not defined' in bad.stderr
    bad = osc('stack', 'resource', 'signal', 'hk', 'first', '--data',
              '{"unset_hook": "pre-launch"}', check=False)
    assert bad.returncode and 'Invalid hook type' in bad.stderr


@pytest.mark.long
def test_embedded_hook_survives_kill_9(cli, write, started):
    """The paused create's only engine is killed; the hook stays pending
    in the database, and `converge stack hook clear` (embedded: this
    process is the engine now) sees the stack to its end."""
    top, _ = _files(write)
    env = write('env.yaml', NESTED_HOOK)
    proc = started('stack', 'create', 'k', '-t', top, '-e', env)

    def polled():
        return _poll(cli, 'k', '--nested-depth', '1')
    rows = _until(polled, timeout=60)
    assert list(rows[0]) == POLL_COLUMNS + ['Stack Name']
    assert [(r['Resource Name'], r['Resource Status']) for r in rows] == [
        ('word', 'INIT_COMPLETE')]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert cli.json('stack', 'show', 'k')['stack_status'] == \
        'CREATE_IN_PROGRESS'
    # still pending after the kill
    assert [r['ID'] for r in polled()] == [rows[0]['ID']]
    assert cli.json('stack', 'hook', 'poll', 'k') == []
    out = cli.run('stack', 'hook', 'clear', 'k', 'inner/w*')
    assert '[last]: CREATE_COMPLETE' in out.stdout
    assert cli.json('stack', 'show', 'k')['stack_status'] == \
        'CREATE_COMPLETE'
    assert cli.json('stack', 'resource', 'show', 'k', 'last')[
        'attributes']['value'] == 'hi'


@pytest.mark.long  # 20-30 s beside a busy machine
def test_embedded_pre_update_and_pre_delete(cli, write, started):
    top, _ = _files(write)
    cli.run('stack', 'create', 'u', '-t', top)
    env = write('env.yaml', 'resource_registry:\n  resources:\n'
                '    first: {hooks: [pre-update, pre-delete]}\n')
    proc = started('stack', 'update', 'u', '-t', top, '-e', env,
                     '--parameter', 'v=b')
    rows = _until(lambda: _poll(cli, 'u'), timeout=60)
    assert [(r['Resource Name'], r['Resource Status'],
             r['Resource Status Reason']) for r in rows] == [
        ('first', 'CREATE_COMPLETE',
         'UPDATE paused until Hook pre-update is cleared')]
    first = cli.json('stack', 'resource', 'show', 'u', 'first')
    assert first['attributes']['value'] == 'a'   # not updated yet
    # a signal clears it, as Heat's does
    out = cli.run('stack', 'resource', 'signal', 'u', 'first', '--data',
                  '{"unset_hook": "pre-update"}')
    assert 'Hook pre-update is cleared' in out.stdout
    assert proc.wait(timeout=60) == 0
    assert cli.json('stack', 'show', 'u')['stack_status'] == \
        'UPDATE_COMPLETE'
    assert cli.json('stack', 'resource', 'show', 'u', 'first')[
        'attributes']['value'] == 'b'

    proc = started('stack', 'delete', 'u', '--yes')
    rows = _until(lambda: _poll(cli, 'u'), timeout=60)
    assert [(r['Resource Name'], r['Resource Status Reason'])
            for r in rows] == [
        ('first', 'DELETE paused until Hook pre-delete is cleared')]
    # what does not depend on it went; it is still there
    names = {r['resource_name'] for r in
             cli.json('stack', 'resource', 'list', 'u')}
    assert names == {'first'}
    cli.run('stack', 'hook', 'clear', '--pre-delete', 'u', 'first')
    assert proc.wait(timeout=60) == 0
    assert cli.json('stack', 'list') == []


@pytest.mark.long  # as the one above
def test_a_pre_update_hook_stops_an_update_that_changes_nothing(
        cli, write, started):
    """Heat's test_hook_pre_update_nochange: the same template again,
    with a pre-update hook on an unchanged resource: the update stops at
    it (the stack UPDATE_IN_PROGRESS, the resource CREATE_COMPLETE) until
    it is cleared, and the resource is kept."""
    top, _ = _files(write)
    env = write('env.yaml', 'resource_registry:\n  resources:\n'
                '    first: {hooks: pre-update}\n')
    cli.run('stack', 'create', 'n', '-t', top, '-e', env)
    before = cli.json('stack', 'resource', 'show', 'n', 'first')
    proc = started('stack', 'update', 'n', '-t', top, '-e', env)
    rows = _until(lambda: _poll(cli, 'n'), timeout=60)
    assert [(r['Resource Name'], r['Resource Status'],
             r['Resource Status Reason']) for r in rows] == [
        ('first', 'CREATE_COMPLETE',
         'UPDATE paused until Hook pre-update is cleared')]
    assert cli.json('stack', 'show', 'n')['stack_status'] == \
        'UPDATE_IN_PROGRESS'
    cli.run('stack', 'hook', 'clear', '--pre-update', 'n', 'first')
    assert proc.wait(timeout=60) == 0
    assert cli.json('stack', 'show', 'n')['stack_status'] == \
        'UPDATE_COMPLETE'
    after = cli.json('stack', 'resource', 'show', 'n', 'first')
    assert (after['resource_status'], after['physical_resource_id']) == (
        'CREATE_COMPLETE', before['physical_resource_id'])


def test_embedded_post_create(cli, write, started):
    """post-create: the resource is created and recorded, and what
    depends on it waits until the hook is cleared."""
    top, _ = _files(write)
    env = write('env.yaml', 'resource_registry:\n  resources:\n'
                '    inner: {hooks: post-create}\n')
    proc = started('stack', 'create', 'p', '-t', top, '-e', env)
    rows = _until(lambda: _poll(cli, 'p'), timeout=60)
    assert [(r['Resource Name'], r['Resource Status'],
             r['Resource Status Reason']) for r in rows] == [
        ('inner', 'CREATE_COMPLETE',
         'CREATE paused until Hook post-create is cleared')]
    states = {r['resource_name']: r['resource_status'] for r in
              cli.json('stack', 'resource', 'list', 'p')}
    assert states == {'first': 'CREATE_COMPLETE', 'inner': 'CREATE_COMPLETE',
                      'last': 'INIT_COMPLETE'}
    cli.run('stack', 'hook', 'clear', '--post-create', 'p', 'inner')
    assert proc.wait(timeout=60) == 0
    assert cli.json('stack', 'resource', 'show', 'p', 'last')[
        'attributes']['value'] == 'hi'


def test_bad_hooks_are_refused(cli, write):
    top, _ = _files(write)
    env = write('env.yaml', 'resource_registry:\n  resources:\n'
                '    first:\n      hooks: [pre-create, pre-launch]\n')
    proc = cli.run('stack', 'create', 'b', '-t', top, '-e', env,
                   check=False)
    assert proc.returncode == 2
    assert 'Invalid hook type' in proc.stderr and 'env.yaml' in \
        proc.stderr and 'pre-launch' in proc.stderr
    assert cli.json('stack', 'list') == []
    cli.run('stack', 'create', 'b', '-t', top)
    proc = cli.run('stack', 'hook', 'clear', '--pre-create', 'b', 'first',
                   check=False)
    assert proc.returncode == 2 and 'not defined' in proc.stderr
    proc = cli.run('stack', 'hook', 'poll', 'b', check=False)
    assert proc.returncode == 2 and 'CREATE_COMPLETE' in proc.stderr
