"""A signal to an AWS::CloudWatch::Alarm: the alarm set to a state, its
actions for that state signalled.

Nothing watches a metric in converge (resources/aws_cloudwatch.py), so
an alarm changes state only when told: ``converge stack resource signal
STACK ALARM --data '{"state": "ALARM"}'`` (or Heat's resource signal
API) with ALARM, OK or INSUFFICIENT_DATA. Each action of that state
(AlarmActions, OKActions, InsufficientDataActions) that is the
reference of a scaling policy of the same stack (an
AWS::AutoScaling::ScalingPolicy's AlarmUrl, as the template's Ref gives
it) is signalled as `stack resource signal` signals it
(engine/scaling.py); any other action is named in the alarm's event as
not signalled. The new state is the alarm's SIGNAL event.
"""

from converge import exception
from converge.db import api
from converge.engine import rows as rows_mod
from converge.engine import scaling
from converge.resources import autoscaling

TYPE = 'AWS::CloudWatch::Alarm'
#: state -> the property naming its actions
ACTIONS = {'ALARM': 'AlarmActions', 'OK': 'OKActions',
           'INSUFFICIENT_DATA': 'InsufficientDataActions'}


def _rows(engine, stack_ident, project_id):
    with engine.db.read() as s:
        stack = api.stack_get(s, stack_ident, project_id=project_id)
        found = rows_mod.current(api.resources_live(s, stack.id),
                                 stack.template_id)
    return stack, found


def is_alarm(engine, stack_ident, resource_name, project_id=None):
    """Whether the stack's resource `resource_name` is an alarm (False
    when there is no such stack or resource: the scaling signal says
    so)."""
    try:
        _, found = _rows(engine, stack_ident, project_id)
    except exception.NotFound:
        return False
    row = found.get(resource_name)
    return row is not None and row.type == TYPE


def signal(engine, stack_ident, resource_name, details, project_id=None):
    """Set the alarm to the state `details` names and signal that
    state's actions. Returns {status (the state), reason, signalled
    (the names of the policies signalled), traversal_id (the first
    scaling traversal started, or None)}."""
    state = str((details or {}).get('state') or '').upper() \
        if isinstance(details, dict) else ''
    if state not in ACTIONS:
        raise exception.InvalidInput(
            'A signal to alarm %s sets its state: {"state": "ALARM"}, '
            '"OK" or "INSUFFICIENT_DATA"' % resource_name)
    stack, found = _rows(engine, stack_ident, project_id)
    alarm = found[resource_name]
    if not alarm.physical_id or alarm.action in ('INIT', 'DELETE'):
        raise exception.Conflict(
            'Signal resource %s of stack %s during %s_%s is not supported'
            % (resource_name, stack.name, alarm.action, alarm.status))
    by_ref = {}
    for row in found.values():
        ref = row.reference_id or row.physical_id
        if ref:
            by_ref[ref] = row
    signalled, ignored, trav = [], [], None
    for action in (alarm.properties or {}).get(ACTIONS[state]) or []:
        target = by_ref.get(action)
        if target is None or not scaling._is(engine, target.type,
                                             autoscaling.ScalingPolicy):
            ignored.append(str(target.name if target else action))
            continue
        done = scaling.signal(engine, stack.id, target.name,
                              {'alarm': resource_name, 'state': state},
                              project_id=project_id)
        signalled.append(target.name)
        trav = trav or done.get('traversal_id')
    reason = 'Alarm state set to %s' % state
    if signalled:
        reason += '; signalled %s' % ', '.join(signalled)
    if ignored:
        reason += '; not signalled (not a scaling policy of the stack): %s' \
            % ', '.join(ignored)
    with engine.db.write() as s:
        api.event_add(s.connection(), stack.id, None, resource_name,
                      api.shown_type(alarm), alarm.physical_id, 'SIGNAL',
                      'COMPLETE', reason)
    return {'status': state, 'reason': reason, 'signalled': signalled,
            'stack_id': stack.id, 'traversal_id': trav}
