"""What OS::Nova::Server (resources/server.py) asks of the transports:
the check of its transport at validate, its boot config, and its
``os_collect_config`` attribute."""

from converge import exception
from converge import transports
from converge.resources import properties as p
from converge.transports import bootconfig


def validate(values, path):
    """ZAQAR_MESSAGE is refused where no Zaqar is configured (converge
    configures none): said at validate, naming the property, rather than
    a server that boots and never hears of its deployments."""
    if values.get('user_data_format') != 'SOFTWARE_CONFIG':
        return
    transport = values.get('software_config_transport')
    if transport is p.UNKNOWN or transport != transports.ZAQAR_MESSAGE:
        return
    raise exception.InvalidTemplate(
        transports.ZAQAR_REFUSED % 'software_config_transport '
        'ZAQAR_MESSAGE', path=path + ['software_config_transport'])


def transport_of(server):
    return server.properties.get('software_config_transport') or \
        transports.CONVERGE_AGENT


def collect_config(server):
    """The server's os-collect-config section ({} for converge's own
    agent, or a server that is not SOFTWARE_CONFIG)."""
    agents = server._agents()
    if agents is None or not hasattr(agents, 'collect_config'):
        return {}
    stack_name = getattr(server.stack, 'name', None) or 'stack'
    return agents.collect_config(server.agent_id, transport_of(server),
                                 stack_name, server.name)


def user_data(server, user_data):
    """`user_data` (converge-agent's part in it) as the server boots with
    it: within Heat's boot config for Heat's transports (for
    POLL_SERVER_HEAT, with its Keystone user made first, where a
    Keystone is configured)."""
    transport = transport_of(server)
    if transport not in transports.HEAT_CONFIG_TRANSPORTS:
        return user_data
    agents = server._agents()
    if transport == transports.POLL_SERVER_HEAT and \
            hasattr(agents, 'server_user'):
        agents.server_user(server.agent_id,
                           getattr(server.stack, 'project_id', None))
    return bootconfig.build(user_data, {
        'deployments': [], 'os-collect-config': collect_config(server)})


def revoke(server):
    """The server's Keystone user deleted with it (if it had one)."""
    agents = server._agents()
    if hasattr(agents, 'server_user_revoke'):
        agents.server_user_revoke(server.agent_id)


def updated(server):
    """A transport changed by an update is served at once (the metadata
    is computed when asked for); POLL_SERVER_HEAT needs its Keystone user
    first, as Heat makes credentials for the new transport."""
    agents = server._agents()
    if transport_of(server) == transports.POLL_SERVER_HEAT and \
            hasattr(agents, 'server_user'):
        agents.server_user(server.agent_id,
                           getattr(server.stack, 'project_id', None))
