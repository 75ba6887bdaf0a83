"""Heat's software-config examples of the corpus (script, os-apply-config,
ansible, the deployment group) converged on the simulated cloud, on image
heat-agents with POLL_TEMP_URL + TEMP_URL_SIGNAL, POLL_SERVER_CFN +
CFN_SIGNAL and (realcloud: the devcloud's Keystone) POLL_SERVER_HEAT +
HEAT_SIGNAL (Heat's own os-collect-config and heat-config hooks in the
server's root), and on cirros with converge-agent: each stack
CREATE_COMPLETE, the hooks' outputs as `stack output show` and `software
deployment output show` report them, each hook run once (issue 40).
tools/swconfig_corpus.py runs them (and prints docs/software.md's
table)."""

import os
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, os.path.join(REPO, 'tools'))
import swconfig_corpus  # noqa: E402

from converge.agent import rootfs  # noqa: E402

needs_corpus = pytest.mark.skipif(
    not os.path.isdir(swconfig_corpus.EXAMPLES), reason='corpus not here')

#: the issue's must-show examples
MUST = ('script', 'os-apply-config', 'ansible', 'deployment-group')


@pytest.fixture(scope='module')
def heat_agents_image():
    """Image heat-agents built (once per machine and recipe) before the
    stacks that boot it wait for it."""
    if not rootfs.available():
        pytest.skip('no roots here (not root on Linux?)')
    from converge.agent import image
    return image.ensure(uid=rootfs.DEFAULT_UID)


def _run(name, column, tmp_path):
    outcome, detail = swconfig_corpus.run_one(name, column, str(tmp_path))
    assert (outcome, detail) == ('ok', ''), '%s on %s: %s' % (
        name, column, detail)


@needs_corpus
@pytest.mark.soak
@pytest.mark.parametrize('column', ['heat-agents/TEMP_URL',
                                    'heat-agents/CFN'])
@pytest.mark.parametrize('name', MUST)
def test_example_converges_on_heat_agents(heat_agents_image, tmp_path,
                                          name, column):
    _run(name, column, tmp_path)


@pytest.fixture(scope='module')
def devcloud():
    from tests import realcloud
    return realcloud.up('--with-converge')


@needs_corpus
@pytest.mark.realcloud
@pytest.mark.soak
@pytest.mark.xdist_group('realcloud')
@pytest.mark.parametrize('name', MUST)
def test_example_converges_on_heat_agents_with_keystone(
        heat_agents_image, devcloud, tmp_path, name):
    """POLL_SERVER_HEAT + HEAT_SIGNAL: each server's own Keystone user
    in the devcloud's Keystone, whose catalog names the home's
    converge-api in a region of its own (tests/realcloud.py
    `home_in_catalog`)."""
    from tests import realcloud
    identity = realcloud.connect(devcloud, 'devcloud-admin').identity

    def server_users():
        return {u.id for u in identity.users()
                if u.name.startswith('converge-server-')}
    before = server_users()
    with realcloud.home_in_catalog(devcloud,
                                   tmp_path / 'converge.conf') as made:
        outcome, detail = swconfig_corpus.run_one(
            name, 'heat-agents/HEAT', str(tmp_path / 'run'), [made['path']])
    assert (outcome, detail) == ('ok', ''), '%s on heat-agents/HEAT: %s' % (
        name, detail)
    # the stack deleted, its servers' users are gone
    assert server_users() <= before


@needs_corpus
@pytest.mark.soak
@pytest.mark.parametrize('name', [n for n in MUST if n != 'os-apply-config'])
def test_example_converges_on_cirros(tmp_path, name):
    _run(name, 'cirros', tmp_path)


@needs_corpus
@pytest.mark.soak
def test_os_apply_config_on_cirros_fails_naming_the_group(tmp_path):
    """converge-agent has no os-apply-config hook (nor has cirros the
    tool): the deployment fails at once saying so, as the stack shows."""
    outcome, detail = swconfig_corpus.run_one('os-apply-config', 'cirros',
                                              str(tmp_path))
    assert outcome == 'FAILED'
    assert "No hook for config group 'os-apply-config'" in detail, detail


def test_the_tool_writes_the_columns_transports():
    """A heat-agents column names its transports on every server and
    deployment (NO_SIGNAL kept); the group example gets its inputs."""
    template = {'resources': {
        'server': {'type': 'OS::Nova::Server', 'properties': {}},
        'dep': {'type': 'OS::Heat::SoftwareDeployment',
                'properties': {'signal_transport': 'HEAT_SIGNAL'}},
        'quiet': {'type': 'OS::Heat::StructuredDeployment',
                  'properties': {'signal_transport': 'NO_SIGNAL'}}}}
    out = swconfig_corpus.rewrite(template, 'script', 'POLL_SERVER_CFN',
                                  'CFN_SIGNAL')['resources']
    assert out['server']['properties']['software_config_transport'] == \
        'POLL_SERVER_CFN'
    assert out['dep']['properties']['signal_transport'] == 'CFN_SIGNAL'
    assert out['quiet']['properties']['signal_transport'] == 'NO_SIGNAL'
    group = {'resources': {'g': {
        'type': 'OS::Heat::SoftwareDeploymentGroup',
        'properties': {'signal_transport': 'NO_SIGNAL'}}}}
    props = swconfig_corpus.rewrite(group, 'deployment-group', None,
                                    None)['resources']['g']['properties']
    assert 'signal_transport' not in props
    assert props['input_values'] == {'foo': 'fooooo', 'bar': 'baaaaa'}
    assert swconfig_corpus.parameters(
        {'parameters': {'fedora_image': {}, 'flavor': {}, 'other': {}}},
        'heat-agents') == {'fedora_image': 'heat-agents',
                           'flavor': 'm1.small'}
