"""A real OpenStack on this machine for the `realcloud` tests:
`tools/devcloud up` (Keystone, Nova with a fake virt driver, Neutron,
Cinder, Glance, Placement from PyPI), brought up once per test session
and left running (`tools/devcloud down` stops it).

Where MariaDB or RabbitMQ is missing the tests skip, naming it; with
CI=true they fail, because CI must run them for real."""

import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from tests import conftest
from tests import distributed

DEVCLOUD = os.path.join(conftest.REPO, 'tools', 'devcloud')
#: a cold `up` installs the services from PyPI first
UP_TIMEOUT = 1500

_ENV = {}


def _ci():
    return os.environ.get('CI') == 'true'


def up():
    """`tools/devcloud up` once per process; the `export` lines of
    `tools/devcloud env` as a dict."""
    if _ENV:
        return dict(_ENV)
    distributed.require('mariadb')
    if shutil.which('rabbitmq-server') is None:
        msg = 'needs rabbitmq-server (its binaries run the devcloud broker)'
        if _ci():
            pytest.fail('CI=true: ' + msg)
        pytest.skip(msg)
    proc = subprocess.run([sys.executable, DEVCLOUD, 'up'],
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
