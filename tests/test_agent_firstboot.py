"""A simulated server's first boot: its user_data read and run as
cloud-init would, once per instance."""

import email.mime.multipart
import email.mime.text
import json
import os

import pytest

from converge import userdata
from converge.agent import firstboot
from converge.agent import hooks
from converge.agent import rootfs

CLOUD_CONFIG = '''#cloud-config
users: [default, {name: ops, ssh_authorized_keys: [ssh-ed25519 AAAA ops]}]
write_files:
  - {path: /etc/motd, content: hello, permissions: '0600'}
runcmd:
  - echo runcmd >> /tmp/order
  - [sh, -c, 'echo "$0" >> /tmp/order', 'a list']
'''
SCRIPT = '#!/bin/sh\necho script >> /tmp/order\n'


def mime(*texts):
    doc = email.mime.multipart.MIMEMultipart()
    for text, subtype in texts:
        doc.attach(email.mime.text.MIMEText(text, subtype, 'utf-8'))
    return doc.as_string()


SERVER = {'id': 'srv', 'name': 'vm', 'image': 'fedora-39',
          'key_name': 'k1'}


@pytest.fixture(autouse=True)
def simulated(monkeypatch):
    monkeypatch.setitem(rootfs._STATE, 'enabled', True)


def test_parts_are_what_cloud_init_acts_on():
    assert firstboot.parts(None) == []
    assert firstboot.parts('just text') == []
    assert firstboot.parts(SCRIPT) == [('text/x-shellscript', SCRIPT)]
    assert firstboot.parts(CLOUD_CONFIG)[0][0] == 'text/cloud-config'
    assert [k for k, _t in firstboot.parts(mime(
        (CLOUD_CONFIG, 'cloud-config'), (SCRIPT, 'x-shellscript')))] == [
        'text/cloud-config', 'text/x-shellscript']
    # a SOFTWARE_CONFIG server's bootstrap alone: nothing to run
    agent_only = userdata.encode('', 'http://x', 'a', 't')
    assert firstboot.parts(agent_only) == []
    with_script = userdata.encode(SCRIPT, 'http://x', 'a', 't')
    assert firstboot.parts(with_script) == [('text/x-shellscript', SCRIPT)]


@pytest.mark.skipif(not rootfs.available(), reason='no mount namespaces')
def test_first_boot_runs_each_part_once_in_order(tmp_path):
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    parts = firstboot.parts(mime((CLOUD_CONFIG, 'cloud-config'),
                                 (SCRIPT, 'x-shellscript')))
    state = firstboot.run(disk, parts, SERVER, hooks.ProcessRunner())
    assert state['state'] == 'done'
    assert [(p['type'], p['exit_code']) for p in state['parts']] == [
        ('text/cloud-config', 0), ('text/x-shellscript', 0), ('runcmd', 0)]
    # scripts before runcmd (cloud-init's scripts-user order)
    with open(os.path.join(disk, 'tmp', 'order')) as f:
        assert f.read() == 'script\nruncmd\na list\n'
    with open(os.path.join(disk, 'etc', 'motd')) as f:
        assert f.read() == 'hello'
    assert os.stat(os.path.join(disk, 'etc', 'motd')).st_mode & 0o777 == \
        0o600
    with open(os.path.join(disk, 'home', 'fedora', '.ssh',
                           'authorized_keys')) as f:
        assert f.read() == firstboot.public_key('k1') + '\n'
    with open(os.path.join(disk, 'home', 'ops', '.ssh',
                           'authorized_keys')) as f:
        assert f.read() == 'ssh-ed25519 AAAA ops\n'
    # a reboot: counted, nothing run again
    again = firstboot.run(disk, parts, SERVER, hooks.ProcessRunner())
    assert again['boots'] == 2
    with open(os.path.join(disk, 'tmp', 'order')) as f:
        assert f.read() == 'script\nruncmd\na list\n'
    assert firstboot.status(disk) == again


def test_a_part_cut_off_is_interrupted_not_run_again(tmp_path):
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    with open(os.path.join(disk, firstboot.JOURNAL), 'w') as f:
        json.dump({'boots': 1, 'state': 'started', 'parts': [
            {'type': 'text/x-shellscript', 'state': 'started'}]}, f)
    state = firstboot.run(disk, [('text/x-shellscript', SCRIPT)], SERVER,
                          hooks.ProcessRunner())
    assert state['state'] == 'interrupted'
    assert state['parts'][0]['state'] == 'interrupted'
    assert not os.path.exists(os.path.join(disk, 'tmp', 'order'))


def test_without_namespaces_scripts_are_not_run(tmp_path, monkeypatch):
    monkeypatch.setitem(rootfs._STATE, 'available', False)
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    state = firstboot.run(disk, [('text/x-shellscript', SCRIPT)], SERVER,
                          hooks.ProcessRunner())
    assert state['parts'][0]['state'] == 'skipped'
    assert 'not run' in state['parts'][0]['note']


@pytest.mark.skipif(not rootfs.available(), reason='no mount namespaces')
def test_cloud_config_is_applied_before_any_script_runs(tmp_path):
    """cloud-init's stages: a script part first in the user_data still
    runs after every cloud-config part was applied (so the host never
    writes users and files on a disk the server's software changed)."""
    disk = str(tmp_path / 'disk')
    os.makedirs(disk)
    parts = firstboot.parts(mime(
        ('#!/bin/sh\ncat /tmp/from-config > /tmp/seen\n', 'x-shellscript'),
        ('#cloud-config\nwrite_files:\n'
         '  - {path: /tmp/from-config, content: applied}\n'
         '  - {path: ../../outside, content: escaped}\n', 'cloud-config')))
    state = firstboot.run(disk, parts, SERVER, hooks.ProcessRunner())
    assert [(p['type'], p['exit_code']) for p in state['parts']] == [
        ('text/x-shellscript', 0), ('text/cloud-config', 0)]
    with open(os.path.join(disk, 'tmp', 'seen')) as f:
        assert f.read() == 'applied'
    assert not os.path.exists(tmp_path.parent / 'outside')
    assert not os.path.exists(tmp_path / 'outside')
