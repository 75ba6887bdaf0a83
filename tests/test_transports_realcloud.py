"""POLL_SERVER_HEAT and HEAT_SIGNAL against the devcloud's Keystone
(issue 40, point 5): a server's own Keystone user (role heat_stack_user
in the stack's project, made with the server, deleted with it), with
which the real os-collect-config `heat` collector reads the server's
metadata from converge-api and heat-agents' heat-config-notify signals
a HEAT_SIGNAL deployment once; that user can read nothing else. The first
tests play the server (Nova's fake driver runs nothing); the last boots a
simulated server of image heat-agents in an embedded home the devcloud's
Keystone names in its catalog, whose own tooling does the same."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from tests import conftest
from tests import realcloud
from tests import test_transports_heat_agents as heat_agents
from tests.test_transports import _inputs, heat_config_notify

pytestmark = [pytest.mark.realcloud, pytest.mark.slow,
              pytest.mark.xdist_group('realcloud')]

BIN = os.path.dirname(sys.executable)

TEMPLATE = '''
heat_template_version: 2018-08-31
resources:
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.tiny
      networks: [{allocate_network: none}]
      user_data_format: SOFTWARE_CONFIG
      software_config_transport: POLL_SERVER_HEAT
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: "#!/bin/sh\\necho hi"
      outputs: [{name: said}]
  deployment:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_resource: server}
      signal_transport: HEAT_SIGNAL
outputs:
  said: {value: {get_attr: [deployment, said]}}
'''


@pytest.fixture(scope='module')
def cloud_env():
    env = realcloud.up('--with-converge')
    realcloud.purge(realcloud.connect(env, 'devcloud-alice'))
    return env


def _heat(conn):
    from heatclient import client as heat_client
    return heat_client.Client('1', session=conn.session,
                              service_type='orchestration')


def test_poll_server_heat_with_keystone(cloud_env, tmp_path):
    alice = realcloud.connect(cloud_env, 'devcloud-alice')
    admin = realcloud.connect(cloud_env, 'devcloud-admin')
    hc = _heat(alice)
    hc.stacks.create(stack_name='heatpoll', template=TEMPLATE,
                     parameters={})
    occ = realcloud.wait_for(lambda: hc.resources.get(
        'heatpoll', 'server').attributes.get('os_collect_config')
        if hc.resources.get('heatpoll', 'server').resource_status ==
        'CREATE_COMPLETE' else None, timeout=300, interval=0.5)
    assert occ['collectors'] == ['ec2', 'heat', 'local']
    heat = occ['heat']
    assert heat['project_id'] == alice.current_project_id
    assert heat['resource_name'] == 'server'
    assert heat['stack_id'].startswith('heatpoll/')
    user = admin.identity.get_user(heat['user_id'])
    assert user.name.startswith('converge-server-')
    roles = {a.role['id'] for a in admin.identity.role_assignments(
        user_id=user.id)}
    names = {admin.identity.get_role(r).name for r in roles}
    assert names == {'heat_stack_user'}

    # the real `heat` collector, as the server runs it
    conf = tmp_path / 'occ.conf'
    conf.write_text('[DEFAULT]\ncachedir = %s\n[heat]\n%s\n' % (
        tmp_path / 'cache', '\n'.join('%s = %s' % (k, v) for k, v in
                                      heat.items() if v)))
    env = dict(os.environ)
    env.pop('OS_CLOUD', None)
    got = realcloud.wait_for(lambda: _collect(conf, env), timeout=120,
                             interval=0.5)
    [dep] = got['heat']['deployments']
    iv = _inputs(dep)
    assert 'deploy_signal_id' not in iv
    assert iv['deploy_user_id'] == heat['user_id']
    assert iv['deploy_signal_transport'] == 'HEAT_SIGNAL'

    # heat-config-notify signals the deployment through Keystone, twice:
    # taken once
    path = tmp_path / 'dep.json'
    path.write_text(json.dumps(dep))
    notify = heat_config_notify(tmp_path)
    for said in ('first', 'second'):
        out = subprocess.run([sys.executable, notify, str(path)],
                             input=json.dumps({'said': said}),
                             capture_output=True, text=True, timeout=120,
                             env=env)
        assert out.returncode == 0, out.stderr
    st = realcloud.wait_for(lambda: (lambda s: s if not s.stack_status.
                                     endswith('IN_PROGRESS') else None)(
        hc.stacks.get('heatpoll')), timeout=300, interval=0.5)
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    assert st.outputs[0]['output_value'] == 'first'

    # the server's user reads nothing but its own server's metadata
    from keystoneauth1 import session
    from keystoneauth1.identity import v3
    own = session.Session(auth=v3.Password(
        auth_url=heat['auth_url'], user_id=heat['user_id'],
        password=heat['password'], project_id=heat['project_id']))
    from heatclient import client as heat_client
    theirs = heat_client.Client('1', session=own,
                                service_type='orchestration')
    from heatclient import exc
    with pytest.raises(exc.HTTPForbidden):
        theirs.resources.metadata(heat['stack_id'], 'deployment')
    with pytest.raises(exc.HTTPForbidden):
        theirs.stacks.list().__next__()

    # deleted with the server
    hc.stacks.delete('heatpoll')
    realcloud.wait_for(lambda: not [s for s in hc.stacks.list()
                                    if s.stack_name == 'heatpoll'],
                       timeout=300, interval=0.5)
    assert admin.identity.find_user(heat['user_id']) is None


def _collect(conf, env):
    out = subprocess.run(
        [os.path.join(BIN, 'os-collect-config'), '--one-time', '--print',
         '--config-file', str(conf), 'heat'],
        capture_output=True, text=True, timeout=120, env=env)
    found = json.loads(out.stdout or '{}')
    return found if found.get('heat', {}).get('deployments') else None


def test_transport_changed_to_poll_server_heat(cloud_env):
    """An update to POLL_SERVER_HEAT makes the server's Keystone user
    (the server kept, as in Heat) and the metadata serves the heat
    section at once; deleted with the server."""
    alice = realcloud.connect(cloud_env, 'devcloud-alice')
    admin = realcloud.connect(cloud_env, 'devcloud-admin')
    hc = _heat(alice)
    tpl = TEMPLATE.replace('POLL_SERVER_HEAT', '{get_param: transport}'
                           ).replace('resources:', 'parameters:\n  '
                                     'transport: {type: string}\n'
                                     'resources:', 1)
    tpl = tpl[:tpl.index('  config:')]
    hc.stacks.create(stack_name='switch', template=tpl,
                     parameters={'transport': 'POLL_TEMP_URL'})
    done = lambda: (lambda s: s if not s.stack_status.endswith(  # noqa
        'IN_PROGRESS') else None)(hc.stacks.get('switch'))
    assert realcloud.wait_for(done, 300, 0.5).stack_status == \
        'CREATE_COMPLETE'
    server = hc.resources.get('switch', 'server').physical_resource_id
    occ = hc.resources.metadata('switch', 'server')['os-collect-config']
    assert 'request' in occ and 'heat' not in occ
    hc.stacks.update('switch', template=tpl,
                     parameters={'transport': 'POLL_SERVER_HEAT'})
    realcloud.wait_for(lambda: hc.stacks.get('switch').stack_status ==
                       'UPDATE_COMPLETE', 300, 0.5)
    assert hc.resources.get('switch', 'server').physical_resource_id == \
        server
    occ = hc.resources.metadata('switch', 'server')['os-collect-config']
    assert occ['collectors'] == ['ec2', 'heat', 'local']
    user_id = occ['heat']['user_id']
    assert admin.identity.get_user(user_id).name.startswith(
        'converge-server-')
    hc.stacks.delete('switch')
    realcloud.wait_for(lambda: not [s for s in hc.stacks.list()
                                    if s.stack_name == 'switch'], 300, 0.5)
    assert admin.identity.find_user(user_id) is None


class _HomeCLI(conftest.CLI):
    """`converge` on an embedded home with a converge.conf of its own."""

    def __init__(self, home, config):
        super().__init__(home)
        self.config = config

    def run(self, *args, **kw):
        return super().run('--config-file', self.config, *args, **kw)


def test_heat_agents_server_with_poll_server_heat(cloud_env, tmp_path):
    """A simulated server of image heat-agents (the real os-collect-config,
    os-refresh-config, os-apply-config, heat-config and heat-config-notify
    in its own root and network namespace) with POLL_SERVER_HEAT +
    HEAT_SIGNAL: its `heat` collector logs in to the devcloud's Keystone
    as the server's own user and finds, by the home's region in the
    catalog, the embedded home's converge-api, reads its deployments
    there, runs the script once and signals it through Heat's API there;
    the output is the deployment's; the user goes with the server."""
    from converge.agent import rootfs
    if not rootfs.available():
        pytest.skip('no roots here (not root on Linux?)')
    from converge.agent import image
    image.ensure(uid=rootfs.DEFAULT_UID)
    admin = realcloud.connect(cloud_env, 'devcloud-admin')
    tpl = tmp_path / 't.yaml'
    tpl.write_text(heat_agents.TEMPLATE)
    home = str(tmp_path / 'home')
    with realcloud.home_in_catalog(cloud_env,
                                   tmp_path / 'converge.conf') as made:
        cli = _HomeCLI(home, made['path'])
        try:
            cli.run('stack', 'create', 's', '-t', str(tpl),
                    '--parameter', 'transport=POLL_SERVER_HEAT',
                    '--parameter', 'signal=HEAT_SIGNAL', '--wait',
                    timeout=600)
            assert cli.json('stack', 'output', 'show', 's', '--all')[
                'said'] == 'hello world'
            dep = cli.json('stack', 'resource', 'show', 's', 'deployment')
            shown = yaml.safe_load(cli.run(
                'software', 'deployment', 'output', 'show',
                dep['physical_resource_id'], '--all').stdout)
            assert shown['output_values']['said'] == 'hello world', shown

            server = cli.json('stack', 'resource', 'show', 's', 'server')
            heat = server['attributes']['os_collect_config']['heat']
            assert heat['region_name'] == made['region']
            assert heat['project_id'] == made['project_id']
            user = admin.identity.get_user(heat['user_id'])
            assert user.name.startswith('converge-server-')

            # Heat's tooling on the server did it: its collector was
            # `heat`, the script ran once, and heat-config-notify had
            # Keystone's inputs, no signal URL
            disk = cli.json('sim', 'server', 'show',
                            server['physical_resource_id'])['disk']
            root = pathlib.Path(disk) / 'rootfs'
            occ = (root / 'etc/os-collect-config.conf').read_text()
            assert 'collectors = heat' in occ, occ
            assert (root / 'var/lib/runs.log').read_text() == 'ran\n'
            deployed = root / 'var/lib/heat-config/deployed'
            [record] = [p for p in deployed.iterdir()
                        if p.name.endswith('.json') and
                        not p.name.endswith('.notify.json')]
            iv = _inputs(json.loads(record.read_text()))
            assert iv['deploy_signal_transport'] == 'HEAT_SIGNAL'
            assert iv['deploy_user_id'] == heat['user_id']
            assert 'deploy_signal_id' not in iv

            cli.run('stack', 'delete', 's', '--yes', '--wait', timeout=300)
            assert admin.identity.find_user(heat['user_id']) is None
        finally:
            # a stack a failure left: its server's user goes with it
            cli.run('stack', 'delete', 's', '--yes', '--wait', check=False,
                    timeout=300)
            conftest.stop_agents(home)
