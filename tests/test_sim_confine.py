"""A simulated server's software is confined (converge/agent/rootfs.py):
a tenant's deployment script runs in a root of its own, not as root on
the engine's machine. It cannot read the engine's database or the home's
files (directly, or through another process's /proc/PID/root), cannot
see the engine's processes, cannot read another server's disk, and its
files belong to an unprivileged uid of the host; its deployments still
run and report their outputs. The CLI, embedded, as a user runs it."""

import http.server
import json
import os
import re
import shutil
import socket
import sys
import threading
import time

import pytest
import yaml

from converge.agent import rootfs
from tests.test_agent_netns import _Answer

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not rootfs.available(), reason='no roots here (not root on Linux?)')]

SECRET = 'hush-%d' % os.getpid()

OWNER = '''#!/bin/sh
echo "only for server a" > a-private
printf ok > "$heat_outputs_path.result"
'''

# What a hostile tenant's script does: look for the engine's home, its
# database (another project's hidden parameter) and key files, directly
# and through every process's /proc/PID/root; read another server's disk;
# list the processes it can see. Then report, as outputs, what it got.
ATTACKER = r'''#!/bin/sh
got=""
for f in "$home"/* /proc/[0-9]*/root"$home"/*; do
  if [ -f "$f" ] && cat "$f" > /dev/null 2>&1; then
    got="$got $f"
    grep -a -o 'hush-[0-9]*' "$f" 2>/dev/null | head -n 1 >> leaked
  fi
done
printf '%s' "${got:-none}" > "$heat_outputs_path.home"
cat leaked 2>/dev/null > "$heat_outputs_path.leaked"
cat "$other" > "$heat_outputs_path.other" 2>/dev/null || \
  printf denied > "$heat_outputs_path.other"
ls /proc | grep -E '^[0-9]+$' | tr '\n' ' ' > "$heat_outputs_path.pids"
id -u > "$heat_outputs_path.inside_uid"
touch mine
printf ok > "$heat_outputs_path.result"
'''

OUTPUTS = ['home', 'leaked', 'other', 'pids', 'inside_uid', 'result']


def _template(home):
    return {
        'heat_template_version': '2018-08-31',
        'resources': {
            'a': {'type': 'OS::Nova::Server', 'properties': {
                'image': 'cirros', 'flavor': 'm1.tiny',
                'user_data_format': 'SOFTWARE_CONFIG'}},
            'b': {'type': 'OS::Nova::Server', 'properties': {
                'image': 'cirros', 'flavor': 'm1.tiny',
                'user_data_format': 'SOFTWARE_CONFIG'}},
            'owner_config': {'type': 'OS::Heat::SoftwareConfig',
                             'properties': {
                                 'group': 'script', 'config': OWNER,
                                 'outputs': [{'name': 'result'}]}},
            'owner': {'type': 'OS::Heat::SoftwareDeployment', 'properties': {
                'config': {'get_resource': 'owner_config'},
                'server': {'get_resource': 'a'}}},
            'attack_config': {'type': 'OS::Heat::SoftwareConfig',
                              'properties': {
                                  'group': 'script', 'config': ATTACKER,
                                  'inputs': [{'name': 'home'},
                                             {'name': 'other'}],
                                  'outputs': [{'name': n}
                                              for n in OUTPUTS]}},
            'attack': {
                'type': 'OS::Heat::SoftwareDeployment',
                'depends_on': 'owner',
                'properties': {
                    'config': {'get_resource': 'attack_config'},
                    'server': {'get_resource': 'b'},
                    'input_values': {
                        'home': home,
                        'other': {'str_replace': {
                            'template': 'DISKS/ID/a-private',
                            'params': {
                                'DISKS': os.path.join(home, 'sim-disks'),
                                'ID': {'get_resource': 'a'}}}}}}},
        },
        'outputs': {n: {'value': {'get_attr': ['attack', n]}}
                    for n in OUTPUTS},
    }


HIDDEN = '''heat_template_version: 2018-08-31
parameters:
  password: {type: string, hidden: true}
resources:
  nothing: {type: OS::Heat::None}
'''


def test_a_tenants_script_on_a_sim_server_is_confined(cli, tmp_path):
    home = cli.home
    # another project's stack, with a hidden parameter in the database
    hidden = tmp_path / 'hidden.yaml'
    hidden.write_text(HIDDEN)
    cli.run('stack', 'create', 'other', '-t', str(hidden), '--parameter',
            'password=%s' % SECRET, '--wait')
    path = tmp_path / 'attack.yaml'
    path.write_text(yaml.safe_dump(_template(home)))
    # the engine (with converge-api) runs in this process while the
    # deployments run: its pid is one the script must not see
    engine = cli.popen('stack', 'create', 'attack', '-t', str(path),
                       '--wait')
    deadline = time.monotonic() + 240
    disks = os.path.join(home, 'sim-disks')
    while engine.poll() is None:
        if os.path.exists(os.path.join(disks, 'agent-host.pid')):
            break
        assert time.monotonic() < deadline, 'no agent host started'
        time.sleep(0.1)
    with open(os.path.join(disks, 'agent-host.pid')) as f:
        host_pid = int(f.read())
    out, err = engine.communicate(timeout=240)
    assert engine.returncode == 0, (out, err)
    shown = cli.json('stack', 'output', 'show', 'attack', '--all')

    # normal deployments still run and report their outputs
    assert shown['result'] == 'ok', shown
    owner = cli.json('stack', 'resource', 'show', 'attack', 'owner')
    assert owner['attributes']['result'] == 'ok'
    # the engine's database, key files, api.url...: nothing read, not
    # even through /proc/PID/root of the engine's or the agent host's
    assert shown['home'] == 'none', shown['home'][:400]
    assert SECRET not in str(shown)
    # another server's disk is not there
    assert shown['other'] == 'denied', shown['other']
    # only its own processes: not the engine's, not the agent host's
    pids = [int(p) for p in shown['pids'].split()]
    assert engine.pid not in pids and host_pid not in pids, pids
    assert len(pids) < 10, pids
    # root inside its root, an unprivileged uid on the host
    assert shown['inside_uid'].strip() == '0'
    servers = {name: cli.json('stack', 'resource', 'show', 'attack',
                              name)['physical_resource_id']
               for name in ('a', 'b')}
    b_disk = os.path.join(disks, servers['b'])
    st = os.stat(os.path.join(b_disk, 'mine'))
    assert st.st_uid != 0 and st.st_gid != 0, st
    assert st.st_uid == rootfs.DEFAULT_UID
    # and server a's own file is there, for a only
    with open(os.path.join(disks, servers['a'], 'a-private')) as f:
        assert f.read() == 'only for server a\n'
    assert re.match(r'^[0-9 ]+$', shown['pids'])


UNCONFINED = '''heat_template_version: 2018-08-31
resources:
  server:
    type: OS::Nova::Server
    properties: {image: cirros, flavor: m1.tiny,
                 user_data_format: SOFTWARE_CONFIG}
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      outputs: [{name: seen}]
      config: |
        #!/bin/sh
        touch mine
        test -e "$home/converge.db" && printf yes > "$heat_outputs_path.seen"
      inputs: [{name: home}]
  deployment:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_resource: server}
      input_values: {home: %s}
outputs:
  seen: {value: {get_attr: [deployment, seen]}}
'''


def test_an_operator_may_turn_confinement_off(cli, tmp_path):
    """[sim] confine_servers = false: the servers' software runs as the
    agent host's user on this machine, as it did before (for templates
    the operator trusts)."""
    conf = tmp_path / 'converge.conf'
    conf.write_text('[sim]\nconfine_servers = false\n')
    path = tmp_path / 'unconfined.yaml'
    path.write_text(UNCONFINED % cli.home)
    cli.run('--config-file', str(conf), 'stack', 'create', 'trusted', '-t',
            str(path), '--wait', timeout=240)
    assert cli.json('stack', 'output', 'show', 'trusted',
                    'seen')['output_value'] == 'yes'
    server = cli.json('stack', 'resource', 'show', 'trusted',
                      'server')['physical_resource_id']
    st = os.stat(os.path.join(cli.home, 'sim-disks', server, 'mine'))
    assert st.st_uid == os.geteuid()


# A server's first boot signals a wait condition with the handle's
# curl_cli (cloud-init's user data, as templates write it); a deployment
# on another server tries the host's loopback and an abstract unix
# socket, then signals the same handle. The stack completes only if both
# signals reach converge-api.
FIRST_BOOT = '''#!/bin/sh
CURL -sS -d '{"status": "SUCCESS", "id": "boot", "data": "booted"}'
'''

PROBES = r'''#!/bin/sh
probe() { "$python" -c "$1" 2>&1 | tail -n 1; }
probe "import socket; socket.create_connection(('127.0.0.1', $port), 5)" \
  > "$heat_outputs_path.tcp"
probe "import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(5); \
s.connect('\0$abstract')" > "$heat_outputs_path.unix"
sh -c "$curl_cli -sS -d '{\"status\": \"SUCCESS\", \"id\": \"deployment\", \
\"data\": \"deployed\"}'" > /dev/null 2> "$heat_outputs_path.curl" && \
  printf signalled > "$heat_outputs_path.signal"
probe "import urllib.request; \
print(urllib.request.urlopen('$auth_url', timeout=10).read().decode())" \
  > "$heat_outputs_path.keystone"
'''


def _network_template(port, abstract, auth_url):
    return {
        'heat_template_version': '2018-08-31',
        'resources': {
            'handle': {'type': 'OS::Heat::WaitConditionHandle'},
            'wait': {'type': 'OS::Heat::WaitCondition', 'properties': {
                'handle': {'get_resource': 'handle'}, 'count': 2,
                'timeout': 180}},
            'booted': {'type': 'OS::Nova::Server', 'properties': {
                'image': 'cirros', 'flavor': 'm1.tiny',
                'user_data_format': 'RAW',
                'user_data': {'str_replace': {
                    'template': FIRST_BOOT,
                    'params': {'CURL': {'get_attr': ['handle',
                                                     'curl_cli']}}}}}},
            'server': {'type': 'OS::Nova::Server', 'properties': {
                'image': 'cirros', 'flavor': 'm1.tiny',
                'user_data_format': 'SOFTWARE_CONFIG'}},
            'config': {'type': 'OS::Heat::SoftwareConfig', 'properties': {
                'group': 'script', 'config': PROBES,
                'inputs': [{'name': n} for n in ('python', 'port',
                                                 'abstract', 'curl_cli',
                                                 'auth_url')],
                'outputs': [{'name': n} for n in ('tcp', 'unix', 'curl',
                                                  'signal', 'keystone')]}},
            'deployment': {
                'type': 'OS::Heat::SoftwareDeployment', 'properties': {
                    'config': {'get_resource': 'config'},
                    'server': {'get_resource': 'server'},
                    'input_values': {
                        'python': sys.executable, 'port': port,
                        'abstract': abstract, 'auth_url': auth_url,
                        'curl_cli': {'get_attr': ['handle', 'curl_cli']}}}},
        },
        'outputs': dict(
            {n: {'value': {'get_attr': ['deployment', n]}}
             for n in ('tcp', 'unix', 'curl', 'signal', 'keystone')},
            data={'value': {'get_attr': ['wait', 'data']}}),
    }


@pytest.mark.skipif(not shutil.which('curl'), reason='no curl here')
def test_a_servers_scripts_reach_converge_api_and_nothing_else_of_the_host(
        cli, tmp_path):
    """Each server has a network namespace of its own: a tenant's
    script finds nothing of what listens on the host's loopback (a
    database with trust authentication, a broker) nor its abstract unix
    sockets; converge-api, at the URL its wait condition's curl_cli
    names, it reaches, from a first boot and from a deployment; and the
    Keystone of [trustee] where one is configured (a POLL_SERVER_HEAT
    server's collector and heat-config-notify log in there)."""
    tcp = socket.socket()
    tcp.bind(('127.0.0.1', 0))
    tcp.listen(8)
    tcp.setblocking(False)
    abstract = 'converge-test-%d' % os.getpid()
    unix = socket.socket(socket.AF_UNIX)
    unix.bind('\0' + abstract)
    unix.listen(8)
    unix.setblocking(False)
    # a stand-in Keystone on the host's loopback: GET /13, 13 bytes
    keystone = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Answer)
    threading.Thread(target=keystone.serve_forever, daemon=True).start()
    auth_url = 'http://127.0.0.1:%d/13' % keystone.server_address[1]
    conf = tmp_path / 'converge.conf'
    conf.write_text('[sim]\nrun_user_data = true\n'
                    '[trustee]\nauth_url = %s\nusername = converge\n'
                    'password = secret\n' % auth_url)
    path = tmp_path / 'network.yaml'
    path.write_text(yaml.safe_dump(_network_template(
        tcp.getsockname()[1], abstract, auth_url)))
    try:
        cli.run('--config-file', str(conf), 'stack', 'create', 'net', '-t',
                str(path), '--wait', timeout=300)
        shown = cli.json('stack', 'output', 'show', 'net', '--all')
        assert shown['tcp'].startswith('ConnectionRefusedError'), shown
        assert shown['unix'].startswith('ConnectionRefusedError'), shown
        for sock in (tcp, unix):
            with pytest.raises(BlockingIOError):
                sock.accept()
    finally:
        tcp.close()
        unix.close()
        keystone.shutdown()
        keystone.server_close()
    assert shown['signal'] == 'signalled', shown
    assert json.loads(shown['data']) == {'boot': 'booted',
                                         'deployment': 'deployed'}, shown
    assert shown['keystone'].strip() == 'x' * 13, shown

