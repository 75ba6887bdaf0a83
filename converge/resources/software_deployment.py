"""OS::Heat::SoftwareDeployment: a config applied to a server by its agent.

For each lifecycle action in ``actions`` the step builds the derived
config (the config's inputs filled from ``input_values`` or their
defaults, undeclared values added, and the ``deploy_*`` inputs), writes the
deployment row the server's agent pulls (IN_PROGRESS, with the run key),
and WAITs for the event ``deployment:<id>``: no thread is held while the
agent works. The agent's signal records the result and sends the unit
again; the step, run again from the top, finds the result and ends.

Exactly once: a run is keyed by (deployment, action, run), where the run
key digests what the hook sees and how many runs of this deployment ended
before it. The step never writes a new run for a key it has written
before, whatever crashed or was delivered twice; the agent never runs a
key its journal holds. A failed run stays failed (its output
in the reason) until the inputs change or an operator asks again.
"""

import calendar
import dataclasses
import hashlib
import json
import time

from converge import conf as conf_mod
from converge import exception
from converge import transports
from converge.resources import base
from converge.resources import component
from converge.resources import none
from converge.resources import properties as p
from converge.resources import structured
from converge.transports import signals

ACTIONS = ('CREATE', 'UPDATE', 'DELETE', 'SUSPEND', 'RESUME')
TRANSPORTS = ('CFN_SIGNAL', 'TEMP_URL_SIGNAL', 'HEAT_SIGNAL', 'NO_SIGNAL',
              'ZAQAR_SIGNAL')
#: inputs the engine adds, and those that change between runs of the same
#: work (they are not part of the run key)
DERIVED = ('deploy_server_id', 'deploy_action', 'deploy_stack_id',
           'deploy_resource_name', 'deploy_signal_transport')
_VOLATILE = ('deploy_action', 'deploy_signal_id', 'deploy_signal_verb')
RESULT_ATTRS = ('deploy_stdout', 'deploy_stderr', 'deploy_status_code')


DONE, RUNNING, PENDING = 'done', 'running', 'pending'
#: the plug-in data key of a group's rollout in progress (batches, pause)
ROLLOUT = 'rollout'


def derived_inputs(declared_inputs, values, server_id, action,
                   deployment_id, signal_transport, stack_id=None,
                   resource_name=None):
    """A derived config's inputs: the config's declared inputs with the
    deployment's values (else their defaults), undeclared values, then
    Heat's derived inputs (deploy_server_id, deploy_action, ..., the
    signal URL on converge-api unless NO_SIGNAL)."""
    values = dict(values or {})
    inputs = []
    declared = set()
    for item in declared_inputs or []:
        name = item['name']
        declared.add(name)
        entry = {k: v for k, v in item.items() if k != 'default'}
        entry['value'] = values.get(name, item.get('default'))
        inputs.append(entry)
    for name in sorted(set(values) - declared):
        inputs.append({'name': name, 'type': 'String',
                       'description': 'undeclared input',
                       'value': values[name]})
    derived = {
        'deploy_server_id': server_id,
        'deploy_action': action,
        'deploy_stack_id': stack_id,
        'deploy_resource_name': resource_name,
        'deploy_signal_transport': signal_transport,
    }
    if signal_transport != 'NO_SIGNAL':
        # the signed URL of the run is put in when the run is written
        # (transports/signals.py); converge's agent signals on its own
        # route, heat-config-notify and cfn-signal to this one
        derived['deploy_signal_id'] = (
            '%s/v1/transport/deployments/%s/signal'
            % (conf_mod.api_endpoint(), deployment_id))
        derived['deploy_signal_verb'] = signals.verb(signal_transport)
    for name, value in derived.items():
        if value is None and name in ('deploy_stack_id',
                                      'deploy_resource_name'):
            continue  # a deployment made outside any stack
        inputs.append({'name': name, 'type': 'String',
                       'description': 'converge: %s' % name,
                       'value': value})
    return inputs


@dataclasses.dataclass
class Target:
    """One deployment a resource makes: its id, its server, the plug-in
    data that keeps its runs (``applied``, ``runs``), its member name in a
    group (None alone) and the event its signal wakes."""

    id: str
    server: str
    book: dict
    member: str | None
    wake: str


def event(deployment_id):
    """The event a deployment's unit waits for (its agent's signal)."""
    return 'deployment:%s' % deployment_id


class SoftwareDeployment(base.Resource):
    #: the type a group's members of this kind show (Heat's nested stack)
    member_type = 'OS::Heat::SoftwareDeployment'

    properties_schema = {
        'config': p.Schema(
            p.STRING, 'ID of the software configuration resource to '
            'execute when applying to the server.', update_allowed=True),
        'server': p.Schema(
            p.STRING, 'ID of resource to apply configuration to. Normally '
            'this should be a Nova server ID.', required=True,
            # Heat's: a server the project cannot see (another's) is not
            # one to run its configs on
            constraint='nova.server'),
        'input_values': p.Schema(
            p.MAP, 'Input values to apply to the software configuration on '
            'this server.', default={}, update_allowed=True),
        'actions': p.Schema(
            p.LIST, 'Which lifecycle actions of the deployment resource '
            'will result in this deployment being triggered.',
            default=['CREATE', 'UPDATE'], update_allowed=True,
            schema=p.Schema(p.STRING, allowed_values=ACTIONS)),
        'name': p.Schema(
            p.STRING, 'Name of the derived config associated with this '
            'deployment. This is used to apply a sort order to the list of '
            'configurations currently deployed to a server.',
            update_allowed=True),
        'signal_transport': p.Schema(
            p.STRING, 'How the server should signal to heat with the '
            'deployment output values. converge-agent signals on its own '
            'route; for Heat\'s tooling deploy_signal_id is a URL on '
            'converge-api signed for the run (PUT for TEMP_URL_SIGNAL, '
            'POST otherwise). ZAQAR_SIGNAL needs Zaqar.',
            default='CFN_SIGNAL', allowed_values=TRANSPORTS),
    }

    attributes_schema = {
        'deploy_stdout': 'Captured stdout from the configuration execution.',
        'deploy_stderr': 'Captured stderr from the configuration execution.',
        'deploy_status_code': 'Returned status code from the configuration '
                              'execution.',
    }

    @classmethod
    def validate_more(cls, values, path):
        # Heat's ZAQAR_SIGNAL needs a Zaqar: converge configures none
        if values.get('signal_transport') == transports.ZAQAR_SIGNAL:
            raise exception.InvalidTemplate(
                transports.ZAQAR_REFUSED % 'signal_transport ZAQAR_SIGNAL',
                path=path + ['signal_transport'])
        return values

    #: any output the config declares is an attribute too (the config is
    #: another resource's: its outputs are not known when validating)
    allow_unknown_attributes = True

    # -- identity -----------------------------------------------------------
    @property
    def deployment_id(self):
        return self.physical_id or none.derived_uuid(self.uuid, 'deployment')

    def _store(self):
        return self.clients.deployments

    def _targets(self):
        """The deployments this resource makes: here one. A row whose
        create never recorded its properties (it failed, or is cleaned up
        while its run was still waiting for an agent) is deleted from
        what the deployment itself records: its server (and no DELETE
        config runs: what it asked for is not known)."""
        server = self.properties.get('server')
        if server is None:
            found = self._store().get(self.deployment_id)
            if found is None:
                return []
            server = found.get('server_id') or ''
        return [Target(self.deployment_id, str(server), self.data, None,
                       event(self.deployment_id))]

    #: its create writes the deployment under an id derived from the
    #: resource (deployment_id) with a run key derived from what it runs:
    #: made again, it is the same deployment and run, which the agent runs
    #: once. So it needs no claim before it (see base.Resource)
    adopts_by_key = True
    reruns = True

    # -- steps ----------------------------------------------------------------
    def owned(self, shared=False):
        found = self._store().get(self.physical_id)
        # a deployment written by another project's stack is not this
        # one's to run or delete (one gone is reported by the adopt)
        return found is None or found.get('project_id') == \
            self.stack.project_id

    def observe(self):
        if not self.physical_id:
            # a create whose unit died before recording it wrote this
            found = self._store().get(self.deployment_id)
            if found is not None:
                self.physical_id = self.deployment_id
            return found
        return self._store().get(self.physical_id)

    def create(self):
        return self._apply('CREATE')

    def update(self, prior, observed):
        if self.needs_replace(prior):
            raise exception.UpdateReplace(self.name)
        return self._apply(self._update_action())

    def _update_action(self):
        """UPDATE; after a failed CHECK, the config that applies the
        deployment runs again (CREATE when it runs nothing on UPDATE)."""
        targets = self._targets()
        if self.drift(None) and targets and \
                self._derived_config('UPDATE', targets[0]) is None:
            return 'CREATE'
        return 'UPDATE'

    def drift(self, observed):
        """A target whose CHECK config failed has drifted: what it applied
        no longer holds, so a converge runs it again."""
        failed = sorted({t.book['check_failed'] for t in self._targets()
                         if t.book.get('check_failed')})
        return {'CHECK': ('failed (%s)' % '; '.join(failed), 'COMPLETE')} \
            if failed else set()

    def runs_check(self):
        """Whether a CHECK config runs on its servers: then that is how
        it is observed (observers/loop.py runs a stack check)."""
        targets = self._targets()
        return bool(targets) and \
            self._derived_config('CHECK', targets[0]) is not None

    def delete(self):
        if self.physical_id is None:
            return None
        running = self._apply('DELETE', only=self._alive)
        if running is not None:
            return running
        for target in self._targets() + self._gone_targets():
            self._forget(target)
        return None

    def suspend(self, observed):
        return self._apply('SUSPEND')

    def resume(self, observed):
        return self._apply('RESUME')

    def check(self, observed):
        if observed is None:
            raise exception.ResourceFailure('%s does not exist' % self.name)
        # a CHECK config (a component's `actions: [CHECK]`) runs once per
        # stack check; without one nothing runs
        running = self._apply('CHECK')
        if running is not None:
            return running
        found = self._store().get(self.physical_id) or observed
        if found.get('status') == 'FAILED':
            raise exception.ResourceFailure(found.get('status_reason')
                                            or 'deployment failed')

    def needs_replace(self, prior):
        if prior.get('server') != self.properties.get('server'):
            return True
        return self._inputs_replace(prior)

    def _inputs_replace(self, prior):
        """An input flagged replace_on_change whose value changed."""
        config = self._config()
        for item in config.get('inputs') or []:
            if not item.get('replace_on_change'):
                continue
            name = item.get('name')
            before = (prior.get('input_values') or {}).get(name)
            if before != (self.properties.get('input_values') or {}).get(name):
                return True
        return False

    def get_attributes(self, observed):
        outputs = (observed or {}).get('output_values') or {}
        attrs = {name: outputs.get(name) for name in RESULT_ATTRS}
        for item in (self._config().get('outputs') or []):
            attrs[item['name']] = outputs.get(item['name'])
        return attrs

    # -- the one step every action runs ---------------------------------------
    def _apply(self, action, only=None):
        """Make sure each target's run of `action` happened once.

        Without a rollout policy every target starts at once. With one (a
        group's ``batch_create`` on CREATE, ``rolling_update`` on UPDATE)
        the targets that need a run start batch by batch, in member
        order, with ``pause_time`` between two batches: the pause is a
        Wait (no thread held), its end kept in the plug-in's data. The
        resource waits while a batch runs; once it ended with a failure,
        the resource fails naming every failed member, and no further
        batch starts."""
        self.physical_id = self.deployment_id
        self._running = {}   # target id -> the run it waits for
        targets = [t for t in self._targets() if only is None or only(t)]
        policy = self._rollout_policy(action)
        rollout = self._rollout(action, policy) if policy else None
        # each round starts a batch or returns: a batch that ended at once
        # (NO_SIGNAL) is followed by the next round
        for _ in range(len(targets) + 1):
            running, pending, failed = [], [], []
            for target in targets:
                try:
                    state = self._step(self._action_for(action, target),
                                       target, start=policy is None)
                except exception.ResourceFailure as e:
                    failed.append((target, e))
                    continue
                if state == RUNNING:
                    running.append(target)
                elif state == PENDING:
                    pending.append(target)
            if running:
                if rollout is not None:  # (again, after a crash)
                    rollout['started'] = sorted(set(rollout['started']) | {
                        t.member for t in running})
                return self._wait(running)
            if failed:
                self.data.pop(ROLLOUT, None)
                raise _failure(failed)
            if not pending:
                self.data.pop(ROLLOUT, None)
                return None
            if rollout['started'] and policy[1]:
                # a batch ended: pause before the next one
                left = rollout.setdefault(
                    'pause_until', time.time() + policy[1]) - time.time()
                if left > 0:
                    return base.Wait(
                        after=left, reason='pause_time: %gs before the next '
                        'batch of members' % policy[1])
            batch = pending[:policy[0]]
            for target in batch:
                try:
                    self._step(self._action_for(action, target), target)
                except exception.ResourceFailure:
                    pass   # seen failed when looked at again, just below
            rollout['started'] = sorted(set(rollout['started']) | {
                t.member for t in batch})
            rollout.pop('pause_until', None)
        return self._wait(running)   # not reached: every round started one

    def _rollout_policy(self, action):
        """(max_batch_size, pause_time) for `action`, or None: every
        target at once."""
        return None

    def _rollout(self, action, policy):
        """This action's rollout record in the plug-in's data: the
        members started so far and the end of the current pause. Kept
        while the same action on the same properties goes on (a step run
        again, a traversal superseded by the same one), started afresh
        otherwise."""
        key = hashlib.sha256(json.dumps(
            [action, self.properties, policy], sort_keys=True,
            default=str).encode()).hexdigest()
        found = self.data.get(ROLLOUT)
        if not found or found.get('key') != key:
            found = self.data[ROLLOUT] = {'key': key, 'started': []}
        return found

    def _action_for(self, action, target):
        """The action a target runs when the resource runs `action`."""
        return action

    def _step(self, action, target, start=True):
        """One target's run of `action`: DONE (it happened, or there is
        nothing to run), RUNNING, or PENDING (a new run not started: its
        batch has not come); raises ResourceFailure when it failed."""
        store = self._store()
        derived = self._derived_config(action, target)
        if derived is None:
            # not an action this deployment runs: nothing to run; the
            # agent is shown the deployment once it exists
            if store.get(target.id) is None:
                reason = 'not run: nothing to run for %s' % action
                self._write(store, target, action,
                            self._derived_config(action, target, runs=False),
                            '', 'COMPLETE', reason)
                self._note(target, action, '', 'COMPLETE', reason)
            if action == 'CREATE':
                target.book['created'] = True
            return DONE
        digest = _digest(derived)
        book = target.book
        if action == 'UPDATE' and book.get('applied') == digest and \
                not book.get('check_failed'):
            return DONE   # nothing the hook sees has changed: no re-run
        found = store.get(target.id)
        # a check runs once per stack check (its walk's id), not once
        checking = action == 'CHECK' and \
            book.get('checked') != self.stack.traversal_id
        if found is not None and found['run'] == book.get('last') and \
                found['action'] == action and not checking and \
                found['status'] == 'COMPLETE' and \
                (action == 'CHECK' or book.get('applied') == digest):
            # this action's run ended already (a group's member done in
            # an earlier batch; the same action asked twice in a row)
            if target.member is None:
                self.seen = found
            return DONE
        # the runs finished before this one count in its key: a suspend
        # after suspend, resume is a new run, a retry of this one is not
        runs = book.get('runs', 0)
        run = hashlib.sha256(('%s:%s:%d' % (action, digest, runs)).encode()
                             ).hexdigest()
        if action == 'CHECK':
            # this walk's check; a unit run again for it finds it
            run = hashlib.sha256(('CHECK:%s:%s' % (
                digest, self.stack.traversal_id)).encode()).hexdigest()
            book['checked'] = self.stack.traversal_id
        if found is not None and found['run'] != run and \
                action != 'CHECK' and found['action'] == action and \
                found['status'] in ('COMPLETE', 'FAILED') and \
                'inputs' in (found.get('config') or {}) and \
                _digest(found['config']) == digest:
            # an operator ran this very action again (`deployment action
            # run`, after it failed or was interrupted): its outcome is
            # this step's; writing our own run key again would ask the
            # agent for a run its journal holds already
            if found['status'] == 'FAILED':
                raise exception.ResourceFailure(found['status_reason'])
            run = found['run']
        if found is None or found['run'] != run or \
                found['action'] != action:
            if not start:
                return PENDING
            no_signal = self.properties.get('signal_transport') == \
                'NO_SIGNAL'
            self._write(store, target, action, derived, run,
                        'COMPLETE' if no_signal else 'IN_PROGRESS',
                        store.NO_SIGNAL_REASON if no_signal
                        else 'Deploy data available')
            if not no_signal:
                self._note(target, action, run, 'IN_PROGRESS',
                           'Deploy data available')
                self._running[target.id] = run
                return RUNNING
            found = store.get(target.id)
        elif found['status'] == 'IN_PROGRESS':
            # looked at again while it runs: a server gone for good never
            # signals. Once per recheck period, not on every wake (a
            # group's member signals wake all of it). (Reading the server
            # is also what brings a simulated server's agent back, as a
            # real server's init system would.)
            now = time.time()
            if now - target.book.get('server_seen', now) >= \
                    conf_mod.CONF.software.deployment_recheck / 2:
                if not self._server_lives(target.server):
                    raise exception.ResourceFailure(
                        'server %s is gone: its deployment cannot run'
                        % target.server)
                target.book['server_seen'] = now
            target.book.setdefault('server_seen', now)
            self._running[target.id] = run
            return RUNNING
        elif found['status'] == 'FAILED':
            self._note(target, action, run, 'FAILED',
                       found['status_reason'], found.get('updated_at'))
            if action == 'CHECK':
                # kept with the row: a converge runs the config again
                book['check_failed'] = found['status_reason'] or 'failed'
            raise exception.ResourceFailure(found['status_reason'])
        self._note(target, action, run, 'COMPLETE', found['status_reason'],
                   found.get('updated_at'))
        book.pop('check_failed', None)
        if action == 'CHECK':
            # what the deployment applied is unchanged: an update that
            # changes nothing still runs nothing
            book.update(last=run)
        else:
            book.update(applied=digest, runs=runs + 1, last=run,
                        created=True)
        if target.member is None:
            self.seen = found
        return DONE

    def _note(self, target, action, run, status, reason, when=None):
        """A member's event, once: what was noted last is kept in its
        book, which the engine stores with the events (one transaction),
        so a step run again does not repeat it."""
        if target.member is None:
            return   # a lone deployment's events are its resource's
        key = '%s:%s:%s' % (action, run, status)
        if target.book.get('noted') == key:
            return
        target.book['noted'] = key
        self.member_events.append(base.MemberEvent(
            target.member, self.member_type, target.id, action, status,
            reason or '', _epoch(when)))

    def _wait(self, running):
        # every target's signal wakes this resource's event; one that came
        # since its target was looked at means no wait (engine/software.py
        # wakes in the signal's transaction, under no lock)
        return base.Wait(after=conf_mod.CONF.software.deployment_recheck,
                         event=event(self.deployment_id),
                         reason='waiting for the deployment\'s signal',
                         still=self._store().still_running(
                             {t.id: self._running[t.id] for t in running}))

    def _write(self, store, target, action, derived, run, status, reason):
        derived = signals.with_signal_url(store, derived, target.id, run,
                                          target.server, target.member)
        store.put(id=target.id, stack_id=self.stack.id,
                  project_id=getattr(self.stack, 'project_id', 'converge'),
                  resource_name=self.name, member=target.member,
                  wake_event=target.wake, server_id=target.server,
                  name=derived['name'], config=derived, action=action,
                  run=run, status=status, status_reason=reason,
                  input_values=dict(self.properties.get('input_values')
                                    or {}),
                  output_values={})

    def _gone_targets(self):
        return []

    def _forget(self, target):
        """Delete a target's deployment (the agent stops showing it)."""
        self._store().delete(target.id)

    def _alive(self, target):
        """A DELETE config runs only where the server still exists."""
        return self._server_lives(target.server)

    # -- the derived config ---------------------------------------------------
    def _actions(self):
        return self.properties.get('actions') or []

    def _config(self):
        """The source config (SoftwareConfig's stored body), or {}: read
        once by this plug-in object (one unit of work; a config is
        immutable), not once per target and attribute."""
        config_id = self.properties.get('config')
        if not config_id:
            return {}
        cached = self.__dict__.get('_source')
        if cached is not None and cached[0] == config_id:
            return cached[1]
        found = self.clients.configs.get(config_id)
        if found is None:
            raise exception.ResourceFailure(
                'Software config %s not found' % config_id)
        self._source = (config_id, found)
        return found

    def _derived_config(self, action, target, runs=True):
        """The config the agent runs for `action`, or None when this
        deployment runs nothing for it (with runs=False: what it shows)."""
        source = self._config()
        group = source.get('group') or 'Heat::Ungrouped'
        body = source.get('config', '')
        if group == component.GROUP:
            entry = component.config_for(body, action)
            if entry is None and runs:
                return None
            group = (entry or {}).get('tool') or group
            body = (entry or {}).get('config', '') if entry else body
        elif runs and action not in self._actions():
            return None
        stack = self.stack
        inputs = derived_inputs(
            source.get('inputs'), self.properties.get('input_values'),
            target.server, action, target.id,
            self.properties.get('signal_transport'),
            stack_id='%s/%s' % (stack.name, stack.id),
            resource_name=(target.member if target.member is not None
                           else self.name))
        body = self.derive_body(body, {i['name']: i.get('value')
                                       for i in inputs})
        return {
            'name': (self.properties.get('name') or source.get('name')
                     or none.physical_resource_name(self)),
            'group': group,
            'config': body,
            'options': source.get('options') or {},
            'inputs': inputs,
            'outputs': source.get('outputs') or [],
        }

    def derive_body(self, body, inputs):
        """The config body the agent runs, given {input name: value}
        (StructuredDeployment fills its get_input references here)."""
        return body

    def _server_lives(self, server_id):
        agents = getattr(self.clients, 'agents', None)
        if agents is not None and agents.deployed_server(server_id):
            # an OS::Heat::DeployedServer: no cloud knows it
            return True
        compute = getattr(self.clients, 'compute', None)
        if compute is None:
            return True
        try:
            server = compute.get_server(server_id)
        except exception.CloudNotFound:
            return False
        return server is not None and server.get('status') not in (
            'DELETED', 'SOFT_DELETED')


class StructuredDeployment(SoftwareDeployment):
    """A deployment of a StructuredConfig: every ``{get_input: NAME}`` in
    the config's structure is replaced by the input's value before the
    agent sees it."""

    properties_schema = dict(
        SoftwareDeployment.properties_schema,
        input_key=p.Schema(
            p.STRING, 'Name of key to use for substituting inputs during '
            'deployment.', default='get_input'),
        input_values_validate=p.Schema(
            p.STRING, 'Perform a check on the input values passed to '
            'verify that each required input has a corresponding value. '
            'When the property is set to STRICT and no value is passed, '
            'an exception is raised.', default='LAX',
            allowed_values=structured.VALIDATE_MODES))
    member_type = 'OS::Heat::StructuredDeployment'

    def derive_body(self, body, inputs):
        try:
            return structured.substitute(
                body, inputs, self.properties.get('input_key'),
                self.properties.get('input_values_validate'))
        except exception.InvalidInput as e:
            raise exception.ResourceFailure(str(e))


def _rollout_schema(what):
    return p.Schema(p.MAP, schema={
        'max_batch_size': p.Schema(
            p.INTEGER, 'The maximum number of deployments to %s at once.'
            % what, default=1, min=1),
        'pause_time': p.Schema(
            p.NUMBER, 'The number of seconds to wait between batches.',
            default=0, min=0)})


class SoftwareDeploymentGroup(SoftwareDeployment):
    """One config deployed to many servers (a ``servers`` map of member
    name to server id): a deployment per member, each run exactly once;
    the group's attributes are maps by member name.

    As in Heat, the members are the resources of the group's nested stack
    (its id is the group's physical id): ``members()`` lists them (type
    OS::Heat::SoftwareDeployment, named by the map's keys) and their
    events are kept under that id. update_policy ``batch_create`` (on
    CREATE) and ``rolling_update`` (on UPDATE) run the members that need
    a run ``max_batch_size`` at a time, ``pause_time`` seconds apart."""

    # claimed before its create, as any resource: its members' rollout
    # state lives in its data
    adopts_by_key = False

    properties_schema = dict(
        SoftwareDeployment.properties_schema,
        servers=p.Schema(
            p.MAP, 'A map of names and server IDs to apply configuration '
            'to. The name is arbitrary and is used as the Heat resource '
            'name for the corresponding deployment.', required=True,
            update_allowed=True))
    del properties_schema['server']

    update_policy_schema = {
        'batch_create': _rollout_schema('create'),
        'rolling_update': _rollout_schema('replace'),
    }

    attributes_schema = {
        'deploy_stdouts': 'A map of Nova names and captured stdouts from '
                          'the configuration execution to each server.',
        'deploy_stderrs': 'A map of Nova names and captured stderrs from '
                          'the configuration execution to each server.',
        'deploy_status_codes': 'A map of Nova names and returned status '
                               'code from the configuration execution.',
    }

    @property
    def deployment_id(self):
        return self.physical_id or none.derived_uuid(self.uuid,
                                                     'deployment-group')

    def _member(self, name, server):
        book = self.data.setdefault('members', {}).setdefault(name, {})
        return Target(none.derived_uuid(self.uuid, 'member:%s' % name),
                      str(server), book, name, event(self.deployment_id))

    def _targets(self):
        servers = self.properties.get('servers') or {}
        return [self._member(n, servers[n]) for n in sorted(servers)]

    def _gone_targets(self):
        """Members the servers map no longer has."""
        servers = self.properties.get('servers') or {}
        return [self._member(n, '') for n in sorted(
            self.data.get('members') or {}) if n not in servers]

    def _rollout_policy(self, action):
        key = {'CREATE': 'batch_create', 'UPDATE': 'rolling_update'}.get(
            action)
        policy = self.update_policy.get(key) if key else None
        if not isinstance(policy, dict):
            return None   # Heat: every member at once
        return (max(1, int(policy.get('max_batch_size') or 1)),
                max(0.0, float(policy.get('pause_time') or 0)))

    def _action_for(self, action, target):
        # a member added by an update (or never created: its batch never
        # came) is created, as Heat creates a new resource of the nested
        # stack; 'applied' marks members created before 'created' existed
        if action == 'UPDATE' and not (target.book.get('created') or
                                       'applied' in target.book):
            return 'CREATE'
        return action

    def _alive(self, target):
        # a member whose deployment was never written has nothing to undo
        return self._store().get(target.id) is not None and \
            super()._alive(target)

    def _forget(self, target):
        """A member's deployment deleted: its DELETE events (after its
        DELETE config's own, if that ran)."""
        if self._store().get(target.id) is None:
            return
        self._store().delete(target.id)
        if not (target.book.get('noted') or '').startswith('DELETE:'):
            self._note(target, 'DELETE', '', 'IN_PROGRESS', 'state changed')
        target.book['noted'] = None
        self._note(target, 'DELETE', '', 'COMPLETE', 'state changed')

    # -- the nested stack ---------------------------------------------------
    def nested_stack_id(self):
        return self.physical_id

    def members(self):
        if not self.physical_id:
            return None
        store, out = self._store(), []
        for target in self._shown_targets():
            row = store.get(target.id)
            shown = dict(resource_name=target.member,
                         resource_type=self.member_type,
                         properties=self._member_properties(target, row))
            if row is None:   # its batch has not come: not created yet
                out.append(dict(shown, physical_resource_id='',
                                action='INIT', status='COMPLETE',
                                status_reason='', updated_at=None,
                                attributes={}))
                continue
            outputs = row.get('output_values') or {}
            out.append(dict(
                shown, physical_resource_id=target.id, action=row['action'],
                status=row['status'], status_reason=row['status_reason'],
                updated_at=_epoch(row.get('updated_at')),
                attributes={k: outputs.get(k) for k in sorted(
                    set(RESULT_ATTRS) | set(outputs))}))
        return out

    def _shown_targets(self):
        """The members shown: those of the servers map last applied and
        those a step of an action still running started (its properties
        are recorded when it ends; its members' books are kept in its
        data as it goes)."""
        servers = dict(self.properties.get('servers') or {})
        for name in self.data.get('members') or {}:
            servers.setdefault(name, '')
        return [self._member(n, servers[n]) for n in sorted(servers)]

    def _member_properties(self, target, row):
        """A member's properties as Heat's nested stack gives them: the
        group's, with its one server (and the input values its
        deployment was last written with)."""
        props = {k: v for k, v in self.properties.items() if k != 'servers'}
        props['server'] = target.server or (row or {}).get('server_id')
        if row is not None:
            props['input_values'] = row.get('input_values') or {}
        return props

    # -- steps ----------------------------------------------------------------
    def observe(self):
        if not self.physical_id:
            return None
        store = self._store()
        return {'members': {t.member: store.get(t.id)
                            for t in self._targets()}}

    def update(self, prior, observed):
        if self.needs_replace(prior):
            raise exception.UpdateReplace(self.name)
        for gone in self._gone_targets():   # members removed: their rows go
            self._forget(gone)
            self.data['members'].pop(gone.member, None)
        return self._apply('UPDATE')

    def needs_replace(self, prior):
        return self._inputs_replace(prior)

    def check(self, observed):
        if observed is None:
            raise exception.ResourceFailure('%s does not exist' % self.name)
        for name, row in sorted((observed.get('members') or {}).items()):
            if row is None or row.get('status') == 'FAILED':
                raise exception.ResourceFailure('member %s: %s' % (
                    name, (row or {}).get('status_reason') or 'missing'))

    def get_attributes(self, observed):
        members = (observed or {}).get('members') or {}
        names = list(RESULT_ATTRS) + [
            o['name'] for o in self._config().get('outputs') or []]
        attrs = {}
        for name in names:
            attrs[name] = {m: ((row or {}).get('output_values') or {}).get(
                name) for m, row in members.items()}
        attrs['deploy_stdouts'] = attrs['deploy_stdout']
        attrs['deploy_stderrs'] = attrs['deploy_stderr']
        attrs['deploy_status_codes'] = attrs['deploy_status_code']
        return attrs


class StructuredDeploymentGroup(SoftwareDeploymentGroup,
                                StructuredDeployment):
    """A StructuredDeployment to each server of a map."""

    properties_schema = dict(
        SoftwareDeploymentGroup.properties_schema,
        input_key=StructuredDeployment.properties_schema['input_key'],
        input_values_validate=StructuredDeployment.properties_schema[
            'input_values_validate'])


def _epoch(when):
    """A stored naive-UTC datetime as epoch seconds (None: now)."""
    if when is None:
        return None
    return calendar.timegm(when.utctimetuple()) + when.microsecond / 1e6


def _failure(failed):
    """The resource's failure: every failed target, by member."""
    if len(failed) == 1 and failed[0][0].member is None:
        return failed[0][1]
    return exception.ResourceFailure('; '.join(
        'member %s failed: %s' % (t.member, e) for t, e in failed))


def _digest(derived):
    """What the hook sees, as one hex digest (not the action, not the
    signal's own address)."""
    seen = dict(derived)
    seen['inputs'] = [{'name': i['name'], 'value': i.get('value')}
                      for i in derived['inputs']
                      if i['name'] not in _VOLATILE]
    return hashlib.sha256(json.dumps(seen, sort_keys=True,
                                     default=str).encode()).hexdigest()
