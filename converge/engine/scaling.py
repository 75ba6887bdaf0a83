"""A signal to an OS::Heat::ScalingPolicy: adjust its group's capacity.

The CLI (``converge stack resource signal``, through the service layer)
and converge-api (``POST`` to the policy's ``signal_url`` or
``alarm_url``) call `signal`. In **one transaction** it finds the
policy's row, the AutoScalingGroup its ``auto_scaling_group_id`` names
(by reference id, in the same stack, as Heat's ``resource_by_refid``),
decides as Heat's ``AutoScalingGroup.adjust`` does — nothing while the
group or its stack is in progress, nothing when the capacity would not
change, nothing inside the cooldown — records the signal and what became
of it (``scaling_signals``) with an event, and, when the capacity
changes, starts a traversal of the stack (an UPDATE to the template it
has). The group's unit in that traversal finds the recorded capacity
newer than the one it applied and converges its members to it
(resources/autoscaling.py). The traversal's first nodes are sent once
the transaction commits; a lost message is sent again by any engine's
sweeper. Whichever process receives the signal, the handoff is the
database.

A signal that carries an id (converge-api: the ``Idempotency-Key``
header) and comes again is answered from its record, never applied
twice; two signals at once cannot both scale: each starts its traversal
with a compare-and-swap on the stack's current traversal, and the loser's
transaction (its record with it) rolls back.
"""

import time

import sqlalchemy as sa

from converge import exception
from converge.db import api
from converge.drivers import scaling as store
from converge.engine import rows as rows_mod
from converge.engine import traversal
from converge.resources import autoscaling


class Refused(exception.ConvergeError):
    """The token is not the policy's."""

    http_status = 403


class NotSupported(exception.InvalidInput):
    """A signal to a policy suspended or being deleted (Heat's 400)."""


#: a policy in these actions takes no signal (Heat's no_signal_actions)
NO_SIGNAL = ('SUSPEND', 'DELETE')


def signal(engine, stack_ident, resource_name, details=None,
           project_id=None, token=None, signal_id=None):
    """Handle one signal to the policy `resource_name` of a stack.

    :param stack_ident: the stack's id (or, from the CLI, its name)
    :param details: the signal's body (an alarm's JSON); kept in the
        event, not interpreted (Heat acts whatever the alarm state)
    :param project_id: the caller's project (the CLI's); None with a token
    :param token: the policy's token (converge-api); checked when given
    :param signal_id: the caller's id of this signal: a repeat is
        answered from the first one's record
    :returns: the record: {id, status (SCALING, IGNORED), reason,
        capacity, stack_id, traversal_id (the traversal scaling the
        group, or None), repeated (True for a repeat)}
    :raises Refused: a wrong token
    :raises exception.NotFound: no such stack or resource
    :raises exception.InvalidInput: not a scaling policy, or a policy
        whose group is not an AutoScalingGroup of the stack (the failure
        is recorded, with an event, before this is raised)
    :raises exception.Conflict: the policy cannot take signals now
    """
    if token is not None and not engine.clients.scaling.verify(
            stack_ident, resource_name, token):
        raise Refused('Invalid token for resource %s of stack %s'
                      % (resource_name, stack_ident))
    try:
        return _signal(engine, stack_ident, resource_name, details,
                       project_id, signal_id)
    except sa.exc.IntegrityError:
        if signal_id is None:
            raise
        # the same signal came twice at once and the other one won: the
        # answer is its record
        return _signal(engine, stack_ident, resource_name, details,
                       project_id, signal_id)


def _signal(engine, stack_ident, resource_name, details, project_id,
            signal_id):
    with engine.db.write() as s:
        stack = api.stack_get(s, stack_ident, project_id=project_id)
        rows = rows_mod.current(api.resources_live(s, stack.id),
                                stack.template_id)
        policy = rows.get(resource_name)
        if policy is None:
            raise exception.ResourceNotFound(stack.name, resource_name)
        if not _is(engine, policy.type, autoscaling.ScalingPolicy):
            raise exception.InvalidInput(
                'Resource %s of stack %s is %s: only %s takes signals here'
                % (resource_name, stack.name, policy.type,
                   autoscaling.POLICY_TYPE))
        if policy.action in NO_SIGNAL:
            # Heat's: an event on the policy says so (committed), and the
            # caller is refused
            api.event_add(s.connection(), stack.id, None, resource_name,
                          api.shown_type(policy), policy.physical_id,
                          policy.action, policy.status,
                          'Cannot signal resource during %s'
                          % policy.action)
            done = NotSupported('Signal resource during %s is not '
                                'supported.' % policy.action)
        elif not policy.physical_id or policy.action == 'INIT':
            raise exception.Conflict(
                'Signal resource %s of stack %s during %s_%s is not '
                'supported' % (resource_name, stack.name, policy.action,
                               policy.status))
        else:
            done = _record(engine, s, stack, rows, policy, details,
                           signal_id)
    if isinstance(done, Exception):
        raise done
    record, trav, repeated = done
    if repeated:
        return dict(record, repeated=True, traversal_id=None)
    if record['status'] == store.FAILED:
        raise exception.InvalidInput(record['reason'])
    if trav is not None:
        traversal.kick(engine, trav)
    return dict(record, repeated=False,
                traversal_id=trav.id if trav else None)


def _scaling_cause(policy, grp, capacity, reason):
    """What a scaling traversal's notifications say of it (Heat's
    autoscaling notification's fields)."""
    props = policy.properties or {}
    return {'adjustment': props.get('scaling_adjustment'),
            'adjustment_type': props.get('adjustment_type'),
            'capacity': capacity, 'groupname': grp.name,
            'message': reason}


def _record(engine, s, stack, rows, policy, details, signal_id):
    """In the signal's transaction: what became of it, recorded (and the
    traversal scaling the group started): (record, traversal or None,
    False); a repeat: (the first one's record, None, True)."""
    conn = s.connection()
    found = store.ScalingStore.find(conn, stack.id, policy.name, signal_id)
    if found is not None:
        return found, None, True
    trav = None
    status, reason, grp, capacity, cooldown = _decide(
        engine, stack, rows, policy)
    if status == store.SCALING:
        trav = traversal.start(engine, s, stack, stack.template_id,
                               'UPDATE',
                               engine.definition(stack.template_id, stack),
                               rollback=False,
                               visit={grp.name: 'signalled: %s' % reason},
                               cause={'scaling': _scaling_cause(
                                   policy, grp, capacity, reason)})
    record = store.ScalingStore.add(
        conn, stack.id, policy.name, signal_id, status, reason,
        group_key=grp.uuid if grp is not None else None,
        capacity=capacity, cooldown=cooldown)
    api.event_add(conn, stack.id, trav.id if trav else None, policy.name,
                  api.shown_type(policy), policy.physical_id, 'SIGNAL',
                  'FAILED' if status == store.FAILED else 'COMPLETE',
                  _event_reason(status, reason, details))
    return record, trav, False


def _event_reason(status, reason, details):
    text = ('Signal: %s' if status != store.IGNORED
            else 'Signal ignored: %s') % reason
    if details:
        text += ' (details: %s)' % (details,)
    return text


def in_progress(engine, st, row):
    """Heat's ``scaling_in_progress`` of a group's metadata: whether the
    traversal a signal started to scale `row` (an AutoScalingGroup of
    stack `st`) still runs. Heat sets it before resizing and clears it
    after; its functional tests (test_heat_autoscaling) wait for it to
    clear before the next signal, which Heat would ignore meanwhile, as
    converge does. None for a resource that is no such group."""
    if not _is(engine, row.type, autoscaling.AutoScalingGroup):
        return None
    if not st.current_traversal:
        return False
    with engine.db.read() as s:
        trav = api.traversal_get(s, st.current_traversal)
    scaling = ((trav.options or {}).get('cause') or {}).get('scaling') \
        if trav is not None else None
    return bool(scaling) and trav.state in ('running', 'failing') and \
        scaling.get('groupname') == row.name


def _is(engine, type_name, cls):
    """Whether resources of `type_name` are of plug-in `cls` (or of a
    type run by it: AWS::AutoScaling::ScalingPolicy is a ScalingPolicy)."""
    found = engine.plugin_class(type_name)
    return isinstance(found, type) and issubclass(found, cls)


def _decide(engine, stack, rows, policy):
    """(status, reason, group row, new capacity, cooldown) of a signal to
    `policy`, as Heat's AutoScalingGroup.adjust decides."""
    props = policy.properties or {}
    ref = props.get('auto_scaling_group_id')
    grp = next((r for r in rows.values()
                if r.name != policy.name and ref is not None and
                ref in (r.reference_id, r.physical_id)), None)
    if grp is None or not _is(engine, grp.type,
                                  autoscaling.AutoScalingGroup):
        named = 'names no resource' if grp is None else \
            'names %s, an %s,' % (grp.name, grp.type)
        return (store.FAILED,
                'Resource %s (%s) of stack %s: property '
                'auto_scaling_group_id %r %s not an %s of the stack'
                % (policy.name, autoscaling.POLICY_TYPE, stack.name, ref,
                   named, autoscaling.GROUP_TYPE),
                None, None, None)
    if stack.status == 'IN_PROGRESS':
        return (store.IGNORED, 'stack %s is %s_IN_PROGRESS: not scaling '
                'group %s during it' % (stack.name, stack.action, grp.name),
                grp, None, None)
    if grp.status != 'COMPLETE' or grp.action in ('DELETE', 'SUSPEND'):
        return (store.IGNORED, 'group %s is %s_%s: not scaling it'
                % (grp.name, grp.action, grp.status), grp, None, None)
    plugin = engine.plugin(engine.plugin_class(grp.type), grp,
                           grp.properties or {}, stack)
    state = plugin.scaling_state()
    capacity = autoscaling.new_capacity(
        state['capacity'], props.get('scaling_adjustment') or 0,
        props.get('adjustment_type'), props.get('min_adjustment_step'),
        state['min'], state['max'])
    what = '%s %s' % (props.get('adjustment_type'),
                      props.get('scaling_adjustment'))
    if capacity == state['capacity']:
        return (store.IGNORED, 'group %s stays at %d (%s, within %d to %d)'
                % (grp.name, capacity, what, state['min'], state['max']),
                grp, None, None)
    left = state['cooldown_end'] - time.time()
    if left > 0:
        return (store.IGNORED, 'group %s is in cooldown for %.0f s more '
                '(%s not applied)' % (grp.name, left, what),
                grp, None, None)
    cooldown = props.get('cooldown')
    if cooldown is None:
        cooldown = state['cooldown']
    return (store.SCALING, 'scaling group %s from %d to %d (%s)'
            % (grp.name, state['capacity'], capacity, what),
            grp, capacity, cooldown)
