"""How a SOFTWARE_CONFIG server learns its deployments and signals their
results: converge's own agent, or Heat's transports for servers that
carry Heat's guest tooling (os-collect-config, os-refresh-config,
os-apply-config, heat-config and its hooks, heat-config-notify,
cfn-signal). docs/software.md, "Transports".

A server's ``software_config_transport`` chooses:

- ``CONVERGE_AGENT`` (the default): converge-agent's bootstrap part in the
  user data, nothing else. One endpoint, pull, no Keystone user.
- ``POLL_TEMP_URL``, ``POLL_SERVER_CFN``, ``POLL_SERVER_HEAT``: Heat's
  boot config as well (``bootconfig``), and the ``os-collect-config``
  section of that transport in the server's metadata (``metadata``),
  served by converge-api itself (``converge/api/transport.py``).
- ``ZAQAR_MESSAGE``: refused at validate where no Zaqar is configured
  (none ever is, here).

Every SOFTWARE_CONFIG server keeps converge-agent's part, whatever its
transport: an image with converge-agent (cirros in the simulator) runs
it, an image with Heat's tooling runs that; each server runs one of them.
"""

CONVERGE_AGENT = 'CONVERGE_AGENT'
POLL_SERVER_CFN = 'POLL_SERVER_CFN'
POLL_SERVER_HEAT = 'POLL_SERVER_HEAT'
POLL_TEMP_URL = 'POLL_TEMP_URL'
ZAQAR_MESSAGE = 'ZAQAR_MESSAGE'

#: the server's software_config_transport values (Heat's, and converge's
#: own first: the default)
CONFIG_TRANSPORTS = (CONVERGE_AGENT, POLL_SERVER_CFN, POLL_SERVER_HEAT,
                     POLL_TEMP_URL, ZAQAR_MESSAGE)
#: those that make Heat's boot config and os-collect-config section
HEAT_CONFIG_TRANSPORTS = (POLL_SERVER_CFN, POLL_SERVER_HEAT, POLL_TEMP_URL)

CFN_SIGNAL = 'CFN_SIGNAL'
TEMP_URL_SIGNAL = 'TEMP_URL_SIGNAL'
HEAT_SIGNAL = 'HEAT_SIGNAL'
ZAQAR_SIGNAL = 'ZAQAR_SIGNAL'
NO_SIGNAL = 'NO_SIGNAL'

ZAQAR_REFUSED = ('%s needs Zaqar (a messaging service), and none is '
                 'configured for converge; use POLL_TEMP_URL and '
                 'TEMP_URL_SIGNAL (served by converge-api, no Swift), '
                 'POLL_SERVER_CFN and CFN_SIGNAL, or converge\'s own '
                 'agent (CONVERGE_AGENT)')
