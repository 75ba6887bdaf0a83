"""OS::Aodh::Alarm, and OS::Ceilometer::Alarm (the alias Heat's default
environment maps to it), as Heat's
(heat/engine/resources/openstack/aodh/alarm.py, alarm_base.py): an Aodh
threshold alarm made through ``clients.cloud`` (kind alarm).

The properties become Aodh's body as Heat builds it: the rule's fields
go into ``threshold_rule``, ``matching_metadata`` becomes query terms
(``metadata.user_metadata.KEY`` for Nova's meters, else
``metadata.metering.KEY``), the Zaqar queues become ``trust+zaqar://``
actions. The alarm's name is Heat's physical name. Stack suspend
disables it and resume enables it again, as Heat does.
"""

import urllib.parse

from converge.resources import cloud_object as co
from converge.resources import properties as p

OPERATORS = ('le', 'ge', 'eq', 'lt', 'gt', 'ne')
#: the meters whose resource metadata Nova puts under user_metadata
NOVA_METERS = (
    'instance', 'memory', 'memory.usage', 'memory.resident', 'cpu',
    'cpu_util', 'vcpus', 'disk.root.size', 'disk.ephemeral.size') + tuple(
    'disk.%s%s.%s%s' % (device, way, what, rate)
    for device in ('', 'device.') for way in ('read', 'write')
    for what in ('requests', 'bytes') for rate in ('', '.rate')) + tuple(
    'network.%s.%s%s' % (way, what, rate)
    for way in ('incoming', 'outgoing') for what in ('bytes', 'packets')
    for rate in ('', '.rate'))
RULE_FIELDS = ('period', 'evaluation_periods', 'threshold', 'statistic',
               'comparison_operator', 'meter_name')
ACTIONS = (('alarm_actions', 'alarm_queues'),
           ('ok_actions', 'ok_queues'),
           ('insufficient_data_actions', 'insufficient_data_queues'))


def _queues(what):
    return p.Schema(
        p.LIST, 'A list of Zaqar queues to post to when state transitions '
        'to %s.' % what, default=[], update_allowed=True,
        schema=p.Schema(p.STRING))


def _urls(what):
    return p.Schema(p.LIST, 'A list of URLs (webhooks) to invoke when state '
                    'transitions to %s.' % what, update_allowed=True)


class Alarm(co.CloudObject):
    """OS::Aodh::Alarm (and OS::Ceilometer::Alarm): a threshold alarm."""

    kind = 'alarm'
    title = 'Alarm'
    # a cloud without Aodh refuses the type at validate (engine/stacks.py)
    required_service = ('aodh', 'alarming', None)
    natural_identity = True
    update_fields = ('description', 'enabled', 'repeat_actions', 'severity',
                     'threshold_rule', 'alarm_actions', 'ok_actions',
                     'insufficient_data_actions')
    drift_fields = update_fields

    properties_schema = {
        'comparison_operator': p.Schema(
            p.STRING, 'Operator used to compare specified statistic with '
            'threshold.', allowed_values=OPERATORS, update_allowed=True),
        'evaluation_periods': p.Schema(
            p.INTEGER, 'Number of periods to evaluate over.',
            update_allowed=True),
        'meter_name': p.Schema(p.STRING, 'Meter name watched by the alarm.',
                               required=True),
        'period': p.Schema(p.INTEGER, 'Period (seconds) to evaluate over.',
                           update_allowed=True),
        'statistic': p.Schema(
            p.STRING, 'Meter statistic to evaluate.',
            allowed_values=('count', 'avg', 'sum', 'min', 'max'),
            update_allowed=True),
        'threshold': p.Schema(p.NUMBER, 'Threshold to evaluate against.',
                              required=True, update_allowed=True),
        'matching_metadata': p.Schema(
            p.MAP, 'Meter should match this resource metadata (key=value) '
            'additionally to the meter_name.', default={},
            update_allowed=True),
        'query': p.Schema(
            p.LIST, 'A list of query factors, each comparing a Sample '
            'attribute with a value. Implicitly combined with '
            'matching_metadata, if any.', update_allowed=True, schema={
                'field': p.Schema(p.STRING, 'Name of attribute to compare.'),
                'type': p.Schema(
                    p.STRING, 'The type of the attribute.', default='string',
                    allowed_values=('integer', 'float', 'string', 'boolean',
                                    'datetime')),
                'op': p.Schema(p.STRING, 'Comparison operator.',
                               allowed_values=OPERATORS),
                'value': p.Schema(p.STRING,
                                  'String value with which to compare.'),
            }),
        'description': p.Schema(p.STRING, 'Description for the alarm.',
                                update_allowed=True),
        'enabled': p.Schema(
            p.BOOLEAN, 'True if alarm evaluation/actioning is enabled.',
            default=True, update_allowed=True),
        'alarm_actions': _urls('alarm'),
        'ok_actions': _urls('ok'),
        'insufficient_data_actions': _urls('insufficient-data'),
        'alarm_queues': _queues('alarm'),
        'ok_queues': _queues('ok'),
        'insufficient_data_queues': _queues('insufficient-data'),
        'repeat_actions': p.Schema(
            p.BOOLEAN, "False to trigger actions when the threshold is "
            "reached AND the alarm's state has changed. By default, actions "
            "are called each time the threshold is reached.", default=True,
            update_allowed=True),
        'severity': p.Schema(
            p.STRING, 'Severity of the alarm.', default='low',
            allowed_values=('low', 'moderate', 'critical'),
            update_allowed=True),
        'time_constraints': p.Schema(
            p.LIST, 'Describe time constraints for the alarm. Only evaluate '
            'the alarm if the time at evaluation is within this time '
            'constraint. Start point(s) of the constraint are specified '
            'with a cron expression, whereas its duration is given in '
            'seconds.', default=[], schema={
                'name': p.Schema(p.STRING, 'Name for the time constraint.',
                                 required=True),
                'start': p.Schema(
                    p.STRING, 'Start time for the time constraint. A CRON '
                    'expression property.', required=True),
                'description': p.Schema(
                    p.STRING, 'Description for the time constraint.'),
                'duration': p.Schema(
                    p.INTEGER, 'Duration for the time constraint.', min=0,
                    required=True),
                'timezone': p.Schema(
                    p.STRING, 'Timezone for the time constraint (eg. '
                    "'Asia/Taipei', 'Europe/Amsterdam')."),
            }),
    }

    attributes_schema = {}

    def make_body(self):
        props = self.properties
        # an alarm has no name property: always Heat's physical name
        body = {'name': self.physical_name(prop=None), 'type': 'threshold',
                'threshold_rule': self._rule()}
        for field in ('description', 'enabled', 'repeat_actions',
                      'severity'):
            if props.get(field) is not None:
                body[field] = props[field]
        if props.get('time_constraints'):
            body['time_constraints'] = [
                {k: v for k, v in tc.items() if v is not None}
                for tc in props['time_constraints']]
        for urls, queues in ACTIONS:
            body[urls] = [str(u) for u in props.get(urls) or [] if u] + [
                'trust+zaqar://?%s' % urllib.parse.urlencode(
                    {'queue_name': q}) for q in props.get(queues) or []]
        return body

    def _rule(self):
        props = self.properties
        rule = {f: props[f] for f in RULE_FIELDS
                if props.get(f) is not None}
        prefix = 'user_metadata.' if props.get('meter_name') in NOVA_METERS \
            else 'metering.'
        query = [{k: v for k, v in q.items() if v is not None}
                 for q in props.get('query') or []]
        for key, value in (props.get('matching_metadata') or {}).items():
            if key.startswith('metadata.'):
                key = key[len('metadata.'):]
            if key.startswith(('metering.', 'user_metadata.')):
                key = key.split('.', 1)[1]
            query.append({'field': 'metadata.%s%s' % (prefix, key),
                          'op': 'eq', 'value': str(value)})
        if query:
            rule['query'] = query
        return rule

    def suspend(self, observed):
        self._enable(False)

    def resume(self, observed):
        self._enable(True)

    def _enable(self, enabled):
        if self.physical_id and self._get() is not None:
            self.cloud.update(self.kind, self.physical_id,
                              {'enabled': enabled})

    def attributes(self, obj):
        return {}
