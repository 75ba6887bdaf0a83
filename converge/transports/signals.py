"""A deployment's signal as Heat's tooling sends it: heat-config-notify
PUTs or POSTs the hook's result to the run's ``deploy_signal_id``, and
cfn-signal POSTs ``{Status, Reason, UniqueId, Data}`` to it. The URL is
converge-api's, signed for that one run (transports/urls.py): the result
goes into the same exactly-once record as converge-agent's signal
(engine/software.py): a second signal of the run, or one of a run that
is over, changes nothing."""

import time

from converge import transports

#: the verb heat-config-notify uses, by signal transport (Heat's)
_VERBS = {transports.TEMP_URL_SIGNAL: 'PUT'}


def verb(signal_transport):
    return _VERBS.get(signal_transport, 'POST')


def with_signal_url(store, derived, deployment_id, run):
    """The derived config with its ``deploy_signal_id`` the signed URL of
    run `run` (as it is; when there is none, or the store cannot sign:
    a test's fake)."""
    make = getattr(store, 'signal_url', None)
    if make is None or not run or not any(
            i.get('name') == 'deploy_signal_id'
            for i in derived.get('inputs') or []):
        return derived
    url = make(deployment_id, run, time.time())
    derived = dict(derived)
    derived['inputs'] = [dict(i, value=url) if i.get('name') ==
                         'deploy_signal_id' else i
                         for i in derived['inputs']]
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
