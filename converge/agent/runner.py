"""Running deployments: one `ServerAgent` per server, many in one `Host`.

A server's agent holds no thread while idle: the host's poller (one per
endpoint, one request held at a time for all its servers) hands it each
new deployment list, and a thread is started for that server only while
it has something to do (run a hook, send a signal). A signal that cannot
be sent (the endpoint down between two embedded commands) is tried again
from the host's timer, with backoff, without holding a thread.

Exactly once (docs/software.md): a run is journalled as started before
its hook runs and is never run again; its result is signalled until
converge-api takes it.
"""

import concurrent.futures
import heapq
import itertools
import json
import logging
import threading
import time

from converge.agent import client
from converge.agent import hooks
from converge.agent import journal as journal_mod

LOG = logging.getLogger(__name__)

#: seconds a poll is held by converge-api when nothing changes
POLL_WAIT = 30
#: least seconds between the starts of two polls of one endpoint: while
#: deployments change many times a second (a thousand servers being
#: deployed) the poller asks a few times a second for all the changes
#: since, not once per change (each ask carries every agent's credential)
POLL_SPACING = 0.25
#: ... and once more POLL_SPACING per this many agents in the poll: the
#: endpoint reads every agent's row on each ask, so a host of a thousand
#: servers asks once a second (Heat's os-collect-config polls every 30 s)
POLL_SPACING_AGENTS = 250
#: seconds an agent host's signal waits for others to go in one request
#: with it (a thousand servers finish their runs a few ms apart)
SIGNAL_GATHER = 0.05
#: most signals, and most bytes of results, one such request carries (a
#: result of more bytes goes alone, on the single signal's route)
SIGNAL_BATCH = 200
SIGNAL_BATCH_BYTES = 256 * 1024
BACKOFF_FIRST = 0.2
BACKOFF_MAX = 3.0


class Backoff:
    def __init__(self, cap=None):
        self.cap = BACKOFF_MAX if cap is None else cap
        self.delay = 0.0

    def next(self):
        self.delay = min(self.cap, max(BACKOFF_FIRST, self.delay * 2))
        return self.delay

    def reset(self):
        self.delay = 0.0


class Timer:
    """Calls functions later, all from one thread."""

    def __init__(self):
        self._cond = threading.Condition()
        self._heap = []
        self._seq = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name='agent-timer')
        self._thread.start()

    def call_later(self, delay, fn):
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + delay,
                                        next(self._seq), fn))
            self._cond.notify()

    def stop(self):
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _loop(self):
        while True:
            with self._cond:
                while not self._stopped and (
                        not self._heap or
                        self._heap[0][0] > time.monotonic()):
                    self._cond.wait(self._heap[0][0] - time.monotonic()
                                    if self._heap else None)
                if self._stopped:
                    return
                _when, _seq, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:
                LOG.exception('agent timer callback failed')


class ServerAgent:
    """The agent of one server: its credential, disk and journal."""

    def __init__(self, creds, disk, timer, on_stop=None, backoff_max=None,
                 signaller=None):
        self.agent_id = creds['agent_id']
        self.creds = {'agent_id': creds['agent_id'],
                      'token': creds['token']}
        self.endpoint_url = creds['endpoint'].rstrip('/')
        self.endpoint = client.Endpoint(self.endpoint_url)
        self.disk = disk
        self.journal = journal_mod.Journal(disk)
        self.processes = hooks.ProcessRunner()
        self.version = None
        self.stopped = False
        self.stop_reason = None
        self._timer = timer
        self._on_stop = on_stop
        #: the host's, sending many agents' signals in one request
        self._signaller = signaller
        self._lock = threading.Lock()
        self._deployments = []
        self._traces = {}   # (deployment id, run) -> traceparent
        self._busy = False
        self._again = False
        self._retry_pending = False
        self._backoff = Backoff(backoff_max)
        # results the API may not have yet (a restart re-reads them)
        self._unacked = self.journal.unfinished()
        # run -> the version of the list it was run or answered in: a
        # list of another version that shows it IN_PROGRESS asks again
        self._answered = {(e['id'], e['action'], e['run']): None
                          for e in self._unacked}
        self._list_version = None
        # when the list was asked for, and when each run's signal was
        # taken (monotonic): a list asked for before a signal was taken
        # may show that run IN_PROGRESS still, and asks nothing again
        self._list_asked = None
        self._acked_at = {}
        for entry in self._unacked:
            LOG.info('agent %s: deployment %s %s run %s: %s, signalling '
                     'again', self.agent_id, entry['id'], entry['action'],
                     entry['run'], 'interrupted' if entry['result'].get(
                         'deploy_status_code') == -1 else 'result unsent')

    def __repr__(self):
        return 'ServerAgent(%s at %s)' % (self.agent_id, self.disk)

    # -- fed by the poller ------------------------------------------------

    def update(self, version, deployments, asked=None):
        with self._lock:
            if self.stopped:
                return
            self.version = self._list_version = version
            self._list_asked = asked
            self._deployments = sorted(
                (d for d in deployments or () if isinstance(d, dict)),
                key=lambda d: (str(d.get('name') or ''), str(d.get('id'))))
            # the trace each run belongs to, given with it when
            # converge-api traces: its signal carries it back
            self._traces = {
                (d.get('id'), d.get('run')): d['traceparent']
                for d in self._deployments
                if isinstance(d.get('traceparent'), str)}
        self.kick()

    def kick(self):
        """Work through what there is to do, in a thread of its own."""
        with self._lock:
            if self.stopped:
                return
            if self._busy:
                self._again = True
                return
            self._busy, self._again = True, False
        threading.Thread(target=self._work, daemon=True,
                         name='agent-%s' % self.agent_id[:8]).start()

    def stop(self, reason=None, kill_hooks=True):
        """Stop for good: nothing more runs or is signalled. With
        `kill_hooks` the running hooks are cut off (a power cut): their
        runs stay journalled as started, reported interrupted by the
        next agent on this disk."""
        with self._lock:
            if self.stopped:
                return
            self.stopped = True
            self.stop_reason = reason
        if kill_hooks:
            self.processes.kill_all()
        else:   # its kept mount namespace goes
            self.processes.close()
        if self._on_stop is not None:
            self._on_stop(self)

    @property
    def busy(self):
        return self._busy

    # -- the work ---------------------------------------------------------

    def _work(self):
        while True:
            try:
                retry = self._step()
            except hooks.Stopped:
                retry = False
            except Exception:
                LOG.exception('agent %s: unexpected error', self.agent_id)
                retry = True
            with self._lock:
                if self.stopped:
                    self._busy = False
                    return
                if retry:
                    self._busy = False
                    if not self._retry_pending:
                        self._retry_pending = True
                        self._timer.call_later(self._backoff.next(),
                                               self._retry)
                    return
                if not self._again:
                    self._busy = False
                    return
                self._again = False

    def _retry(self):
        with self._lock:
            self._retry_pending = False
        self.kick()

    def _step(self):
        """Signal what is unsent, then run what is new, in order. True:
        the endpoint is unavailable, try again later."""
        while self._unacked:
            if not self._send(self._unacked[0]):
                return True
            self._unacked.pop(0)
        with self._lock:
            todo, listed = list(self._deployments), self._list_version
            asked = self._list_asked
        for dep in todo:
            if self.stopped:
                return False
            no_signal = _no_signal(dep)
            if dep.get('status') != 'IN_PROGRESS' and not no_signal:
                continue
            try:
                ident = (dep['id'], dep['action'], dep['run'])
                entry = self.journal.get(*ident)
            except (KeyError, ValueError) as e:
                LOG.error('agent %s: cannot run deployment %r: %s',
                          self.agent_id, dep.get('id'), e)
                continue
            if entry is not None:
                if not self._answer_again(ident, entry, listed, asked):
                    return True
                continue
            entry = self.journal.started(*ident, name=dep.get('name'))
            self._answered[ident] = listed
            LOG.info('agent %s: running deployment %s (%s) %s run %s',
                     self.agent_id, dep['id'], dep.get('name'),
                     dep['action'], dep['run'])
            try:
                result = hooks.run(dep, self.disk, self.processes)
            except hooks.Stopped:
                raise
            except Exception as e:
                LOG.exception('agent %s: hook of deployment %s failed',
                              self.agent_id, dep['id'])
                result = {'deploy_stdout': '', 'deploy_status_code': 1,
                          'deploy_stderr': 'the agent could not run the '
                          'hook: %s: %s' % (type(e).__name__, e)}
            if self.stopped:
                raise hooks.Stopped()
            entry = self.journal.done(entry, result)
            LOG.info('agent %s: deployment %s %s run %s exited %s',
                     self.agent_id, dep['id'], dep['action'], dep['run'],
                     result.get('deploy_status_code'))
            if no_signal:   # nobody waits for it: journalled, not sent
                self.journal.acked(entry, 'NO_SIGNAL: not signalled')
                continue
            if not self._send(entry):
                self._unacked.append(entry)
                return True
        return False

    def _answer_again(self, ident, entry, listed, asked=None):
        """A run the journal has, listed IN_PROGRESS again: the engine
        wrote the deployment anew with a run key it had used before (a
        step resumed after the row was taken over by an operator's
        action). The hook never runs twice; its journalled result is
        signalled once more (once per list version), so that nobody
        waits for a signal that would never come. False: the endpoint
        is unavailable, try again later."""
        if not entry.get('acked') or entry.get('state') != 'done' or \
                self._answered.get(ident, ()) == listed:
            return True   # being signalled, or answered in this list
        taken = self._acked_at.get(ident)
        if taken is not None and (asked is None or asked <= taken):
            return True   # a list read before our signal was taken
        LOG.info('agent %s: deployment %s %s run %s asked for again: '
                 'signalling its journalled result, not running it',
                 self.agent_id, *ident)
        if not self._send(entry):
            return False
        self._answered[ident] = listed
        return True

    def _send(self, entry):
        """Signal one journalled result; True once it needs no more
        sending."""
        with self._lock:
            trace = self._traces.get((entry['id'], entry['run']))
        try:
            if self._signaller is not None:
                answer = self._signaller.signal(
                    self.creds, entry['id'], entry['run'], entry['result'],
                    traceparent=trace)
            else:
                answer = client.signal(self.endpoint, self.creds,
                                       entry['id'], entry['run'],
                                       entry['result'], traceparent=trace)
        except client.Unavailable as e:
            if self._backoff.delay == 0:
                LOG.info('agent %s: cannot signal deployment %s yet (%s); '
                         'trying again', self.agent_id, entry['id'], e)
            return False
        except client.Refused as e:
            self.stop('signal of deployment %s refused (%s): the '
                      'credential was revoked or the server or deployment '
                      'is gone' % (entry['id'], e), kill_hooks=True)
            LOG.warning('agent %s stopped: %s', self.agent_id,
                        self.stop_reason)
            raise hooks.Stopped()
        except client.Rejected as e:
            LOG.error('agent %s: signal of deployment %s rejected (%s); '
                      'not sending it again', self.agent_id, entry['id'], e)
            self.journal.acked(entry, 'rejected: %s' % e)
            return True
        self._backoff.reset()
        note = None
        if not answer.get('accepted', True):
            note = 'not accepted: %s' % answer.get('reason')
            LOG.info('agent %s: signal of deployment %s run %s %s',
                     self.agent_id, entry['id'], entry['run'], note)
        self.journal.acked(entry, note)
        self._acked_at[(entry['id'], entry['action'], entry['run'])] = \
            time.monotonic()
        return True


def _no_signal(dep):
    """A NO_SIGNAL deployment is COMPLETE as soon as it is written (the
    stack does not wait), yet the server runs it, as Heat's do."""
    return any(i.get('name') == 'deploy_signal_transport' and
               i.get('value') == 'NO_SIGNAL'
               for i in dep.get('inputs') or () if isinstance(i, dict))


class Poller:
    """Pulls the deployments of every agent of one endpoint: one request
    held at a time, `POST /v1/agent/poll` (batch) or, for a single agent,
    `GET /v1/agent/deployments` with If-None-Match."""

    def __init__(self, url, batch=True, wait=POLL_WAIT, backoff_max=None,
                 spacing=POLL_SPACING):
        self.url = url
        self.endpoint = client.Endpoint(url)
        self.batch = batch
        self.wait = wait
        self.spacing = spacing
        self._agents = {}
        self._cond = threading.Condition()
        self._changed = False
        self._stopped = False
        self._backoff = Backoff(backoff_max)
        self.requests = 0
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name='agent-poll')
        self._thread.start()

    def add(self, agent):
        with self._cond:
            self._agents[agent.agent_id] = agent
            self._changed = True
            self._cond.notify()
        self.endpoint.abort()   # the held request lacks this agent

    def remove(self, agent):
        with self._cond:
            if self._agents.get(agent.agent_id) is agent:
                del self._agents[agent.agent_id]
            self._changed = True
            self._cond.notify()
        self.endpoint.abort()   # the held request speaks for it no more

    def stop(self):
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self.endpoint.abort()

    def __len__(self):
        return len(self._agents)

    def _loop(self):
        down = False
        started = None
        while True:
            with self._cond:
                while not self._stopped and not self._agents:
                    self._cond.wait()
                if started is not None:
                    spacing = self.spacing * max(
                        1.0, len(self._agents) / POLL_SPACING_AGENTS)
                    self._cond.wait_for(
                        lambda: self._stopped, started + spacing -
                        time.monotonic())
                if self._stopped:
                    return
                self._changed = False
                agents = [a for a in self._agents.values() if not a.stopped]
            started = time.monotonic()
            try:
                self.requests += 1
                self._once(agents)
                if down:
                    LOG.info('endpoint %s answers again', self.url)
                down = False
                self._backoff.reset()
            except client.Unavailable as e:
                with self._cond:
                    if self._stopped:
                        return
                    if self._changed:
                        continue   # aborted to take in a new agent
                    if not down:
                        LOG.info('endpoint %s unavailable (%s); polling '
                                 'again quietly until it answers',
                                 self.url, e)
                    down = True
                    self._cond.wait(self._backoff.next())
            except (client.Rejected, client.Refused) as e:
                LOG.error('endpoint %s refused a poll: %s', self.url, e)
                with self._cond:
                    self._cond.wait(self._backoff.next())
            except Exception:
                LOG.exception('poll of %s failed', self.url)
                with self._cond:
                    self._cond.wait(self._backoff.next())

    def _once(self, agents):
        if not self.batch:
            for agent in agents:
                asked = time.monotonic()
                try:
                    found = client.deployments(self.endpoint, agent.creds,
                                               agent.version, self.wait)
                except client.Refused as e:
                    self._refused(agent, e.code, str(e))
                    continue
                if found is not None:
                    agent.update(*found, asked=asked)
            return
        by_id = {a.agent_id: a for a in agents}
        asked = time.monotonic()
        answer = client.poll(self.endpoint, [
            {'agent_id': a.agent_id, 'token': a.creds['token'],
             'version': a.version} for a in agents], self.wait,
            cancelled=lambda: self._changed)
        for item in answer:
            agent = by_id.get(item.get('agent_id'))
            if agent is None:
                continue
            if item.get('error'):
                self._refused(agent, item['error'], item.get('message'))
            else:
                agent.update(item.get('version'),
                             item.get('deployments') or [], asked)

    def _refused(self, agent, code, message):
        agent.stop('poll refused (%s: %s): the credential was revoked or '
                   'the server is gone' % (code, message))
        LOG.warning('agent %s stopped: %s', agent.agent_id,
                    agent.stop_reason)


class Signaller:
    """Sends the signals of every agent of one endpoint (an agent host's
    servers): one request at a time, `POST /v1/agent/signals`, carrying
    every signal that came within SIGNAL_GATHER of the first, each with
    its agent's own credential. An agent's `signal` blocks until its
    answer; it raises as the single signal's route would, and a request
    that failed as a whole is Unavailable to each (each agent sends again,
    with its own backoff)."""

    def __init__(self, url):
        self.url = url
        self.endpoint = client.Endpoint(url)
        self._cond = threading.Condition()
        self._queue = []
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name='agent-signal')
        self._thread.start()

    def signal(self, creds, dep_id, run, payload, traceparent=None):
        size = len(json.dumps(payload))
        if size > SIGNAL_BATCH_BYTES:
            return client.signal(self.endpoint, creds, dep_id, run, payload,
                                 traceparent=traceparent)
        future = concurrent.futures.Future()
        item = {'deployment_id': dep_id, 'agent_id': creds['agent_id'],
                'token': creds['token'], 'run': run, 'payload': payload}
        if traceparent:
            item['traceparent'] = traceparent
        with self._cond:
            if self._stopped:
                raise client.Unavailable('the agent host is stopping')
            self._queue.append((time.monotonic(), size, item, future))
            self._cond.notify()
        return future.result()

    def stop(self):
        with self._cond:
            self._stopped = True
            left, self._queue = self._queue, []
            self._cond.notify()
        self.endpoint.abort()   # an answer in flight: sent again later
        for _at, _size, _item, future in left:
            future.set_exception(client.Unavailable(
                'the agent host is stopping'))

    def _loop(self):
        while True:
            with self._cond:
                while not self._stopped and not self._queue:
                    self._cond.wait()
                if self._stopped:
                    return
                self._cond.wait_for(
                    lambda: self._stopped or
                    len(self._queue) >= SIGNAL_BATCH,
                    self._queue[0][0] + SIGNAL_GATHER - time.monotonic())
                if self._stopped:
                    return
                batch, total = [], 0
                while self._queue and len(batch) < SIGNAL_BATCH and (
                        not batch or
                        total + self._queue[0][1] <= SIGNAL_BATCH_BYTES):
                    total += self._queue[0][1]
                    batch.append(self._queue.pop(0))
            self._send(batch)

    def _send(self, batch):
        try:
            answers = client.signals(self.endpoint,
                                     [item for _a, _s, item, _f in batch])
        except Exception as e:   # the request as a whole: try again later
            if not isinstance(e, client.Unavailable):
                LOG.error('endpoint %s refused a batch of signals: %s',
                          self.url, e)
            for _a, _s, _item, future in batch:
                future.set_exception(client.Unavailable(str(e)))
            return
        for (_a, _s, item, future), answer in zip(batch, answers):
            code = answer.get('error') if isinstance(answer, dict) else ''
            if not isinstance(code, (int, type(None))):
                # not an answer: no agent may wait for ever on it
                future.set_exception(client.Unavailable(
                    'signal of deployment %s: not an answer: %.200r'
                    % (item['deployment_id'], answer)))
                continue
            error = client.error_for(
                code, str(answer.get('message')), 'signal of deployment '
                '%s' % item['deployment_id']) if code else None
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(answer)


class Host:
    """Many server agents in one process."""

    def __init__(self, batch=True, wait=POLL_WAIT, backoff_max=None):
        self.batch = batch
        self.wait = wait
        self.backoff_max = backoff_max
        self.timer = Timer()
        self._lock = threading.Lock()
        self._pollers = {}
        self._signallers = {}
        self.agents = {}

    def start(self, creds, disk):
        """Start the agent of one server (its journal read first)."""
        with self._lock:
            old = self.agents.get(creds['agent_id'])
        if old is not None:   # its hooks cut off before the journal is read
            old.stop('replaced', kill_hooks=True)
        url = creds['endpoint'].rstrip('/')
        with self._lock:
            signaller = self._signallers.get(url)
            if signaller is None and self.batch:
                signaller = self._signallers[url] = Signaller(url)
        agent = ServerAgent(creds, disk, self.timer, on_stop=self._gone,
                            backoff_max=self.backoff_max,
                            signaller=signaller)
        with self._lock:
            self.agents[agent.agent_id] = agent
            poller = self._pollers.get(agent.endpoint_url)
            if poller is None:
                poller = self._pollers[agent.endpoint_url] = Poller(
                    agent.endpoint_url, self.batch, self.wait,
                    self.backoff_max)
        poller.add(agent)
        agent.kick()   # results a previous run left unsent
        return agent

    def _gone(self, agent):
        with self._lock:
            if self.agents.get(agent.agent_id) is agent:
                del self.agents[agent.agent_id]
            poller = self._pollers.get(agent.endpoint_url)
        if poller is not None:
            poller.remove(agent)

    def stop(self, kill_hooks=True):
        with self._lock:
            agents = list(self.agents.values())
            pollers = list(self._pollers.values())
            signallers = list(self._signallers.values())
        for agent in agents:
            agent.stop('host stopping', kill_hooks=kill_hooks)
        for poller in pollers + signallers:
            poller.stop()
        self.timer.stop()
