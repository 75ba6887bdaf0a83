"""Heat beside converge on the devcloud, without a cloud: what
`tools/devcloud up --with-heat` writes (Heat's configuration, the catalog
it asks Keystone for, the *-heat clouds), and converge-bench's --heat
error when no Heat answers.  Bringing Heat up is left to a person
(docs/devcloud.md): it takes minutes and half a gigabyte."""

import configparser
import importlib.machinery
import importlib.util
import os
import socket
import subprocess
import sys

import pytest
import yaml

from tests import conftest

DEVCLOUD = os.path.join(conftest.REPO, 'tools', 'devcloud')


@pytest.fixture
def devcloud(tmp_path, monkeypatch):
    """tools/devcloud as a module, its files under tmp_path."""
    loader = importlib.machinery.SourceFileLoader('devcloud_under_test',
                                                  DEVCLOUD)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    home = tmp_path / 'devcloud'
    for name, sub in (('HOME', ''), ('VENV', 'venv'), ('ETC', 'etc'),
                      ('STATE', 'state'), ('LOG', 'log'), ('RUN', 'run'),
                      ('BIN', 'venv/bin')):
        monkeypatch.setattr(mod, name, home / sub if sub else home)
    monkeypatch.setattr(mod, 'CLOUDS_YAML', home / 'etc' / 'clouds.yaml')
    paste = home / 'venv' / 'etc' / 'heat' / 'api-paste.ini'
    paste.parent.mkdir(parents=True)
    paste.write_text('[pipeline:heat-api]\n')
    for env in mod.ENV_NAMES.values():      # the defaults: ports, names
        monkeypatch.delenv(env, raising=False)
    mod.SECRETS.update(mod.load_secrets())
    return mod


def settings(mod, *extras):
    s, _ = mod.load_settings()
    s.extras = sorted(extras)
    return s


def test_heat_config_has_trusts_convergence_and_a_stack_user_domain(
        devcloud):
    s = settings(devcloud, 'heat')
    devcloud.write_heat_configs(s)
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(devcloud.ETC / 'heat' / 'heat.conf')
    default = conf['DEFAULT']
    assert default['deferred_auth_method'] == 'trusts'
    assert default['convergence_engine'] == 'true'
    assert 1 <= int(default['num_engine_workers']) <= 2
    assert default['stack_user_domain_name'] == 'heat'
    assert default['stack_domain_admin'] == 'heat_domain_admin'
    assert default['stack_domain_admin_password']
    assert len(default['auth_encryption_key']) == 32
    assert conf['trustee']['username'] == 'heat'
    assert conf['trustee']['auth_type'] == 'password'
    assert conf['database']['connection'].endswith(
        '/devcloud_heat?charset=utf8mb4')
    # Heat finds itself by configuration, not by the catalog's
    # orchestration (which is converge's when both run)
    assert conf['clients_heat']['url'] == \
        'http://127.0.0.1:17007/v1/%(tenant_id)s'
    engine = configparser.ConfigParser(interpolation=None)
    engine.read(devcloud.ETC / 'heat' / 'heat-engine.conf')
    assert 'keystoneauth.session=DEBUG' in \
        engine['DEFAULT']['default_log_levels']


def test_the_heat_rows_come_only_with_heat(devcloud):
    without = devcloud.Context(settings(devcloud, 'converge'))
    assert 'heat-api' not in without.by_name
    assert 'heat' not in devcloud.db_groups(without.s)
    ctx = devcloud.Context(settings(devcloud, 'converge', 'heat'))
    assert ctx.by_name['heat-api'].port == 'heat-api'
    assert ctx.by_name['heat-engine'].after == ('rabbitmq', 'keystone')
    assert devcloud.db_groups(ctx.s)['heat']['dbs'] == ['heat']


def orchestration(devcloud, *extras):
    ctx = devcloud.Context(settings(devcloud, *extras))
    return {e['name']: e['interfaces'] for e in devcloud.catalog(ctx)
            if e['type'] == 'orchestration'}


def test_converge_keeps_the_public_orchestration_heat_takes_internal(
        devcloud):
    assert orchestration(devcloud, 'converge', 'heat') == {
        'converge': ['public', 'admin'], 'heat': ['internal']}
    assert orchestration(devcloud, 'heat') == {
        'heat': ['public', 'internal', 'admin']}
    assert orchestration(devcloud, 'converge') == {
        'converge': ['public', 'internal', 'admin']}


def test_heat_clouds_reach_heat_by_override_and_interface(devcloud):
    devcloud.write_clouds_yaml(settings(devcloud, 'converge', 'heat'))
    clouds = yaml.safe_load(devcloud.CLOUDS_YAML.read_text())['clouds']
    assert sorted(clouds) == [
        'devcloud-admin', 'devcloud-admin-heat', 'devcloud-alice',
        'devcloud-alice-heat', 'devcloud-bob', 'devcloud-bob-heat']
    heat = clouds['devcloud-alice-heat']
    assert heat['orchestration_endpoint_override'] == \
        'http://127.0.0.1:17007/v1/%(project_id)s'
    assert heat['interface'] == 'internal'
    assert heat['auth'] == clouds['devcloud-alice']['auth']
    assert clouds['devcloud-alice']['interface'] == 'public'
    assert 'orchestration_endpoint_override' not in clouds['devcloud-alice']
    devcloud.write_clouds_yaml(settings(devcloud, 'converge'))
    clouds = yaml.safe_load(devcloud.CLOUDS_YAML.read_text())['clouds']
    assert not [c for c in clouds if c.endswith('-heat')]


# -- converge-bench --scenario cloud --heat, no Heat --------------------------

def closed_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def bench(tmp_path, clouds, *args):
    path = tmp_path / 'clouds.yaml'
    url = 'http://127.0.0.1:%d/v3' % closed_port()
    path.write_text(yaml.safe_dump({'clouds': {name: {
        'auth': {'auth_url': url, 'username': 'u', 'password': 'p',
                 'project_name': 'p', 'user_domain_name': 'Default',
                 'project_domain_name': 'Default'},
        'region_name': 'RegionOne'} for name in clouds}}))
    env = dict(os.environ, OS_CLIENT_CONFIG_FILE=str(path),
               CONVERGE_HOME=str(tmp_path / 'home'))
    env.pop('OS_CLOUD', None)
    return subprocess.run(
        [sys.executable, '-m', 'converge.bench.cli', '--scenario', 'cloud',
         '--n', '1'] + list(args), capture_output=True, text=True, env=env,
        timeout=120, cwd=str(tmp_path))


@pytest.mark.parametrize('clouds, args, named', [
    # no CLOUD-heat in clouds.yaml: Heat is looked for in CLOUD's catalog
    (['c1'], [], 'c1'),
    # tools/devcloud up --with-heat writes CLOUD-heat: that one
    (['c1', 'c1-heat'], [], 'c1-heat'),
    (['c1', 'c1-heat', 'mine'], ['--heat-cloud', 'mine'], 'mine'),
])
def test_bench_heat_without_heat_is_a_clear_error(tmp_path, clouds, args,
                                                  named):
    proc = bench(tmp_path, clouds, '--os-cloud', 'c1', '--heat', *args)
    assert proc.returncode == 2, proc.stderr
    assert '--heat: no Heat answers through cloud %s ' % named in proc.stderr
    assert 'tools/devcloud up --with-heat' in proc.stderr
    assert 'Traceback' not in proc.stderr


def test_bench_heat_cloud_needs_heat(tmp_path):
    proc = bench(tmp_path, ['c1'], '--os-cloud', 'c1', '--heat-cloud', 'x')
    assert proc.returncode == 2
    assert '--heat-cloud goes with --scenario cloud --heat' in proc.stderr
