"""A SOFTWARE_CONFIG server's metadata as Heat writes it: its
``deployments`` (each the derived config of the run in progress or last
run: id, name, group, creation_time, config, inputs with the deploy_*
keys, outputs, options) and the ``os-collect-config`` section of its
transport, which os-collect-config reads to know where to poll next.

Computed when asked for, from the deployment rows and the server's
credential: nothing is stored twice, and the deployments an agent of
either kind sees are the same rows.
"""

import sqlalchemy as sa

from converge import exception
from converge import transports
from converge.db import software as db_software
from converge.resources import none
from converge.transports import cfn_keys
from converge.transports import keystone_users
from converge.transports import urls


def config_id(deployment_id, run):
    """The id of a run's derived config, as the server sees it. Heat
    makes a derived config per action; heat-config on the server runs a
    config id once (its deployed directory) and skips it after: one id
    per run, so each run runs once and a new run is seen as new."""
    return none.derived_uuid(deployment_id, 'derived-config:%s' % run)


def _iso(when):
    return when.strftime('%Y-%m-%dT%H:%M:%SZ') if when is not None else None


def heat_deployment(row):
    """One deployment row as Heat's metadata lists it."""
    cfg = row.config or {}
    return {
        'id': config_id(row.id, row.run),
        'name': row.name,
        'group': cfg.get('group') or 'Heat::Ungrouped',
        'creation_time': _iso(row.updated_at or row.created_at),
        'config': cfg.get('config', ''),
        'inputs': cfg.get('inputs') or [],
        'outputs': cfg.get('outputs') or [],
        'options': cfg.get('options') or {},
    }


def deployments(conn, server_id, project_id):
    """The server's deployments in Heat's order (by name, then id), those
    of its own project, each with the config it runs. A row written only
    to say there was nothing to run (no run key) is not one: Heat makes
    no deployment for an action it does not run."""
    rows = conn.execute(sa.select(db_software.DEPLOYMENTS).where(
        db_software.DEPLOYMENTS.c.server_id == server_id,
        db_software.DEPLOYMENTS.c.project_id == project_id).order_by(
        db_software.DEPLOYMENTS.c.name, db_software.DEPLOYMENTS.c.id))
    return [heat_deployment(r) for r in rows if r.run and r.config]


def agent_for_server(conn, server_id):
    """The live credential bound to a server (None: none, or revoked)."""
    return conn.execute(sa.select(db_software.AGENTS).where(
        db_software.AGENTS.c.server_id == server_id,
        db_software.AGENTS.c.revoked_at.is_(None)).order_by(
        db_software.AGENTS.c.created_at.desc())).first()


def collect_config(db, transport, agent_id, since, stack_name,
                   resource_name, stack_id=None, project_id=None):
    """The `os-collect-config` section for `transport` (Heat's
    _populate_deployments_metadata): the collectors to run, in order
    (ec2 first, local last, the transport's between), and its own
    settings. {} for converge's own agent, which needs none."""
    if transport not in transports.HEAT_CONFIG_TRANSPORTS:
        return {}
    collectors = ['ec2']
    occ = {'collectors': collectors}
    if transport == transports.POLL_TEMP_URL:
        occ['request'] = {'metadata_url': urls.metadata_url(
            db, agent_id, since)}
        collectors.append('request')
    elif transport == transports.POLL_SERVER_CFN:
        access, secret = cfn_keys.key_pair(db, agent_id)
        occ['cfn'] = {'metadata_url': cfn_keys.metadata_server_url(),
                      'access_key_id': access,
                      'secret_access_key': secret,
                      'stack_name': stack_name,
                      'path': '%s.Metadata' % resource_name}
        collectors.append('cfn')
    elif transport == transports.POLL_SERVER_HEAT:
        # a Keystone user of the server's own, where a Keystone is
        # configured; none: no section (converge-agent's part serves an
        # image that has it)
        user_id = keystone_users.user_of(db, agent_id)
        if user_id:
            occ['heat'] = keystone_users.heat_section(
                db, agent_id, user_id, project_id,
                '%s/%s' % (stack_name, stack_id), resource_name)
            collectors.append('heat')
    collectors.append('local')
    return occ


def server_metadata(engine, template_metadata, props, server_id,
                    stack_name, resource_name):
    """A server's resource metadata: the template's, and for a
    SOFTWARE_CONFIG server its deployments and os-collect-config section
    (the template's own os-collect-config keys kept beside, as Heat
    merges them)."""
    meta = dict(template_metadata or {})
    if (props or {}).get('user_data_format') != 'SOFTWARE_CONFIG':
        return meta
    transport = props.get('software_config_transport') or \
        transports.CONVERGE_AGENT
    with engine.db.connect() as conn:
        agent = agent_for_server(conn, server_id) if server_id else None
        deps = deployments(conn, server_id, agent.project_id) \
            if agent is not None else []
    meta['deployments'] = deps
    occ = collect_config(engine.db, transport, agent.agent_id,
                         agent.created_at, stack_name, resource_name,
                         agent.stack_id, agent.project_id) \
        if agent is not None else {}
    if occ or 'os-collect-config' in meta:
        merged = dict(meta.get('os-collect-config') or {})
        merged.update(occ)
        meta['os-collect-config'] = merged
    return meta


class Served:
    """Whose metadata a transport's request read: the server's stack
    (id, name), resource name and physical id."""

    def __init__(self, stack, agent):
        self.id, self.name = stack.id, stack.name
        self.resource_name = agent.resource_name
        self.server_id = agent.server_id


def for_agent(engine, agent_id, with_stack=False):
    """What a server's os-collect-config reads with the URL or key pair
    made for its credential: its resource metadata (with `with_stack`:
    (metadata, Served)); None when the credential is gone or revoked
    (the server deleted)."""
    from converge.db import api as db_api   # the engine's side only
    from converge.engine import views
    with engine.db.connect() as conn:
        agent = db_software.agent_get(conn, agent_id)
    if agent is None or agent.revoked_at is not None or \
            not agent.server_id or not agent.stack_id:
        return None
    try:
        with engine.db.read() as s:
            stack = db_api.stack_get(s, agent.stack_id,
                                     project_id=agent.project_id)
        meta = views.resource_metadata(engine, stack, agent.resource_name)
    except exception.ConvergeError:
        return None
    return (meta, Served(stack, agent)) if with_stack else meta
