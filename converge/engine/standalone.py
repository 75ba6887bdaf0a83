"""Software configs and deployments made through Heat's API, outside any
stack (`openstack software config create`, `software deployment create`,
as tripleoclient and operators' scripts use them).

A config belongs to the project that made it. A deployment is made for
a server of the caller's project that has an agent (its credential is
the proof that the server is the project's): that agent pulls it, runs
it once (its `run` key, as for a stack's deployment) and signals the
result on its agent route, and the deployment's status and outputs are
then what `software deployment show` reads. Nothing waits on it: a
deployment of no stack wakes no traversal.
"""

import hashlib
import uuid

import sqlalchemy as sa

from converge import exception
from converge.db import api
from converge.db import models
from converge.db import software as db_software
from converge.drivers import software as drivers_software
from converge.engine import views
from converge.resources import properties as props_mod
from converge.resources import software_config as sc
from converge.resources import software_deployment as sd

_DEPLOYMENTS = models.SoftwareDeployment.__table__
_AGENTS = models.AgentCredential.__table__
ACTIONS = ('CREATE', 'UPDATE', 'DELETE', 'SUSPEND', 'RESUME', 'CHECK',
           'INIT')
STATUSES = ('IN_PROGRESS', 'COMPLETE', 'FAILED')


# -- configs -----------------------------------------------------------------

def _config(row):
    body = row.config or {}
    return {'id': row.id, 'name': row.name, 'group': row.group,
            'config': body.get('config', ''),
            'inputs': body.get('inputs') or [],
            'outputs': body.get('outputs') or [],
            'options': body.get('options') or {},
            'creation_time': views.iso(row.created_at),
            'project': row.project_id}


def config_create(engine, project_id, data):
    """Store a config: `data` is Heat's body (name, group, config,
    inputs, outputs, options), checked against OS::Heat::SoftwareConfig's
    schema."""
    unknown = set(data) - {'name', 'group', 'config', 'inputs', 'outputs',
                           'options'}
    if unknown:
        raise exception.InvalidInput('Unknown software config key(s): %s'
                                     % ', '.join(sorted(unknown)))
    if not isinstance(data.get('name') or '', str):
        raise exception.InvalidInput('name must be a string')
    body = {k: v for k, v in data.items() if k != 'name'}
    props = props_mod.validate(sc.SoftwareConfig.properties_schema, body,
                               path=['software_config'])
    config_id = str(uuid.uuid4())
    engine.clients.configs.create(
        config_id, data.get('name') or '', props.get('group') or
        'Heat::Ungrouped', props.get('config') or '',
        options=props.get('options') or {}, inputs=props.get('inputs') or [],
        outputs=props.get('outputs') or [], project_id=project_id)
    return config_show(engine, project_id, config_id)


def _config_row(session, project_id, config_id):
    row = api.software_config_get(session, config_id)
    if row is None or row.project_id != project_id:
        raise exception.NotFound('Software config %s not found' % config_id)
    return row


def config_show(engine, project_id, config_id):
    """A config; or the derived config a stack's deployment runs now (its
    `config_id`, the deployment's own id: Heat stores each derived config
    as a config of its own), its inputs with their values."""
    with engine.db.read() as s:
        if api.software_config_get(s, config_id) is None:
            derived = _derived_config(s, project_id, config_id)
            if derived is not None:
                return derived
        return _config(_config_row(s, project_id, config_id))


def _derived_config(session, project_id, deployment_id):
    row = db_software.deployment_get(session.connection(), deployment_id)
    if row is None or row.project_id != project_id or not row.stack_id:
        return None
    body = row.config or {}
    return {'id': row.id, 'name': row.name, 'group': body.get('group'),
            'config': body.get('config', ''),
            'inputs': body.get('inputs') or [],
            'outputs': body.get('outputs') or [],
            'options': body.get('options') or {},
            'creation_time': views.iso(row.updated_at or row.created_at),
            'project': row.project_id}


def config_list(engine, project_id):
    with engine.db.read() as s:
        return [_config(r) for r in api.software_configs_list(s, project_id)]


def config_delete(engine, project_id, config_id):
    with engine.db.read() as s:
        _config_row(s, project_id, config_id)
    engine.clients.configs.delete(config_id)


# -- deployments -------------------------------------------------------------

def _deployment(row):
    # a stack's deployment: its derived config is kept with it (under
    # its own id, config_show); one made through the API names its config
    return {'id': row.id,
            'config_id': row.id if row.stack_id else
            (row.config or {}).get('id'),
            'server_id': row.server_id, 'action': row.action,
            'status': row.status, 'status_reason': row.status_reason,
            'input_values': row.input_values or {},
            'output_values': row.output_values or {},
            'creation_time': views.iso(row.created_at),
            'updated_time': views.iso(row.updated_at)}


def _server_of_project(conn, project_id, server_id):
    """The server must have an agent of the caller's project: that is
    what makes it the project's (and what will run the deployment)."""
    found = conn.execute(sa.select(_AGENTS.c.agent_id).where(
        _AGENTS.c.server_id == server_id,
        _AGENTS.c.project_id == project_id,
        _AGENTS.c.revoked_at.is_(None))).first()
    if found is None:
        raise exception.NotFound(
            'Server %s not found (a deployment needs a server of this '
            'project with an agent: user_data_format SOFTWARE_CONFIG)'
            % server_id)


def _choice(value, allowed, name, default):
    value = value or default
    if value not in allowed:
        raise exception.InvalidInput('%s must be one of %s, not %r'
                                     % (name, ', '.join(allowed), value))
    return value


def _run(action, deployment_id):
    return hashlib.sha256(('%s:%s:%s' % (action, deployment_id,
                                         uuid.uuid4())).encode()
                          ).hexdigest()


def deployment_create(engine, project_id, data):
    """Deploy a config to a server: Heat's body (config_id, server_id,
    action, status, status_reason, input_values, signal_transport).
    IN_PROGRESS (the default) means "run it": the server's agent pulls
    it and signals the result."""
    config_id, server_id = data.get('config_id'), data.get('server_id')
    if not config_id or not server_id or not isinstance(
            config_id, str) or not isinstance(server_id, str):
        raise exception.InvalidInput('A software deployment needs '
                                     'config_id and server_id (strings)')
    action = _choice(data.get('action'), ACTIONS, 'action', 'UPDATE')
    status = _choice(data.get('status'), STATUSES, 'status', 'IN_PROGRESS')
    values = data.get('input_values') or {}
    if not isinstance(values, dict):
        raise exception.InvalidInput('input_values must be a map')
    transport = data.get('signal_transport') or 'CFN_SIGNAL'
    if not isinstance(data.get('name') or '', str):
        raise exception.InvalidInput('name must be a string')
    deployment_id = str(uuid.uuid4())
    with engine.db.read() as s:
        source = _config(_config_row(s, project_id, config_id))
    derived = {
        # the name orders the server's configs (OSC's <deployment-name>)
        'id': config_id,
        'name': data.get('name') or source['name'] or config_id,
        'group': source['group'], 'config': source['config'],
        'options': source['options'], 'outputs': source['outputs'],
        'inputs': sd.derived_inputs(source['inputs'], values, server_id,
                                    action, deployment_id, transport)}
    with engine.db.begin() as conn:
        _server_of_project(conn, project_id, server_id)
        db_software.deployment_put(conn, dict(
            id=deployment_id, stack_id=None, project_id=project_id,
            resource_name=None, server_id=server_id,
            name=derived['name'], member=None, wake_event=None,
            config=derived, action=action, run=_run(action, deployment_id),
            status=status, status_reason=data.get('status_reason') or '',
            input_values=values, output_values={}))
    drivers_software.CHANGES.notify()
    return deployment_show(engine, project_id, deployment_id)


def _deployment_row(conn, project_id, deployment_id):
    row = db_software.deployment_get(conn, deployment_id)
    if row is None or row.project_id != project_id:
        raise exception.NotFound('Software deployment %s not found'
                                 % deployment_id)
    return row


_RESOURCES = models.Resource.__table__


def _as_shown(conn, rows):
    """The rows as Heat shows them: a stack's deployment still waiting
    for its run's signal when its stack's operation ended (timed out,
    failed: its resource FAILED, "Timed out" or "Stopped waiting: ...")
    is FAILED with that reason, as Heat cancels it. The row keeps
    waiting underneath: a late result is still taken by the next
    converge (docs/software.md)."""
    out = [_deployment(r) for r in rows]
    waiting = {(r.stack_id, r.resource_name) for r in rows
               if r.status == 'IN_PROGRESS' and r.stack_id}
    if not waiting:
        return out
    stopped = {}
    for res in conn.execute(sa.select(
            _RESOURCES.c.stack_id, _RESOURCES.c.name, _RESOURCES.c.status,
            _RESOURCES.c.status_reason).where(
            _RESOURCES.c.stack_id.in_({s for s, _ in waiting}))):
        key = (res.stack_id, res.name)
        if key not in waiting:
            continue
        if res.status == 'IN_PROGRESS':
            stopped[key] = None   # a row of it still waits: as stored
        elif res.status == 'FAILED' and key not in stopped:
            stopped[key] = res.status_reason or 'Failed'
    for row, shown in zip(rows, out):
        reason = stopped.get((row.stack_id, row.resource_name))
        if row.status == 'IN_PROGRESS' and reason:
            shown.update(status='FAILED', status_reason=reason)
    return out


def deployment_show(engine, project_id, deployment_id):
    with engine.db.connect() as conn:
        return _as_shown(conn, [_deployment_row(conn, project_id,
                                                deployment_id)])[0]


def deployment_list(engine, project_id, server_id=None):
    q = sa.select(_DEPLOYMENTS).where(
        _DEPLOYMENTS.c.project_id == project_id).order_by(
        _DEPLOYMENTS.c.created_at, _DEPLOYMENTS.c.id)
    if server_id:
        q = q.where(_DEPLOYMENTS.c.server_id == server_id)
    with engine.db.connect() as conn:
        return _as_shown(conn, conn.execute(q).all())


def deployment_update(engine, project_id, deployment_id, data):
    """Heat's PUT: a new status, reason and outputs (a signal by the
    user); a new action runs the deployment again."""
    with engine.db.begin() as conn:
        row = _deployment_row(conn, project_id, deployment_id)
        if row.stack_id:
            raise exception.Conflict(
                'Software deployment %s belongs to a stack: its stack '
                'updates it' % deployment_id)
        values = {c: getattr(row, c) for c in (
            'id', 'stack_id', 'project_id', 'resource_name', 'server_id',
            'member', 'wake_event', 'name', 'input_values', 'config',
            'action', 'run', 'status', 'status_reason', 'output_values')}
        if data.get('action') and data['action'] != row.action:
            values['action'] = _choice(data['action'], ACTIONS, 'action',
                                       row.action)
            values['run'] = _run(values['action'], deployment_id)
            values['status'] = 'IN_PROGRESS'
        if data.get('status'):
            values['status'] = _choice(data['status'], STATUSES, 'status',
                                       row.status)
        if 'status_reason' in data:
            values['status_reason'] = str(data['status_reason'] or '')
        if 'output_values' in data:
            if not isinstance(data['output_values'], dict):
                raise exception.InvalidInput('output_values must be a map')
            values['output_values'] = data['output_values']
        db_software.deployment_put(conn, values)
    drivers_software.CHANGES.notify()
    return deployment_show(engine, project_id, deployment_id)


def deployment_delete(engine, project_id, deployment_id):
    with engine.db.begin() as conn:
        row = _deployment_row(conn, project_id, deployment_id)
        if row.stack_id:
            raise exception.Conflict(
                'Software deployment %s belongs to a stack: deleting its '
                'resource deletes it' % deployment_id)
        db_software.deployment_delete(conn, deployment_id)
    drivers_software.CHANGES.notify()


def server_metadata(engine, project_id, server_id):
    """The deployments of one of the project's servers, in Heat's order,
    each as its derived config (Heat's server metadata)."""
    with engine.db.connect() as conn:
        rows = [r for r in db_software.deployments_for_server(conn,
                                                              server_id)
                if r.project_id == project_id]
    if not rows:
        raise exception.NotFound('Server %s has no deployments' % server_id)
    out = []
    for r in rows:
        doc = dict(r.config or {})
        doc.update(id=r.id, name=r.name, action=r.action,
                   status=r.status)
        out.append(doc)
    return out
