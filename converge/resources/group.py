"""OS::Heat::ResourceGroup: `count` copies of one resource definition in
a nested stack, as in Heat.

Members are named "0", "1", … in order, skipping the names a removal
policy took out (they are never used again, Heat's blacklist); the
member definition's strings have ``index_var`` (``%index%``) replaced by
the member's name. The group's attributes are read from its members:
``refs`` and ``refs_map``, ``attributes`` (``get_attr: [g, attributes,
X]``: X of each member by name), ``resource.N`` (the member's
attributes, or ``resource.N.X`` one of them), ``removed_rsrc_list``, and
any other name X: the list of each member's X, in order.
"""

import copy
import itertools
import time

from converge.resources import base
from converge.resources import nested
from converge.resources import properties as p
from converge.resources import rolling

#: plug-in data keys: member names a removal policy took out; the member
#: definitions last applied in full; a rolling update under way
REMOVED = 'removed'
APPLIED_DEFS = 'member_defs'
ROLLOUT = 'rollout'

_BATCH = {
    'max_batch_size': p.Schema(p.INTEGER, default=1, min=1),
    'pause_time': p.Schema(p.NUMBER, default=0, min=0),
}
_ROLLING = dict(_BATCH,
                min_in_service=p.Schema(p.INTEGER, default=0, min=0))


def member_names(count, removed):
    """The first `count` names "0", "1", … that were not removed."""
    taken = set(removed)
    return list(itertools.islice(
        (n for n in map(str, itertools.count()) if n not in taken), count))


def _with_index(value, var, index):
    if isinstance(value, str):
        return value.replace(var, index) if var else value
    if isinstance(value, dict):
        return {_with_index(k, var, index): _with_index(v, var, index)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_with_index(v, var, index) for v in value]
    return value


def _child(values, names):
    """The nested stack of members `names` the group's property values
    describe."""
    rdef = values['resource_def']
    var = values.get('index_var', '%index%')
    resources = {}
    for name in names:
        member = {'type': rdef['type']}
        for key in ('properties', 'metadata'):
            if isinstance(rdef.get(key), dict):
                member[key] = _with_index(copy.deepcopy(rdef[key]), var,
                                          name)
        resources[name] = member
    return {'template': {'heat_template_version': '2015-04-30',
                         'resources': resources},
            'params': {}, 'timeout': None}


class ResourceGroup(nested.Nested):
    properties_schema = {
        'count': p.Schema(p.INTEGER, 'How many members.', default=1, min=0,
                          update_allowed=True),
        'index_var': p.Schema(p.STRING, 'Replaced by each member\'s index '
                              'in the member definition\'s strings.',
                              default='%index%', update_allowed=True),
        'resource_def': p.Schema(p.MAP, 'The member definition: type, '
                                 'properties, metadata.', required=True,
                                 update_allowed=True, schema={
                                     'type': p.Schema(p.STRING,
                                                      required=True),
                                     'properties': p.Schema(p.MAP),
                                     'metadata': p.Schema(p.MAP)}),
        'removal_policies': p.Schema(
            p.LIST, 'Members to remove: [{resource_list: [names or '
            'ids]}]; their names are not used again.', default=[],
            update_allowed=True,
            schema={'resource_list': p.Schema(p.LIST, default=[])}),
        'removal_policies_mode': p.Schema(
            p.STRING, 'append: the names add to those removed before; '
            'update: they replace them.', default='append',
            allowed_values=['append', 'update'], update_allowed=True),
    }
    attributes_schema = {
        'refs': 'Each member\'s reference id, in order.',
        'refs_map': 'Each member\'s reference id, by member name.',
        'attributes': 'get_attr: [group, attributes, X]: X of each '
                      'member, by name.',
        'removed_rsrc_list': 'The member names removal policies took out.',
    }
    #: resource.N, resource.N.X and any member attribute X (as a list)
    allow_unknown_attributes = True
    update_policy_schema = {
        'batch_create': p.Schema(p.MAP, schema=_BATCH),
        'rolling_update': p.Schema(p.MAP, schema=_ROLLING),
    }

    # -- a rolling update ---------------------------------------------------
    def create(self):
        """With ``batch_create``, the members are created a batch at a
        time (in name order), as the child grows batch by batch; the plan
        is kept as a rolling update's is."""
        child = self._desired()
        policy = (self.update_policy or {}).get('batch_create')
        if not policy:
            if not self.physical_id:
                self.data[APPLIED_DEFS] = self._members_of(child)
            return super().create()
        plan = self.data.get(ROLLOUT)
        if not self.physical_id:
            names = list(self._members_of(child))
            size = policy.get('max_batch_size', 1)
            batches = [names[i:i + size]
                       for i in range(0, len(names), size)] or [[]]
            plan = self.data[ROLLOUT] = {'batches': batches, 'done': 0,
                                         'phase': 'running', 'until': None,
                                         'create': True}
            first = self._part(child, batches[:1])
            self.physical_id, self.data[nested.TRAVERSAL] = \
                self.clients.stacks.create(self.stack, self.name, self.uuid,
                                           first)
            self.data[nested.APPLIED] = self._digest(first)
        if plan is None:   # the batches are done: the last update's wait
            return self._apply_all(child, None)
        return self._roll(plan, child, policy)

    def update(self, prior, observed):
        """With ``rolling_update``, members whose definition changes are
        updated a batch at a time, in place (rolling.py): the plan is kept
        in the resource's data, so a worker dying mid-rollout leaves it to
        the next at the same batch; a pause between batches is a wait
        that holds no thread. A change of count or removals, and members
        whose definition did not change, are applied after the last
        batch, in one update."""
        child = self._desired()
        plan = self.data.get(ROLLOUT)
        policy = self.rolling_policy()
        if plan is None:
            old = self.data.get(APPLIED_DEFS) or {}
            new = self._members_of(child)
            changing = [n for n in new if n in old and new[n] != old[n]]
            if not policy or not changing:
                return self._apply_all(child, observed)
            batches = rolling.in_place_batches(
                self.update_order(changing), len(old),
                policy.get('max_batch_size', 1),
                policy.get('min_in_service', 0))
            plan = self.data[ROLLOUT] = {'batches': batches, 'done': 0,
                                         'phase': 'start', 'until': None}
        return self._roll(plan, child, policy or {})

    def rolling_policy(self):
        """The rolling update policy (None: every member at once);
        a group type that keeps it elsewhere says so here."""
        return (self.update_policy or {}).get('rolling_update')

    def update_order(self, names):
        """The order the members whose definition changes go in."""
        return rolling.update_order(names)

    def _roll(self, plan, child, policy):
        batches = plan['batches']
        while True:
            if plan['phase'] == 'pause':
                left = plan['until'] - time.time()
                if left > 0:
                    return base.Wait(after=left, reason=(
                        'pausing after batch %d of %d'
                        % (plan['done'], len(batches))))
                plan['phase'] = 'start'
            if plan['done'] >= len(batches):
                del self.data[ROLLOUT]
                return self._apply_all(child, None)
            batch = batches[plan['done']]
            if plan['phase'] == 'start':
                self._push(self._part(child, batches[:plan['done'] + 1]))
                plan['phase'] = 'running'
            creating = plan.get('create')
            waiting = self._until_done(
                'CREATE' if creating and plan['done'] == 0 else 'UPDATE')
            if waiting is not None:
                waiting.reason = '%s: batch %d of %d (%s)' % (
                    'batch create' if creating else 'rolling update',
                    plan['done'] + 1, len(batches), ', '.join(batch))
                return waiting
            plan['done'] += 1
            pause = policy.get('pause_time') or 0
            if pause and plan['done'] < len(batches):
                plan.update(phase='pause', until=time.time() + pause)
            else:
                plan['phase'] = 'start'

    def _part(self, child, batches):
        """The child with the members of `batches` on their new
        definition and every other member as last applied (while the
        group is created in batches: only the members of `batches`)."""
        old = self.data.get(APPLIED_DEFS) or {}
        new = self._members_of(child)
        moved = [n for b in batches for n in b]
        part = copy.deepcopy(child)
        if (self.data.get(ROLLOUT) or {}).get('create'):
            part['template']['resources'] = {n: new[n] for n in moved}
        else:
            part['template']['resources'] = {
                n: (new[n] if n in moved else d) for n, d in old.items()}
        return part

    def _apply_all(self, child, observed):
        self.data[APPLIED_DEFS] = self._members_of(child)
        return self._apply(child, observed)

    @staticmethod
    def _members_of(child):
        return copy.deepcopy(child['template']['resources'])

    def _removed(self):
        given = []
        for policy in self.properties.get('removal_policies') or ():
            given += [str(n) for n in policy.get('resource_list') or ()]
        before = [] if self.properties.get('removal_policies_mode') == \
            'update' else list(self.data.get(REMOVED) or ())
        members = self.data.get('members') or {}
        # a physical id given instead of a name means its member
        by_id = {v: k for k, v in members.items()}
        names = [by_id.get(n, n) for n in given]
        return before + [n for n in names if n not in before]

    def child(self):
        removed = self._removed()
        self.data[REMOVED] = removed
        return _child(self.properties,
                      member_names(self.properties.get('count', 1), removed))

    @classmethod
    def child_to_validate(cls, values):
        """One member, as the group would make it (when its type is
        known): a member's provider template is checked before anything
        is created."""
        rdef = values.get('resource_def')
        if not isinstance(rdef, dict) or not isinstance(rdef.get('type'),
                                                        str):
            return None
        return _child(values, ['0'])

    @classmethod
    def has_attribute(cls, name):
        return True

    def attributes_from(self, outputs, observed):
        members = sorted(self.members() or (),
                         key=lambda m: int(m['resource_name'])
                         if m['resource_name'].isdigit() else -1)
        refs = {m['resource_name']: m['reference_id'] for m in members}
        self.data['members'] = {m['resource_name']: m['physical_resource_id']
                                for m in members}
        names = sorted({k for m in members for k in m['attributes']})
        values = {
            'refs': [refs[m['resource_name']] for m in members],
            'refs_map': refs,
            'attributes': {x: {m['resource_name']: m['attributes'].get(x)
                               for m in members} for x in names},
            'removed_rsrc_list': list(self.data.get(REMOVED) or ()),
        }
        for m in members:
            key = 'resource.%s' % m['resource_name']
            values[key] = m['attributes']
            for x, v in m['attributes'].items():
                values['%s.%s' % (key, x)] = v
        for x in names:
            if x not in values:
                values[x] = [m['attributes'].get(x) for m in members]
        return values


class ResourceChain(ResourceGroup):
    """OS::Heat::ResourceChain: a nested stack of one resource per type in
    `resources`, named "0", "1", … in order, each with
    `resource_properties`; each depends on the one before unless
    `concurrent`. Its attributes are a group's."""

    properties_schema = {
        'resources': p.Schema(p.LIST, 'The resource types, in order.',
                              required=True, update_allowed=True,
                              schema=p.Schema(p.STRING)),
        'concurrent': p.Schema(p.BOOLEAN, 'Create them all at once.',
                               default=False, update_allowed=True),
        'resource_properties': p.Schema(p.MAP, 'Properties of every '
                                        'resource of the chain.',
                                        default={}, update_allowed=True),
    }
    update_policy_schema = None

    def child(self):
        return _chain(self.properties)

    @classmethod
    def child_to_validate(cls, values):
        if not isinstance(values.get('resources'), list) or not all(
                isinstance(t, str) for t in values['resources']):
            return None
        return _chain(values)

    def update(self, prior, observed):
        return self._apply(self._desired(), observed)

    def create(self):
        return nested.Nested.create(self)


def _chain(values):
    resources, before = {}, None
    props = values.get('resource_properties')
    for i, rtype in enumerate(values.get('resources') or ()):
        name = str(i)
        member = {'type': rtype}
        if isinstance(props, dict) and props:
            member['properties'] = copy.deepcopy(props)
        if before is not None and not values.get('concurrent'):
            member['depends_on'] = [before]
        resources[name] = member
        before = name
    return {'template': {'heat_template_version': '2015-04-30',
                         'resources': resources},
            'params': {}, 'timeout': None}
