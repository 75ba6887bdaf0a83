"""OS::Heat::AutoScalingGroup and OS::Heat::ScalingPolicy, as in Heat.

An AutoScalingGroup is a ResourceGroup (group.py) whose members have
Heat's random-looking short names instead of indices and whose size is
a capacity between ``min_size`` and ``max_size``: ``desired_capacity``
(else ``min_size``) when it is created or its properties change, and what
a ScalingPolicy's signal asked for in between. Its members are kept in
creation order; scaling down removes FAILED members first, then the
oldest (Heat's order); a change of the member definition (``resource``)
rolls through the members a batch at a time by the ``rolling_updates``
property, in that same order, on the ResourceGroup's in-place machinery.

A ScalingPolicy is an address (``alarm_url``, ``signal_url``). A signal
to it is handled by the engine (converge/engine/scaling.py): in one
transaction it finds the policy's group, computes the new capacity with
`new_capacity` (Heat's rounding), honours the cooldown, records the
capacity (``clients.scaling``) and starts a traversal of the stack; the
group's unit then finds the recorded capacity newer than the one it
applied and converges its members to it. Neither plug-in talks to the
other.
"""

import base64
import copy
import hashlib
import math
import time

from converge import conf as conf_mod
from converge import exception
from converge.resources import base
from converge.resources import group
from converge.resources import none
from converge.resources import properties as p
from converge.resources import rolling

ADJUSTMENT_TYPES = (CHANGE_IN_CAPACITY, EXACT_CAPACITY,
                    PERCENT_CHANGE_IN_CAPACITY) = (
    'change_in_capacity', 'exact_capacity', 'percent_change_in_capacity')

GROUP_TYPE = 'OS::Heat::AutoScalingGroup'
POLICY_TYPE = 'OS::Heat::ScalingPolicy'

#: plug-in data keys of the group: member names in creation order (oldest
#: first); how many names were made so far; the id of the last scaling
#: record applied; when the cooldown of the last scaling ends
NAMES = 'names'
MINTED = 'minted'
SCALED = 'scaled'
COOLDOWN_END = 'cooldown_end'

#: what a member definition (``resource``) may hold: a HOT resource's keys
_MEMBER = {
    'type': p.Schema(p.STRING, required=True),
    'properties': p.Schema(p.MAP),
    'metadata': p.Schema(p.MAP),
    'depends_on': p.Schema(p.ANY),
    'update_policy': p.Schema(p.MAP),
    'deletion_policy': p.Schema(p.STRING),
}

SIGNAL_PATH = '/v1/%s/stacks/%s/%s/resources/%s/signal'


def new_capacity(current, adjustment, adjustment_type, min_adjustment_step,
                 lower, upper):
    """The capacity an adjustment makes of `current`, within [lower,
    upper] (Heat's rule). A percentage under one member rounds away from
    zero, one of a member or more towards zero; `min_adjustment_step` is
    the least a percentage moves."""
    if adjustment_type == CHANGE_IN_CAPACITY:
        wanted = current + adjustment
    elif adjustment_type == EXACT_CAPACITY:
        wanted = adjustment
    else:
        delta = current * adjustment / 100.0
        if abs(delta) < 1.0:
            step = math.ceil(delta) if delta > 0 else math.floor(delta)
        else:
            step = math.floor(delta) if delta > 0 else math.ceil(delta)
        if min_adjustment_step and min_adjustment_step > abs(step):
            step = min_adjustment_step if step > 0 else -min_adjustment_step
        wanted = current + step
    return int(max(lower, min(upper, wanted)))


def member_name(key, number):
    """The `number`th member name of the group whose resource uuid is
    `key`: 12 characters as Heat's short ids, derived rather than random
    so that a step repeated after a crash names the same members."""
    digest = hashlib.sha256(('%s:%d' % (key, number)).encode()).digest()
    return base64.b32encode(digest).decode('ascii')[:12].lower()


def _child(rdef, names):
    member = {k: copy.deepcopy(v) for k, v in rdef.items()
              if k in _MEMBER and v is not None}
    return {'template': {'heat_template_version': '2015-04-30',
                         'resources': {n: copy.deepcopy(member)
                                       for n in names}},
            'params': {}, 'timeout': None}


class AutoScalingGroup(group.ResourceGroup):
    properties_schema = {
        'resource': p.Schema(p.MAP, 'The member definition, in HOT: type, '
                             'properties, metadata...', required=True,
                             update_allowed=True, schema=_MEMBER),
        'max_size': p.Schema(p.INTEGER, 'The most members.', required=True,
                             min=0, update_allowed=True),
        'min_size': p.Schema(p.INTEGER, 'The fewest members.',
                             required=True, min=0, update_allowed=True),
        'cooldown': p.Schema(p.INTEGER, 'Seconds after a scaling during '
                             'which signals are ignored.',
                             update_allowed=True),
        'desired_capacity': p.Schema(p.INTEGER, 'The size when created '
                                     'and when the properties change.',
                                     update_allowed=True),
        'rolling_updates': p.Schema(
            p.MAP, 'How a change of the member definition goes through '
            'the members.', update_allowed=True, schema=group._ROLLING,
            default={'min_in_service': 0, 'max_batch_size': 1,
                     'pause_time': 0}),
    }
    attributes_schema = {
        'outputs': 'get_attr: [group, outputs, X]: X of each member, by '
                   'name.',
        'outputs_list': 'get_attr: [group, outputs_list, X]: X of each '
                        'member, as a list.',
        'current_size': 'How many members the group has.',
        'refs': 'Each member\'s reference id.',
        'refs_map': 'Each member\'s reference id, by name.',
    }
    allow_unknown_attributes = False
    #: Heat's AutoScalingGroup takes its rolling policy as a property
    update_policy_schema = {}
    #: the size a change of the properties decided, for this step
    _target = None

    @classmethod
    def validate_more(cls, values, path):
        group.check_members(values, ('min_size', 'max_size',
                                     'desired_capacity'), path)
        lo, hi = values.get('min_size'), values.get('max_size')
        want = values.get('desired_capacity')
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            raise exception.InvalidTemplate(
                'min_size (%d) can not be greater than max_size (%d)'
                % (lo, hi), path=path + ['min_size'])
        if isinstance(want, int) and isinstance(lo, int) and \
                isinstance(hi, int) and not lo <= want <= hi:
            raise exception.InvalidTemplate(
                'desired_capacity (%d) must be between min_size (%d) and '
                'max_size (%d)' % (want, lo, hi),
                path=path + ['desired_capacity'])
        return values

    @classmethod
    def validate_update_policy(cls, values, path=()):
        if isinstance(values, dict) and 'rolling_update' in values:
            raise exception.InvalidTemplate(
                'Unknown property rolling_update: an AutoScalingGroup '
                'takes its rolling update policy as the property '
                'rolling_updates (as in Heat)',
                path=list(path) + ['rolling_update'])
        return super().validate_update_policy(values, path)

    @classmethod
    def has_attribute(cls, name):
        return name in cls.attributes_schema or name.startswith('resource.')

    # -- the size -----------------------------------------------------------
    def _bounded(self, size):
        return max(self.properties['min_size'],
                   min(self.properties['max_size'], size))

    def _initial(self):
        want = self.properties.get('desired_capacity')
        return self._bounded(self.properties['min_size'] if want is None
                             else want)

    def _pending(self):
        """The newest scaling record not applied yet, or None."""
        found = self.clients.scaling.latest(self.uuid)
        if found is not None and found['id'] > self.data.get(SCALED, 0):
            return found
        return None

    def capacity(self):
        """The size the group is to have now."""
        if self._target is not None:
            return self._target
        names = self.data.get(NAMES)
        if names is None:
            return self._initial()
        pending = self._pending()
        if pending is not None:
            return self._bounded(pending['capacity'])
        return self._bounded(len(names))

    def scaling_state(self):
        """What the engine needs to handle a policy's signal: the current
        size, the bounds, the group's cooldown and when the last scaling's
        ends."""
        return {'capacity': len(self.data.get(NAMES) or ()),
                'min': self.properties['min_size'],
                'max': self.properties['max_size'],
                'cooldown': self.properties.get('cooldown'),
                'cooldown_end': self.data.get(COOLDOWN_END, 0)}

    def _names(self, size):
        names = list(self.data.get(NAMES) or ())
        if size <= len(names):
            # Heat's order: FAILED members go first, then the oldest
            gone = set(self.update_order(names)[:len(names) - size])
            return [n for n in names if n not in gone]
        minted = self.data.get(MINTED, 0)
        while len(names) < size:
            names.append(member_name(self.uuid, minted))
            minted += 1
        self.data[MINTED] = minted
        return names

    def child(self):
        names = self._names(self.capacity())
        self.data[NAMES] = names
        return _child(self.properties['resource'], names)

    @classmethod
    def child_to_validate(cls, values):
        rdef = values.get('resource')
        if not isinstance(rdef, dict) or not isinstance(rdef.get('type'),
                                                        str):
            return None
        return _child(rdef, ['member'])

    # -- hooks of ResourceGroup ---------------------------------------------
    SURGE_STAYS = True

    def rolling_policy(self):
        return self.properties.get('rolling_updates')

    def _surge_plan(self, changing, policy, budget):
        """Heat's InstanceGroup surge (rolling.instance_surge): where the
        minimum in service and a batch do not fit, new members on the
        new definition go with the first batch and stay; once the last
        batch is done as many of the oldest members go (the group's
        member list says so from now on: the last update of the rollout
        removes them)."""
        names = list(self.data.get(NAMES) or ())
        extra, gone, batches = rolling.instance_surge(
            self.update_order(names), policy.get('max_batch_size', 1),
            policy.get('min_in_service', 0))
        minted = self.data.get(MINTED, 0)
        grown = [member_name(self.uuid, minted + i) for i in range(extra)]
        self.data[MINTED] = minted + extra
        self.data[NAMES] = [n for n in names if n not in gone] + grown
        batches[0] = grown + batches[0]
        plan = group._plan([b for b in batches if b], budget)
        plan['grown'] = grown
        return plan

    def update_order(self, names, order=None, key=None):
        """Heat's InstanceGroup order: FAILED members first, then the
        oldest (the policy's own order keys are ResourceGroup's)."""
        kept = self.data.get(NAMES) or []
        place = {n: i for i, n in enumerate(kept)}
        failed = {m['resource_name'] for m in self.members() or ()
                  if m['status'] == 'FAILED'}
        return sorted(names, key=lambda n: (n not in failed,
                                            place.get(n, len(kept)), n))

    # -- steps ----------------------------------------------------------------
    def create(self):
        done = super().create()
        if done is None:
            self._finished(self.properties.get('cooldown'))
        return done

    def update(self, prior, observed):
        pending = self._pending()
        if prior != self.properties:
            # Heat: a change of the properties sizes the group anew
            # (desired_capacity, else the size it has), whatever a signal
            # asked before
            want = self.properties.get('desired_capacity')
            self._target = self._bounded(
                len(self.data.get(NAMES) or ()) if want is None else want)
            cooldown = self.properties.get('cooldown')
        else:
            cooldown = pending['cooldown'] if pending else None
        done = super().update(prior, observed)
        if done is None:
            if pending is not None:
                self.data[SCALED] = pending['id']
            self._finished(cooldown)
        return done

    def _finished(self, cooldown):
        """The group is at its size: signals are ignored for `cooldown`
        seconds (Heat: a cooldown never shortens one under way)."""
        end = time.time() + max(0, cooldown or 0)
        self.data[COOLDOWN_END] = max(end, self.data.get(COOLDOWN_END, 0))

    # -- what the parent sees -------------------------------------------------
    def attributes_from(self, outputs, observed):
        place = {n: i for i, n in enumerate(self.data.get(NAMES) or ())}
        members = sorted((m for m in self.members() or ()
                          if m['resource_name'] in place),
                         key=lambda m: place[m['resource_name']])
        names = [m['resource_name'] for m in members]
        refs = {m['resource_name']: m['reference_id'] for m in members}
        self.data['members'] = {m['resource_name']:
                                m['physical_resource_id'] for m in members}
        keys = sorted({k for m in members for k in m['attributes']})
        values = {
            'refs': [refs[n] for n in names],
            'refs_map': refs,
            'current_size': len(members),
            'outputs': {x: {m['resource_name']: m['attributes'].get(x)
                            for m in members} for x in keys},
            'outputs_list': {x: [m['attributes'].get(x) for m in members]
                             for x in keys},
        }
        # resource.N: the Nth member (creation order), its reference id or
        # resource.N.X one of its attributes
        for i, m in enumerate(members):
            values['resource.%d' % i] = m['reference_id']
            for x, v in m['attributes'].items():
                values['resource.%d.%s' % (i, x)] = v
        return values


class ScalingPolicy(base.Resource):
    """An address that scales an AutoScalingGroup of its stack: each
    signal adjusts the group's capacity (converge/engine/scaling.py)."""

    logical = True

    @classmethod
    def credentials(cls, attributes):
        # the alarm URL carries the token: the token is the secret
        url = attributes.get('alarm_url')
        if isinstance(url, str) and '?token=' in url:
            return [url.split('?token=', 1)[1]]
        return []

    properties_schema = {
        'auto_scaling_group_id': p.Schema(
            p.STRING, 'The AutoScalingGroup to scale (get_resource of it).',
            required=True),
        'adjustment_type': p.Schema(
            p.STRING, 'change_in_capacity, exact_capacity or '
            'percent_change_in_capacity.', required=True,
            allowed_values=list(ADJUSTMENT_TYPES), update_allowed=True),
        'scaling_adjustment': p.Schema(
            p.NUMBER, 'The size of the adjustment.', required=True,
            update_allowed=True),
        'cooldown': p.Schema(
            p.NUMBER, 'Seconds after a scaling during which signals are '
            'ignored (default: the group\'s cooldown).',
            update_allowed=True),
        'min_adjustment_step': p.Schema(
            p.INTEGER, 'The fewest members a percent_change_in_capacity '
            'adds or removes.', min=0, update_allowed=True),
    }
    attributes_schema = {
        'alarm_url': 'A signed URL: a POST to it signals the policy.',
        'signal_url': 'The URL to POST a signal to, with the policy\'s '
                      'token (from alarm_url) in X-Auth-Token.',
    }

    @classmethod
    def validate_more(cls, values, path):
        kind = values.get('adjustment_type')
        if values.get('min_adjustment_step') is not None and \
                kind is not p.UNKNOWN and \
                kind != PERCENT_CHANGE_IN_CAPACITY:
            raise exception.InvalidTemplate(
                'min_adjustment_step property should only be specified '
                'for adjustment_type with value %s.'
                % PERCENT_CHANGE_IN_CAPACITY,
                path=path + ['min_adjustment_step'])
        return values

    def observe(self):
        return {'id': self.physical_id} if self.physical_id else None

    def create(self):
        self.physical_id = none.derived_uuid(self.uuid, 'scaling-policy')

    def update(self, prior, observed):
        if self.needs_replace(prior):
            raise exception.UpdateReplace(self.name)
        if observed is None:
            self.create()

    def delete(self):
        return None

    def get_attributes(self, observed):
        if not self.physical_id:
            return {'alarm_url': None, 'signal_url': None}
        url = signal_url(self.stack, self.name)
        token = self.clients.scaling.token(self.stack.id, self.name)
        return {'signal_url': url, 'alarm_url': '%s?token=%s' % (url, token)}


def signal_url(stack, resource_name):
    """Heat's native signal URL of a resource, on converge-api."""
    return conf_mod.api_endpoint() + SIGNAL_PATH % (
        stack.project_id, stack.name, stack.id, resource_name)
