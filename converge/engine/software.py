"""What servers' agents may ask of the engine (converge-api's agent routes
call these; docs/software.md has the contract).

An agent proves who it is with its server's credential (agent id and
token); it sees that one server's deployments and may signal only those.
"""

import time

from oslo_log import log as logging

from converge import exception
from converge.db import software as db_software
from converge.drivers import software as drivers_software
from converge.drivers import tokens
from converge.engine import traversal
from converge.resources import software_deployment as sd

LOG = logging.getLogger(__name__)


class Forbidden(exception.ConvergeError):
    """The credential is not valid for what it asked."""
    exit_code = 4
    http_status = 403


def _check(engine, row, agent_id, token, verified=False):
    if row is None or row.revoked_at is not None or not (
            verified or tokens.verify(engine.db, agent_id, token)):
        raise Forbidden('Invalid or revoked credential for agent %s'
                        % agent_id)
    return row


def _document(row):
    doc = dict(row.config or {})
    doc.update(id=row.id, action=row.action, run=row.run,
               status=row.status)
    return doc


def deployments(engine, agent_id, token):
    """(version, the server's deployments in Heat's order)."""
    with engine.db.connect() as conn:
        agent = _check(engine, db_software.agent_get(conn, agent_id),
                       agent_id, token)
        rows = (db_software.deployments_for_server(conn, agent.server_id)
                if agent.server_id else [])
        return agent.version, [_document(r) for r in rows]


def version(engine, agent_id, token):
    with engine.db.connect() as conn:
        return _check(engine, db_software.agent_get(conn, agent_id),
                      agent_id, token).version


def poll(engine, agents, wait=0.0, interval=0.5):
    """Many agents' deployments at once (an agent host): entries
    {agent_id, token, version}. Returns, as soon as one changed (or at
    the end of `wait`), the changed ones {agent_id, version, deployments}
    and the refused ones {agent_id, error: 403, message}."""
    deadline = time.monotonic() + max(0.0, wait)
    known = {a['agent_id']: a for a in agents}
    # a token is checked once per request, not on every look
    refused, valid = [], {}
    with engine.db.connect() as conn:
        rows = db_software.agents_get(conn, list(known))
    for agent_id, entry in known.items():
        try:
            _check(engine, rows.get(agent_id), agent_id, entry.get('token'))
            valid[agent_id] = entry
        except Forbidden as e:
            refused.append({'agent_id': agent_id, 'error': 403,
                            'message': str(e)})
    if refused:
        return refused
    while True:
        mark = drivers_software.CHANGES.mark()
        with engine.db.connect() as conn:
            rows = db_software.agents_get(conn, list(valid))
            changed = []
            for agent_id, entry in valid.items():
                row = rows.get(agent_id)
                if row is None or row.revoked_at is not None:
                    changed.append({'agent_id': agent_id, 'error': 403,
                                    'message': 'credential revoked'})
                elif row.version != entry.get('version'):
                    docs = (db_software.deployments_for_server(
                        conn, row.server_id) if row.server_id else [])
                    changed.append({'agent_id': agent_id,
                                    'version': row.version,
                                    'deployments': [_document(r)
                                                    for r in docs]})
        left = deadline - time.monotonic()
        if changed or left <= 0:
            return changed
        # woken at once by a change this process makes; another
        # process's change is seen at the next look
        drivers_software.CHANGES.wait(mark, min(interval, left))


def signal(engine, deployment_id, agent_id, token, run, payload):
    """Record the result of run `run` of a deployment, by Heat's rules,
    and wake the unit waiting for it. Returns (accepted, reason): a
    duplicate or stale signal is not accepted and changes nothing."""
    payload = payload if isinstance(payload, dict) else {}
    # the token first, outside the write transaction (it reads the key)
    verified = tokens.verify(engine.db, agent_id, token)
    with engine.db.begin() as conn:
        agent = _check(engine, db_software.agent_get(conn, agent_id),
                       agent_id, token, verified)
        dep = db_software.deployment_get(conn, deployment_id)
        if dep is None:
            raise exception.NotFound('Deployment %s not found'
                                     % deployment_id)
        if agent.server_id is None or dep.server_id != agent.server_id:
            raise Forbidden('Agent %s may not signal deployment %s'
                            % (agent_id, deployment_id))
        if dep.status != 'IN_PROGRESS' or dep.run != run:
            return False, ('deployment %s is %s (run %s); signal for run %s '
                           'ignored' % (deployment_id, dep.status,
                                        dep.run[:12], (run or '')[:12]))
        status, reason, outputs = result(dep.config or {}, payload)
        if not db_software.deployment_result(conn, deployment_id, run,
                                             status, reason, outputs):
            return False, 'signalled already'
        stack_id, name = dep.stack_id, dep.resource_name
    drivers_software.CHANGES.notify()
    if stack_id:
        _wake(engine, stack_id, name, sd.event(deployment_id))
    return True, reason


def _wake(engine, stack_id, resource_name, event):
    """Wake the deployment's unit, under its resource's lock: a unit holds
    that lock from reading the deployment to recording its wait, so the
    wake comes either before the read (which then sees the result) or
    after the wait is recorded (and finds it), never in between."""
    try:
        with engine.locks.resource(stack_id, resource_name,
                                   engine.lock_wait):
            traversal.wake(engine, stack_id, event)
    except Exception:  # the lock: the unit's own recheck finds the result
        LOG.warning('Could not wake %s of stack %s at once; it looks '
                    'again by itself', resource_name, stack_id,
                    exc_info=True)


def result(config, payload):
    """Heat's reading of a signal: (status, reason, output values)."""
    outputs = {}
    for name in sd.RESULT_ATTRS:
        if name in payload:
            outputs[name] = payload[name]
    failed = None
    for item in config.get('outputs') or []:
        name = item.get('name')
        if name in payload:
            outputs[name] = payload[name]
            if item.get('error_output') and payload[name]:
                failed = failed or str(payload[name])
    code = payload.get('deploy_status_code')
    try:
        code = int(code) if code is not None else 0
    except (TypeError, ValueError):
        code = -1
    if code != 0:
        reason = 'Deployment exited with non-zero status code: %s' % code
        tail = str(payload.get('deploy_stderr') or '').strip()[-300:]
        if tail:
            reason += ': %s' % tail.splitlines()[-1]
        return 'FAILED', reason, outputs
    if failed is not None:
        return 'FAILED', failed, outputs
    return 'COMPLETE', 'Outputs received', outputs
