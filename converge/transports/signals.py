"""A deployment's signal as Heat's tooling sends it: heat-config-notify
PUTs or POSTs the hook's result to the run's ``deploy_signal_id``, and
cfn-signal POSTs ``{Status, Reason, UniqueId, Data}`` to it. The URL is
converge-api's, signed for that one run (transports/urls.py): the result
goes into the same exactly-once record as converge-agent's signal
(engine/software.py): a second signal of the run, or one of a run that
is over, changes nothing."""

from converge import transports

#: the verb heat-config-notify uses, by signal transport (Heat's)
_VERBS = {transports.TEMP_URL_SIGNAL: 'PUT'}


def verb(signal_transport):
    return _VERBS.get(signal_transport, 'POST')


def with_signal_url(store, derived, deployment_id, run, server_id=None,
                    member=None):
    """The derived config with its ``deploy_signal_id`` the signed URL of
    run `run` (as it is when there is none, or the store cannot sign: a
    test's fake). HEAT_SIGNAL on a server with a Keystone user
    (POLL_SERVER_HEAT where a Keystone is configured): Heat's
    deploy_auth_url, deploy_user_id, deploy_password... instead, with
    which heat-config-notify signals the deployment resource through
    converge-api; a group's member keeps the URL (its resource is the
    group's nested stack's, which Heat's signal path names otherwise)."""
    inputs = derived.get('inputs') or []
    make = getattr(store, 'signal_url', None)
    if make is None or not run or not any(
            i.get('name') == 'deploy_signal_id' for i in inputs):
        return derived
    transport = next((i.get('value') for i in inputs if i.get('name') ==
                      'deploy_signal_transport'), None)
    keystone = None
    if transport == transports.HEAT_SIGNAL and member is None and \
            server_id and hasattr(store, 'heat_signal_inputs'):
        keystone = store.heat_signal_inputs(server_id)
    derived = dict(derived)
    if keystone:
        derived['inputs'] = [i for i in inputs if i.get('name') not in (
            'deploy_signal_id', 'deploy_signal_verb')] + [
            {'name': k, 'type': 'String', 'value': v,
             'description': 'converge: %s' % k}
            for k, v in keystone.items() if v is not None]
        return derived
    url = make(deployment_id, run, server_id)
    derived['inputs'] = [dict(i, value=url) if i.get('name') ==
                         'deploy_signal_id' else i for i in inputs]
    return derived


def from_cfn(payload):
    """A signal's body as Heat's deployment reads it: cfn-signal's
    {Status, Reason, UniqueId, Data} becomes a result (FAILURE: status
    code 1 with the reason as stderr); anything else is taken as it is
    (heat-config-notify sends the hook's outputs)."""
    if not isinstance(payload, dict):
        return {}
    if 'Status' in payload and not any(k.startswith('deploy_')
                                       for k in payload):
        if str(payload.get('Status')).upper() == 'FAILURE':
            return {'deploy_status_code': 1,
                    'deploy_stderr': str(payload.get('Reason') or ''),
                    'deploy_stdout': str(payload.get('Data') or '')}
        return {'deploy_status_code': 0,
                'deploy_stdout': str(payload.get('Data') or '')}
    return payload
