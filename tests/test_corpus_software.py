"""Corpus templates whose configs are not shell scripts, converged on the
simulated cloud with their tools really run: Heat's Ansible example on a
deployment group, TripleO's firstboot user_data (cloud-init on the
simulated server).
"""

import contextlib
import os
import shutil
import subprocess
import sys
import time
import urllib.parse

import pytest
import yaml

from converge.agent import rootfs

from tests.test_software_e2e import CORPUS, ENV, EXAMPLES

ANSIBLE_EXAMPLE = 'example-software-deploymentgroup-template.yaml'
# the parameters of its line in the corpus' INDEX.md
ANSIBLE_PARAMS = ['key_name=demo-key', 'flavor=m1.small',
                  'ubuntu_image=cirros-0.6.2-x86_64-disk',
                  'fedora_image=cirros-0.6.2-x86_64-disk', 'network=private']

needs_corpus = pytest.mark.skipif(not os.path.isdir(EXAMPLES),
                                  reason='corpus not here')


def _example(tmp_path):
    work = tmp_path / 'example'
    shutil.copytree(EXAMPLES, work)
    (work / 'env.yaml').write_text(ENV)
    return work


def _create(cli, name, template, env, params):
    args = ['stack', 'create', name, '-t', str(template), '-e', str(env),
            '--wait']
    for p in params:
        args += ['--parameter', p]
    cli.run(*args, timeout=240)
    assert cli.json('stack', 'show', name)['stack_status'] == \
        'CREATE_COMPLETE'


def _disks(cli):
    return {s['Name']: cli.json('sim', 'server', 'show', s['ID'])['disk']
            for s in cli.json('sim', 'server', 'list')}


@needs_corpus
def test_the_ansible_group_example_runs_its_playbook_on_both_servers(
        cli, tmp_path):
    """As published, the example leaves its inputs unset and asks for
    NO_SIGNAL (Heat shows no outputs for it): here it is given its inputs
    and signals, so its outputs come back as maps by member name."""
    work = _example(tmp_path)
    template = yaml.safe_load((work / ANSIBLE_EXAMPLE).read_text())
    group = template['resources']['my_deps']['properties']
    del group['signal_transport']
    group['input_values'] = {'foo': 'fooooo', 'bar': 'baaaaa'}
    path = work / 'with-inputs.yaml'
    path.write_text(yaml.safe_dump(template))
    _create(cli, 'ans', path, work / 'env.yaml', ANSIBLE_PARAMS)
    out = cli.json('stack', 'output', 'show', 'ans', '--all')
    assert sorted(out['result']) == ['0', '1'], out
    for member in '01':
        assert out['result'][member].strip() == \
            'The file /tmp/baaaaa contains fooooo'
        assert out['status_code'][member] == 0
        assert 'PLAY RECAP' in out['stdout'][member]
        assert 'failed=0' in out['stdout'][member]
    if rootfs.available():
        # each server wrote its own /tmp (its disk), not the host's
        for disk in _disks(cli).values():
            with open(os.path.join(disk, 'tmp', 'baaaaa')) as f:
                assert f.read() == 'fooooo\n'
    # the attributes, as a template's get_attr reads them
    shown = cli.json('stack', 'resource', 'show', 'ans', 'my_deps')
    attrs = shown['attributes']
    assert sorted(attrs['deploy_status_code']) == ['0', '1']


@needs_corpus
def test_the_ansible_group_example_converges_as_published(cli, tmp_path):
    """NO_SIGNAL: the stack does not wait for the servers (as in Heat);
    each server still runs the playbook once."""
    work = _example(tmp_path)
    _create(cli, 'asis', work / ANSIBLE_EXAMPLE, work / 'env.yaml',
            ANSIBLE_PARAMS)
    disks = _disks(cli)
    assert len(disks) == 2
    # the command ended with the stack: the agents pull their deployments
    # from the home's converge-api, served now as an operator would
    with _api(cli):
        found = {d: _wait_for_journal(d) for d in disks.values()}
    for entries in found.values():
        [entry] = entries
        assert entry['ack_note'] == 'NO_SIGNAL: not signalled'
        # it ran: with `bar` unset the playbook appends to "/tmp/", as it
        # would on Heat's servers
        assert 'PLAY RECAP' in entry['result']['deploy_stdout']
        assert 'Is a directory' in entry['result']['deploy_stdout']


@contextlib.contextmanager
def _api(cli):
    """converge-api serving the home's agents at their address."""
    with open(os.path.join(cli.home, 'api.url')) as f:
        address = urllib.parse.urlsplit(f.read().strip()).netloc
    env = dict(cli.env(), CONVERGE_HOME=cli.home)
    proc = subprocess.Popen([sys.executable, '-m', 'converge.cmd.api',
                             '--bind', address], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def _wait_for_journal(disk, deadline=60):
    """The journal entries of a server, once every one is acked."""
    from converge.agent import journal
    end = time.monotonic() + deadline
    while True:
        entries = journal.Journal(disk).entries()
        if entries and all(e.get('acked') for e in entries):
            return entries
        assert time.monotonic() < end, 'no finished run on %s' % disk
        time.sleep(0.1)


FIRSTBOOT = os.path.join(CORPUS, 'tripleo-heat-templates', 'firstboot',
                         'userdata_example.yaml')
needs_firstboot = pytest.mark.skipif(
    not os.path.exists(FIRSTBOOT) or not rootfs.available(),
    reason='corpus not here, or no mount namespaces (not root?)')


def _firstboot(cli, server, deadline=120, boots=1):
    """The server's first-boot record once its `boots`-th boot is done."""
    end = time.monotonic() + deadline
    while True:
        shown = cli.json('sim', 'server', 'show', server)
        state = shown.get('firstboot')
        if state and state['boots'] >= boots and state['state'] != \
                'started':
            return shown, state
        assert time.monotonic() < end, 'first boot not done: %r' % state
        time.sleep(0.2)


@needs_firstboot
def test_the_firstboot_userdata_example_converges_on_its_own(cli):
    cli.run('stack', 'create', 'fb', '-t', FIRSTBOOT, '--wait', timeout=240)
    assert cli.json('stack', 'show', 'fb')['stack_status'] == \
        'CREATE_COMPLETE'
    out = cli.json('stack', 'output', 'show', 'fb', '--all')
    # its OS::stack_id output is the MultipartMime: a stored config's id
    config = cli.json('stack', 'resource', 'show', 'fb', 'userdata')
    assert out['OS::stack_id'] == config['physical_resource_id']


@needs_firstboot
def test_a_server_booted_with_the_firstboot_userdata_runs_it_once(
        cli, tmp_path):
    """The example's resources, and a server whose user_data is its
    MultipartMime (what TripleO's OS::TripleO::NodeUserData mapping
    does): the simulated server does what cloud-init would."""
    with open(FIRSTBOOT) as f:
        template = yaml.safe_load(f)
    template['resources']['server'] = {
        'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.tiny', 'key_name': 'demo-key',
            'user_data_format': 'RAW',
            'user_data': {'get_resource': 'userdata'}}}
    path = tmp_path / 'node.yaml'
    path.write_text(yaml.safe_dump(template))
    # the operator trusts this template's user_data to run on the host
    conf = tmp_path / 'converge.conf'
    conf.write_text('[sim]\nrun_user_data = true\n')
    cli.run('--config-file', str(conf), 'stack', 'create', 'node', '-t',
            str(path), '--wait', timeout=240)
    [server] = cli.json('sim', 'server', 'list')
    shown, state = _firstboot(cli, server['ID'])
    assert state['state'] == 'done', state
    assert [(p['type'], p['state'], p.get('exit_code'))
            for p in state['parts']] == [
        ('text/cloud-config', 'done', 0), ('text/x-shellscript', 'done', 0)]
    disk = shown['disk']
    # users: default (cirros, with the server's key) and extrauser
    with open(os.path.join(disk, 'etc', 'passwd')) as f:
        users = {line.split(':')[0]: line.split(':')
                 for line in f if line.strip()}
    assert 'cirros' in users and 'extrauser' in users
    ssh = os.path.join(disk, 'home', 'extrauser', '.ssh')
    keys = os.path.join(ssh, 'authorized_keys')
    with open(keys) as f:
        key = f.read()
    assert key.startswith('ssh-rsa ') and key.strip().endswith('demo-key')
    # the script copied the default user's key, as the template means
    with open(os.path.join(disk, 'home', 'cirros', '.ssh',
                           'authorized_keys')) as f:
        assert f.read() == key
    # chmod and chown -R extrauser:extrauser, with the server's users
    # (on the host, its uid in the server's range: its root is confined)
    uid = int(users['extrauser'][2])
    assert uid >= 1000
    for path, mode in ((ssh, 0o700), (keys, 0o600)):
        st = os.stat(path)
        assert (st.st_uid, st.st_gid) == (rootfs.DEFAULT_UID + uid,) * 2
        assert st.st_mode & 0o777 == mode
    assert not os.path.exists('/home/extrauser')   # not the host's
    # a reboot does not run it again (the script would rewrite the file)
    with open(keys, 'a') as f:
        f.write('# added after the first boot\n')
    cli.run('sim', 'server', 'reboot', server['ID'])
    _shown, state = _firstboot(cli, server['ID'], boots=2)
    with open(keys) as f:
        assert f.read() == key + '# added after the first boot\n'
