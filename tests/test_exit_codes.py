"""Exit codes as docs/cli.md's table gives them, and the guard rails a
new user meets first: stack names, timeouts, Ctrl-C."""

import signal
import time

import pytest

pytestmark = pytest.mark.slow

NONE = '''
heat_template_version: 2018-08-31
resources:
  a: {type: OS::Heat::None}
'''
FAILS = '''
heat_template_version: 2018-08-31
resources:
  ok: {type: OS::Heat::None}
  bad:
    type: OS::Heat::TestResource
    depends_on: ok
    properties: {fail: true}
'''


@pytest.mark.long  # among the slowest of ./run-tests
def test_not_found_exits_3_whatever_the_verb(cli, write):
    verbs = [
        ('stack', 'show', 'nope'),
        ('stack', 'update', 'nope', '--existing'),
        ('stack', 'delete', 'nope', '--yes'),
        ('stack', 'delete', 'nope', 'nada', '--yes'),
        ('stack', 'check', 'nope'),
        ('stack', 'converge', 'nope'),
        ('stack', 'cancel', 'nope'),
        ('stack', 'event', 'list', 'nope'),
        ('stack', 'resource', 'list', 'nope'),
        ('stack', 'output', 'show', 'nope', 'x'),
        ('stack', 'graph', 'nope'),
        ('stack', 'drift', 'nope'),
    ]
    for verb in verbs:
        proc = cli.run(*verb, check=False)
        assert proc.returncode == 3, (verb, proc.returncode, proc.stderr)
        assert 'not found' in proc.stderr
    cli.run('stack', 'create', 's', '-t', write('n.yaml', NONE))
    for verb in (('stack', 'resource', 'show', 's', 'zz'),
                 ('stack', 'output', 'show', 's', 'zz')):
        proc = cli.run(*verb, check=False)
        assert proc.returncode == 3, (verb, proc.stderr)


def test_usage_errors_exit_2(cli, write):
    assert cli.run('stack', 'create', 's', check=False).returncode == 2
    assert cli.run('stack', 'create', 's', '-t', write('n.yaml', NONE),
                   '--timeout', 'soon', check=False).returncode == 2
    proc = cli.run('stack', 'create', 's', '-t', write('n.yaml', NONE),
                   '--parameter', 'novalue', check=False)
    assert proc.returncode == 2 and 'key=value' in proc.stderr
    assert cli.json('stack', 'list') == []


@pytest.mark.parametrize('name', ['', 'x' * 300, 'a/b', 'my stack', '9lives'])
def test_a_name_heat_refuses_is_refused_and_nothing_stored(cli, write, name):
    path = write('n.yaml', NONE)
    for args in (('stack', 'create', name, '-t', path),
                 ('stack', 'create', name, '-t', path, '--dry-run')):
        proc = cli.run(*args, check=False)
        assert proc.returncode == 2, proc.stderr
        assert 'Invalid stack name' in proc.stderr
    assert cli.json('stack', 'list') == []


@pytest.mark.parametrize('timeout', ['0', '-5'])
def test_a_timeout_that_is_not_positive_is_refused(cli, write, timeout):
    path = write('n.yaml', NONE)
    proc = cli.run('stack', 'create', 's', '-t', path, '--timeout', timeout,
                   check=False)
    assert proc.returncode == 2 and 'timeout' in proc.stderr
    assert cli.json('stack', 'list') == []
    cli.run('stack', 'create', 's', '-t', path, '--timeout', '3')
    proc = cli.run('stack', 'update', 's', '--existing', '--timeout',
                   timeout, check=False)
    assert proc.returncode == 2 and 'timeout' in proc.stderr
    show = cli.json('stack', 'show', 's')
    assert show['timeout_mins'] == 3
    assert show['stack_status'] == 'CREATE_COMPLETE'


def test_a_create_that_failed_exits_1_rolled_back_or_not(cli, write):
    path = write('f.yaml', FAILS)
    proc = cli.run('stack', 'create', 'f', '-t', path, '--wait',
                   check=False)
    assert proc.returncode == 1 and 'CREATE_FAILED' in proc.stderr
    proc = cli.run('stack', 'create', 'r', '-t', path, '--enable-rollback',
                   '--wait', check=False)
    assert proc.returncode == 1, proc.stderr
    assert 'rolled back' in proc.stderr and 'ROLLBACK_COMPLETE' in \
        proc.stderr
    assert cli.json('stack', 'show', 'r')['stack_status'] == \
        'ROLLBACK_COMPLETE'


SLOW = '''
heat_template_version: 2018-08-31
resources:
  quick:
    type: OS::Heat::TestResource
    properties: {value: q}
  slow:
    type: OS::Heat::TestResource
    depends_on: quick
    properties: {value: s, action_wait_secs: {create: 600}}
'''


def test_ctrl_c_stops_a_running_command_and_says_how_to_resume(cli, write):
    path = write('slow.yaml', SLOW)
    proc = cli.popen('stack', 'create', 'slow', '-t', path, '--wait')
    deadline = time.time() + 120
    while time.time() < deadline:
        events = cli.json('stack', 'event', 'list', 'slow', check=False) \
            if _exists(cli, 'slow') else []
        if any(e['resource_name'] == 'slow' for e in events):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail('the slow resource never started')
    sent = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    # at once, though a worker thread of the process is 600 s into an action
    assert time.time() - sent < 15
    assert proc.returncode == 130
    assert 'Nothing is lost' in err
    assert 'converge stack converge slow' in err
    assert cli.json('stack', 'show', 'slow')['stack_status'] == \
        'CREATE_IN_PROGRESS'
    # nothing is lost: the stack is there to resume or, here, to cancel;
    # a cancel's goal is the rollback, so reaching it exits 0
    proc = cli.run('stack', 'cancel', 'slow', '--wait', check=False)
    assert proc.returncode == 0, proc.stderr
    assert cli.json('stack', 'show', 'slow')['stack_status'] == \
        'ROLLBACK_COMPLETE'


def _exists(cli, name):
    return cli.run('stack', 'show', name, check=False).returncode == 0
