"""The devcloud's guests service (tools/devcloud.d/guests.py) against a
stand-in for Keystone and Nova's API: which servers it boots, once, and
when again (a rebuild), and what it stops. The real cloud:
tests/test_devcloud_guests.py."""

import base64
import contextlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse

import pytest

from tests import conftest
from tests import realcloud
from tests.test_devcloud_heat import devcloud  # noqa: F401 (a fixture)
from tests.test_devcloud_heat import settings

GUESTS = os.path.join(conftest.REPO, 'tools', 'devcloud.d', 'guests.py')

#: a guest's root is made by root (rootfs); its script uses curl
confined = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which('curl'),
    reason='guests are confined (rootfs): root and curl needed')


class FakeCloud(http.server.ThreadingHTTPServer):
    """Keystone's token call and Nova's server list and instance actions,
    from `servers` ({id: server}) and `rebuilds` ({id: [request ids]});
    `pings` counts what a guest's curl of /ping brought."""

    daemon_threads = True

    def __init__(self):
        super().__init__(('127.0.0.1', 0), Handler)
        self.servers, self.rebuilds, self.pings = {}, {}, []
        self.lock = threading.Lock()
        self.url = 'http://127.0.0.1:%d' % self.server_address[1]

    def add(self, server_id, user_data, **kw):
        server = {'id': server_id, 'name': server_id, 'status': 'ACTIVE',
                  'OS-EXT-SRV-ATTR:host': 'devcloud-compute1',
                  'OS-SRV-USG:launched_at': '2026-01-01T00:00:00.000000',
                  'OS-EXT-SRV-ATTR:user_data': base64.b64encode(
                      user_data.encode()).decode(),
                  'image': {'id': 'cirros'}, 'key_name': None}
        server.update(kw)
        with self.lock:
            self.servers[server_id] = server


class Handler(http.server.BaseHTTPRequestHandler):

    def log_message(self, *args):
        pass

    def _answer(self, code, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        self.rfile.read(int(self.headers.get('Content-Length') or 0))
        self._answer(201, {'token': {'catalog': [{
            'type': 'compute', 'endpoints': [{
                'interface': 'public',
                'url': self.server.url + '/compute'}]}]}},
            [('X-Subject-Token', 'tok')])

    def do_GET(self):
        cloud = self.server
        path = urllib.parse.urlsplit(self.path)
        if path.path == '/ping':
            with cloud.lock:
                cloud.pings.append(self.path)
            return self._answer(200, {'pong': True})
        assert self.headers['X-Auth-Token'] == 'tok'
        assert self.headers['X-OpenStack-Nova-API-Version'] == '2.3'
        parts = path.path.split('/')
        with cloud.lock:
            if path.path == '/compute/servers/detail':
                query = urllib.parse.parse_qs(path.query)
                servers = [s for s in cloud.servers.values()
                           if s['status'] != 'DELETED' or
                           'changes-since' in query]
                if 'marker' in query:
                    servers = []
                return self._answer(200, {'servers': servers})
            if parts[-1] == 'os-instance-actions':
                return self._answer(200, {'instanceActions': [
                    {'action': 'rebuild', 'request_id': r}
                    for r in cloud.rebuilds.get(parts[-2], ())]})
        self._answer(404, {})


@pytest.fixture
def cloud():
    server = FakeCloud()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


class Service:
    """guests.py run as tools/devcloud runs it, on a home of its own."""

    def __init__(self, home, cloud):
        self.home, self.cloud, self.proc = home, cloud, None
        os.makedirs(os.path.join(home, 'state'), exist_ok=True)
        with open(os.path.join(home, 'state', 'secrets.json'), 'w') as f:
            json.dump({'admin': 'secret'}, f)

    def start(self):
        self.log = open(os.path.join(self.home, 'guests.log'), 'ab')
        self.proc = subprocess.Popen(
            [sys.executable, GUESTS, '--home', self.home,
             '--auth-url', self.cloud.url + '/v3',
             '--compute-host', 'devcloud-compute1',
             '--endpoint', self.cloud.url, '--interval', '0.1'],
            stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        self.log.close()

    def console(self, server_id):
        try:
            with open(os.path.join(self.home, 'log', 'guests',
                                   server_id + '.log')) as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def booted(self, server_id, text, count=1):
        """Until `text` is on the server's console `count` times."""
        return realcloud.wait_for(
            lambda: self.console(server_id).count(text) >= count and
            self.console(server_id), timeout=120)


@pytest.fixture
def service(tmp_path, cloud):
    svc = Service(str(tmp_path / 'devcloud'), cloud)
    svc.start()
    yield svc
    svc.stop()


SCRIPT = '''#!/bin/sh
echo "ran-as-$(id -u)"
curl -s "%s/ping" > /dev/null && echo reached-the-cloud
'''


@confined
def test_user_data_runs_once_across_restarts_and_again_on_rebuild(
        cloud, service):
    """A server's script runs once, as root of its own root, reaching the
    endpoint it was given; a restart of the service does not run it again;
    a launch that is not a rebuild (a resize) neither; a rebuild does;
    a server of another host, or being built, is left alone."""
    cloud.add('a', SCRIPT % cloud.url)
    cloud.add('elsewhere', SCRIPT % cloud.url,
              **{'OS-EXT-SRV-ATTR:host': 'another-host'})
    cloud.add('building', SCRIPT % cloud.url, status='BUILD')
    console = service.booted('a', 'exited 0')
    assert 'ran-as-0' in console and 'reached-the-cloud' in console, console
    assert len(cloud.pings) == 1

    service.stop()
    service.start()
    # seen after "a" in the same look, or a later one
    cloud.add('b', '#!/bin/sh\necho b-ran\n')
    service.booted('b', 'b-ran')
    assert service.console('a').count('ran-as-0') == 1

    # a resize moves launched_at, no rebuild: the same disk, not run again
    cloud.servers['a']['OS-SRV-USG:launched_at'] = '2026-01-02T00:00:00Z'
    cloud.add('c', '#!/bin/sh\necho c-ran\n')
    service.booted('c', 'c-ran')
    assert service.console('a').count('ran-as-0') == 1

    cloud.rebuilds['a'] = ['req-rebuild-1']
    cloud.servers['a']['OS-SRV-USG:launched_at'] = '2026-01-03T00:00:00Z'
    console = service.booted('a', 'ran-as-0', count=2)
    assert 'server rebuilt' in console, console
    assert service.console('elsewhere') == ''
    assert service.console('building') == ''


@confined
def test_a_stopped_or_deleted_server_stops_its_guest(cloud, service):
    """What the user data left running dies when the server stops; started
    again, it does not run its user data again; deleted, its disk goes."""
    mark = '%d' % (os.getpid() * 7 + 1000003)
    cloud.add('d', '#!/bin/sh\necho d-ran\nsleep %s > /dev/null 2>&1 &\n'
              % mark)
    service.booted('d', 'd-ran')
    realcloud.wait_for(lambda: realcloud.running(['sleep', mark]), timeout=60)
    cloud.servers['d']['status'] = 'SHUTOFF'
    realcloud.wait_for(lambda: not realcloud.running(['sleep', mark]),
                       timeout=60)
    service.booted('d', 'is SHUTOFF')
    cloud.servers['d']['status'] = 'ACTIVE'
    console = service.booted('d', 'boot 2')
    assert console.count('d-ran') == 1, console
    cloud.servers['d']['status'] = 'DELETED'
    service.booted('d', 'server deleted')
    assert not os.path.exists(os.path.join(service.home, 'state', 'guests',
                                           'd'))



def test_devcloud_runs_the_guests_service_unless_told_not_to(
        devcloud, monkeypatch):
    """`up` brings the guests row (and converge's .venv it runs on) by
    default, `--without-guests` leaves it out; the row reaches every API
    of the devcloud and watches every fake compute."""
    seen = []
    monkeypatch.setattr(devcloud, 'up', lambda args: seen.append(
        sorted(args.extras)) or 0)
    made = []
    monkeypatch.setattr(devcloud, 'ensure_converge',
                        lambda: made.append(True))
    monkeypatch.setattr(devcloud, 'locked', contextlib.nullcontext)
    assert devcloud.main(['up']) == 0
    assert devcloud.main(['up', '--with-guests', '--with-heat']) == 0
    assert devcloud.main(['up', '--without-guests']) == 0
    assert seen == [['guests'], ['guests', 'heat'], []]
    assert len(made) == 2
    assert 'guests' not in devcloud.Context(settings(devcloud)).by_name

    s = settings(devcloud, 'guests')
    s.computes = 2
    ctx = devcloud.Context(s)
    argv = ctx.by_name['guests'].argv(ctx)
    assert argv[:2] == [str(devcloud.converge_python()), GUESTS]
    pairs = list(zip(argv[2::2], argv[3::2]))
    assert [v for k, v in pairs if k == '--compute-host'] == [
        'devcloud-compute1', 'devcloud-compute2']
    assert [v for k, v in pairs if k == '--endpoint'] == [
        'http://127.0.0.1:%d' % (17000 + n) for n in range(8)]


@confined
def test_a_script_cut_off_by_a_restart_is_not_run_again(cloud, service):
    """The service dies while a server's script runs (its root dies with
    it, a power cut): started again, it records the script interrupted
    and does not run it a second time."""
    mark = '%d' % (os.getpid() * 7 + 2000003)
    cloud.add('e', '#!/bin/sh\necho e-started\nsleep %s\necho e-ended\n'
              % mark)
    realcloud.wait_for(lambda: realcloud.running(['sleep', mark]),
                       timeout=60)
    service.proc.kill()
    service.proc.wait()
    realcloud.wait_for(lambda: not realcloud.running(['sleep', mark]),
                       timeout=60)
    service.log.close()
    service.start()
    console = service.booted('e', 'interrupted')
    assert console.count('running part-000') == 1, console
    assert 'e-ended' not in console
    assert not realcloud.running(['sleep', mark])


def _heat_cfntools_user_data(script, metadata):
    """A HEAT_CFNTOOLS server's user data as Heat's nova plug-in makes it
    (converge/transports/bootconfig.py: cloud-config, boothook, the part
    handler writing each text/x-cfninitdata part to /var/lib/heat-cfntools,
    then the server's parts and cfn-init-data): the user's script as the
    cfn-userdata part, run by a loguserdata script."""
    from email.mime import multipart, text

    from converge.transports import bootconfig

    def part(content, filename, subtype):
        msg = text.MIMEText(content, subtype)
        msg.add_header('Content-Disposition', 'attachment',
                       filename=filename)
        return msg
    loguserdata = ('#!/bin/sh\n'
                   'chmod 700 /var/lib/heat-cfntools/cfn-userdata\n'
                   '/var/lib/heat-cfntools/cfn-userdata '
                   '>> /var/log/heat-provision.log 2>&1\n'
                   'code=$?\ncat /var/log/heat-provision.log\nexit $code\n')
    own = multipart.MIMEMultipart(_subparts=[
        part(loguserdata, 'loguserdata.py', 'x-shellscript'),
        part(script, 'cfn-userdata', 'x-cfninitdata')]).as_string()
    return bootconfig.build(own, metadata)


@confined
def test_heat_cfntools_boot_config_runs_its_part_handler(cloud, service):
    """Heat's boot config runs as on a VM with cloud-init: the boothook,
    the part handler writing cfn-userdata and cfn-init-data to
    /var/lib/heat-cfntools, the script running cfn-userdata (which reads
    the metadata and reaches the cloud)."""
    mark = 'meta-%d' % os.getpid()
    cloud.add('f', _heat_cfntools_user_data(
        '#!/bin/sh\necho cfn-userdata-ran\n'
        'cat /var/lib/heat-cfntools/cfn-init-data; echo\n'
        'curl -s "%s/ping" > /dev/null && echo reached-the-cloud\n'
        % cloud.url, {'mark': mark}))
    console = service.booted('f', 'boot 1: user data')
    for kind in ('text/cloud-config', 'text/cloud-boothook',
                 'text/part-handler', 'text/x-shellscript'):
        assert '%s done (exit 0)' % kind in console, console
    assert 'cfn-userdata-ran' in console, console
    assert '"mark": "%s"' % mark in console, console
    assert 'reached-the-cloud' in console and len(cloud.pings) == 1
