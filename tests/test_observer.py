"""Continuous convergence as an operator runs it: stacks with a converge
policy, damaged behind the engine's back, repaired by `converge observe
--forever` with nobody asking; a stack that cannot be repaired backs off
(its events say how long) and does not hold up another."""

import signal
import time

import pytest

GROUP = '''heat_template_version: 2018-08-31
resources:
  servers:
    type: OS::Heat::ResourceGroup
    properties:
      count: 4
      resource_def:
        type: OS::Nova::Server
        properties: {name: 'w-%index%', image: cirros, flavor: m1.tiny}
'''

ONE = '''heat_template_version: 2018-08-31
resources:
  s: {type: OS::Nova::Server,
      properties: {name: lone, image: cirros, flavor: m1.tiny}}
'''

#: how long a test waits for the daemon to do what it must (a bound, not
#: a pace: each wait ends as soon as what it waits for is seen)
DEADLINE = 90


def _until(what, check):
    end = time.monotonic() + DEADLINE
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError('not seen within %d s: %s' % (DEADLINE,
                                                               what))
        time.sleep(0.3)


@pytest.fixture
def daemon(cli):
    procs = []

    def start():
        proc = cli.popen('observe', '--forever')
        procs.append(proc)
        return proc
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)


def _servers(cli):
    return {s['Name']: s for s in cli.json('sim', 'server', 'list',
                                           '--long')}


def _observe_events(cli, stack):
    return [e for e in cli.json('stack', 'event', 'list', stack)
            if e['resource_status'].startswith('OBSERVE_')]


def test_repair_mode_repairs_with_no_operator(cli, write, daemon):
    cli.run('stack', 'create', 'r', '-t', write('group.yaml', GROUP),
            '--converge-policy', 'repair:1', '--wait')
    assert cli.json('stack', 'show', 'r')['converge_policy'].startswith(
        'repair every 1 s')
    before = _servers(cli)
    cli.run('sim', 'server', 'delete', 'w-0')
    cli.run('sim', 'server', 'stop', 'w-1')
    cli.run('sim', 'server', 'rebuild', 'w-2', '--image', 'fedora')
    proc = daemon()

    def repaired():
        servers = _servers(cli)
        return sorted(servers) == ['w-0', 'w-1', 'w-2', 'w-3'] and all(
            (s['Status'], s['Image']) == ('ACTIVE', 'cirros')
            for s in servers.values()) and cli.json(
            'stack', 'show', 'r')['stack_status'] == 'UPDATE_COMPLETE'
    _until('the three servers repaired', repaired)
    assert proc.poll() is None, proc.communicate()
    after = _servers(cli)
    assert after['w-0']['ID'] != before['w-0']['ID']     # recreated
    assert [after[n]['ID'] for n in ('w-1', 'w-2', 'w-3')] == \
        [before[n]['ID'] for n in ('w-1', 'w-2', 'w-3')]
    [repairing] = [e for e in _observe_events(cli, 'r')
                   if e['resource_status'] == 'OBSERVE_REPAIRING']
    assert repairing['resource_status_reason'] == \
        'repairing 3 drifted resources: 0 (gone), 1 (changed), 2 (changed)'
    # and nothing more to do: in sync, no repair again
    out = cli.json('observe', '--all')
    assert [o['outcome'] for o in out] == ['in-sync']


@pytest.mark.long   # 19-37 s: in .ci/run's long group
def test_a_failing_repair_backs_off_without_holding_up_others(cli, write,
                                                              daemon):
    cli.run('stack', 'create', 'bad', '-t', write('group.yaml', GROUP),
            '--converge-policy', 'repair:1', '--wait')
    cli.run('stack', 'create', 'good', '-t', write('one.yaml', ONE),
            '--converge-policy', 'repair:1', '--wait')
    # bad's server can not come back: every create is refused
    cli.run('sim', 'fault', 'set', 'create', '--fail-count', '1000',
            '--code', '400')
    cli.run('sim', 'server', 'delete', 'w-3')
    cli.run('sim', 'server', 'stop', 'lone')
    daemon()

    def backed_off_twice():
        failed = [e['resource_status_reason']
                  for e in _observe_events(cli, 'bad')
                  if e['resource_status'] == 'OBSERVE_REPAIR_FAILED']
        return failed if len(failed) >= 2 else None
    failed = _until('two failed repairs of bad', backed_off_twice)
    # the wait before the next repair doubles with each failure
    assert failed[:2] == [
        'repair failed 1 time in a row; the next in 2 s',
        'repair failed 2 times in a row; the next in 4 s']
    # meanwhile the other stack was repaired
    _until('lone started again',
           lambda: _servers(cli)['lone']['Status'] == 'ACTIVE')
    assert cli.json('stack', 'show', 'good')['stack_status'] == \
        'UPDATE_COMPLETE'
    # once the cloud takes creates again, the next repair after the
    # back-off succeeds
    cli.run('sim', 'fault', 'clear', 'create')
    _until('w-3 recreated', lambda: 'w-3' in _servers(cli) and cli.json(
        'stack', 'show', 'bad')['stack_status'] == 'UPDATE_COMPLETE')


def test_a_policy_is_refused_when_malformed(cli, write):
    top = write('one.yaml', ONE)
    proc = cli.run('stack', 'create', 'x', '-t', top, '--converge-policy',
                   'sometimes', check=False)
    assert proc.returncode != 0
    assert "the mode is one of off, observe, repair" in proc.stderr
    env = write('env.yaml', 'converge: {policy: repair, every: 3}\n')
    proc = cli.run('stack', 'create', 'x', '-t', top, '-e', env,
                   check=False)
    assert proc.returncode != 0
    assert 'environment section "converge" has unknown key every' in \
        proc.stderr
    assert cli.json('stack', 'list') == []
    # the environment's section sets it as the flag does
    env = write('env2.yaml', 'converge: {policy: observe, interval: 30}\n')
    cli.run('stack', 'create', 'x', '-t', top, '-e', env, '--wait')
    assert cli.json('stack', 'show', 'x')['converge_policy'].startswith(
        'observe every 30 s')
    cli.run('stack', 'update', 'x', '--existing', '--converge-policy', 'off',
            '--wait')
    assert 'converge_policy' not in cli.json('stack', 'show', 'x')
    # an update whose environment drops the section drops the policy;
    # --existing keeps the environment (and so the policy)
    cli.run('stack', 'update', 'x', '-t', top, '-e', env, '--wait')
    cli.run('stack', 'update', 'x', '--existing', '--wait')
    assert cli.json('stack', 'show', 'x')['converge_policy'].startswith(
        'observe every 30 s')
    cli.run('stack', 'update', 'x', '-t', top, '--wait')
    assert 'converge_policy' not in cli.json('stack', 'show', 'x')


def test_an_observer_killed_mid_pass_leaves_the_stack_to_the_next(
        cli, write, daemon):
    """The pass an observer was killed in is the next observer's at once
    (it is taken under a lock that dies with its holder), not five
    minutes later."""
    from converge import conf
    from converge.db import session
    from converge.engine import context
    cli.run('stack', 'create', 'o', '-t', write('one.yaml', ONE),
            '--converge-policy', 'observe:1', '--wait')
    stack_id = cli.json('stack', 'show', 'o')['id']
    cli.run('sim', 'server', 'stop', 'lone')
    # every look at the cloud hangs: a pass, once started, does not end
    cli.run('sim', 'fault', 'set', 'list', '--latency', '600')
    first = daemon()
    conf.setup([], home=cli.home, log=False)
    eng = context.Engine()
    try:
        def in_its_pass():
            lock = eng.locks.try_lock('observe-' + stack_id)
            if lock is None:
                return True
            lock.release()
            return False
        _until('the first observer in its pass', in_its_pass)
    finally:
        eng.close()
        session.forget()
    first.kill()
    first.communicate(timeout=30)
    cli.run('sim', 'fault', 'clear', 'list')
    daemon()
    _until('the drift seen by the second observer', lambda: [
        e['resource_status'] for e in _observe_events(cli, 'o')] ==
        ['OBSERVE_DRIFTED'])


def test_converge_observer_observes_with_no_worker(tmp_path):
    """converge-observer, a service of its own: with every worker gone, a
    stack whose policy is `observe` still has its drift seen, recorded and
    evented."""
    import os
    import subprocess

    from tests.distributed import BIN, Deployment, require, wait_for
    require('postgresql', 'rabbitmq', 'redis')
    d = Deployment(tmp_path, options={'observer': {'tick': 0.2}})
    observer = None
    try:
        d.start_worker()
        top = tmp_path / 'one.yaml'
        top.write_text(ONE)
        d.cli('stack', 'create', 'o', '-t', str(top), '--converge-policy',
              'observe:1', '--wait')
        d.kill(0)   # no worker observes now
        observer = subprocess.Popen(
            [os.path.join(BIN, 'converge-observer'), '--config-file',
             d.conf, '--log-file', str(tmp_path / 'observer.log')],
            start_new_session=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        d.cli('sim', 'server', 'stop', 'lone')
        wait_for(lambda: d.json('stack', 'resource', 'list', 'o',
                                '--drift'), timeout=DEADLINE)
        [row] = d.json('stack', 'resource', 'list', 'o', '--drift')
        assert row['drift'] == 'changed: status SHUTOFF, not ACTIVE'
        assert [e['resource_status'] for e in d.json(
            'stack', 'event', 'list', 'o')
            if e['resource_status'].startswith('OBSERVE_')] == \
            ['OBSERVE_DRIFTED']
        # observe mode: reported, not repaired
        assert d.json('sim', 'server', 'show', 'lone')['status'] == \
            'SHUTOFF'
    finally:
        if observer is not None:
            os.killpg(observer.pid, signal.SIGTERM)
            observer.wait(timeout=30)
        d.close()


def test_a_check_config_is_how_a_deployment_is_observed(cli, write):
    """Repair mode on a deployment with a CHECK config: a pass runs the
    check on the server, the pass after it repairs what it found (the
    config runs again, once), and then all is in sync."""
    from tests.test_drift import CHECKED, _runs
    import os
    cli.run('stack', 'create', 'k', '-t', write('k.yaml', CHECKED),
            '--converge-policy', 'repair:60', '--wait', timeout=120)
    assert [o['outcome'] for o in cli.json('observe', '--all')] == \
        ['in-sync']   # checked, nothing found
    assert _runs(cli, 'checked') == 1
    disk = cli.json('sim', 'server', 'show', 'checked')['disk']
    os.remove(os.path.join(disk, 'installed'))   # behind its back

    assert [o['outcome'] for o in cli.json('observe', '--all')] == \
        ['repairing']
    assert os.path.exists(os.path.join(disk, 'installed'))
    assert _runs(cli, 'checked') == 2
    assert cli.json('stack', 'show', 'k')['stack_status'] == \
        'UPDATE_COMPLETE'
    said = [(e['resource_status'], e['resource_status_reason'])
            for e in _observe_events(cli, 'k')]
    assert ('OBSERVE_CHECKING', 'running the CHECK configs of '
            'deployment') in said
    assert any(status == 'OBSERVE_REPAIRING' and 'deployment (changed)'
               in reason for status, reason in said), said
    assert [o['outcome'] for o in cli.json('observe', '--all')] == \
        ['in-sync']
    assert _runs(cli, 'checked') == 2
