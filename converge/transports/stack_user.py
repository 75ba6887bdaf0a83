"""What a server's own Keystone user (transports/keystone_users.py, role
``heat_stack_user`` only) may do through Heat's API: read its server's
resource metadata (os-collect-config's `heat` collector) and signal the
deployments on that server (heat-config-notify's HEAT_SIGNAL). The
policy lets the role reach those two routes; these checks confine it to
its own server."""

from converge import exception
from converge.db import software as db_software
from converge.engine import views
from converge.transports import keystone_users
from converge.transports import metadata

#: roles that make a caller more than a server's user
_PROJECT_ROLES = {'reader', 'member', 'admin'}


def only_server_user(ctx):
    roles = set(getattr(ctx, 'roles', None) or ())
    return keystone_users.ROLE in roles and not roles & _PROJECT_ROLES


def _agent(engine, ctx):
    agent_id = keystone_users.agent_of(engine.db, ctx.user_id)
    if agent_id is None:
        raise exception.Forbidden('This user is no server\'s')
    return agent_id


def check_metadata(engine, ctx, stack, name):
    """A server's user reads its own server's metadata only."""
    if not only_server_user(ctx):
        return
    agent_id = _agent(engine, ctx)
    with engine.db.connect() as conn:
        agent = db_software.agent_get(conn, agent_id)
    if agent is None or agent.revoked_at is not None or \
            agent.stack_id != stack.id or agent.resource_name != name:
        raise exception.Forbidden('A server\'s user may read its own '
                                  'server\'s metadata only')


def deployment_of(engine, ctx, stack, name):
    """The deployment id of the software deployment resource `name` of
    `stack`, or None when it is not one. A server's user may signal
    those on its own server only."""
    row = views.resources(engine, stack).get(name)
    if row is None or row.type not in (
            'OS::Heat::SoftwareDeployment',
            'OS::Heat::StructuredDeployment') or not row.physical_id:
        if only_server_user(ctx):
            raise exception.Forbidden('A server\'s user may signal the '
                                      'deployments on its server only')
        return None
    if only_server_user(ctx):
        agent_id = _agent(engine, ctx)
        with engine.db.connect() as conn:
            dep = db_software.deployment_get(conn, row.physical_id)
            agent = metadata.agent_for_server(
                conn, dep.server_id) if dep is not None else None
        if agent is None or agent.agent_id != agent_id:
            raise exception.Forbidden('A server\'s user may signal the '
                                      'deployments on its server only')
    return row.physical_id
