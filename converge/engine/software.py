"""What servers' agents may ask of the engine (converge-api's agent routes
call these; docs/software.md has the contract).

An agent proves who it is with its server's credential (agent id and
token); it sees that one server's deployments and may signal only those.
"""

import hashlib
import json
import time
import uuid

from oslo_log import log as logging

from converge import exception
from converge import tracing
from converge.db import api
from converge.db import software as db_software
from converge.drivers import facts as drivers_facts
from converge.drivers import software as drivers_software
from converge.drivers import tokens
from converge.engine import traversal
from converge.engine import views
from converge.resources import component
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
    doc.setdefault('name', row.name)
    doc.update(id=row.id, action=row.action, run=row.run,
               status=row.status)
    return doc


def _documents(conn, rows):
    """The documents of a server's deployments; with tracing on, each
    run in progress with the trace of the stack operation it belongs to
    (its `traceparent`, which its agent's signal sends back)."""
    docs = [_document(r) for r in rows]
    running = {r.stack_id for r in rows
               if r.status == 'IN_PROGRESS' and r.stack_id}
    if tracing.enabled and running:
        traces = db_software.running_traces(conn, running)
        for doc, row in zip(docs, rows):
            if row.status == 'IN_PROGRESS' and row.stack_id in traces:
                doc['traceparent'] = traces[row.stack_id]
    return docs


def deployments(engine, agent_id, token):
    """(version, the server's deployments in Heat's order)."""
    with engine.db.connect() as conn:
        agent = _check(engine, db_software.agent_get(conn, agent_id),
                       agent_id, token)
        rows = (db_software.deployments_for_agent(
            conn, agent.server_id, agent.project_id)
            if agent.server_id else [])
        return agent.version, _documents(conn, rows)


def version(engine, agent_id, token):
    with engine.db.connect() as conn:
        return _check(engine, db_software.agent_get(conn, agent_id),
                      agent_id, token).version


#: seconds a held poll woken by a change waits for the changes that come
#: with it (a deployment's siblings, created a moment apart) before it
#: looks: one answer for the burst, not one per change
COALESCE = 0.05


def poll(engine, agents, wait=0.0, interval=0.5, stopping=None):
    """Many agents' deployments at once (an agent host): entries
    {agent_id, token, version}. Returns, as soon as one changed (or at
    the end of `wait`), the changed ones {agent_id, version, deployments}
    and the refused ones {agent_id, error: 403, message}. A held poll
    ends early (answering nothing new) once `stopping` is set: the
    service is going away, and the agent asks the next one."""
    deadline = time.monotonic() + max(0.0, wait)
    known = {a['agent_id']: a for a in agents}
    # a token is checked once per request, not on every look
    refused, valid = [], {}
    with engine.db.connect() as conn:
        rows = db_software.agents_get(conn, list(known))
    verify = tokens.verifier(engine.db)
    for agent_id, entry in known.items():
        try:
            _check(engine, rows.get(agent_id), agent_id, entry.get('token'),
                   verify(agent_id, entry.get('token')))
            valid[agent_id] = entry
        except Forbidden as e:
            refused.append({'agent_id': agent_id, 'error': 403,
                            'message': str(e)})
    if refused:
        return refused
    versions = [e.get('version') for e in valid.values()]
    as_known = ((len(valid), sum(versions))
                if all(type(v) is int for v in versions) else None)
    while True:
        mark = drivers_software.CHANGES.mark()
        changed = []
        with engine.db.connect() as conn:
            # most looks of a held poll find nothing new: one row says so
            if as_known is None or db_software.agents_version_sum(
                    conn, valid) != as_known:
                changed = _changes(conn, valid)
        left = deadline - time.monotonic()
        if changed or left <= 0 or (stopping is not None and
                                    stopping.is_set()):
            return changed
        # woken at once by a change this process makes; another
        # process's change is seen at the next look
        if drivers_software.CHANGES.wait(mark, min(interval, left)) and \
                stopping is not None:
            stopping.wait(min(COALESCE, max(0.0, left)))


def _changes(conn, valid):
    """The entries of `valid` whose server has something new, each with
    its deployments, or refused now."""
    rows = db_software.agents_get(conn, list(valid))
    changed = []
    for agent_id, entry in valid.items():
        row = rows.get(agent_id)
        if row is None or row.revoked_at is not None:
            changed.append({'agent_id': agent_id, 'error': 403,
                            'message': 'credential revoked'})
        elif row.version != entry.get('version'):
            docs = (db_software.deployments_for_agent(
                conn, row.server_id, row.project_id)
                if row.server_id else [])
            changed.append({'agent_id': agent_id, 'version': row.version,
                            'deployments': _documents(conn, docs)})
    return changed


def signal(engine, deployment_id, agent_id, token, run, payload):
    """Record the result of run `run` of a deployment, by Heat's rules,
    and wake the unit waiting for it. Returns (accepted, reason): a
    duplicate or stale signal is not accepted and changes nothing.
    Raises Forbidden or exception.NotFound."""
    [answer] = signals(engine, [{
        'deployment_id': deployment_id, 'agent_id': agent_id,
        'token': token, 'run': run, 'payload': payload}], raising=True)
    return answer['accepted'], answer['reason']


def signals(engine, items, raising=False):
    """Many agents' signals at once (an agent host's): each item
    {deployment_id, agent_id, token, run, payload}, recorded as `signal`
    does, all in one transaction. Returns an answer per item, in order:
    {accepted, reason}, or {error: 403|404|400, message} for one refused
    (with `raising`, that error is raised instead)."""
    # the tokens first, outside the write transaction (the key read once)
    verify = tokens.verifier(engine.db)
    verified = [verify(i.get('agent_id'), i.get('token')) for i in items]
    answers, woken = [], []
    with engine.db.begin() as conn:
        for item, ok in zip(items, verified):
            try:
                answer, nodes = _signal(engine, conn, item, ok)
            except exception.ConvergeError as e:
                if raising:
                    raise
                answer, nodes = {'error': exception.http_status(e),
                                 'message': str(e)}, None
            answers.append(answer)
            if nodes:
                woken.append(nodes)
    if any(a.get('accepted') for a in answers):
        drivers_software.CHANGES.notify()
    for stack_id, nodes in woken:
        traversal.send_woken(engine, stack_id, nodes)
    return answers


def _signal(engine, conn, item, verified):
    """One signal in the caller's transaction: (answer, (stack id, the
    nodes it woke) or None). Raises before writing anything when the
    signal is refused."""
    deployment_id, agent_id = item.get('deployment_id'), item.get('agent_id')
    run = item.get('run') or ''
    payload = item.get('payload')
    payload = payload if isinstance(payload, dict) else {}
    agent = _check(engine, db_software.agent_get(conn, agent_id),
                   agent_id, item.get('token'), verified)
    dep = db_software.deployment_get(conn, deployment_id)
    if dep is None:
        raise exception.NotFound('Deployment %s not found' % deployment_id)
    if agent.server_id is None or dep.server_id != agent.server_id or \
            dep.project_id != agent.project_id:
        raise Forbidden('Agent %s may not signal deployment %s'
                        % (agent_id, deployment_id))
    if dep.run == run and dep.status != 'IN_PROGRESS':
        # again for a run recorded already (an agent's answer to a list
        # read before its first signal was taken)
        return {'accepted': False, 'reason': 'signalled already'}, None
    if dep.status != 'IN_PROGRESS' or dep.run != run:
        return {'accepted': False, 'reason': (
            'deployment %s is %s (run %s); signal for run %s ignored'
            % (deployment_id, dep.status, dep.run[:12], run[:12]))}, None
    return _record(engine, conn, dep, run, payload, agent_id)


def complete(engine, deployment_id, payload=None):
    """A user's signal to a stack's deployment (Heat's resource signal
    to a deployment group's member or, HEAT_SIGNAL, to a deployment:
    what its server would have said, given by hand or by
    heat-config-notify): the result of the run in progress, recorded and
    woken exactly as its agent's signal (`payload` read by `result`;
    none: success). The caller has checked that the deployment is its
    project's. Returns {accepted, reason}: a deployment not running (a
    second signal, a member whose batch has not come) changes
    nothing."""
    return _take(engine, deployment_id, None, payload)


def signal_run(engine, deployment_id, run, payload):
    """The result of run `run` of a deployment, sent to its signed URL
    (heat-config-notify, cfn-signal: transports/signals.py), whose
    signature the caller checked: recorded and woken exactly as an
    agent's signal. Returns {accepted, reason}: a second signal of the
    run, or a signal of a run that is over, changes nothing."""
    return _take(engine, deployment_id, run, payload)


def _take(engine, deployment_id, run, payload):
    """A signal without an agent's credential: of run `run`, or of the
    run in progress (None)."""
    payload = payload if isinstance(payload, dict) else {}
    with engine.db.begin() as conn:
        dep = db_software.deployment_get(conn, deployment_id)
        if dep is None:
            raise exception.NotFound('Deployment %s not found'
                                     % deployment_id)
        if run is None and dep.status != 'IN_PROGRESS':
            return {'accepted': False, 'reason': (
                'deployment %s is %s_%s: signal ignored'
                % (deployment_id, dep.action, dep.status))}
        if run is not None and dep.run == run and \
                dep.status != 'IN_PROGRESS':
            return {'accepted': False, 'reason': 'signalled already'}
        if run is not None and (dep.status != 'IN_PROGRESS' or
                                dep.run != run):
            return {'accepted': False, 'reason': (
                'deployment %s is %s (run %s); signal for run %s ignored'
                % (deployment_id, dep.status, dep.run[:12], run[:12]))}
        answer, woken = _record(engine, conn, dep, dep.run, payload, None)
    if answer['accepted']:
        drivers_software.CHANGES.notify()
    if woken:
        traversal.send_woken(engine, *woken)
    return answer


def _record(engine, conn, dep, run, payload, agent_id):
    """The result of run `run` of the deployment `dep`, recorded in the
    caller's transaction (once: a run recorded already changes nothing)
    and the unit waiting for it woken: (answer, (stack id, the nodes it
    woke) or None)."""
    deployment_id = dep.id
    status, reason, outputs = result(dep.config or {}, payload)
    if not db_software.deployment_result(conn, deployment_id, run, status,
                                         reason, outputs):
        return {'accepted': False, 'reason': 'signalled already'}, None
    from converge import metrics   # not for the CLI's read-only commands
    metrics.deployment_ended(status, dep.updated_at)
    day2 = db_software.action_result(conn, run, status, reason, outputs)
    if day2 is not None:
        api.event_add(conn, dep.stack_id, None, dep.resource_name,
                      'OS::Heat::SoftwareDeployment', dep.id,
                      day2.action.upper(), status, reason + (
                          ' (member %s)' % dep.member if dep.member else ''))
    answer = {'accepted': True, 'reason': reason}
    facts = _facts(payload.get(FACTS), deployment_id) if agent_id else {}
    if facts and dep.stack_id:
        # the stack's fact store; a change marks the stack for a refresh
        # that an observer runs (observers/loop.py)
        drivers_facts.record(conn, dep.stack_id, facts, agent_id)
    if not dep.stack_id:
        return answer, None
    # woken in this transaction, under no lock: a unit that read the
    # deployment still running and records its wait after this commits
    # finds the result there (its Wait's `still`)
    return answer, (dep.stack_id, traversal.woken(
        conn, dep.stack_id, dep.wake_event or sd.event(deployment_id)))


#: a signal's facts (the agent's hooks: ``converge_facts_path``)
FACTS = 'converge_facts'


def _facts(facts, deployment_id):
    """The facts of a signal that can be kept: string keys a file name
    may have, JSON values up to drivers/facts.MAX_VALUE; the others are
    left out, logged."""
    if not isinstance(facts, dict):
        return {}
    kept = {}
    for key, value in facts.items():
        if not isinstance(key, str) or not key or \
                len(key) > drivers_facts.MAX_KEY or '/' in key or \
                len(json.dumps(value, default=str)) > \
                drivers_facts.MAX_VALUE:
            LOG.warning('deployment %s: fact %.40r left out (a key of at '
                        'most %d characters without "/", a value of at '
                        'most %d bytes)', deployment_id, key,
                        drivers_facts.MAX_KEY, drivers_facts.MAX_VALUE)
            continue
        kept[key] = value
    return kept


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


# -- day-2 actions: an operator runs a deployment's action now -------------

DEPLOYMENT_TYPES = ('OS::Heat::SoftwareDeployment',
                    'OS::Heat::StructuredDeployment')
GROUP_TYPES = ('OS::Heat::SoftwareDeploymentGroup',
               'OS::Heat::SoftwareDeployments',
               'OS::Heat::StructuredDeploymentGroup',
               'OS::Heat::StructuredDeployments')


def run_action(engine, project_id, stack_ident, resource_name, action,
               inputs=None, members=None):
    """Run `action` of a deployment on its server now, outside any stack
    operation: the entry of its component that serves `action` (a day-2
    action such as backup), or, for a plain config, the config again
    (an explicit re-run). For a deployment group, on each member (or the
    `members` named). The stack's template and state are untouched.
    Returns the actions' records, one per deployment."""
    with engine.db.read() as s:
        stack = api.stack_get(s, stack_ident, project_id=project_id)
    row = views.resources(engine, stack).get(resource_name)
    if row is None:
        raise exception.ResourceNotFound(stack.name, resource_name)
    if row.type not in DEPLOYMENT_TYPES + GROUP_TYPES or not row.physical_id:
        raise exception.InvalidInput(
            'Resource %s of stack %s is %s, not a software deployment that '
            'exists: it has no actions to run' % (
                resource_name, stack.name, row.type))
    config_id = (row.properties or {}).get('config')
    source = engine.clients.configs.get(config_id) if config_id else None
    entry = None
    if source and source.get('group') == component.GROUP:
        entry = component.config_for(source.get('config'), action)
        if entry is None:
            served = sorted({a for e in source['config'].get(
                'configs', []) for a in e.get('actions', [])})
            raise exception.InvalidInput(
                'Component %s has no config for action %s (it has: %s)'
                % (config_id, action, ', '.join(served)))
    given = dict(inputs or {})
    ids = []
    with engine.db.begin() as conn:
        if row.type in GROUP_TYPES:
            deps = db_software.deployments_of(conn, stack.id, resource_name)
            if members:
                unknown = sorted(set(members) - {d.member for d in deps})
                if unknown:
                    raise exception.InvalidInput(
                        'Deployment group %s has no member %s' % (
                            resource_name, ', '.join(unknown)))
                deps = [d for d in deps if d.member in members]
        else:
            dep = db_software.deployment_get(conn, row.physical_id)
            deps = [dep] if dep is not None else []
        if not deps:
            raise exception.NotFound('No deployment of %s found' %
                                     resource_name)
        busy = [d.member or resource_name for d in deps
                if d.status == 'IN_PROGRESS']
        if busy:
            raise exception.Conflict(
                'Deployment %s of stack %s is running %s; try again when '
                'it ends' % (', '.join(busy), stack.name, deps[0].action))
        for dep in deps:
            ids.append(_start_action(conn, stack, row.type, dep, action,
                                     entry, given))
    drivers_software.CHANGES.notify()
    return [action_show(engine, project_id, i) for i in ids]


def members(engine, project_id, stack_ident, resource_name):
    with engine.db.read() as s:
        stack = api.stack_get(s, stack_ident, project_id=project_id)
    with engine.db.connect() as conn:
        return [d.member for d in db_software.deployments_of(
            conn, stack.id, resource_name) if d.member is not None]


def _start_action(conn, stack, rtype, dep, action, entry, given):
    config = dict(dep.config or {})
    if entry is not None:
        config.update(group=entry.get('tool') or 'script',
                      config=entry.get('config', ''))
    config['inputs'] = _inputs_for(config.get('inputs') or [], given,
                                   action)
    run = hashlib.sha256(('%s:%s' % (action, uuid.uuid4())).encode()
                         ).hexdigest()
    values = {c: getattr(dep, c) for c in (
        'id', 'stack_id', 'project_id', 'resource_name', 'server_id',
        'member', 'wake_event', 'name', 'input_values')}
    db_software.deployment_put(conn, dict(
        values, config=config, action=action, run=run,
        status='IN_PROGRESS', status_reason='%s requested' % action,
        output_values={}))
    record = dict(id=str(uuid.uuid4()), deployment_id=dep.id,
                  stack_id=stack.id, project_id=stack.project_id,
                  resource_name=dep.resource_name, member=dep.member,
                  server_id=dep.server_id, action=action,
                  input_values=given, run=run, status='IN_PROGRESS',
                  status_reason='', output_values={})
    db_software.action_add(conn, record)
    api.event_add(conn, stack.id, None, dep.resource_name, rtype, dep.id,
                  action.upper(), 'IN_PROGRESS', 'action %s requested%s' % (
                      action, ' on member %s' % dep.member
                      if dep.member else ''))
    return record['id']


def _inputs_for(inputs, given, action):
    out, seen = [], set()
    for item in inputs:
        item = dict(item)
        name = item.get('name')
        seen.add(name)
        if name in given:
            item['value'] = given[name]
        if name == 'deploy_action':
            item['value'] = action
        out.append(item)
    for name in sorted(set(given) - seen):
        out.append({'name': name, 'type': 'String', 'value': given[name],
                    'description': 'given with the action'})
    return out


def _action(row):
    return {'id': row.id, 'stack_id': row.stack_id,
            'resource_name': row.resource_name, 'member': row.member,
            'deployment_id': row.deployment_id, 'server_id': row.server_id,
            'action': row.action, 'status': row.status,
            'status_reason': row.status_reason,
            'input_values': row.input_values or {},
            'output_values': row.output_values or {},
            'creation_time': views.iso(row.created_at),
            'updated_time': views.iso(row.updated_at)}


def action_show(engine, project_id, action_id):
    with engine.db.connect() as conn:
        row = db_software.action_get(conn, action_id, project_id)
    if row is None:
        raise exception.NotFound('Deployment action %s not found'
                                 % action_id)
    return _action(row)


def action_list(engine, project_id, stack_ident, resource_name=None):
    with engine.db.read() as s:
        stack = api.stack_get(s, stack_ident, project_id=project_id)
    with engine.db.connect() as conn:
        return [_action(r) for r in db_software.actions_list(
            conn, stack.id, resource_name)]
