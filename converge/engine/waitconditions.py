"""A signal to an OS::Heat::WaitConditionHandle: record it, wake the
waiters.

The HTTP route (``POST /v1/agent/waitconditions/{handle id}/signal``, the
token in ``X-Auth-Token``, Heat's JSON body) calls `signal`; what it raises
maps to the answer: Refused 403, exception.NotFound 404,
exception.InvalidInput 400.
"""

from converge import exception
from converge.engine import traversal
from converge.resources import wait_condition


class Refused(exception.ConvergeError):
    """The token is not the handle's."""

    http_status = 403


def signal(engine, handle_id, token, body):
    """Record one signal to the handle and wake the units waiting for it.

    :param engine: the Engine (its database and messaging)
    :param handle_id: the handle's id (the path's, its physical id)
    :param token: the token the caller presented
    :param body: Heat's signal, a dict (or None): ``status`` (SUCCESS, the
        default, or FAILURE), ``reason``, ``data`` (any JSON) and ``id``
        (a signal sent again with the same id replaces the earlier one;
        without one, the next number)
    :returns: the signal as stored: {id, status, reason, data}
    :raises Refused: the token is not the handle's
    :raises exception.NotFound: no such handle (never made, or deleted)
    :raises exception.InvalidInput: a body Heat would refuse, saying why

    The signal is committed before anyone is woken, so a woken unit sees
    it; a unit that is not waiting yet sees it on its first look.
    """
    store = engine.clients.waitconditions
    # the token first: a caller without it learns nothing, not even
    # whether the handle exists
    if not store.verify(handle_id, token):
        raise Refused('Invalid token for wait condition handle %s'
                      % handle_id)
    stack_id = store.stack_of(handle_id)
    if stack_id is None:
        raise exception.NotFound('Wait condition handle %s not found'
                                 % handle_id)
    stored = store.add(handle_id, body)
    traversal.wake(engine, stack_id, wait_condition.event_for(handle_id))
    return stored


#: cfn-signal's keys (CloudFormation's signal) -> Heat's
CFN_KEYS = {'Status': 'status', 'Reason': 'reason', 'UniqueId': 'id',
            'Data': 'data'}


def from_cfn(body):
    """A CloudFormation-form signal body in Heat's keys; any other body
    as it is (normalise judges it)."""
    if isinstance(body, dict) and body and set(body) <= set(CFN_KEYS):
        return {CFN_KEYS[k]: v for k, v in body.items()}
    return body
