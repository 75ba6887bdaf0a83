"""Config-download, the engine's side: a stack's software deployments as
a plan an Ansible run can push (`converge deployment export` writes it,
`converge deployment run` runs it), and the results of such a run
recorded as an agent's signals are (docs/software.md "Servers without
agents: config-download").

The plan holds, for a stack and every stack nested in it:

- **hosts**: its servers (OS::Heat::DeployedServer, and OS::Nova::Server
  but one whose agent pulls its deployments, user_data_format
  SOFTWARE_CONFIG) by server id: name, role;
- **deployments**: each deployment row of a server the plan has (a
  group's members each), with its step, its role, its derived config
  (what the agent would be sent), and its group's rolling policy.

A server's **role** is the resource of the top-level stack it belongs
to (TripleO's ``Controller`` ResourceGroup for every controller), its
own name when it is one itself. A deployment's **step** follows the
graph: 1 for a deployment that needs no other deployment, else one more
than the latest step of the deployments it needs, directly or through
other resources (a nested stack needs what its parent resource needs,
and what needs a nested stack's resource needs every deployment in it).
"""

import functools
import json
import urllib.request

import sqlalchemy as sa

from converge import conf as conf_mod

from converge import exception
from converge.db import api
from converge.db import software as db_software
from converge.drivers import software as drivers_software
from converge.drivers import tokens
from converge.engine import software
from converge.engine import traversal
from converge.engine import views

SERVER_TYPES = ('OS::Heat::DeployedServer', 'OS::Nova::Server')
DEPLOYMENT_TYPES = software.DEPLOYMENT_TYPES + software.GROUP_TYPES


def _stacks(engine, project_id, stack_ident):
    with engine.db.read() as s:
        top = api.stack_get(s, stack_ident, project_id=project_id)
        ids = api.stack_tree(s, top.id)
        stacks = {i: (top if i == top.id else
                      api.stack_get(s, i, project_id=project_id))
                  for i in ids}
    return top, stacks


def _policy(engine, stack, row, action):
    """A deployment group's rollout policy for `action` (Heat's
    batch_create on CREATE, rolling_update on UPDATE): {max_batch_size,
    pause_time} or None."""
    if row.type not in software.GROUP_TYPES or not row.template_id:
        return None
    try:
        defn = engine.definition(row.template_id, stack)
    except exception.ConvergeError:
        return None
    rdef = defn.resources.get(row.name) if defn else None
    policy = getattr(rdef, 'update_policy', None) or {}
    key = {'CREATE': 'batch_create', 'UPDATE': 'rolling_update'}.get(action)
    found = policy.get(key) if key else None
    if not isinstance(found, dict):
        return None
    return {'max_batch_size': int(found.get('max_batch_size') or 1),
            'pause_time': float(found.get('pause_time') or 0)}


def plan(engine, project_id, stack_ident):
    """The config-download plan of a stack (see the module's doc)."""
    top, stacks = _stacks(engine, project_id, stack_ident)
    rows = {sid: views.resources(engine, st) for sid, st in stacks.items()}
    by_id = {sid: {r.id: r.name for r in rs.values()}
             for sid, rs in rows.items()}
    children = {}   # (stack id, resource name) -> child stack id
    for sid, st in stacks.items():
        if st.parent_id in stacks and st.parent_resource:
            children.setdefault((st.parent_id, st.parent_resource),
                                []).append(sid)

    @functools.lru_cache(maxsize=None)
    def needs(sid, name):
        """What (sid, name) needs, by name: as its stack's template says
        (a row records its own only once converged: a deployment still
        waiting has none yet)."""
        st = stacks[sid]
        try:
            defn = engine.definition(st.template_id, st) \
                if st.template_id else None
        except exception.ConvergeError:
            defn = None
        rdef = defn.resources.get(name) if defn is not None else None
        if rdef is not None:
            return tuple(sorted(rdef.requires))
        row = rows[sid].get(name)
        return tuple(by_id[sid].get(rid) for rid in (
            row.requires or ()) if row is not None)

    @functools.lru_cache(maxsize=None)
    def start(sid, name):
        """The latest step what (sid, name) needs ends with."""
        found = 0
        for dep in needs(sid, name):
            if dep is not None and dep != name and dep in rows[sid]:
                found = max(found, end(sid, dep))
        st = stacks[sid]
        if st.parent_id in stacks and st.parent_resource:
            found = max(found, start(st.parent_id, st.parent_resource))
        return found

    @functools.lru_cache(maxsize=None)
    def end(sid, name):
        """The latest step (sid, name) ends with, its nested stacks'
        deployments included."""
        row = rows[sid].get(name)
        begin = start(sid, name)
        if row is not None and row.type in DEPLOYMENT_TYPES:
            return begin + 1
        found = begin
        for child in children.get((sid, name), ()):
            for child_name in rows[child]:
                found = max(found, end(child, child_name))
        return found

    def role(sid, name):
        while sid != top.id and stacks[sid].parent_id in stacks:
            name = stacks[sid].parent_resource
            sid = stacks[sid].parent_id
        return name

    hosts = {}
    for sid, rs in rows.items():
        for name, row in rs.items():
            if row.type in SERVER_TYPES and row.physical_id and \
                    row.action not in ('INIT', 'DELETE'):
                props = row.properties or {}
                if row.type == 'OS::Nova::Server' and props.get(
                        'user_data_format') == 'SOFTWARE_CONFIG':
                    # its agent pulls its deployments: not pushed too
                    continue
                attrs = row.attributes or {}
                hosts[row.physical_id] = {
                    'server_id': row.physical_id,
                    'name': attrs.get('name') or props.get('name') or name,
                    'role': role(sid, name), 'resource': name,
                    'stack_id': sid, 'type': row.type,
                    'metadata': props.get('metadata') or {}}
    deployments = []
    with engine.db.connect() as conn:
        for sid in stacks:
            for name, row in rows[sid].items():
                if row.type not in DEPLOYMENT_TYPES:
                    continue
                for dep in db_software.deployments_of(conn, sid, name):
                    host = hosts.get(dep.server_id)
                    if host is None:
                        continue
                    doc = dict(dep.config or {})
                    doc.setdefault('name', dep.name)
                    doc.update(id=dep.id, action=dep.action, run=dep.run)
                    deployments.append({
                        'id': dep.id, 'resource': name, 'stack_id': sid,
                        'member': dep.member, 'server_id': dep.server_id,
                        'host': host['name'], 'role': host['role'],
                        'step': end(sid, name), 'status': dep.status,
                        'policy': _policy(engine, stacks[sid], row,
                                          dep.action),
                        'deployment': doc})
    deployments.sort(key=lambda d: (d['step'], d['role'], d['deployment'][
        'name'] or '', d['id']))
    return {'stack': top.name, 'stack_id': top.id,
            'stack_status': '%s_%s' % (top.action, top.status),
            'hosts': sorted(hosts.values(), key=lambda h: (h['role'],
                                                           h['name'])),
            'deployments': deployments}


def _agent_of(conn, server_id):
    row = conn.execute(sa.select(db_software.AGENTS.c.agent_id).where(
        db_software.AGENTS.c.server_id == server_id,
        db_software.AGENTS.c.revoked_at.is_(None))).first()
    return row.agent_id if row is not None else None


def _through_api(engine, items):
    """Embedded, the engine waiting for these results may be another
    process (a `stack create --wait` in another terminal) that serves
    converge-api at the home's address: the results go there, as its
    servers' agents' signals, under each server's credential, so that
    process records them and wakes at once. None when no API answers
    (nothing is waiting in another process: they are recorded here)."""
    if not conf_mod.is_embedded() or not items:
        return None
    endpoint = conf_mod.api_endpoint()
    if not endpoint:
        return None
    verify = [dict(i, token=tokens.token_for(engine.db, i['agent_id']))
              for i in items]
    body = json.dumps({'signals': verify}).encode('utf-8')
    request = urllib.request.Request(
        endpoint + '/v1/agent/signals', data=body, method='POST',
        headers={'Content-Type': 'application/json'})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read().decode('utf-8'))['signals']
    except (OSError, ValueError, KeyError):
        return None


def record(engine, project_id, stack_ident, results):
    """The results of a push run, each {id, run, payload}: recorded by
    the rules of an agent's signal (`software.result`), each only while
    that run is the deployment's run in progress; the units waiting for
    them woken. A deployment of another stack, or one that ran already,
    changes nothing. Returns an answer per result: {id, accepted,
    reason}."""
    _top, stacks = _stacks(engine, project_id, stack_ident)
    answers, woken = [], []
    with engine.db.connect() as conn:
        signals = []
        for item in results:
            dep = db_software.deployment_get(conn, item.get('id'))
            if dep is not None and dep.stack_id in stacks and \
                    dep.status == 'IN_PROGRESS' and \
                    dep.run == item.get('run'):
                agent_id = _agent_of(conn, dep.server_id)
                if agent_id:
                    signals.append({'deployment_id': dep.id,
                                    'agent_id': agent_id,
                                    'run': dep.run,
                                    'payload': item.get('payload') or {}})
    sent = _through_api(engine, signals)
    if sent is not None and len(sent) == len(signals) and all(
            'error' not in a for a in sent):
        done = {s['deployment_id']: a for s, a in zip(signals, sent)}
        results = [r for r in results if r.get('id') not in done]
        answers = [dict(a, id=i) for i, a in done.items()]
    with engine.db.begin() as conn:
        for item in results:
            dep = db_software.deployment_get(conn, item.get('id'))
            if dep is None or dep.stack_id not in stacks:
                answers.append({'id': item.get('id'), 'accepted': False,
                                'reason': 'not a deployment of this stack'})
                continue
            if dep.status_reason == db_software.NO_SIGNAL_REASON and \
                    dep.run == item.get('run'):
                answers.append({'id': dep.id, 'accepted': False,
                                'reason': 'NO_SIGNAL: nothing waits for '
                                          'its result'})
                continue
            if dep.status != 'IN_PROGRESS' or dep.run != item.get('run'):
                answers.append({'id': dep.id, 'accepted': False,
                                'reason': 'deployment is %s_%s%s' % (
                                    dep.action, dep.status,
                                    '' if dep.run == item.get('run') else
                                    ' (another run)')})
                continue
            answer, nodes = software._record(
                engine, conn, dep, dep.run, item.get('payload') or {}, None)
            answers.append(dict(answer, id=dep.id))
            if nodes:
                woken.append(nodes)
    if any(a.get('accepted') for a in answers):
        drivers_software.CHANGES.notify()
    for stack_id, nodes in woken:
        traversal.send_woken(engine, stack_id, nodes)
    return answers

