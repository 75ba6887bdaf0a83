"""A simulated server's hooks run in a root of its own (its disk, its own
/tmp and /home, a read-only /usr), not as root on the host, where the
agent host may make one (root on Linux); elsewhere they fail saying so,
unless the operator turned confinement off."""

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
    not rootfs.available(), reason='no roots here (not root on Linux?)')

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


@pytest.mark.parametrize('state', [{'confine': False},
                                   {'enabled': False}])
def test_unconfined_hooks_run_as_before(tmp_path, monkeypatch, state):
    """On a real server (a standalone agent), and on the sim when the
    operator turned confinement off, hooks see the machine's own /tmp."""
    for key, value in state.items():
        monkeypatch.setitem(rootfs._STATE, key, value)
    disk, result = _read_host_file(tmp_path)
    assert result['deploy_stdout'] == 'seen\n', result
    assert rootfs.plan(disk) is None
    assert not os.path.exists(os.path.join(disk, 'tmp'))


def test_where_no_root_can_be_made_hooks_fail_saying_so(tmp_path,
                                                          monkeypatch):
    """Not root, no util-linux: a simulated server's software is not run
    unconfined behind the operator's back; its deployment fails naming
    the setting that would allow it, and nothing is written."""
    monkeypatch.setitem(rootfs._STATE, 'available', False)
    monkeypatch.setitem(rootfs._STATE, 'reason', 'the agent host does not '
                        'run as root')
    disk, result = _read_host_file(tmp_path)
    assert result['deploy_status_code'] == 1
    assert result['deploy_stdout'] == ''
    assert 'does not run as root' in result['deploy_stderr']
    assert 'confine_servers = false' in result['deploy_stderr']
    assert os.listdir(disk) == []


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


def _script(disk, text, outputs=(), inputs=None):
    return hooks.run({'id': 'd', 'group': 'script', 'config': text,
                      'inputs': [{'name': k, 'value': v}
                                 for k, v in (inputs or {}).items()],
                      'outputs': [{'name': n} for n in outputs]},
                     disk, hooks.ProcessRunner())


@needs_namespaces
def test_a_script_is_root_in_its_root_and_unprivileged_on_the_host(
        tmp_path):
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    result = _script(disk, '#!/bin/sh\nid -u > "$heat_outputs_path.uid"\n'
                     'touch made\n', outputs=['uid'])
    assert result['deploy_status_code'] == 0, result
    assert result['uid'].strip() == '0'
    st = os.stat(os.path.join(disk, 'made'))
    assert (st.st_uid, st.st_gid) == (rootfs.DEFAULT_UID,) * 2
    assert rootfs.host_id(1001) == rootfs.DEFAULT_UID + 1001


@needs_namespaces
def test_a_script_sees_its_own_processes_only(tmp_path):
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    result = _script(disk, '#!/bin/sh\nls /proc | grep -E "^[0-9]+$"\n'
                     'cat /proc/%d/cmdline\n' % os.getpid())
    pids = [int(p) for p in result['deploy_stdout'].split()]
    assert os.getpid() not in pids and 1 in pids, pids
    assert len(pids) < 10
    assert 'No such file' in result['deploy_stderr']


@needs_namespaces
def test_a_script_cannot_reach_the_hosts_files(tmp_path):
    """Not the agent host's environment (the sim's database URL), not a
    file of the host's outside its disk, not the host's /etc (beyond the
    few files a server gets), not another server's disk."""
    other = tmp_path / 'other-disk'
    other.mkdir()
    (other / 'private').write_text('not yours\n')
    (tmp_path / 'engine.db').write_text('the engine\n')
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    os.environ['CONVERGE_TEST_SECRET'] = 'sim-db-password'
    try:
        result = _script(disk, '#!/bin/sh\n'
                         'env | grep CONVERGE_TEST_SECRET\n'
                         'cat "$db" "$other" /etc/shadow /etc/fstab\n'
                         'ls /etc/hosts /usr/bin/env\n',
                         inputs={'db': str(tmp_path / 'engine.db'),
                                 'other': str(other / 'private')})
    finally:
        del os.environ['CONVERGE_TEST_SECRET']
    assert result['deploy_stdout'] == '/etc/hosts\n/usr/bin/env\n', result
    assert result['deploy_stderr'].count('No such file') == 4, result


@needs_namespaces
def test_links_a_script_leaves_do_not_point_the_agent_at_the_host(
        tmp_path):
    """The agent (root on the host) reads the outputs and writes the next
    script on the disk the server's software may change: an output that
    is a link to a host file is not read, a script directory replaced by
    a link does not get the next script written through it."""
    secret = tmp_path / 'engine.key'
    secret.write_text('engine key\n')
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    result = _script(disk, '#!/bin/sh\n'
                     'ln -s %s "$heat_outputs_path.key"\n'
                     'mkdir "$heat_outputs_path.up"\n'
                     'rm -rf heat-config-script\n'
                     'ln -s %s heat-config-script\n' % (secret, elsewhere),
                     outputs=['key', 'up/../../../engine.key'])
    assert result['deploy_status_code'] == 0, result
    assert 'key' not in result
    assert 'engine key' not in str(result)
    result = _script(disk, '#!/bin/sh\necho second\n')
    assert result['deploy_stdout'] == 'second\n', result
    assert os.listdir(elsewhere) == []
    assert not os.path.islink(os.path.join(disk, 'heat-config-script'))


@needs_namespaces
def test_a_server_cannot_have_its_next_root_bind_a_host_directory(
        tmp_path):
    """The launcher binds the disk's tmp, home, etc/passwd into the
    root: a server that could swap them for links would have its next
    root (after a reboot) bind host files of its choosing."""
    marker = 'host-only-%s' % uuid.uuid4().hex
    outside = tmp_path / 'outside'
    outside.mkdir()
    (outside / 'passwd').write_text(marker + '\n')
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    _script(disk, '#!/bin/sh\nmv tmp old-tmp; rm -rf tmp home\n'
            'ln -s %s tmp; ln -s %s home\n'
            'mkdir -p etc && ln -s %s/passwd etc/passwd\n'
            % (outside, outside, outside))
    assert os.path.isdir(os.path.join(disk, 'tmp'))
    assert not os.path.islink(os.path.join(disk, 'tmp'))
    # the server booted again: a new root
    result = _script(disk, '#!/bin/sh\ncat /tmp/passwd /home/passwd '
                     '/etc/passwd\n')
    assert marker not in result['deploy_stdout'], result
    assert os.listdir(outside) == ['passwd']
