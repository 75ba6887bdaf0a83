"""AWS::CloudWatch::Alarm, kept as Heat's CWLiteAlarm kept it: the
alarm's definition, stored with the stack (Heat 27 maps the type to an
Aodh alarm through a template; converge has no metering service to
watch a metric). Its properties are checked as Heat's template checks
them; nothing evaluates the metric, so the alarm never fires by itself.
"""

from converge.resources import none
from converge.resources import properties as p

_UNITS = ('Seconds', 'Microseconds', 'Milliseconds', 'Bytes', 'Kilobytes',
          'Megabytes', 'Gigabytes', 'Terabytes', 'Bits', 'Kilobits',
          'Megabits', 'Gigabits', 'Terabits', 'Percent', 'Count',
          'Bytes/Second', 'Kilobytes/Second', 'Megabytes/Second',
          'Gigabytes/Second', 'Terabytes/Second', 'Bits/Second',
          'Kilobits/Second', 'Megabits/Second', 'Gigabits/Second',
          'Terabits/Second', 'Count/Second', 'None')


def _actions(what):
    return p.Schema(p.LIST, 'A list of actions to execute when %s.' % what,
                    update_allowed=True)


class Alarm(none.Named):
    """A stored alarm definition (its Ref: the alarm's physical name)."""

    properties_schema = {
        'AlarmDescription': p.Schema(p.STRING, 'Description for the alarm.',
                                     update_allowed=True),
        'AlarmActions': _actions('state transitions to alarm'),
        'OKActions': _actions('state transitions to ok'),
        'InsufficientDataActions': _actions(
            'state transitions to insufficient-data'),
        'ComparisonOperator': p.Schema(
            p.STRING, 'Operator used to compare the specified Statistic '
            'with Threshold.', update_allowed=True,
            allowed_values=('GreaterThanOrEqualToThreshold',
                            'GreaterThanThreshold', 'LessThanThreshold',
                            'LessThanOrEqualToThreshold')),
        'Dimensions': p.Schema(p.LIST, 'A list of dimensions (arbitrary '
                               'name/value pairs) associated with the '
                               'metric.'),
        'EvaluationPeriods': p.Schema(p.STRING, 'Number of periods to '
                                      'evaluate over.', update_allowed=True),
        'MetricName': p.Schema(p.STRING, 'Metric name watched by the '
                               'alarm.'),
        'Namespace': p.Schema(p.STRING, 'Namespace for the metric.'),
        'Period': p.Schema(p.STRING, 'Period (seconds) to evaluate over.',
                           update_allowed=True),
        'Statistic': p.Schema(
            p.STRING, 'Metric statistic to evaluate.', update_allowed=True,
            allowed_values=('SampleCount', 'Average', 'Sum', 'Minimum',
                            'Maximum')),
        'Threshold': p.Schema(p.STRING, 'Threshold to evaluate against.',
                              update_allowed=True),
        'Units': p.Schema(p.STRING, 'Unit for the metric.',
                          update_allowed=True, allowed_values=_UNITS),
    }
    attributes_schema = {}
