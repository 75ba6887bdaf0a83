"""A real OpenStack on this machine for the `realcloud` tests:
`tools/devcloud up` (Keystone, Nova with a fake virt driver, Neutron,
Cinder, Glance, Placement from PyPI), brought up once per test session
and left running (`tools/devcloud down` stops it).

Where MariaDB or RabbitMQ is missing the tests skip, naming it; with
CI=true they fail, because CI must run them for real."""

import configparser
import contextlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
import uuid

import pytest

from tests import conftest
from tests import distributed

DEVCLOUD = os.path.join(conftest.REPO, 'tools', 'devcloud')
#: a cold `up` installs the services from PyPI first
UP_TIMEOUT = 1500

_ENV = {}


def _ci():
    return os.environ.get('CI') == 'true'


def up(*flags):
    """`tools/devcloud up` (with `flags`) once per process; the `export`
    lines of `tools/devcloud env` as a dict."""
    if _ENV:
        return dict(_ENV)
    distributed.require('mariadb')
    if shutil.which('rabbitmq-server') is None:
        msg = 'needs rabbitmq-server (its binaries run the devcloud broker)'
        if _ci():
            pytest.fail('CI=true: ' + msg)
        pytest.skip(msg)
    flags = list(flags) + [f for f in kept_extras() if f not in flags]
    proc = subprocess.run([sys.executable, DEVCLOUD, 'up'] + flags,
                          capture_output=True, text=True,
                          timeout=UP_TIMEOUT, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        pytest.fail('tools/devcloud up failed (%d):\n%s\n%s' % (
            proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
    out = subprocess.run([sys.executable, DEVCLOUD, 'env'],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith('export '):
            continue
        name, _, value = line[len('export '):].partition('=')
        _ENV[name] = shlex.split(value)[0] if value else ''
    return dict(_ENV)


def kept_extras(home=os.path.join(conftest.REPO, '.devcloud')):
    """The `--with-...` flags of the extras the devcloud in `home` was
    last brought up with: `up` stops an extra it is not given, and a test
    asking for converge must not stop the Heat a person (or .ci/run)
    started beside it."""
    try:
        with open(os.path.join(home, 'state', 'settings.json')) as f:
            extras = json.load(f).get('extras') or []
    except (OSError, ValueError):
        return []
    return ['--with-' + name for name in sorted(extras)]


class CloudCLI(conftest.CLI):
    """`converge` in a subprocess, with the devcloud's clouds.yaml."""

    def __init__(self, home, env):
        super().__init__(home)
        self._extra = env

    def env(self):
        env = super().env()
        env.pop('OS_CLOUD', None)
        env.update(self._extra)
        return env


def connect(env, cloud):
    """openstacksdk on the devcloud, as `cloud` (devcloud-alice, ...)."""
    import openstack
    old = os.environ.get('OS_CLIENT_CONFIG_FILE')
    os.environ['OS_CLIENT_CONFIG_FILE'] = env['OS_CLIENT_CONFIG_FILE']
    try:
        return openstack.connect(cloud=cloud)
    finally:
        if old is None:
            os.environ.pop('OS_CLIENT_CONFIG_FILE', None)
        else:
            os.environ['OS_CLIENT_CONFIG_FILE'] = old


def wait_for(predicate, timeout=180, interval=0.1):
    """Until `predicate()` is true (a look at a real service each
    `interval`: the condition is what is waited for, not the time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError('condition not met in %ss' % timeout)


def running(argv):
    """Whether a process with exactly this command line runs on the
    machine (a devcloud guest's processes are the host's, in namespaces
    of their own)."""
    want = ('\0'.join(argv) + '\0').encode()
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                if f.read() == want:
                    return True
        except OSError:
            continue
    return False


def purge(conn):
    """Leave the project of `conn` as tools/devcloud made it: what an
    earlier run that died left behind would otherwise be counted as this
    run's (servers, floating IPs, routers with their interfaces, trunks,
    ports, networks, volumes, key pairs, security groups, server
    groups)."""
    project = conn.current_project_id
    for server in list(conn.compute.servers()):
        conn.compute.delete_server(server, ignore_missing=True)
    for fip in list(conn.network.ips(project_id=project)):
        conn.network.delete_ip(fip, ignore_missing=True)
    for router in list(conn.network.routers(project_id=project)):
        for port in conn.network.ports(device_id=router.id):
            if port.device_owner.startswith('network:router_interface'):
                conn.network.remove_interface_from_router(
                    router, port_id=port.id)
        conn.network.delete_router(router, ignore_missing=True)
    wait_for(lambda: not list(conn.compute.servers()), timeout=300,
             interval=0.5)
    # a trunk keeps its ports (Neutron refuses their delete)
    if conn.network.find_extension('trunk'):
        for trunk in list(conn.network.trunks(project_id=project)):
            conn.network.delete_trunk(trunk, ignore_missing=True)
    for port in list(conn.network.ports(project_id=project)):
        if not port.device_owner.startswith('network:'):
            conn.network.delete_port(port, ignore_missing=True)
    for net in list(conn.network.networks(project_id=project)):
        if not net.is_router_external:
            conn.network.delete_network(net, ignore_missing=True)
    for volume in list(conn.block_storage.volumes()):
        conn.block_storage.delete_volume(volume, ignore_missing=True)
    for pair in list(conn.compute.keypairs()):
        conn.compute.delete_keypair(pair, ignore_missing=True)
    for group in list(conn.network.security_groups(project_id=project)):
        if group.name != 'default':
            conn.network.delete_security_group(group, ignore_missing=True)
    for group in list(conn.compute.server_groups()):
        conn.compute.delete_server_group(group, ignore_missing=True)
    wait_for(lambda: not list(conn.block_storage.volumes()), timeout=300,
             interval=0.5)


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def home_in_catalog(env, path, cloud='devcloud-alice'):
    """A converge.conf at `path` for an embedded home (its cloud the
    simulator, its stacks in `cloud`'s project) whose converge-api the
    devcloud's Keystone names: a region of its own whose `orchestration`
    endpoint is the home's converge-api (at a port fixed here), and
    [cloud] region_name naming it. A POLL_SERVER_HEAT server's `heat`
    collector and heat-config-notify find Heat's API in the catalog by
    that region, so they reach this home, not the devcloud's own
    converge-api. Tokens are checked and servers' users made as the
    devcloud's converge does ([keystone_authtoken], [trustee]). The
    region, its service and endpoint go on exit; the clouds of
    clouds.yaml name RegionOne and never see them."""
    # its [DEFAULT] (the devcloud's home) kept out of the sections read
    devcloud = configparser.ConfigParser(interpolation=None,
                                         default_section='no default')
    devcloud.read(os.path.join(env['DEVCLOUD_HOME'], 'etc', 'converge',
                               'converge.conf'))
    ident = connect(env, 'devcloud-admin').identity
    project = connect(env, cloud).current_project_id
    port = free_port()
    region = 'converge-home-%s' % uuid.uuid4().hex[:8]
    ident.create_region(id=region, description='an embedded converge '
                        'home of a test')
    service = ident.create_service(name=region, type='orchestration',
                                   is_enabled=True)
    try:
        ident.create_endpoint(
            service_id=service.id, interface='public', region_id=region,
            url='http://127.0.0.1:%d/v1/%%(project_id)s' % port)
        conf = configparser.ConfigParser(interpolation=None)
        conf['DEFAULT'] = {'project_id': project}
        conf['api'] = {'auth_strategy': 'keystone', 'bind_port': str(port)}
        for section in ('keystone_authtoken', 'trustee'):
            conf[section] = dict(devcloud[section])
        conf['cloud'] = {'region_name': region}
        with open(path, 'w') as f:
            conf.write(f)
        yield {'path': str(path), 'region': region, 'project_id': project,
               'port': port}
    finally:
        for endpoint in list(ident.endpoints(service_id=service.id)):
            ident.delete_endpoint(endpoint, ignore_missing=True)
        ident.delete_service(service, ignore_missing=True)
        ident.delete_region(region, ignore_missing=True)
