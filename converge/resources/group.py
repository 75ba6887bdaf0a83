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

from converge import exception
from converge.resources import base
from converge.resources import nested
from converge.resources import properties as p
from converge.resources import rolling
from converge.template import bounds

#: plug-in data keys: member names a removal policy took out; the member
#: definitions last applied (a rollout moves each batch's over once it
#: passed its gate); a rolling update under way
REMOVED = 'removed'
APPLIED_DEFS = 'member_defs'
ROLLOUT = 'rollout'
#: the plug-in data key of the digest of what the members read beside
#: their definitions (the environment, provider and get_file files)
APPLIED_AROUND = 'member_surroundings'
#: seconds between looks at a rollout waiting for the operator (the
#: operator's resume wakes it at once)
RESUME_RECHECK = 600.0
#: member names shown in a progress line, at most
SHOWN = 10

_BATCH = {
    'max_batch_size': p.Schema(p.INTEGER, default=1, min=1),
    'pause_time': p.Schema(p.NUMBER, default=0, min=0),
}
_ROLLING = dict(
    _BATCH,
    min_in_service=p.Schema(p.INTEGER, default=0, min=0),
    # converge's own, beyond Heat's (docs/resources.md)
    max_failures=p.Schema(
        p.STRING, 'Members that may fail before the rollout halts: a '
        'count, or a percentage of the members it updates ("20%").',
        default='0', pattern=r'[0-9]+(\.[0-9]+)?%?'),
    canary_size=p.Schema(
        p.INTEGER, 'The size of the first batch; the rollout then waits '
        '(canary_wait) before the rest.', default=0, min=0),
    canary_wait=p.Schema(
        p.STRING, 'After the canary batch: "resume" waits for `converge '
        'stack update --resume`, "timer" for pause_time.',
        default='resume', allowed_values=['resume', 'timer']),
    order=p.Schema(
        p.STRING, 'The order members go in.', default='highest_index',
        allowed_values=list(rolling.ORDERS)),
    order_property=p.Schema(
        p.STRING, 'With order "property": the member property (of the '
        'new definition) that orders them, lowest first.'),
    failure_domain=p.Schema(
        p.STRING, 'A member attribute (or else property) naming its '
        'failure domain: no two members of one domain go in one batch.'),
    health_check=p.Schema(
        p.BOOLEAN, 'After each batch, check its members (a stack check of '
        'them: a deployment\'s CHECK config runs on its server); a member '
        'whose check fails counts against max_failures.', default=False),
    surge=p.Schema(
        p.BOOLEAN, 'Meet min_in_service as Heat does, by creating extra '
        'members for the duration of the rollout (where capacity allows '
        'it; not on bare metal). Default: in place.', default=False),
)


def resume_event(resource_uuid):
    """The event a rollout waiting for the operator waits on."""
    return 'rollout:%s' % resource_uuid


def member_names(count, removed):
    """The first `count` names "0", "1", … that were not removed."""
    taken = set(removed)
    return list(itertools.islice(
        (n for n in map(str, itertools.count()) if n not in taken), count))


def _plan(batches, budget, create=False):
    """A rollout's plan, as kept in the resource's data."""
    plan = {'batches': batches, 'done': 0, 'phase': 'start', 'until': None,
            'failed': [], 'budget': budget}
    if create:
        plan['create'] = True
    return plan


def _names(names):
    names = list(names)
    shown = ', '.join(names[:SHOWN])
    return shown + (', … %d more' % (len(names) - SHOWN)
                    if len(names) > SHOWN else '')


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


class MemberAttributes:
    """The attributes of a resource whose members are its nested stack's
    resources (a group's, a chain's): ``refs``, ``refs_map``,
    ``attributes``, ``resource.N[.X]``, ``removed_rsrc_list`` and any
    member attribute X as a list."""

    #: resource.N, resource.N.X and any member attribute X (as a list)
    allow_unknown_attributes = True
    attributes_schema = {
        'refs': 'Each member\'s reference id, in order.',
        'refs_map': 'Each member\'s reference id, by member name.',
        'attributes': 'get_attr: [group, attributes, X]: X of each '
                      'member, by name.',
        'removed_rsrc_list': 'The member names removal policies took out.',
    }

    #: the attributes that are the group's own, not a list of each
    #: member's
    OWN = ('refs', 'refs_map', 'attributes', 'removed_rsrc_list')

    @classmethod
    def has_attribute(cls, name):
        return True

    @classmethod
    def path_per_member(cls, name):
        """Whether a path after attribute `name` in get_attr applies to
        each member's value (Heat: ``[group, X, key]`` is the list of
        each member's X's key), not to the list."""
        return name not in cls.OWN and not name.startswith('resource.')

    def attributes_from(self, outputs, observed):
        members = sorted(self.members() or (),
                         key=lambda m: rolling.sort_key(m['resource_name']))
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


def check_members(values, keys, path):
    """Refuse a member count (`keys` of `values`) beyond what a stack may
    hold ([DEFAULT] max_resources_per_stack), before the child's
    template of that many members is built (a count of a billion took
    the memory of the process that built it)."""
    maximum = bounds.limit('max_resources_per_stack')
    for key in keys:
        count = values.get(key)
        if isinstance(count, int) and count > maximum:
            raise exception.InvalidTemplate(
                '%s (%d) is more members than a stack may hold (%d, '
                '[DEFAULT] max_resources_per_stack)' % (key, count,
                                                        maximum),
                path=list(path) + [key])


class ResourceGroup(MemberAttributes, nested.Nested):
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
    update_policy_schema = {
        'batch_create': p.Schema(p.MAP, schema=_BATCH),
        'rolling_update': p.Schema(p.MAP, schema=_ROLLING),
    }

    @classmethod
    def validate_more(cls, values, path):
        check_members(values, ('count',), path)
        return values

    # -- a rolling update ---------------------------------------------------
    def create(self):
        """With ``batch_create``, the members are created a batch at a
        time (in name order), as the child grows batch by batch; the plan
        is kept as a rolling update's is."""
        child = self._desired()
        policy = (self.update_policy or {}).get('batch_create')
        if not self.physical_id:
            self.data[APPLIED_AROUND] = self._surroundings(child)
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
            self.data[APPLIED_DEFS] = {}
            plan = self.data[ROLLOUT] = _plan(batches, 0, create=True)
            first = self._part(child, batches[:1])
            self.physical_id, self.data[nested.TRAVERSAL] = \
                self.clients.stacks.create(
                    self.stack, self.name, self.uuid, first,
                    adopt=self.data.pop(nested.ADOPTING, None))
            self.data[nested.APPLIED] = self._digest(first)
            plan['phase'] = 'running'
            self._note(plan, 'started')
        if plan is None:   # the batches are done: the last update's wait
            return self._apply_all(child, None)
        return self._roll(plan, child, policy)

    def update(self, prior, observed):
        """With ``rolling_update``, members whose definition changes are
        updated a batch at a time, in place (rolling.py): the plan is kept
        in the resource's data, so a worker dying mid-rollout leaves it to
        the next at the same batch; a pause between batches (or after the
        canary) is a wait that holds no thread. A batch passes its gate
        when the child's traversal that updates it completes: its members
        converged, their deployments signalled. Failed members are
        counted against ``max_failures``; within it the rollout goes on
        (later batches try them again), beyond it the rollout halts. A
        change of count or removals, and members whose definition did not
        change or whose own stacks would visit nothing (quiet_members),
        are applied after the last batch, in one update."""
        child = self._desired()
        plan = self.data.get(ROLLOUT)
        policy = self.rolling_policy()
        if plan is None:
            old = self.data.get(APPLIED_DEFS) or {}
            new = self._members_of(child)
            # a provider file or the environment changed: every member
            # changes, though no definition did
            around = self.data.get(APPLIED_AROUND)
            moved = around is not None and \
                around != self._surroundings(child)
            changing = [n for n in new if n in old and
                        (moved or new[n] != old[n])]
            surge = bool(policy and policy.get('surge')) and \
                len(changing) == len(new) == len(old)
            if policy and changing and not (surge and self.SURGE_STAYS):
                # batches of members whose stacks would do nothing are
                # only pauses: they go with the last update (a surge
                # that stays changes the members all the same)
                quiet = self.clients.stacks.quiet_members(
                    self.stack, self.name, child, self.physical_id, changing)
                changing = [n for n in changing if n not in quiet]
                surge = surge and len(changing) == len(new)
            if not policy or not changing:
                return self._apply_all(child, observed)
            budget = rolling.budget(policy.get('max_failures'),
                                    len(changing))
            if surge:
                plan = self.data[ROLLOUT] = self._surge_plan(
                    changing, policy, budget)
                # the plan may have changed the members the group ends
                # with (a surge that stays)
                child = self._desired()
            else:
                plan = self.data[ROLLOUT] = _plan(
                    self._batches(changing, old, new, policy), budget)
        return self._roll(plan, child, policy or {})

    def _batches(self, changing, old, new, policy):
        """The plan's batches: the members in the policy's order, cut as
        its batch size, minimum in service, canary and failure domains
        say."""
        seen = {m['resource_name']: m for m in self.members() or ()}

        def prop(name, key):
            return ((new.get(name) or {}).get('properties') or {}).get(key)

        order = policy.get('order', 'highest_index')
        key = {'oldest': lambda n: (seen.get(n) or {}).get('created_at'),
               'property': lambda n: prop(n, policy.get('order_property')),
               }.get(order)
        domain = policy.get('failure_domain')

        def domain_of(n):
            attrs = (seen.get(n) or {}).get('attributes') or {}
            return attrs[domain] if domain in attrs else prop(n, domain)
        return rolling.in_place_batches(
            self.update_order(changing, order, key), len(old),
            policy.get('max_batch_size', 1), policy.get('min_in_service', 0),
            canary=policy.get('canary_size', 0),
            domain=domain_of if domain else None)

    def _surge_plan(self, changing, policy, budget):
        """Heat's way (rolling.heat_batches): extra members on the new
        definition first, for the duration, so that min_in_service
        members stay in service while the others update in place; the
        extras go after the last batch."""
        count = len(changing)
        spare = member_names(2 * count + policy.get('max_batch_size', 1),
                             self.data.get(REMOVED) or ())[count:]
        steps = rolling.surge_batches(
            self.update_order(changing, policy.get('order',
                                                   'highest_index')),
            count, policy.get('max_batch_size', 1),
            policy.get('min_in_service', 0), spare)
        return _plan([moved for moved, _ in steps], budget)

    #: a surge's extra members stay and as many of the oldest go
    #: (Heat's InstanceGroup), rather than the extras going at the end
    #: (Heat's ResourceGroup)
    SURGE_STAYS = False

    def rolling_policy(self):
        """The rolling update policy (None: every member at once);
        a group type that keeps it elsewhere says so here."""
        return (self.update_policy or {}).get('rolling_update')

    def update_order(self, names, order='highest_index', key=None):
        """The order the members whose definition changes go in (the
        policy's ``order``; `key` gives a member's value for it)."""
        return rolling.update_order(names, order, key)

    def _roll(self, plan, child, policy):
        batches = plan['batches']
        plan.setdefault('failed', [])  # a plan kept by an older release
        plan.setdefault('budget', 0)
        while True:
            if plan['phase'] == 'canary':
                # `converge stack update --resume` moves it on (the engine
                # writes the phase under this resource's lock, then wakes
                # the event)
                return base.Wait(
                    after=RESUME_RECHECK, event=resume_event(self.uuid),
                    reason='canary batch done (%s); waiting for `converge '
                    'stack update --resume %s`: %d of %d batches left' % (
                        _names(batches[0]), self.stack.name,
                        len(batches) - plan['done'], len(batches)))
            if plan['phase'] == 'pause':
                left = plan['until'] - time.time()
                if left > 0:
                    return base.Wait(after=left, reason=(
                        'pausing after batch %d of %d'
                        % (plan['done'], len(batches))))
                plan['phase'] = 'start'
            if plan['done'] >= len(batches):
                return self._last(plan, child)
            if plan['phase'] == 'start':
                # the child's traversal walks this batch's members only:
                # the others wait for their own batch (or, failed, are
                # left as they are)
                part = self._part(child, batches[:plan['done'] + 1])
                self._push(part, only=[n for n in batches[plan['done']]
                                       if n not in plan['failed']])
                self.data[nested.APPLIED] = self._digest(part)
                plan['phase'] = 'running'
                self._note(plan, 'started')
            creating = plan.get('create') and plan['done'] == 0
            checking = plan['phase'] == 'checking'
            end = self._child_end('CHECK' if checking else
                                  'CREATE' if creating else 'UPDATE',
                                  settled=True)
            if isinstance(end, base.Wait):
                end.reason = self._progress(plan) + (
                    '; checking its members' if checking else '')
                return end
            if end['status'] == 'FAILED':
                self._count_failures(plan)
                stopped = [] if checking else \
                    self._stopped(batches[plan['done']])
                if stopped:
                    # their waits ended when another member failed: the
                    # batch again, the failed ones left as they are
                    plan['phase'] = 'start'
                    self.notes.append(
                        'batch %d of %d again for %s, stopped when a '
                        'member failed' % (plan['done'] + 1, len(batches),
                                           _names(stopped)))
                    continue
            checked = [n for n in batches[plan['done']]
                       if n not in plan['failed']]
            if policy.get('health_check') and not checking and checked:
                # the gate's second half: a check of the batch's members
                # (a deployment's CHECK config runs on each server)
                self.data[nested.TRAVERSAL] = self.clients.stacks.again(
                    self.physical_id, 'CHECK', only=checked)
                plan['phase'] = 'checking'
                continue
            # the batch passed its gate: its members are on their new
            # definition (failed ones within the budget are left as they
            # are: no later traversal of the rollout walks them)
            new = self._members_of(child)
            applied = self.data.setdefault(APPLIED_DEFS, {})
            for name in batches[plan['done']]:
                if name not in plan['failed']:
                    applied[name] = new[name] if name in new else \
                        self._extra(name)
            plan['done'] += 1
            pause = policy.get('pause_time') or 0
            canary = plan['done'] == 1 and policy.get('canary_size')
            if plan['done'] >= len(batches):
                plan['phase'] = 'start'
            elif canary and policy.get('canary_wait', 'resume') == 'resume':
                plan['phase'] = 'canary'
                self.notes.append('canary batch done (%s); waiting for '
                                  '`converge stack update --resume`'
                                  % _names(batches[0]))
            elif pause:
                plan.update(phase='pause', until=time.time() + pause)
            else:
                plan['phase'] = 'start'

    def _last(self, plan, child):
        """After the last batch: the rest of the change (count, removals,
        members whose definition did not change) in one update; the
        rollout ends with it."""
        if plan['phase'] != 'final':
            old = set(self.data.get(APPLIED_DEFS) or ())
            new = self._members_of(child)
            self.data[APPLIED_DEFS] = new
            self.data[APPLIED_AROUND] = self._surroundings(child)
            wanted = self._digest(child)
            if self.data.get(nested.APPLIED) != wanted:
                # members added or removed; else (the group's metadata)
                # a whole walk. A surge's members that stay are walked
                # again too (Heat updates a member's nested stack in
                # every later batch: they end UPDATE_COMPLETE as the
                # others)
                grown = set(plan.get('grown') or ())
                self._push(child, only=(old ^ set(new)) | grown or None,
                           converge=bool(grown))
                self.data[nested.APPLIED] = wanted
            plan['phase'] = 'final'
        end = self._child_end('UPDATE', settled=True)
        if isinstance(end, base.Wait):
            end.reason = '%s: the last batch done, applying the rest' % (
                self._kind(plan))
            return end
        if end['status'] == 'FAILED':
            self._count_failures(plan)
        del self.data[ROLLOUT]
        if plan['failed']:
            self.status_note = (
                '%s done: %d of its members failed (%s), within '
                'max_failures %d' % (self._kind(plan), len(plan['failed']),
                                     _names(plan['failed']), plan['budget']))
        return None

    def _count_failures(self, plan):
        """The child's traversal failed: its failed members count against
        the budget; beyond it the rollout halts (with the stack's
        rollback, if enabled, the batches done go back in batches)."""
        failed = sorted(
            (m['resource_name'] for m in self.members() or ()
             if m['status'] == 'FAILED' and not (
                 m['status_reason'] or '').startswith('Stopped waiting')),
            key=rolling.sort_key)
        fresh = [n for n in failed if n not in plan['failed']]
        plan['failed'] = failed
        total = len(plan['batches'])
        if fresh:
            self.notes.append('batch %d of %d: members failed: %s (%d '
                              'failed, max_failures %d)' % (
                                  plan['done'] + 1, total, _names(fresh),
                                  len(failed), plan['budget']))
        if len(failed) > plan['budget']:
            # the batch under way, and the failed members, are in no
            # known state: any next update (a rollback) walks them again
            applied = self.data.setdefault(APPLIED_DEFS, {})
            batch = plan['batches'][plan['done']] \
                if plan['done'] < total else []
            for name in set(batch) | set(failed):
                if name in applied:
                    applied[name] = None
            del self.data[ROLLOUT]
            raise exception.ResourceFailure(
                '%s halted at batch %d of %d: %d members failed (%s), more '
                'than max_failures %d' % (
                    self._kind(plan), min(plan['done'] + 1, total), total,
                    len(failed), _names(failed), plan['budget']))

    def _stopped(self, names):
        """Those of the members `names` whose wait the child's failing
        traversal stopped."""
        names = set(names)
        return sorted((m['resource_name'] for m in self.members() or ()
                       if m['resource_name'] in names and
                       m['status'] == 'FAILED' and (
                           m['status_reason'] or '').startswith(
                               'Stopped waiting')), key=rolling.sort_key)

    @staticmethod
    def _kind(plan):
        return 'batch create' if plan.get('create') else 'rolling update'

    def _progress(self, plan):
        """Where the rollout is: the batch (n of m), its members, what is
        left, what failed."""
        batches, done = plan['batches'], plan['done']
        left = sum(len(b) for b in batches[done + 1:])
        text = '%s: batch %d of %d (%s); %d members after it' % (
            self._kind(plan), done + 1, len(batches),
            _names(batches[done]), left)
        if plan['failed']:
            text += '; %d failed (%s)' % (len(plan['failed']),
                                          _names(plan['failed']))
        return text

    def _note(self, plan, what):
        self.notes.append(self._progress(plan).replace(
            '; ', ' %s; ' % what, 1))

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
            # a member in no known state (a halted batch's) stands on its
            # new definition until its batch walks it
            part['template']['resources'] = {
                n: (new[n] if n in new and (n in moved or d is None)
                    else d)
                for n, d in old.items() if n in new or d is not None}
            # a surge: extra members, on the new definition
            part['template']['resources'].update(
                (n, new[n] if n in new else self._extra(n)) for n in moved
                if n not in old)
        return part

    def _extra(self, name):
        """The definition of member `name` beyond the count (a surge's
        extra member)."""
        return _child(self.properties, [name])['template']['resources'][name]

    def _surroundings(self, child):
        return self.clients.stacks.surroundings(self.stack, self.name, child)

    def _apply_all(self, child, observed):
        self.data[APPLIED_DEFS] = self._members_of(child)
        self.data[APPLIED_AROUND] = self._surroundings(child)
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
        is created. A group of no members (a count known to be 0: a
        feature turned off) has none to check, as Heat's: its member's
        values may name what this cloud lacks."""
        rdef = values.get('resource_def')
        if not isinstance(rdef, dict) or not isinstance(rdef.get('type'),
                                                        str):
            return None
        if values.get('count', 1) == 0:
            return None
        return _child(values, ['0'])


class ResourceChain(MemberAttributes, nested.Nested):
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

    def child(self):
        return _chain(self.properties)

    @classmethod
    def child_to_validate(cls, values):
        if not isinstance(values.get('resources'), list) or not all(
                isinstance(t, str) for t in values['resources']):
            return None
        return _chain(values)


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
