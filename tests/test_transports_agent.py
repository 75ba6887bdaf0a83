"""A server of one of Heat's transports still runs converge-agent where
its image has it (cirros in the simulator): its user data holds Heat's
boot config and converge-agent's part, and the agent runs each
deployment once, whichever transport the template names (issue 40)."""

import pytest

#: ~25 s a transport (a server booted, its agent running the script)
pytestmark = pytest.mark.long

TEMPLATE = '''
heat_template_version: 2018-08-31
parameters:
  transport: {type: string}
resources:
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.small
      user_data_format: SOFTWARE_CONFIG
      software_config_transport: {get_param: transport}
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: |
        #!/bin/sh
        echo ran >> runs.log
        printf '%s' "$(wc -l < runs.log)" > "$heat_outputs_path.runs"
      outputs: [{name: runs}]
  deployment:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_resource: server}
      signal_transport: TEMP_URL_SIGNAL
outputs:
  runs: {value: {get_attr: [deployment, runs]}}
'''


@pytest.mark.parametrize('transport', ['POLL_TEMP_URL', 'POLL_SERVER_CFN',
                                       'POLL_SERVER_HEAT'])
def test_converge_agent_serves_a_heat_transport_server(cli, tmp_path,
                                                       transport):
    tpl = tmp_path / 't.yaml'
    tpl.write_text(TEMPLATE)
    cli.run('stack', 'create', 's', '-t', str(tpl), '--parameter',
            'transport=%s' % transport, '--wait', timeout=240)
    assert cli.json('stack', 'output', 'show', 's', 'runs')[
        'output_value'] == '1'
    occ = cli.json('stack', 'resource', 'show', 's', 'server')[
        'attributes']['os_collect_config']
    # no Keystone here: POLL_SERVER_HEAT has no heat section
    assert occ['collectors'][0] == 'ec2' and \
        occ['collectors'][-1] == 'local'
