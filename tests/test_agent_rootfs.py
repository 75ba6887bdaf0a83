"""A simulated server's hooks see its own /tmp and /home (its disk), not
the host's, where the agent may make mount namespaces (root on Linux)."""

import os
import uuid

import pytest

from converge.agent import hooks
from converge.agent import rootfs


@pytest.fixture(autouse=True)
def simulated(monkeypatch):
    """The hooks run for simulated servers (as in the sim's agent host)."""
    monkeypatch.setitem(rootfs._STATE, 'enabled', True)


needs_namespaces = pytest.mark.skipif(
    not rootfs.available(), reason='no mount namespaces here (not root?)')

SCRIPT = '''#!/bin/sh
set -e
echo "$marker" > /tmp/$marker
mkdir -p /home/someone
echo hi > /home/someone/file
ls /tmp
printf '%s' "$(cat /tmp/$marker)" > "$heat_outputs_path.result"
'''


@needs_namespaces
def test_a_script_writing_tmp_and_home_writes_its_servers_disk(tmp_path):
    # the disk itself is under /tmp: it stays reachable at its own path
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    marker = 'marker-%s' % uuid.uuid4().hex
    result = hooks.run({'id': 'd1', 'group': 'script', 'config': SCRIPT,
                        'inputs': [{'name': 'marker', 'value': marker}],
                        'outputs': [{'name': 'result'}]},
                       disk, hooks.ProcessRunner())
    assert result['deploy_status_code'] == 0, result
    assert result['result'] == marker
    assert not os.path.exists(os.path.join('/tmp', marker))
    with open(os.path.join(disk, 'tmp', marker)) as f:
        assert f.read() == marker + '\n'
    with open(os.path.join(disk, 'home', 'someone', 'file')) as f:
        assert f.read() == 'hi\n'
    # the server's /tmp holds its own files only, not the host's
    assert result['deploy_stdout'].split() == sorted(
        os.listdir(os.path.join(disk, 'tmp')))


@needs_namespaces
def test_two_servers_do_not_see_each_others_tmp(tmp_path):
    marker = 'marker-%s' % uuid.uuid4().hex
    for name in ('a', 'b'):
        disk = str(tmp_path / name)
        os.makedirs(disk)
        result = hooks.run({'id': 'd', 'group': 'script', 'config':
                            '#!/bin/sh\ncat /tmp/%s 2>/dev/null\n'
                            'echo %s > /tmp/%s\n' % (marker, name, marker)},
                           disk, hooks.ProcessRunner())
        # b does not find what a wrote
        assert result['deploy_stdout'] == ''
        with open(os.path.join(disk, 'tmp', marker)) as f:
            assert f.read() == name + '\n'


def _read_host_file(tmp_path):
    """The result of a script reading a file of the host's beside its
    disk: a server with its own /tmp could not read it."""
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    (tmp_path / 'host-only').write_text('seen\n')
    return disk, hooks.run(
        {'id': 'd', 'group': 'script',
         'config': '#!/bin/sh\ncat %s\n' % (tmp_path / 'host-only')},
        disk, hooks.ProcessRunner())


@pytest.mark.parametrize('state', [{'available': False},
                                   {'enabled': False}])
def test_without_namespaces_hooks_run_as_before(tmp_path, monkeypatch,
                                                state):
    """Where they cannot be made, and on a real server (a standalone
    agent), hooks see the machine's own /tmp."""
    for key, value in state.items():
        monkeypatch.setitem(rootfs._STATE, key, value)
    disk, result = _read_host_file(tmp_path)
    assert result['deploy_stdout'] == 'seen\n', result
    assert rootfs.plan(disk) is None
    assert not os.path.exists(os.path.join(disk, 'tmp'))


@needs_namespaces
def test_with_namespaces_the_hosts_tmp_is_hidden(tmp_path):
    _disk, result = _read_host_file(tmp_path)
    assert result['deploy_status_code'] != 0
    assert 'No such file' in result['deploy_stderr']


def _processes_seeing(path):
    """Pids of the processes whose mounts include `path` as a source."""
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open('/proc/%s/mountinfo' % pid) as f:
                if path in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


@needs_namespaces
def test_a_servers_hooks_share_its_namespace_which_goes_with_it(tmp_path):
    """A server's hooks join one mount namespace kept for it (made once,
    not per hook): what one hook leaves in /tmp the next sees, in the
    directory it was started in; once the server stops, nothing of its
    namespace is left running."""
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    runner = hooks.ProcessRunner()
    code, _o, err = runner.run(['/bin/sh', '-c', 'echo one > /tmp/left; '
                                'pwd > here'], dict(os.environ), disk,
                               disk=disk)
    assert code == 0, err
    code, out, err = runner.run(['/bin/sh', '-c', 'cat /tmp/left'],
                                dict(os.environ), disk, disk=disk)
    assert (code, out) == (0, b'one\n'), err
    with open(os.path.join(disk, 'here')) as f:
        assert f.read().strip() == os.path.realpath(disk)
    bound = os.path.join(os.path.realpath(disk), 'tmp')
    assert _processes_seeing(bound), 'no namespace kept for the server'
    runner.kill_all()
    assert _processes_seeing(bound) == []


def test_a_kept_namespace_is_started_while_no_script_is_open(monkeypatch):
    """A process forked while another thread has a script open for
    writing keeps it open until it execs, and that script's exec fails
    with "Text file busy" (seen at 1,000 servers: deployments FAILED with
    exit 126). The spawner of kept namespaces starts its processes under
    the lock the scripts are written under, as the hooks' runners do."""
    seen = []

    def popen(argv, **kw):
        seen.append(rootfs.FORK_LOCK.locked())
        raise OSError('not started: the test only looks')

    monkeypatch.setattr(rootfs.subprocess, 'Popen', popen)
    with pytest.raises(OSError):
        rootfs._Spawner().popen(['true'])
    assert seen == [True]
    assert hooks.FORK_LOCK is rootfs.FORK_LOCK
