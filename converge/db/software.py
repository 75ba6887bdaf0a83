"""Queries for software deployments, agent credentials and engine secrets.

Callers own the transaction. A change to a server's deployments bumps the
``version`` of that server's agent credential in the same transaction: the
version is the agent's ETag, so an agent whose server has nothing new costs
one indexed read.
"""

import secrets
import time

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from converge.db import models
from converge.db import sealing
from converge.db.models import utcnow

DEPLOYMENTS = models.SoftwareDeployment.__table__
AGENTS = models.AgentCredential.__table__
SECRETS = models.EngineSecret.__table__
ACTIONS = models.DeploymentAction.__table__
# Statements every deployment's units, agent polls and signals run are
# built once (with bind parameters): building a statement per call cost
# more than running it.
bp = sa.bindparam
_AGENT_GET = sa.select(AGENTS).where(AGENTS.c.agent_id == bp('b_agent'))
_AGENTS_GET = sa.select(AGENTS).where(
    AGENTS.c.agent_id.in_(bp('b_agents', expanding=True)))
_AGENTS_SUM = sa.select(sa.func.count(), sa.func.sum(AGENTS.c.version)).where(
    AGENTS.c.agent_id.in_(bp('b_agents', expanding=True)))
_BUMP = AGENTS.update().where(AGENTS.c.server_id == bp('b_server')).values(
    version=AGENTS.c.version + 1)
_DEPLOYMENT_GET = sa.select(DEPLOYMENTS).where(
    DEPLOYMENTS.c.id == bp('b_id'))
# FOR UPDATE (SQLite, with one writer, needs none): a signal's result,
# written to one of these rows, commits wholly before or wholly after the
# transaction that reads them
_DEPLOYMENT_RUNS = sa.select(DEPLOYMENTS.c.id, DEPLOYMENTS.c.run,
                             DEPLOYMENTS.c.status).where(
    DEPLOYMENTS.c.id.in_(bp('b_ids', expanding=True))).order_by(
    DEPLOYMENTS.c.id).with_for_update()
_DEPLOYMENT_SERVER = sa.select(DEPLOYMENTS.c.server_id).where(
    DEPLOYMENTS.c.id == bp('b_id'))
_DEPLOYMENT_INSERT = DEPLOYMENTS.insert()
_DEPLOYMENT_UPDATE = DEPLOYMENTS.update().where(DEPLOYMENTS.c.id == bp('b_id'))
_DEPLOYMENT_DELETE = DEPLOYMENTS.delete().where(
    DEPLOYMENTS.c.id == bp('b_id'))
_DEPLOYMENT_RESULT = DEPLOYMENTS.update().where(
    DEPLOYMENTS.c.id == bp('b_id'), DEPLOYMENTS.c.run == bp('b_run'),
    DEPLOYMENTS.c.status == 'IN_PROGRESS').values(
    status=bp('b_status'), status_reason=bp('b_reason'),
    output_values=bp('b_outputs', type_=DEPLOYMENTS.c.output_values.type),
    updated_at=bp('b_now', type_=DEPLOYMENTS.c.updated_at.type))
_ACTION_RESULT = ACTIONS.update().where(
    ACTIONS.c.run == bp('b_run'), ACTIONS.c.status == 'IN_PROGRESS').values(
    status=bp('b_status'), status_reason=bp('b_reason'),
    output_values=bp('b_outputs', type_=ACTIONS.c.output_values.type),
    updated_at=bp('b_now', type_=ACTIONS.c.updated_at.type))
_ACTION_BY_RUN = sa.select(ACTIONS).where(ACTIONS.c.run == bp('b_run'))


# -- secrets ------------------------------------------------------------------

def secret(db, name):
    """The engine-wide secret `name`, made on first use, kept sealed when
    a key is at hand (db/sealing.py: a database dump alone forges no
    agent's token). Of two processes making it at once, one insert wins
    and both read the winner's."""
    with db.connect() as conn:
        value = conn.scalar(sa.select(SECRETS.c.value).where(
            SECRETS.c.name == name))
        if value is not None:
            return sealing.unseal_text(value)
    try:
        with db.begin() as conn:
            conn.execute(SECRETS.insert().values(
                name=name, value=sealing.seal_text(secrets.token_hex(32))))
    except sa_exc.IntegrityError:
        pass  # made elsewhere first
    with db.connect() as conn:
        return sealing.unseal_text(conn.scalar(sa.select(
            SECRETS.c.value).where(SECRETS.c.name == name)))


# -- agent credentials --------------------------------------------------------

def agent_register(conn, agent_id, stack_id, project_id, resource_name):
    """Make the credential row (once: a retried create keeps it)."""
    if conn.execute(sa.select(AGENTS.c.agent_id).where(
            AGENTS.c.agent_id == agent_id)).first() is None:
        conn.execute(AGENTS.insert().values(
            agent_id=agent_id, stack_id=stack_id, project_id=project_id,
            resource_name=resource_name, version=0, created_at=time.time()))


def agent_bind(conn, agent_id, server_id):
    """Bind the credential to the server the cloud made; the agent now
    sees that server's deployments."""
    conn.execute(AGENTS.update().where(
        AGENTS.c.agent_id == agent_id,
        sa.or_(AGENTS.c.server_id.is_(None),
               AGENTS.c.server_id != server_id)).values(
        server_id=server_id, version=AGENTS.c.version + 1))


def agent_revoke(conn, agent_id):
    conn.execute(AGENTS.update().where(
        AGENTS.c.agent_id == agent_id,
        AGENTS.c.revoked_at.is_(None)).values(
        revoked_at=time.time(), version=AGENTS.c.version + 1))


def deployed_server(conn, server_id):
    """Whether `server_id` is an OS::Heat::DeployedServer's (a server no
    cloud knows): its credential's id is its own id, not revoked."""
    return conn.execute(sa.select(AGENTS.c.agent_id).where(
        AGENTS.c.agent_id == server_id, AGENTS.c.server_id == server_id,
        AGENTS.c.revoked_at.is_(None))).first() is not None


def agent_get(conn, agent_id):
    return conn.execute(_AGENT_GET, {'b_agent': agent_id}).first()


def agents_get(conn, agent_ids):
    if not agent_ids:
        return {}
    return {r.agent_id: r for r in conn.execute(
        _AGENTS_GET, {'b_agents': list(agent_ids)})}


def agents_version_sum(conn, agent_ids):
    """(how many of the credentials exist, the sum of their versions).
    A credential is never deleted (it is revoked, which bumps it) and its
    version only grows, so each is at least what an agent host was told:
    while the sum is what the host knows, no version moved and none of
    its servers has anything new. One row for a host's thousand agents,
    where reading each costs more than the look is worth."""
    count, total = conn.execute(_AGENTS_SUM,
                                {'b_agents': list(agent_ids)}).one()
    return count, total or 0


def _bump(conn, server_id):
    conn.execute(_BUMP, {'b_server': server_id})


# -- deployments --------------------------------------------------------------

def deployment_get(conn, deployment_id):
    return conn.execute(_DEPLOYMENT_GET, {'b_id': deployment_id}).first()


def deployments_running(conn, runs):
    """Whether each deployment of `runs` ({id: run}) is still running
    that run, its rows locked until the caller's transaction ends."""
    found = {r.id: r for r in conn.execute(
        _DEPLOYMENT_RUNS, {'b_ids': sorted(runs)})}
    return all(found.get(i) is not None and found[i].run == run and
               found[i].status == 'IN_PROGRESS' for i, run in runs.items())


def deployment_put(conn, values):
    """Insert or replace one deployment (by id); the server's agent (and a
    former server's, if it moved) sees a new version."""
    old = conn.execute(_DEPLOYMENT_SERVER, {'b_id': values['id']}).first()
    now = utcnow()
    # the columns come from the parameters' keys: one compiled statement
    # per set of keys, not a statement built (and its cache key made) on
    # every put
    if old is None:
        conn.execute(_DEPLOYMENT_INSERT,
                     dict(values, updated_at=now, created_at=now))
    else:
        conn.execute(_DEPLOYMENT_UPDATE,
                     dict(values, updated_at=now, b_id=values['id']))
        if old.server_id != values['server_id']:
            _bump(conn, old.server_id)
    _bump(conn, values['server_id'])


def deployment_delete(conn, deployment_id):
    old = conn.execute(_DEPLOYMENT_SERVER, {'b_id': deployment_id}).first()
    if old is None:
        return
    conn.execute(_DEPLOYMENT_DELETE, {'b_id': deployment_id})
    _bump(conn, old.server_id)


def deployment_result(conn, deployment_id, run, status, reason, outputs):
    """Record the result of run `run`: only while that run is the one in
    progress (a duplicate or stale signal changes nothing). True when this
    call recorded it."""
    res = conn.execute(_DEPLOYMENT_RESULT, {
        'b_id': deployment_id, 'b_run': run, 'b_status': status,
        'b_reason': reason, 'b_outputs': outputs, 'b_now': utcnow()})
    # The server's version does not move: the result came from its own
    # agent, which has nothing new to do. (Moving it re-sent every
    # deployment of the server after each run: with a config naming all
    # nodes, bytes squared in the number of servers.)
    return res.rowcount == 1


def deployments_of(conn, stack_id, resource_name):
    """The deployments one resource made (a group's members), by member."""
    return conn.execute(sa.select(DEPLOYMENTS).where(
        DEPLOYMENTS.c.stack_id == stack_id,
        DEPLOYMENTS.c.resource_name == resource_name).order_by(
        DEPLOYMENTS.c.member, DEPLOYMENTS.c.id)).all()


#: the status reason of a NO_SIGNAL deployment: COMPLETE once written,
#: still run once by its agent
NO_SIGNAL_REASON = 'Not waiting for outputs signal'

#: what an agent is sent of a deployment: the derived config only while
#: there may be something to run (IN_PROGRESS, or NO_SIGNAL); a finished
#: one is its id, name, action, run and status. (A config can name every
#: node of an overcloud: sent on each change of a thousand servers' lists
#: it was bytes squared in the servers.)
_FOR_AGENT = sa.select(
    DEPLOYMENTS.c.id, DEPLOYMENTS.c.name, DEPLOYMENTS.c.action,
    DEPLOYMENTS.c.run, DEPLOYMENTS.c.status, DEPLOYMENTS.c.stack_id,
    sa.type_coerce(sa.case((sa.or_(
        DEPLOYMENTS.c.status == 'IN_PROGRESS',
        DEPLOYMENTS.c.status_reason == NO_SIGNAL_REASON),
        DEPLOYMENTS.c.config), else_=sa.null()),
        DEPLOYMENTS.c.config.type).label('config'))


def deployments_for_agent(conn, server_id, project_id):
    """A server's deployments as its agent is sent them, in Heat's order
    (by config name, then id): those of the agent's own project only (a
    stack of another project that names this server, by an id its
    validation could not check, runs nothing on it)."""
    return conn.execute(_FOR_AGENT.where(
        DEPLOYMENTS.c.server_id == server_id,
        DEPLOYMENTS.c.project_id == project_id).order_by(
        DEPLOYMENTS.c.name, DEPLOYMENTS.c.id)).all()


def running_traces(conn, stack_ids):
    """{stack id: the traceparent its running traversal keeps}, for those
    of `stack_ids` that have one (converge/tracing.py)."""
    S, T = models.Stack.__table__, models.Traversal.__table__
    rows = conn.execute(sa.select(S.c.id, T.c.options)
                        .join(T, T.c.id == S.c.current_traversal)
                        .where(S.c.id.in_(list(stack_ids)),
                               T.c.state == 'running')).all()
    return {stack_id: (options or {}).get('trace')
            for stack_id, options in rows if (options or {}).get('trace')}


def deployments_for_server(conn, server_id):
    """A server's deployments in Heat's order: by config name, then id."""
    return conn.execute(sa.select(DEPLOYMENTS).where(
        DEPLOYMENTS.c.server_id == server_id).order_by(
        DEPLOYMENTS.c.name, DEPLOYMENTS.c.id)).all()


# -- day-2 actions ----------------------------------------------------------

def action_add(conn, values):
    conn.execute(ACTIONS.insert().values(created_at=utcnow(),
                                         updated_at=utcnow(), **values))


def action_result(conn, run, status, reason, outputs):
    """The day-2 action of run `run`, if that run was one: record its
    result; returns its row (None when the run was a stack operation's)."""
    res = conn.execute(_ACTION_RESULT, {
        'b_run': run, 'b_status': status, 'b_reason': reason,
        'b_outputs': outputs, 'b_now': utcnow()})
    if res.rowcount != 1:
        return None
    return conn.execute(_ACTION_BY_RUN, {'b_run': run}).first()


def action_get(conn, action_id, project_id=None):
    q = sa.select(ACTIONS).where(ACTIONS.c.id == action_id)
    if project_id is not None:
        q = q.where(ACTIONS.c.project_id == project_id)
    return conn.execute(q).first()


def actions_list(conn, stack_id, resource_name=None):
    q = sa.select(ACTIONS).where(ACTIONS.c.stack_id == stack_id)
    if resource_name:
        q = q.where(ACTIONS.c.resource_name == resource_name)
    return conn.execute(q.order_by(ACTIONS.c.created_at, ACTIONS.c.id)).all()
