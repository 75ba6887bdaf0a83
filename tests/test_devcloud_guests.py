"""The devcloud's guests (tools/devcloud.d/guests.py): a server of Nova's
fake driver runs its user data as a booted VM would with cloud-init,
once, confined, reaching the devcloud's APIs; its console log under
.devcloud/log/guests/<server id>.log."""

import base64
import json
import os
import random
import signal
import subprocess
import sys

import pytest
import yaml

from tests import realcloud
from tests.test_realcloud import _openstack

pytestmark = [pytest.mark.realcloud, pytest.mark.slow,
              pytest.mark.xdist_group('realcloud')]


@pytest.fixture(scope='module')
def cloud_env():
    env = realcloud.up('--with-converge')
    realcloud.purge(realcloud.connect(env, 'devcloud-alice'))
    return env


@pytest.fixture(scope='module')
def alice(cloud_env):
    return realcloud.connect(cloud_env, 'devcloud-alice')


def _console(env, server_id):
    path = os.path.join(env['DEVCLOUD_HOME'], 'log', 'guests',
                        server_id + '.log')
    try:
        with open(path, errors='replace') as f:
            return f.read()
    except FileNotFoundError:
        return ''


def _gone(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] in ('Z', 'X')
    except FileNotFoundError:
        return True


def _boot(alice, name, user_data):
    image = alice.compute.find_image('cirros')
    flavor = alice.compute.find_flavor('m1.tiny')
    server = alice.compute.create_server(
        name=name, image_id=image.id, flavor_id=flavor.id, networks='none',
        user_data=base64.b64encode(user_data.encode()).decode())
    # a build takes 10-30 s; minutes when the machine is loaded
    return alice.compute.wait_for_server(server, wait=900)


MULTIPART = '''Content-Type: multipart/mixed; boundary="==guest=="
MIME-Version: 1.0

--==guest==
Content-Type: text/cloud-config; charset="us-ascii"

#cloud-config
write_files:
- path: /tmp/cc-marker
  content: written-by-write-files
runcmd:
- echo runcmd-ran
--==guest==
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/sh
echo "script-ran as uid $(id -u), $(ls /proc | grep -c '^[0-9]') processes"
echo "marker: $(cat /tmp/cc-marker)"
curl -sS -m 20 %(keystone)s/v3 | grep -o '"id": *"v3[^"]*"'
curl -sS -m 5 http://127.0.0.1:3306/ > /dev/null 2>&1 || \
  echo database-unreachable
sleep %(mark)d > /dev/null 2>&1 &
--==guest==--
'''


def test_a_servers_user_data_runs_once_confined_and_stops_with_it(
        cloud_env, alice):
    """A MIME multipart user data (cloud-config write_files and runcmd, a
    shell script): it runs as root of its own root, sees only its own
    processes, reaches Keystone but not the host's database; its output
    is the server's console. A restart of the guests service does not run
    it again; a rebuild does; a delete stops what it left running."""
    mark = random.randint(10 ** 6, 10 ** 7)
    keystone = cloud_env['DEVCLOUD_AUTH_URL'].rsplit('/v3', 1)[0]
    server = _boot(alice, 'guest-multi', MULTIPART % {
        'keystone': keystone, 'mark': mark})
    console = realcloud.wait_for(
        lambda: 'runcmd-ran' in _console(cloud_env, server.id) and
        _console(cloud_env, server.id), timeout=300, interval=0.5)
    assert 'script-ran as uid 0, ' in console, console
    # its own PID namespace: its sleep, the shell, ls, grep and its init
    processes = int(console.split('uid 0, ')[1].split()[0])
    assert processes < 10, console
    assert 'marker: written-by-write-files' in console, console
    assert '"id": "v3' in console, console
    assert 'database-unreachable' in console, console
    assert realcloud.running(['sleep', str(mark)])

    # the guests service restarted: nothing of the first boot runs again
    home = cloud_env['DEVCLOUD_HOME']
    with open(os.path.join(home, 'run', 'guests.pid')) as f:
        pid = int(f.read().split()[0])
    os.kill(pid, signal.SIGTERM)
    realcloud.wait_for(lambda: _gone(pid), timeout=60)
    subprocess.run([sys.executable, realcloud.DEVCLOUD, 'up'] +
                   realcloud.kept_extras(os.path.join(home)),
                   check=True, capture_output=True, timeout=600)
    # a server booted after the restart was seen after the first one was
    second = _boot(alice, 'guest-after-restart',
                   '#!/bin/sh\necho second-server-ran\n')
    realcloud.wait_for(
        lambda: 'second-server-ran' in _console(cloud_env, second.id),
        timeout=300, interval=0.5)
    console = _console(cloud_env, server.id)
    assert console.count('runcmd-ran') == 1, console
    assert console.count('script-ran as uid') == 1, console

    # a rebuild is a new disk: the user data runs again
    image = alice.compute.find_image('cirros')
    alice.compute.rebuild_server(server, image=image.id)
    realcloud.wait_for(
        lambda: _console(cloud_env, server.id).count('runcmd-ran') == 2,
        timeout=300, interval=0.5)
    realcloud.wait_for(lambda: realcloud.running(['sleep', str(mark)]),
                       timeout=60)

    # deleted: its guest stops, with what its user data left running
    alice.compute.delete_server(server)
    realcloud.wait_for(lambda: not realcloud.running(['sleep', str(mark)]),
                       timeout=300, interval=0.5)
    assert 'server deleted' in _console(cloud_env, server.id)
    alice.compute.delete_server(second)
    alice.compute.wait_for_delete(second, wait=300)


SIGNALS = '''#!/bin/sh
CURL --data-binary '{"status": "SUCCESS", "id": "1", "data": "one"}'
CURL --data-binary '{"status": "SUCCESS", "id": "2", "data": "two"}' &
CURL --data-binary '{"status": "SUCCESS", "id": "3", "data": "three"}' &
wait
'''


def test_a_stacks_server_signals_its_wait_condition_with_curl_cli(
        cloud_env, tmp_path):
    """Through converge-api (`openstack stack create`): a server whose
    RAW user_data calls its wait condition handle's curl_cli three times,
    two at once, completes the stack, the data of each signal in the
    wait condition's."""
    template = {
        'heat_template_version': '2018-08-31',
        'resources': {
            'net': {'type': 'OS::Neutron::Net'},
            'subnet': {'type': 'OS::Neutron::Subnet', 'properties': {
                'network': {'get_resource': 'net'},
                'cidr': '10.77.0.0/24'}},
            'handle': {'type': 'OS::Heat::WaitConditionHandle'},
            'wait': {'type': 'OS::Heat::WaitCondition', 'properties': {
                'handle': {'get_resource': 'handle'}, 'count': 3,
                'timeout': 600}},
            'server': {'type': 'OS::Nova::Server', 'depends_on': 'subnet',
                       'properties': {
                           'image': 'cirros', 'flavor': 'm1.tiny',
                           'networks': [{'network': {
                               'get_resource': 'net'}}],
                           'user_data_format': 'RAW',
                           'user_data': {'str_replace': {
                               'template': SIGNALS,
                               'params': {'CURL': {'get_attr': [
                                   'handle', 'curl_cli']}}}}}},
        },
        'outputs': {'data': {'value': {'get_attr': ['wait', 'data']}}},
    }
    path = tmp_path / 'signals.yaml'
    path.write_text(yaml.safe_dump(template))
    # what a run that died left is not this run's
    _openstack(cloud_env, '--os-cloud', 'devcloud-alice', 'stack', 'delete',
               '--yes', '--wait', 'guest-signals', check=False)
    _openstack(cloud_env, '--os-cloud', 'devcloud-alice', 'stack', 'create',
               '-t', str(path), '--wait', 'guest-signals')
    try:
        shown = json.loads(_openstack(
            cloud_env, '--os-cloud', 'devcloud-alice', 'stack', 'show',
            'guest-signals', '-f', 'json').stdout)
        assert shown['stack_status'] == 'CREATE_COMPLETE', shown
        data = json.loads(_openstack(
            cloud_env, '--os-cloud', 'devcloud-alice', 'stack', 'output',
            'show', 'guest-signals', 'data', '-f', 'json').stdout)
        value = data['output_value']
        if isinstance(value, str):
            value = json.loads(value)
        assert value == {'1': 'one', '2': 'two', '3': 'three'}, data
    finally:
        _openstack(cloud_env, '--os-cloud', 'devcloud-alice', 'stack',
                   'delete', '--yes', '--wait', 'guest-signals')
