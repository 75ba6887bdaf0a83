"""POLL_SERVER_HEAT and HEAT_SIGNAL: a Keystone user per server, where a
Keystone is configured ([trustee]: the user converge acts as, which
needs the admin role in [software] server_users_project).

os-collect-config's `heat` collector and heat-config-notify authenticate
with a user id, a password and a project (password authentication: an
application credential does not fit them). So the server gets a user of
its own, as narrow as Keystone allows for that: named
``converge-server-<credential id>``, its password derived from the
server's credential under the engine's secret (nothing stored but the
user's id, in the server's plug-in data), and one role in the stack's
project, ``heat_stack_user``, which converge-api's policy lets read the
metadata of that one server and signal the deployments on it, nothing
else (converge/engine/service.py). Made with the server, deleted with it.
"""

from converge import conf as conf_mod
from converge.drivers import tokens

ROLE = 'heat_stack_user'
PREFIX = 'converge-server-'
_IDENTITY = {'service_type': 'identity', 'interface': 'public'}


def configured():
    t = conf_mod.CONF.trustee
    return bool(t.auth_url and t.username and t.password)


def auth_url():
    return conf_mod.CONF.trustee.auth_url


def user_name(agent_id):
    return PREFIX + agent_id


def password(db, agent_id):
    return tokens.token_for(db, 'keystone-password:%s' % agent_id)


def _session():
    from keystoneauth1 import session
    from keystoneauth1.identity import v3
    t = conf_mod.CONF.trustee
    return session.Session(auth=v3.Password(
        auth_url=t.auth_url, username=t.username, password=t.password,
        user_domain_name=t.user_domain_name,
        project_name=conf_mod.CONF.software.server_users_project,
        project_domain_name=t.user_domain_name))


def _get(s, path):
    return s.get(path, endpoint_filter=_IDENTITY).json()


def _role_id(s):
    found = _get(s, '/roles?name=%s' % ROLE)['roles']
    if found:
        return found[0]['id']
    return s.post('/roles', json={'role': {'name': ROLE}},
                  endpoint_filter=_IDENTITY).json()['role']['id']


def ensure(db, agent_id, project_id):
    """The server's user (made once: a retried create finds it by name),
    with its role in `project_id`: its id."""
    s = _session()
    domain = s.auth.get_access(s).user_domain_id
    name = user_name(agent_id)
    found = _get(s, '/users?name=%s&domain_id=%s' % (name, domain))['users']
    secret = password(db, agent_id)
    if found:
        user_id = found[0]['id']
        s.patch('/users/%s' % user_id, endpoint_filter=_IDENTITY,
                json={'user': {'password': secret, 'enabled': True}})
    else:
        user = {'name': name, 'domain_id': domain, 'password': secret,
                'default_project_id': project_id, 'enabled': True,
                'description': 'converge: the credential of one server '
                               '(POLL_SERVER_HEAT, HEAT_SIGNAL)'}
        user_id = s.post('/users', json={'user': user},
                         endpoint_filter=_IDENTITY).json()['user']['id']
    s.put('/projects/%s/users/%s/roles/%s' % (project_id, user_id,
                                              _role_id(s)),
          endpoint_filter=_IDENTITY)
    return user_id


def revoke(user_id):
    """Delete the server's user (gone already: nothing to do)."""
    s = _session()
    s.delete('/users/%s' % user_id, endpoint_filter=_IDENTITY,
             raise_exc=False)


def heat_section(db, agent_id, user_id, project_id, stack_path,
                 resource_name):
    """os-collect-config's `heat` section for the server's user."""
    return {'user_id': user_id, 'password': password(db, agent_id),
            'auth_url': auth_url(), 'project_id': project_id,
            'stack_id': stack_path, 'resource_name': resource_name,
            'region_name': conf_mod.CONF.cloud.region_name}


def signal_inputs(db, agent_id, user_id, project_id):
    """HEAT_SIGNAL's deploy_* inputs (heat-config-notify signals the
    deployment resource through converge-api with them)."""
    return {'deploy_auth_url': auth_url(),
            'deploy_username': user_name(agent_id),
            'deploy_user_id': user_id,
            'deploy_password': password(db, agent_id),
            'deploy_project_id': project_id,
            'deploy_region_name': conf_mod.CONF.cloud.region_name}


# -- which user is whose: kept beside the engine's secrets (a name -> value
# table every process reads), so the metadata, the signals and the
# policy check find a server's user, and a user's server, by one row ----

def _names(agent_id, user_id):
    return 'server-user:%s' % agent_id, 'user-server:%s' % user_id


def remember(db, agent_id, user_id):
    import sqlalchemy as sa
    from sqlalchemy import exc as sa_exc
    from converge.db import software as db_software
    table = db_software.SECRETS
    for name, value in zip(_names(agent_id, user_id), (user_id, agent_id)):
        try:
            with db.begin() as conn:
                conn.execute(sa.delete(table).where(table.c.name == name))
                conn.execute(table.insert().values(name=name, value=value))
        except sa_exc.IntegrityError:
            pass   # the same, written by another process at once


def forget(db, agent_id, user_id):
    import sqlalchemy as sa
    from converge.db import software as db_software
    table = db_software.SECRETS
    with db.begin() as conn:
        conn.execute(sa.delete(table).where(
            table.c.name.in_(_names(agent_id, user_id))))


def _lookup(db, name):
    import sqlalchemy as sa
    from converge.db import sealing
    from converge.db import software as db_software
    table = db_software.SECRETS
    with db.connect() as conn:
        # sealed by `converge-manage db encrypt` as every row of the table
        return sealing.unseal_text(conn.scalar(sa.select(
            table.c.value).where(table.c.name == name)))


def user_of(db, agent_id):
    """The Keystone user id of a server's credential, or None."""
    return _lookup(db, 'server-user:%s' % agent_id)


def agent_of(db, user_id):
    """The server credential a Keystone user was made for, or None."""
    return _lookup(db, 'user-server:%s' % user_id) if user_id else None
