"""Run Heat's functional tests and record each one's outcome (run by
tools/heat-functional with the Python of .heat-functional/venv).

    run.py CLOUDS.yaml CONF_DIR OUT.json [PATTERN]

The tests' configuration (tempest.conf's [heat_plugin]) is written to
CONF_DIR from the devcloud's clouds.yaml: alice as the user, admin as the
admin, the devcloud's cirros image, m1 flavors and public network.

Each test module runs in a worker process of its own pool (the tests of
a module share a class and its fixtures); a test's outcome is passed,
failed (an assertion or an error, with the last line of its traceback),
or skipped (with the reason the test gave).
"""

import json
import multiprocessing
import os
import pkgutil
import re
import sys
import time
import traceback
import unittest

SUITES = ('heat_integrationtests.functional',
          'heat_tempest_plugin.tests.functional')


class Recorder(unittest.TestResult):
    """Each test's outcome, as a row."""

    def __init__(self):
        super().__init__()
        self.rows = []
        self._started = {}

    def startTest(self, test):
        super().startTest(test)
        self._started[test.id()] = time.monotonic()

    def _row(self, test, outcome, detail=''):
        began = self._started.get(test.id(), time.monotonic())
        self.rows.append({'id': test.id(), 'outcome': outcome,
                          'detail': detail,
                          'seconds': round(time.monotonic() - began, 1)})

    def addSuccess(self, test):
        self._row(test, 'passed')

    def addFailure(self, test, err):
        self._row(test, 'failed', _last_line(err))

    addError = addFailure

    def addSkip(self, test, reason):
        self._row(test, 'skipped', str(reason))

    def addExpectedFailure(self, test, err):
        self._row(test, 'passed', 'expected failure')

    def addUnexpectedSuccess(self, test):
        self._row(test, 'failed', 'unexpected success')


def _last_line(err):
    lines = ''.join(traceback.format_exception(*err)).strip().splitlines()
    # the exception's own line(s): what a reader needs to see why
    tail = [ln for ln in lines if ln and not ln.startswith(' ')][-1:]
    return (tail[0] if tail else 'error')[:400]


def modules(pattern=None):
    found = []
    for suite in SUITES:
        try:
            package = __import__(suite, fromlist=['x'])
        except ImportError:
            continue
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith('test_'):
                name = '%s.%s' % (suite, info.name)
                if pattern is None or re.search(pattern, name):
                    found.append(name)
    return sorted(found)


def legacy_rabbit_options():
    """test_notifications finds the broker in [oslo_messaging_rabbit]
    rabbit_host, rabbit_port, rabbit_userid and rabbit_password, which
    oslo.messaging no longer has (NoSuchOptError): registered here, as
    the older oslo.messaging Heat's tests were written for had them, with
    the broker converge-api publishes to (HEAT_FUNCTIONAL_BROKER)."""
    url = os.environ.get('HEAT_FUNCTIONAL_BROKER')
    if not url:
        return
    from urllib.parse import urlsplit
    from oslo_config import cfg
    parts = urlsplit(url)
    cfg.CONF.register_opts([
        cfg.StrOpt('rabbit_host', default=parts.hostname),
        cfg.PortOpt('rabbit_port', default=parts.port or 5672),
        cfg.StrOpt('rabbit_userid', default=parts.username),
        cfg.StrOpt('rabbit_password', default=parts.password, secret=True),
    ], group='oslo_messaging_rabbit')


def run_module(name):
    legacy_rabbit_options()
    recorder = Recorder()
    try:
        suite = unittest.defaultTestLoader.loadTestsFromName(name)
        suite.run(recorder)
    except Exception:
        recorder.rows.append({'id': name, 'outcome': 'failed',
                              'detail': _last_line(sys.exc_info()),
                              'seconds': 0})
    return recorder.rows


def configure(clouds_yaml, conf_dir):
    import yaml
    with open(clouds_yaml) as f:
        clouds = yaml.safe_load(f)['clouds']
    user, admin = clouds['devcloud-alice'], clouds['devcloud-admin']
    auth = user['auth']
    lines = [
        '[DEFAULT]', 'log_file = %s' % os.path.join(conf_dir, 'tests.log'),
        '[identity]', 'uri_v3 = %s/v3' % auth['auth_url'].rstrip('/'),
        'auth_version = v3', 'region = %s' % user['region_name'],
        '[heat_plugin]',
        'auth_url = %s' % auth['auth_url'], 'auth_version = 3',
        'username = %s' % auth['username'],
        'password = %s' % auth['password'],
        'project_name = %s' % auth['project_name'],
        'admin_username = %s' % admin['auth']['username'],
        'admin_password = %s' % admin['auth']['password'],
        'admin_project_name = %s' % admin['auth']['project_name'],
        'user_domain_name = Default', 'project_domain_name = Default',
        'region = %s' % user['region_name'],
        'endpoint_type = public',
        'image_ref = cirros', 'minimal_image_ref = cirros',
        'instance_type = m1.small', 'minimal_instance_type = m1.tiny',
        'fixed_network_name = public', 'floating_network_name = public',
        'network_for_ssh = public', 'fixed_subnet_name = public-subnet',
        # the tests poll a stack's status: once a second, not every 4 s
        'build_interval = 1', 'build_timeout = 300',
        'convergence_engine_enabled = true',
        'skip_scenario_tests = true',
        # the devcloud's converge-api hides stacks with this tag
        'hidden_stack_tag = data-processing-cluster',
    ]
    os.makedirs(conf_dir, exist_ok=True)
    with open(os.path.join(conf_dir, 'tempest.conf'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    os.environ['TEMPEST_CONFIG_DIR'] = conf_dir
    os.environ['TEMPEST_CONFIG'] = 'tempest.conf'
    os.environ.setdefault('OS_TEST_TIMEOUT', '600')


def main():
    clouds_yaml, conf_dir, out = sys.argv[1:4]
    pattern = sys.argv[4] if len(sys.argv) > 4 else None
    configure(clouds_yaml, conf_dir)
    names = modules(pattern)
    workers = int(os.environ.get('HEAT_FUNCTIONAL_WORKERS', '4'))
    rows = []
    with multiprocessing.Pool(workers, maxtasksperchild=1) as pool:
        for done in pool.imap_unordered(run_module, names):
            rows.extend(done)
            print('%d tests: %d passed, %d failed, %d skipped' % (
                len(rows), *(sum(r['outcome'] == k for r in rows)
                             for k in ('passed', 'failed', 'skipped'))),
                flush=True)
    with open(out, 'w') as f:
        json.dump(sorted(rows, key=lambda r: r['id']), f, indent=1)


if __name__ == '__main__':
    main()
