"""Servers without agents (config-download): OS::Heat::DeployedServer,
`converge deployment export` and `converge deployment run`, pushing a
stack's deployments over real SSH to simulated hosts (`converge sim host
create`: an sshd in each host's own root, on a loopback port).

As a user runs it: the CLI in subprocesses on an embedded home."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from converge.agent import rootfs
from tests.conftest import CORPUS

TRIPLEO = os.path.join(CORPUS, 'tripleo-heat-templates')
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    'templates', 'configdl')

needs_ssh = pytest.mark.skipif(
    not os.path.exists('/usr/sbin/sshd') or not shutil.which('ssh') or
    not rootfs.available(),
    reason='needs OpenSSH (sshd, ssh) and roots (root on Linux)')


def _hosts(cli):
    return os.path.join(cli.home, 'sim-hosts')


@pytest.fixture
def hosts(cli):
    """Simulated hosts of the test's home, stopped at its end."""
    made = []

    def create(*names):
        cli.run('sim', 'host', 'create', *names)
        made.extend(names)
        return {n: os.path.join(_hosts(cli), n, 'disk') for n in names}
    yield create
    if made:
        cli.run('sim', 'host', 'delete', *made, check=False)


def _rows(proc):
    return json.loads(proc.stdout)


def _lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


# -- OS::Heat::DeployedServer ---------------------------------------------

def test_corpus_config_download_templates_validate(cli):
    for name in ('config-download-software.yaml',
                 'config-download-structured.yaml'):
        proc = cli.run('template', 'validate', '-t',
                       os.path.join(TRIPLEO, name), check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_deployed_server_is_created_without_the_cloud(cli, write):
    path = write('ds.yaml', yaml.safe_dump({
        'heat_template_version': 'rocky',
        'resources': {
            'node': {'type': 'OS::Heat::DeployedServer',
                     'properties': {'name': 'node-0',
                                    'software_config_transport':
                                        'POLL_SERVER_HEAT'}},
            'config': {'type': 'OS::Heat::SoftwareConfig',
                       'properties': {'group': 'script',
                                      'config': '#!/bin/sh\ntrue\n'}},
            'deployment': {'type': 'OS::Heat::SoftwareDeployment',
                           'properties': {
                               'config': {'get_resource': 'config'},
                               'server': {'get_resource': 'node'},
                               'signal_transport': 'NO_SIGNAL'}}},
        'outputs': {'name': {'value': {'get_attr': ['node', 'name']}}}}))
    cli.run('stack', 'create', 'ds', '-t', path, '--wait')
    show = cli.json('stack', 'show', 'ds')
    assert show['stack_status'] == 'CREATE_COMPLETE', show
    assert [o['output_value'] for o in show['outputs']] == ['node-0']
    # no server was booted for it
    assert cli.json('sim', 'server', 'list') == []


# -- export ----------------------------------------------------------------

ROLLOUT = {
    'heat_template_version': 'rocky',
    'resources': {
        'ctl0': {'type': 'OS::Heat::DeployedServer',
                 'properties': {'name': 'ctl-0', 'metadata': {
                     'ansible_host': '192.0.2.10', 'ansible_user': 'heat'}}},
        'ctl1': {'type': 'OS::Heat::DeployedServer',
                 'properties': {'name': 'ctl-1'}},
        'config': {'type': 'OS::Heat::SoftwareConfig',
                   'properties': {'group': 'script',
                                  'config': '#!/bin/sh\necho {{ x }}\n'}},
        'first': {'type': 'OS::Heat::SoftwareDeploymentGroup',
                  'update_policy': {'batch_create': {
                      'max_batch_size': 1, 'pause_time': 2}},
                  'properties': {
                      'config': {'get_resource': 'config'},
                      'servers': {'a': {'get_resource': 'ctl0'},
                                  'b': {'get_resource': 'ctl1'}},
                      'signal_transport': 'NO_SIGNAL'}},
        'second': {'type': 'OS::Heat::SoftwareDeployment',
                   'depends_on': ['first'],
                   'properties': {
                       'config': {'get_resource': 'config'},
                       'server': {'get_resource': 'ctl1'},
                       'signal_transport': 'NO_SIGNAL'}}}}


def test_export_writes_inventory_and_playbooks_by_step_and_role(
        cli, write, tmp_path):
    cli.run('stack', 'create', 'ro', '-t',
            write('ro.yaml', yaml.safe_dump(ROLLOUT)), '--wait')
    out = tmp_path / 'out'
    rows = _rows(cli.run('deployment', 'export', 'ro', str(out), '-f',
                         'json'))
    assert sorted((r['step'], r['role'], r['host'], r['resource'])
                  for r in rows) == [
        (1, 'ctl0', 'ctl-0', 'first'), (1, 'ctl1', 'ctl-1', 'first'),
        (2, 'ctl1', 'ctl-1', 'second')]
    with open(out / 'inventory' / 'hosts.yaml') as f:
        inventory = yaml.safe_load(f)['all']['children']
    # where each is reached: its metadata's address, else its name
    assert inventory['ctl0']['hosts']['ctl-0']['ansible_host'] == \
        '192.0.2.10'
    assert inventory['ctl0']['hosts']['ctl-0']['ansible_user'] == 'heat'
    assert inventory['ctl1']['hosts']['ctl-1']['ansible_host'] == 'ctl-1'
    with open(out / 'project' / 'step1_ctl1.yaml') as f:
        [play] = yaml.safe_load(f)
    # the group's batch policy, as Ansible's rolling policy
    assert play['hosts'] == ['ctl-1']
    assert play['serial'] == 1 and play['max_fail_percentage'] == 0
    assert play['tasks'][1]['ansible.builtin.pause'] == {'seconds': 2}
    with open(out / 'project' / 'step2_ctl1.yaml') as f:
        [play] = yaml.safe_load(f)
    assert 'serial' not in play
    with open(out / 'project' / 'deploy.yaml') as f:
        assert yaml.safe_load(f) == [{'import_playbook': 'step1.yaml'},
                                     {'import_playbook': 'step2.yaml'}]
    # a config's own "{{ }}" reaches the host as it is
    assert (out / 'project' / 'library' / 'converge_deployment.py').exists()
    proc = cli.run('deployment', 'export', 'nosuch', str(out), check=False)
    assert proc.returncode != 0 and 'nosuch' in proc.stderr


# -- run over SSH --------------------------------------------------------

def _environment(tmp_path):
    """TripleO's registry as far as controller-role.yaml and
    deployed-server.yaml need it, and the deployed-server environment,
    with absolute paths."""
    with open(os.path.join(TRIPLEO,
                           'overcloud-resource-registry-puppet.yaml')) as f:
        registry = yaml.safe_load(f)['resource_registry']
    keep = {}
    for name in ('puppet/controller-role.yaml',
                 'deployed-server/deployed-server.yaml',
                 'network/ports/net_ip_map.yaml'):
        with open(os.path.join(TRIPLEO, name)) as f:
            text = f.read()
        for key, value in registry.items():
            if 'type: %s\n' % key not in text:
                continue
            if str(value).endswith('.yaml'):
                # as tools/corpus.py: a template the corpus lacks is None
                value = os.path.join(TRIPLEO, value)
                if not os.path.exists(value):
                    value = 'OS::Heat::None'
            keep[key] = value
    with open(os.path.join(HERE, 'deployed-server-env.yaml')) as f:
        env = yaml.safe_load(f)['resource_registry']
    for key, value in env.items():
        keep[key] = os.path.join(TRIPLEO, value) if value.endswith(
            '.yaml') else value
    path = tmp_path / 'env.yaml'
    path.write_text(yaml.safe_dump({'resource_registry': keep}))
    return str(path)


NODES = ('overcloud-controller-0', 'overcloud-controller-1',
         'overcloud-novacompute-0')


def _until_stored(cli, name, create, timeout=120):
    """Once the create in `create` has stored its stack (polling a
    condition, not synchronising on time)."""
    deadline = time.monotonic() + timeout
    while cli.run('stack', 'show', name, check=False).returncode != 0:
        assert create.poll() is None, create.communicate()
        assert time.monotonic() < deadline, 'stack %s never stored' % name
        time.sleep(0.2)


def _wait(proc, timeout=300):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, out, err


@needs_ssh
@pytest.mark.long
def test_tripleo_roles_on_deployed_servers_converge_config_download_style(
        cli, hosts, tmp_path):
    disks = hosts(*NODES)
    cli.run('stack', 'create', 'net', '-t', os.path.join(HERE,
                                                          'ctlplane.yaml'),
            '--wait')
    env = _environment(tmp_path)
    # the stack's deployments wait for their signals, as Heat's do: the
    # create runs (and serves converge-api) while the push delivers them
    create = cli.popen('stack', 'create', 'oc', '-t',
                       os.path.join(HERE, 'overcloud.yaml'), '-e', env,
                       '--wait')
    try:
        _until_stored(cli, 'oc', create)
        run = cli.run('deployment', 'run', 'oc', '-f', 'json', timeout=600)
    finally:
        rc, out, err = _wait(create)
    assert rc == 0, out + err
    rows = _rows(run)
    # a step's deployments may come in more than one pass (the engine
    # writes them as it reaches them): the steps only ever go forward
    steps = [r['step'] for r in rows]
    assert steps == sorted(steps), rows
    assert sorted((r['step'], r['role'], r['resource'], r['outcome'])
                  for r in rows) == [
        (1, 'Compute', 'ComputeHostPrep', 'ran'),
        (1, 'Controller', 'ControllerHostPrep', 'ran'),
        (1, 'Controller', 'ControllerHostPrep', 'ran'),
        (2, 'Controller', 'ControllerStep', 'ran'),
        (2, 'Controller', 'ControllerStep', 'ran'),
        (3, 'Compute', 'ComputeStep', 'ran')]
    assert {r['recorded'] for r in rows} == {'Outputs received'}, rows
    assert cli.json('stack', 'show', 'oc')['stack_status'] == \
        'CREATE_COMPLETE'
    # the hooks' outputs are the deployments' (an ansible config's too)
    steps = cli.json('stack', 'output', 'show', 'oc', 'controller_steps')
    assert steps['output_value'] == {'0': 'controller one',
                                     '1': 'controller one'}
    logs = {n: _lines(os.path.join(disks[n], 'runs.log')) for n in NODES}
    assert logs == {
        'overcloud-controller-0': ['prep one', 'controller-step'],
        'overcloud-controller-1': ['prep one', 'controller-step'],
        'overcloud-novacompute-0': [
            'prep one', 'compute step {"0": "controller one", '
                        '"1": "controller one"}']}

    # a second run changes nothing: every run is in its host's journal
    again = _rows(cli.run('deployment', 'run', 'oc', '-f', 'json',
                          timeout=600))
    assert {r['outcome'] for r in again} == {'journalled'}
    assert len(again) == 6
    assert {n: _lines(os.path.join(disks[n], 'runs.log'))
            for n in NODES} == logs
    assert cli.json('stack', 'show', 'oc')['stack_status'] == \
        'CREATE_COMPLETE'


CRASH = {
    'heat_template_version': 'rocky',
    'parameters': {'round': {'type': 'string', 'default': 'one'}},
    'resources': {
        'node0': {'type': 'OS::Heat::DeployedServer',
                  'properties': {'name': 'node-0'}},
        'node1': {'type': 'OS::Heat::DeployedServer',
                  'properties': {'name': 'node-1'}},
        'config': {'type': 'OS::Heat::SoftwareConfig', 'properties': {
            'group': 'script', 'inputs': [{'name': 'round'}],
            'config': '#!/bin/sh\necho "$deploy_resource_name $round" '
                      '>> runs.log\n'}},
        'first': {'type': 'OS::Heat::SoftwareDeploymentGroup',
                  'properties': {
                      'config': {'get_resource': 'config'},
                      'servers': {'a': {'get_resource': 'node0'},
                                  'b': {'get_resource': 'node1'}},
                      'input_values': {'round': {'get_param': 'round'}},
                      'signal_transport': 'NO_SIGNAL'}},
        'second': {'type': 'OS::Heat::SoftwareDeployment',
                   'depends_on': ['first'],
                   'properties': {
                       'config': {'get_resource': 'config'},
                       'server': {'get_resource': 'node1'},
                       'input_values': {'round': {'get_param': 'round'}},
                       'signal_transport': 'NO_SIGNAL'}}}}


@needs_ssh
@pytest.mark.long
def test_a_run_killed_midway_and_run_again_skips_what_ran(
        cli, hosts, write, tmp_path):
    disks = hosts('node-0', 'node-1')
    cli.run('stack', 'create', 'cr', '-t',
            write('cr.yaml', yaml.safe_dump(CRASH)), '--wait')
    env = dict(cli.env(), CONVERGE_TEST_CRASH_AFTER_STEP='1')
    # killed (SIGKILL) once step 1 ran on its hosts, before it recorded
    # or reported anything, and before step 2
    killed = subprocess.run(
        [sys.executable, '-m', 'converge.cmd.cli', '--home', cli.home,
         'deployment', 'run', 'cr'], env=env, capture_output=True,
        text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _lines(os.path.join(disks['node-0'], 'runs.log')) == ['a one']
    assert _lines(os.path.join(disks['node-1'], 'runs.log')) == ['b one']

    rows = _rows(cli.run('deployment', 'run', 'cr', '-f', 'json',
                         timeout=600))
    assert [(r['step'], r['host'], r['resource'], r['outcome'])
            for r in rows] == [
        (1, 'node-0', 'first', 'journalled'),
        (1, 'node-1', 'first', 'journalled'),
        (2, 'node-1', 'second', 'ran')]
    assert _lines(os.path.join(disks['node-0'], 'runs.log')) == ['a one']
    assert _lines(os.path.join(disks['node-1'], 'runs.log')) == [
        'b one', 'second one']

    # an update that changes the inputs: each runs once more, once
    cli.run('stack', 'update', 'cr', '--existing', '--parameter',
            'round=two', '--wait')
    rows = _rows(cli.run('deployment', 'run', 'cr', '-f', 'json',
                         timeout=600))
    assert {(r['resource'], r['action'], r['outcome']) for r in rows} == {
        ('first', 'UPDATE', 'ran'), ('second', 'UPDATE', 'ran')}
    assert _lines(os.path.join(disks['node-1'], 'runs.log')) == [
        'b one', 'second one', 'b two', 'second two']
    # what logs in is root of the host's own root, not of this machine
    assert os.stat(os.path.join(disks['node-1'], 'runs.log')).st_uid != 0
