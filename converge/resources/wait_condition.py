"""OS::Heat::WaitConditionHandle and OS::Heat::WaitCondition.

A handle is an address something outside the engine (a server's boot
script, typically through the handle's ``curl_cli``) signals SUCCESS or
FAILURE to; a wait condition waits until the handle has `count` SUCCESS
signals, fails on a FAILURE signal, and fails once its `timeout` has
passed.

The waiting holds no thread: the condition's step looks at the stored
signals and, when it must wait, returns ``Wait(event='waitcondition:<handle
id>', after=...)``. A signal (converge/engine/waitconditions.py `signal`)
stores itself and wakes the units waiting for that event; the step then
runs again from the top and looks again. Signals live in the engine
database (``clients.waitconditions``, converge/drivers/waitconditions.py)
under the handle's id, which is derived from the handle resource (so a
create repeated after a crash makes the same handle, with the same token).
"""

import json
import time

from converge import conf as conf_mod
from converge import exception
from converge.resources import base
from converge.resources import none
from converge.resources import properties as p

SIGNAL_TRANSPORTS = ('CFN_SIGNAL', 'TEMP_URL_SIGNAL', 'HEAT_SIGNAL',
                     'NO_SIGNAL', 'ZAQAR_SIGNAL', 'TOKEN_SIGNAL')
SIGNAL_PATH = '/v1/agent/waitconditions/%s/signal'

#: the longest a waiting condition sleeps before it looks at its signals
#: again even if no wake-up came: a signal stored between the step's look
#: and the engine recording the wait wakes nobody (the wait is not yet
#: recorded), and this bounds how late such a signal is seen
RECHECK = 30.0


def event_for(handle_id):
    """The engine event a signal to `handle_id` fires."""
    return 'waitcondition:%s' % handle_id


def signal_url(handle_id):
    return conf_mod.api_endpoint() + SIGNAL_PATH % handle_id


def _store(resource):
    store = getattr(resource.clients, 'waitconditions', None)
    if store is None:
        raise exception.ResourceFailure(
            'No wait condition store available for %s' % resource.name)
    return store


class WaitConditionHandle(base.Resource):
    """Where signals go: a URL and a token (no properties that matter)."""

    logical = True
    # curl_cli and signal carry the token: masked where it occurs
    credential_attributes = ('token',)

    properties_schema = {
        'signal_transport': p.Schema(
            p.STRING, 'How the client will signal the wait condition. '
            'converge has one transport, whatever the value: an HTTP POST '
            'to the handle\'s endpoint with its token (Heat\'s '
            'TOKEN_SIGNAL).', default='TOKEN_SIGNAL',
            allowed_values=SIGNAL_TRANSPORTS),
    }

    attributes_schema = {
        'token': 'Token to send in the X-Auth-Token header when '
                 'signalling the handle.',
        'endpoint': 'URL to POST a signal to.',
        'curl_cli': 'curl command prefix signalling the handle: add '
                    '--data-binary \'{"status": "SUCCESS"}\' (or '
                    'FAILURE).',
        'signal': 'JSON map of what a client needs to signal the handle: '
                  'endpoint and token.',
    }

    @property
    def handle_id(self):
        return self.physical_id or none.derived_uuid(
            self.uuid, 'wait-condition-handle')

    def owned(self, shared=False):
        # a handle of a live stack of another project is not this one's
        # (its token signals that stack)
        stack_id = _store(self).stack_of(self.physical_id)
        found = self.clients.stacks.status(stack_id) if stack_id else None
        return found is None or found['deleted'] or \
            found['project_id'] == self.stack.project_id

    def observe(self):
        if not self.physical_id:
            return None
        if _store(self).stack_of(self.physical_id) is None:
            return None  # deleted behind our back: not live any more
        return {'id': self.physical_id}

    def create(self):
        handle_id = none.derived_uuid(self.uuid, 'wait-condition-handle')
        _store(self).register(handle_id, self.stack.id)  # again: no-op
        self.physical_id = handle_id

    def update(self, prior, observed):
        if self.needs_replace(prior):
            raise exception.UpdateReplace(self.name)
        if observed is None or not self.physical_id:
            self.create()  # the registration went missing: make it again

    def delete(self):
        # its signals go with it; a signal sent afterwards is refused
        _store(self).delete(self.handle_id)

    def get_attributes(self, observed):
        if not self.physical_id:
            return {k: None for k in self.attributes_schema}
        endpoint = signal_url(self.physical_id)
        token = _store(self).token(self.physical_id)
        curl = ("curl -i -X POST -H 'X-Auth-Token: %s' "
                "-H 'Content-Type: application/json' "
                "-H 'Accept: application/json' %s" % (token, endpoint))
        return {'token': token, 'endpoint': endpoint, 'curl_cli': curl,
                'signal': json.dumps({'endpoint': endpoint,
                                      'token': token})}


class WaitCondition(base.Resource):
    """Waits for `count` SUCCESS signals to `handle`, `timeout` at most."""

    logical = True

    properties_schema = {
        'handle': p.Schema(
            p.STRING, 'A reference to the wait condition handle used to '
            'signal this wait condition.', required=True),
        'timeout': p.Schema(
            p.NUMBER, 'The number of seconds to wait for the correct '
            'number of signals to arrive.', required=True, min=1,
            max=43200),
        'count': p.Schema(
            p.INTEGER, 'The number of success signals that must be '
            'received before the stack creation process continues.',
            default=1, min=1, update_allowed=True),
    }

    attributes_schema = {
        'data': 'JSON string containing data associated with wait '
                'condition signals sent to the handle (by signal id).',
    }

    #: self.data key of the wait in progress: {action, since}
    WAITING = 'waiting'

    def observe(self):
        if not self.physical_id:
            return None
        handle = self.properties.get('handle')
        return {'handle': handle,
                'signals': _store(self).signals(handle)}

    def create(self):
        self.physical_id = none.derived_uuid(self.uuid, 'wait-condition')
        return self._wait('CREATE')

    def update(self, prior, observed):
        if self.needs_replace(prior):
            raise exception.UpdateReplace(self.name)
        # a new count: wait again, the signals already in counting (Heat)
        return self._wait('UPDATE')

    def delete(self):
        # the signals belong to the handle and go when it is deleted
        return None

    def get_attributes(self, observed):
        signals = (observed or {}).get('signals') or []
        return {'data': json.dumps({s['id']: s['data'] for s in signals},
                                   sort_keys=True)}

    # -- the wait -----------------------------------------------------------
    def _wait(self, action):
        """One look at the signals: done (None), failed (ResourceFailure)
        or a Wait to look again on the next signal or at the timeout."""
        store = _store(self)
        handle = self.properties['handle']
        count = self.properties.get('count') or 1
        now = time.time()
        state = self.data.get(self.WAITING)
        if not state or state.get('action') != action:
            # a new wait (not this one resumed): its clock starts now
            if store.stack_of(handle) != self.stack.id:
                raise exception.ResourceFailure(
                    '%s is not a valid wait condition handle of stack %s'
                    % (handle, self.stack.name))
            state = self.data[self.WAITING] = {'action': action,
                                               'since': now}
        signals = store.signals(handle)
        failures = [s['reason'] for s in signals
                    if s['status'] != 'SUCCESS']
        if failures:
            self.data.pop(self.WAITING, None)
            raise exception.ResourceFailure(
                ';'.join(failures), heat_error='WaitConditionFailure')
        if len(signals) >= count:
            self.data.pop(self.WAITING, None)
            self.seen = {'handle': handle, 'signals': signals}
            return None
        left = state['since'] + float(self.properties['timeout']) - now
        if left <= 0:
            self.data.pop(self.WAITING, None)
            got = '%d of %d received' % (len(signals), count)
            if signals:
                got += ' - %s' % ';'.join(s['reason'] for s in signals)
            raise exception.ResourceFailure(
                got, heat_error='WaitConditionTimeout')
        return base.Wait(event=event_for(handle), after=min(left, RECHECK),
                         reason='waiting for signals: %d of %d received'
                         % (len(signals), count))
