"""OS::Heat::TestResource: stores a string; knobs to wait, fail, replace.

Only for testing the engine: ``wait_secs``/``action_wait_secs`` make the
create/update/delete take time (waiting as a cloud action does: the step
returns a Wait and the engine comes back, no thread held), ``fail`` makes create/update fail,
``update_replace`` makes a value change replace the resource, and a change
of ``update_replace_value`` always replaces it.
"""

import time

from converge import exception
from converge.resources import base
from converge.resources import none
from converge.resources import properties as p

ACTIONS = ('create', 'update', 'delete')
#: the longest sleep a property may ask for, in seconds
MAX_SLEEP = 10


class TestResource(base.Resource):
    __test__ = False  # not a pytest test class, despite the name

    logical = False

    #: poll period while waiting (seconds); a negative wait is infinite
    poll_interval = 1.0

    properties_schema = {
        'value': p.Schema(
            p.STRING, 'The input string to be stored.',
            default='test_string', update_allowed=True),
        'update_replace': p.Schema(
            p.BOOLEAN, 'Value which can be set to trigger update replace '
            'for the particular resource.',
            default=False, update_allowed=True),
        'update_replace_value': p.Schema(
            p.STRING, 'Some value that can be stored but can not be '
            'updated.'),
        'fail': p.Schema(
            p.BOOLEAN, 'Value which can be set to fail the resource '
            'operation to test failure scenarios.',
            default=False, update_allowed=True),
        'client_name': p.Schema(
            p.STRING, 'Client to poll.', default='', update_allowed=True),
        'entity_name': p.Schema(
            p.STRING, 'Client entity to poll.', default='',
            update_allowed=True),
        'wait_secs': p.Schema(
            p.NUMBER, 'Seconds to wait after an action (-1 is infinite).',
            default=0, update_allowed=True),
        'action_wait_secs': p.Schema(
            p.MAP, 'Options for simulating waiting.', update_allowed=True,
            schema={
                action: p.Schema(
                    p.NUMBER, 'Seconds to wait after a %s. Defaults to the '
                    'global wait_secs.' % action, update_allowed=True)
                for action in ACTIONS}),
        # these two sleep in the thread that reads the attribute (a
        # worker's) or validates the template (an API request's): a
        # template's number must not hold it for years (nor overflow the
        # sleep, a 500)
        'attr_wait_secs': p.Schema(
            p.NUMBER, 'Number value for timeout during resolving output '
            'value (at most %d s).' % MAX_SLEEP, default=0,
            update_allowed=True, max=MAX_SLEEP),
        'constraint_prop_secs': p.Schema(
            p.NUMBER, 'Number value for delay during resolve constraint '
            '(at most %d s).' % MAX_SLEEP, default=0, update_allowed=True,
            max=MAX_SLEEP),
    }

    attributes_schema = {
        'output': 'The string that was stored. This value is also '
                  'available by referencing the resource.',
    }

    @classmethod
    def validate_more(cls, values, path):
        # Heat's custom constraint on constraint_prop_secs sleeps that long
        delay = values.get('constraint_prop_secs')
        if isinstance(delay, (int, float)) and delay > 0:
            time.sleep(delay)
        return values

    # -- helpers ----------------------------------------------------------
    def _wait_secs(self, action):
        secs = None
        per_action = self.properties.get('action_wait_secs')
        if isinstance(per_action, dict):
            secs = per_action.get(action)
        if secs is None:
            secs = self.properties.get('wait_secs') or 0
        return secs

    def _wait(self, action):
        """Start waiting `action`'s seconds, or go on waiting: a Wait while
        the time is not up (the engine comes back), None when it is."""
        pending = self.data.get('waiting')
        secs = self._wait_secs(action)
        # a wait started under other properties (an update came while it
        # waited) starts again with the new ones
        if pending is None or pending.get('action') != action or \
                pending.get('secs') != secs:
            self.data.pop('waiting', None)
            if not secs:
                return None
            pending = self.data['waiting'] = {
                'action': action, 'secs': secs,
                # a negative wait is infinite: until the stack gives up
                'until': None if secs < 0 else time.time() + secs}
        else:
            self._effort()
        until = pending['until']
        left = self.poll_interval if until is None else until - time.time()
        if left <= 0:
            del self.data['waiting']
            return None
        if self.properties.get('client_name'):
            left = min(left, self.poll_interval)  # simulated effort
        return base.Wait(after=left, reason='%s: waiting %s' % (
            self.name, 'forever' if until is None else
            '%.1f s more' % left))

    def _effort(self):
        """Poll `client_name`.`entity_name` for the stored value, if set."""
        client_name = self.properties.get('client_name')
        entity = self.properties.get('entity_name')
        if not (client_name and entity and self.clients is not None):
            return
        entity_id = self.data.get('value') or self.physical_id
        try:
            client = getattr(self.clients, client_name)
            getter = getattr(client, 'get_' + entity.rstrip('s'), None)
            if getter is None:
                getter = getattr(getattr(client, entity), 'get')
            getter(entity_id)
        except Exception:  # the poll is only simulated effort
            pass

    def _failure(self):
        # Heat's TestResource raises a ValueError (its reason's class)
        return exception.ResourceFailure('Test Resource failed %s' % self.name,
                                         heat_error='ValueError')

    # -- steps ------------------------------------------------------------
    def create(self):
        if not self.properties.get('fail'):
            self.data['value'] = self.properties.get('value')
            self.physical_id = none.physical_resource_name(self)
        wait = self._wait('create')
        if wait is not None:
            return wait
        if self.properties.get('fail'):
            raise self._failure()

    def needs_replace(self, prior):
        if super().needs_replace(prior):  # update_replace_value changed
            return True
        if not self.properties.get('update_replace'):
            return False
        # update_replace: a change of value (or turning the knob on)
        # cannot be made in place
        return any(prior.get(k) != self.properties.get(k)
                   for k in ('value', 'update_replace'))

    def update(self, prior, observed):
        if self.needs_replace(prior):
            raise exception.UpdateReplace(self.name)
        fail = self.properties.get('fail')
        value = self.properties.get('value')
        waiting = (self.data.get('waiting') or {}).get('action') == 'update'
        if waiting or prior.get('value') != value or \
                self.data.get('value') != value:
            if not fail:
                self.data['value'] = value
            wait = self._wait('update')
            if wait is not None:
                return wait
        if not self.physical_id and not fail:
            self.physical_id = none.physical_resource_name(self)
        if fail:
            raise self._failure()

    def delete(self):
        return self._wait('delete')

    def get_attributes(self, observed):
        delay = self.properties.get('attr_wait_secs')
        if isinstance(delay, (int, float)) and delay > 0:
            time.sleep(delay)
        return {'output': self.data.get('value')}
