"""Image heat-agents of the simulated cloud: a server booted from it runs
Heat's own guest tooling (os-collect-config, os-refresh-config,
os-apply-config, heat-agents' heat-config and its hooks, from PyPI) in
a root of its own, configured from Heat's boot config user data as
cloud-init would (converge/agent/image.py, imageboot.py).

The user data here is Heat's format, built by the test (a cloud-config,
a boothook, a part handler, cfn-init-data naming os-collect-config's
`request` collector); the metadata it points at is served by the test,
reached from the server's own network namespace through its relay (the
address it is given for converge-api); the signals come back there."""

import http.server
import json
import os
import re
import signal
import threading
import time
from email.mime import multipart
from email.mime import text

import pytest

from converge import conf
from converge.agent import image
from converge.agent import rootfs
from converge.drivers import sim
from tests.test_agent_sim import home  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.skipif(
    not rootfs.available(), reason='no roots here (not root on Linux?)')]


# -- Heat's boot config, as Heat's server resource writes it for
# user_data_format SOFTWARE_CONFIG (heat/cloudinit, nova client plugin):
# the parts and their roles, written here for the test -------------------

CLOUD_CONFIG = '''#cloud-config
output: {all: '| tee -a /var/log/cloud-init-output.log'}
'''

BOOTHOOK = '''#!/bin/sh
# a boothook: runs early, as root, in the server
echo booted >> /var/lib/boothook.log
exit 0
'''

# cloud-init's custom part handler contract: the cfn-init-data part (and
# any text/x-cfninitdata) lands in /var/lib/heat-cfntools, where
# os-collect-config's heat_local collector reads it
PART_HANDLER = '''# part-handler
import os


def list_types():
    return ['text/x-cfninitdata']


def handle_part(data, ctype, filename, payload):
    if ctype == '__begin__':
        os.makedirs('/var/lib/heat-cfntools', 0o700, exist_ok=True)
        return
    if ctype == '__end__':
        return
    for folder in ('/var/lib/heat-cfntools', '/var/lib/cloud/data'):
        with open(os.path.join(folder, filename), 'w') as f:
            f.write(payload)
'''


USER_SCRIPT = '''#!/bin/sh
echo ran >> /var/lib/user-script.log
'''


def boot_config(metadata, user_parts=()):
    """Heat's boot config multipart for a server whose metadata (its
    os-collect-config section, its deployments) is `metadata`."""
    def part(content, filename, subtype):
        msg = text.MIMEText(content, _subtype=subtype)
        msg.add_header('Content-Disposition', 'attachment',
                       filename=filename)
        return msg
    parts = [part(CLOUD_CONFIG, 'cloud-config', 'cloud-config'),
             part(BOOTHOOK, 'boothook.sh', 'cloud-boothook'),
             part(PART_HANDLER, 'part-handler.py', 'part-handler')]
    parts += [part(c, f, s) for c, f, s in user_parts]
    parts.append(part(json.dumps(metadata), 'cfn-init-data',
                      'x-cfninitdata'))
    return multipart.MIMEMultipart(_subparts=parts).as_string()


class MetadataServer:
    """What the server polls (its metadata, at `url`/metadata: os-collect-
    config's request collector) and signals (`url`/signal/NAME: TEMP_URL
    signals are PUTs, CFN's POSTs), over real HTTP on the loopback."""

    def __init__(self):
        self.metadata = {}
        self.signals = []
        self.cond = threading.Condition()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, code, body=b''):
                self.send_response(code)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                if self.command != 'HEAD':
                    self.wfile.write(body)

            def do_HEAD(self):
                self.do_GET()

            def do_GET(self):
                if self.path != '/metadata':
                    return self._answer(404)
                with outer.cond:
                    body = json.dumps(outer.metadata).encode()
                self._answer(200, body)

            def _signal(self):
                length = int(self.headers.get('Content-Length') or 0)
                body = json.loads(self.rfile.read(length) or b'{}')
                with outer.cond:
                    outer.signals.append((self.command, self.path, body))
                    outer.cond.notify_all()
                self._answer(200, b'{}')

            do_PUT = do_POST = _signal

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                     Handler)
        self.url = 'http://127.0.0.1:%d' % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)
        self.thread.start()

    def publish(self, metadata):
        with self.cond:
            self.metadata = metadata

    def wait_signal(self, path, timeout):
        """The body of the first signal to `path`."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                found = [b for _m, p, b in self.signals if p == path]
                if found:
                    return found[0]
                left = deadline - time.monotonic()
                assert left > 0, 'no signal to %s; got %s' % (
                    path, self.signals)
                self.cond.wait(left)

    def count(self, path):
        with self.cond:
            return len([p for _m, p, _b in self.signals if p == path])

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def occ_section(url):
    """The os-collect-config section Heat writes for POLL_TEMP_URL: the
    server's default collector, `request` at the metadata's URL, `local`
    (and a short polling interval, as an operator may set)."""
    return {'collectors': ['ec2', 'request', 'local'],
            'request': {'metadata_url': url + '/metadata'},
            'polling_interval': 1}


def deployment(dep_id, name, config, url, inputs=(), outputs=(),
               group='script'):
    """A deployment as Heat writes it in a server's metadata."""
    derived = [{'name': k, 'value': v, 'type': 'String'}
               for k, v in inputs]
    derived += [
        {'name': 'deploy_server_id', 'value': 'server-id'},
        {'name': 'deploy_action', 'value': 'CREATE'},
        {'name': 'deploy_stack_id', 'value': 'stack/stack-id'},
        {'name': 'deploy_resource_name', 'value': name},
        {'name': 'deploy_signal_transport', 'value': 'TEMP_URL_SIGNAL'},
        {'name': 'deploy_signal_id', 'value': url + '/signal/' + dep_id},
        {'name': 'deploy_signal_verb', 'value': 'PUT'}]
    return {'id': dep_id, 'name': name, 'group': group,
            'config': config, 'options': {}, 'inputs': derived,
            'outputs': [{'name': o, 'type': 'String',
                         'error_output': False} for o in outputs]}


# a deployment script: leaves a line on the server's disk, an output,
# and tries what a tenant's script must not reach
FIRST = '''#!/bin/sh
echo "first $deploy_action" >> /var/lib/ran.log
printf hello > "$heat_outputs_path.result"
r=denied
for f in "$database" "$sim"; do cat "$f" > /dev/null 2>&1 && r=read; done
printf $r > "$heat_outputs_path.database"
if cat "$other" > /dev/null 2>&1; then r=read; else r=denied; fi
printf $r > "$heat_outputs_path.other"
'''

SECOND = '''#!/bin/sh
echo "second $deploy_action" >> /var/lib/ran.log
printf "after reboot" > "$heat_outputs_path.result"
'''


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, 'timed out waiting for ' + what
        time.sleep(0.1)


@pytest.fixture
def tree():
    """The image, built once per machine (minutes the first time: PyPI)
    in the default cache the agent host uses too."""
    return image.ensure(uid=rootfs.DEFAULT_UID)


@pytest.fixture
def served():
    server = MetadataServer()
    conf.CONF.set_override('public_endpoint', server.url, group='api')
    yield server
    conf.CONF.clear_override('public_endpoint', group='api')
    server.close()


@pytest.mark.long
def test_a_heat_agents_server_runs_heats_tooling_once_per_deployment(
        tree, home, served, tmp_path, monkeypatch):
    # os-collect-config, killed, starts again at once (not after systemd's
    # 10 s): the agent host started below reads it
    monkeypatch.setenv('CONVERGE_SIM_RESTART_SEC', '0.2')
    cloud = sim.SimCompute('sqlite:///%s' % (home / 'sim.db'),
                           disks_dir=str(home / 'sim-disks'))
    # what the script must not read: the sim's and the engine's
    # database, another server's disk
    database = home / 'converge.db'
    database.write_text('secret')
    other = home / 'sim-disks' / 'another-server' / 'private'
    other.parent.mkdir(parents=True)
    other.write_text('secret')
    url = served.url
    served.publish({'os-collect-config': occ_section(url),
                    'deployments': [deployment(
                        'dep-1', 'first', FIRST, url,
                        inputs=[('database', str(database)),
                                ('sim', str(home / 'sim.db')),
                                ('other', str(other))],
                        outputs=['result', 'database', 'other']),
                        deployment('dep-apply', 'applied', {'x': 1}, url,
                                   group='apply-config')]})
    # the template's own user_data (a SOFTWARE_CONFIG server's) is a
    # part of Heat's boot config too: cloud-init runs its script once
    user_data = boot_config(
        {'os-collect-config': occ_section(url), 'deployments': []},
        [(USER_SCRIPT, 'user-script', 'x-shellscript')])
    server = cloud.create_server('vm', 'heat-agents', 'm1.tiny',
                                 user_data=user_data)
    disk = home / 'sim-disks' / server['id']

    signalled = served.wait_signal('/signal/dep-1', 180)
    assert signalled['deploy_status_code'] == 0, signalled
    assert signalled['result'] == 'hello'
    assert signalled['database'] == 'denied'
    assert database.exists() and (home / 'sim.db').exists()
    assert signalled['other'] == 'denied'
    # heat-agents' apply-config hook: os-apply-config, run and signalled
    applied = served.wait_signal('/signal/dep-apply', 60)
    assert applied['deploy_status_code'] == 0, applied
    assert 'success' in applied['deploy_stderr'], applied
    layer = disk / 'rootfs' / 'var' / 'lib'
    # heat-config's own record, and the script's line on the disk
    assert (layer / 'heat-config' / 'deployed' / 'dep-1.json').exists()
    notified = json.loads((layer / 'heat-config' / 'deployed' /
                           'dep-1.notify.json').read_text())
    assert notified['result'] == 'hello'
    assert (layer / 'ran.log').read_text() == 'first CREATE\n'
    # Heat's boot config was run as cloud-init runs it: the part handler
    # wrote cfn-init-data, the boothook ran, os-collect-config was
    # configured from the metadata by os-apply-config
    assert json.loads((layer / 'heat-cfntools' / 'cfn-init-data')
                      .read_text())['os-collect-config']['request']
    assert (layer / 'boothook.log').read_text() == 'booted\n'
    assert (layer / 'user-script.log').read_text() == 'ran\n'
    occ_conf = (disk / 'rootfs' / 'etc' / 'os-collect-config.conf')
    assert 'metadata_url = %s/metadata' % url in occ_conf.read_text()
    record = json.loads((disk / 'firstboot.json').read_text())
    assert record['boots'] == 1
    assert {(p['state'], p['exit_code']) for p in record['parts']} == {
        ('done', 0)}, record

    # a reboot: os-collect-config starts again, with the configuration
    # it was given; a deployment added then runs, the first does not
    cloud.reboot_server(server['id'])
    wait_until(lambda: json.loads((disk / 'firstboot.json').read_text())
               ['boots'] == 2, 60, 'the reboot')
    metadata = dict(served.metadata)
    metadata['deployments'] = metadata['deployments'] + [deployment(
        'dep-2', 'second', SECOND, url, outputs=['result'])]
    served.publish(metadata)
    again = served.wait_signal('/signal/dep-2', 120)
    assert again['result'] == 'after reboot', again
    assert (layer / 'ran.log').read_text() == (
        'first CREATE\nsecond CREATE\n')
    assert served.count('/signal/dep-1') == 1
    # the first boot's parts ran once
    assert (layer / 'boothook.log').read_text() == 'booted\n'
    assert (layer / 'user-script.log').read_text() == 'ran\n'
    assert 'Skipping config dep-1, already deployed' in (
        disk / 'var' / 'log' / 'os-collect-config.log').read_text()

    # os-collect-config killed (a crash): its service starts it again; a
    # deployment added then runs, none before it again
    log = home / 'sim-disks' / 'agent-host.log'
    started = log.read_text().count('os-collect-config started')
    pid = int(re.findall(r'os-collect-config started \(pid (\d+)\)',
                         log.read_text())[-1])
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: log.read_text().count('os-collect-config started')
               > started, 60, 'os-collect-config to start again')
    metadata = dict(served.metadata)
    metadata['deployments'] = metadata['deployments'] + [deployment(
        'dep-3', 'third', SECOND.replace('second', 'third'), url,
        outputs=['result'])]
    served.publish(metadata)
    served.wait_signal('/signal/dep-3', 120)
    assert (layer / 'ran.log').read_text() == (
        'first CREATE\nsecond CREATE\nthird CREATE\n')
    assert [served.count('/signal/%s' % d) for d in (
        'dep-1', 'dep-apply', 'dep-2', 'dep-3')] == [1, 1, 1, 1]


def test_an_images_layers_show_its_tree_and_keep_what_the_server_writes(
        tmp_path):
    """rootfs's overlay layers (what an image is in a server's root): the
    image's files where the server looks for them, read-only /usr, the
    server's changes to /etc and /var on its disk, kept from one root
    (boot) to the next; the image's own tree untouched."""
    uid = rootfs.DEFAULT_UID
    tree = tmp_path / 'tree'
    (tree / 'usr' / 'libexec' / 'thing').mkdir(parents=True)
    (tree / 'usr' / 'libexec' / 'thing' / 'run').write_text('image\n')
    (tree / 'etc').mkdir()
    (tree / 'etc' / 'thing.conf').write_text('first\n')
    (tree / 'var' / 'lib' / 'thing').mkdir(parents=True)
    image._chown_tree(str(tree), uid)
    disk = tmp_path / 'disk'
    disk.mkdir()
    image.prepare(str(disk), uid)
    layers = image.layers(str(tree), str(disk))
    script = ('cat /usr/libexec/thing/run; cat /etc/thing.conf; '
              'echo second > /etc/thing.conf; '
              'mkdir -p /var/lib/thing/state; echo kept >> '
              '/var/lib/thing/state/log; '
              'touch /usr/libexec/thing/x 2>/dev/null && echo usr-writable;'
              ' test -e /bin/sh && echo host-usr')
    import subprocess
    for boot in (1, 2):
        root = rootfs.Root(str(disk), rootfs.binds(str(disk)), uid=uid,
                           endpoints=[], layers=layers)
        try:
            done = subprocess.run(root.argv('/') + ['/bin/sh', '-c', script],
                                  capture_output=True, timeout=60)
        finally:
            root.close()
        out = done.stdout.decode()
        assert done.returncode == 0, done.stderr
        assert out.splitlines()[0] == 'image'
        assert out.splitlines()[1] == ('first' if boot == 1 else 'second')
        assert 'usr-writable' not in out
        assert 'host-usr' in out
    assert (tree / 'etc' / 'thing.conf').read_text() == 'first\n'
    assert (disk / 'rootfs' / 'etc' / 'thing.conf').read_text() == \
        'second\n'
    assert (disk / 'rootfs' / 'var' / 'lib' / 'thing' / 'state' /
            'log').read_text() == 'kept\nkept\n'


def test_the_image_runs_nothing_where_servers_cannot_be_confined(tmp_path):
    """Heat's tooling writes /etc and /var: it runs only in a root of the
    server's own. With confinement off its boot is refused, saying why
    (firstboot.json's image_error), before anything is built or run."""
    from converge.agent import firstboot
    from converge.agent import imageboot
    saved = dict(rootfs._STATE)
    rootfs.enable(confine=False)
    try:
        heat_agents = imageboot.HeatAgents(images_dir=str(tmp_path / 'x'))
        disk = tmp_path / 'disk'
        disk.mkdir()
        boot = firstboot.Boot(str(disk), [], {'id': 'vm'},
                              image=heat_agents)
        boot._thread.join(30)
        record = json.loads((disk / 'firstboot.json').read_text())
    finally:
        rootfs._STATE.clear()
        rootfs._STATE.update(saved)
    assert 'runs only in a root of its own' in record['image_error']
    assert boot.agent is None
    assert not (tmp_path / 'x').exists()   # nothing built
