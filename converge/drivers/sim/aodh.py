"""Aodh's alarms on the sim (threshold alarms, as Heat's OS::Aodh::Alarm
and its alias OS::Ceilometer::Alarm make them).

The sim measures nothing, so no alarm changes state by itself: each
starts ``insufficient data`` and stays there until its state is set
(Aodh's ``PUT /v2/alarms/{id}/state``: here an update of ``state``,
what ``converge sim`` or a test does). An alarm's name is unique in its
project, as Aodh has it: a create of a name taken by an alarm asking
for something else is refused (409); one asking the same is that
alarm.
"""

from converge.drivers.sim import rows
from converge.drivers.sim.rows import bad, conflict

STATES = ('ok', 'alarm', 'insufficient data')
OPERATORS = ('lt', 'le', 'eq', 'ne', 'ge', 'gt')
STATISTICS = ('max', 'min', 'avg', 'sum', 'count')
SEVERITIES = ('low', 'moderate', 'critical')
ACTIONS = ('alarm_actions', 'ok_actions', 'insufficient_data_actions')


def _rule(rule):
    rule = dict(rule or {})
    if rule.get('meter_name') in (None, ''):
        raise bad('threshold_rule: meter_name is mandatory')
    try:
        rule['threshold'] = float(rule['threshold'])
    except (KeyError, TypeError, ValueError):
        raise bad('threshold_rule: threshold is mandatory and a number')
    rule.setdefault('comparison_operator', 'eq')
    rule.setdefault('statistic', 'avg')
    rule.setdefault('period', 60)
    rule.setdefault('evaluation_periods', 1)
    rule.setdefault('query', [])
    if rule['comparison_operator'] not in OPERATORS:
        raise bad("Value '%s' is not in %s: comparison_operator" % (
            rule['comparison_operator'], list(OPERATORS)))
    if rule['statistic'] not in STATISTICS:
        raise bad("Value '%s' is not in %s: statistic" % (
            rule['statistic'], list(STATISTICS)))
    for field in ('period', 'evaluation_periods'):
        try:
            rule[field] = int(rule[field])
        except (TypeError, ValueError):
            rule[field] = 0
        if rule[field] < 1:
            raise bad('threshold_rule: %s must be a positive integer'
                      % field)
    return rule


class Alarm(rows.Kind):
    name = 'alarm'
    title = 'Alarm'
    fields = ('name', 'description', 'type', 'threshold_rule', 'enabled',
              'repeat_actions', 'severity', 'time_constraints', 'state',
              'state_reason') + ACTIONS
    updatable = tuple(f for f in fields if f not in ('name', 'type'))
    #: what makes two alarms of one name the same alarm
    SAME = ('type', 'threshold_rule')

    def identity(self, ctx, body):
        if not body.get('name'):
            return None
        return 'alarm:%s:%s' % (ctx.project_id, body['name'])

    def same(self, obj, body):
        asked = self._stored(body)
        if any(asked[f] != obj.body[f] for f in self.SAME):
            raise conflict('Alarm with name=%s exists' % obj.body['name'])
        return True

    def _stored(self, body, old=None):
        stored = dict(old or {
            'description': '', 'enabled': True, 'repeat_actions': False,
            'severity': 'low', 'time_constraints': [],
            'state': 'insufficient data',
            'state_reason': 'Not evaluated yet',
            **{a: [] for a in ACTIONS}})
        for field in self.updatable:
            if field in body and body[field] is not None:
                stored[field] = body[field]
        if old is None:
            stored['name'] = body['name']
            stored['type'] = body.get('type') or 'threshold'
            if stored['type'] != 'threshold':
                raise bad('Alarm type %s is not one the sim evaluates'
                          % stored['type'])
        stored['threshold_rule'] = _rule(stored.get('threshold_rule'))
        for field in ACTIONS:
            stored[field] = [str(a) for a in stored[field] or []]
        for field in ('enabled', 'repeat_actions'):
            if not isinstance(stored[field], bool):
                stored[field] = str(stored[field]).lower() == 'true'
        if stored['severity'] not in SEVERITIES:
            raise bad("Value '%s' is not in %s: severity" % (
                stored['severity'], list(SEVERITIES)))
        if stored['state'] not in STATES:
            raise bad("Value '%s' is not in %s: state" % (
                stored['state'], list(STATES)))
        return stored

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        if not body.get('name'):
            raise bad('Alarm name is mandatory')
        stored = self._stored(body)
        stored['state_timestamp'] = ctx.stamp
        return ctx.insert(self.new(ctx, stored, key,
                                   ident=self.identity(ctx, body)))

    def show(self, ctx, obj):
        view = rows.public(obj.body)
        view.update(id=obj.id, alarm_id=obj.id, project_id=obj.project_id,
                    user_id='sim', timestamp=obj.updated)
        return view

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        state = obj.body['state']
        obj.body = self._stored(body, obj.body)
        if obj.body['state'] != state:
            obj.body['state_timestamp'] = ctx.stamp
        return ctx.save(obj)


KINDS = {'alarm': Alarm()}
