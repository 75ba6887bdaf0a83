"""Heat's transports end to end on a simulated server of image
`heat-agents` (issue 40): the real os-collect-config, os-refresh-config,
os-apply-config, heat-config's script hook and heat-config-notify in the
server's own root, configured from the boot config converge writes, poll
converge-api and signal it back; the script runs once and its output is
the deployment's. (Image heat-agents is the simulator's,
converge/agent/image.py: skipped where it is not there.)"""

import pathlib

import pytest

pytest.importorskip('converge.agent.image')
from converge.agent import rootfs  # noqa: E402

pytestmark = [pytest.mark.long, pytest.mark.skipif(
    not rootfs.available(), reason='no roots here (not root on Linux?)')]

TEMPLATE = '''
heat_template_version: 2018-08-31
parameters:
  transport: {type: string}
  signal: {type: string}
resources:
  server:
    type: OS::Nova::Server
    properties:
      image: heat-agents
      flavor: m1.small
      user_data_format: SOFTWARE_CONFIG
      software_config_transport: {get_param: transport}
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: who}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        echo ran >> /var/lib/runs.log
        printf 'hello %s' "$who" > "$heat_outputs_path.said"
  deployment:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_resource: server}
      input_values: {who: world}
      signal_transport: {get_param: signal}
outputs:
  said: {value: {get_attr: [deployment, said]}}
  status: {value: {get_attr: [deployment, deploy_status_code]}}
'''


@pytest.fixture
def tree():
    from converge.agent import image
    return image.ensure(uid=rootfs.DEFAULT_UID)


@pytest.mark.parametrize('transport,signal', [
    ('POLL_TEMP_URL', 'TEMP_URL_SIGNAL'),
    ('POLL_SERVER_CFN', 'CFN_SIGNAL')])
def test_heat_agents_server_served_by_converge(tree, cli, tmp_path,
                                               transport, signal):
    tpl = tmp_path / 't.yaml'
    tpl.write_text(TEMPLATE)
    cli.run('stack', 'create', 's', '-t', str(tpl),
            '--parameter', 'transport=%s' % transport,
            '--parameter', 'signal=%s' % signal, '--wait', timeout=600)
    out = cli.json('stack', 'output', 'show', 's', '--all')
    assert out['said'] == 'hello world', out
    assert out['status'] == 0
    # Heat's tooling ran it (not converge-agent): heat-config's record of
    # the run on the server's disk, and the script's one line
    server = cli.json('stack', 'resource', 'show', 's', 'server')[
        'physical_resource_id']
    disk = pathlib.Path(cli.json('sim', 'server', 'show', server)['disk'])
    root = disk / 'rootfs'
    deployed = [p.name for p in (
        root / 'var/lib/heat-config/deployed').iterdir()
        if p.name.endswith('.notify.json')]
    assert len(deployed) == 1, deployed
    assert (root / 'var/lib/runs.log').read_text() == 'ran\n'
