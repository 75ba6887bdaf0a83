"""Signed, expiring URLs on converge-api: what Heat makes with Swift's
TempURLs (POLL_TEMP_URL, TEMP_URL_SIGNAL) and EC2-signed URLs
(CFN_SIGNAL), served here without Swift or a Keystone user.

A URL carries its expiry and a signature: the HMAC, under the engine's
secret (drivers/tokens.py), of what it grants: reading one server's
metadata (by its agent credential's id), or signalling one run of one
deployment. Nothing per URL is stored, any converge-api process checks
it, and it grants nothing once the server's credential is revoked (its
server deleted) or the run it names is over.
"""

import time
import urllib.parse

from converge import conf as conf_mod
from converge import exception
from converge.drivers import tokens


class Refused(exception.ConvergeError):
    """A signed URL that is not (or no longer) valid."""
    exit_code = 4
    http_status = 403


def _ident(kind, parts, expires):
    return 'transport:%s:%s:%d' % (kind, ':'.join(parts), expires)


def expiry(since):
    """When a URL issued at `since` (epoch seconds) expires."""
    return int(since) + int(conf_mod.CONF.software.transport_url_lifetime)


def _sign(db, kind, parts, expires):
    return tokens.token_for(db, _ident(kind, parts, expires))


def check(db, kind, parts, expires, signature, now=None):
    """Raise Refused unless `signature` signs (kind, parts, expires) and
    `expires` has not passed."""
    try:
        expires = int(expires)
    except (TypeError, ValueError):
        raise Refused('This URL has no valid expiry')
    if not tokens.verify(db, _ident(kind, parts, expires), signature or ''):
        raise Refused('This URL\'s signature is not valid')
    if (time.time() if now is None else now) > expires:
        raise Refused('This URL expired at %s' % time.strftime(
            '%Y-%m-%dT%H:%M:%SZ', time.gmtime(expires)))


def metadata_url(db, agent_id, since):
    """The URL a POLL_TEMP_URL server's os-collect-config (its `request`
    collector) reads its metadata from: GET (and HEAD)."""
    expires = expiry(since)
    return '%s/v1/transport/servers/%s/metadata?%s' % (
        conf_mod.api_endpoint(), agent_id, urllib.parse.urlencode({
            'expires': expires,
            'signature': _sign(db, 'metadata', [agent_id], expires)}))


def signal_url(db, deployment_id, run, since):
    """The URL heat-config-notify (or cfn-signal) sends the result of run
    `run` of a deployment to: PUT or POST, no credential but the URL.
    `since`: when its server's credential was made (so the URL, and what
    masks it for a reader, can be derived again)."""
    expires = expiry(since)
    return '%s/v1/transport/deployments/%s/signal?%s' % (
        conf_mod.api_endpoint(), deployment_id, urllib.parse.urlencode({
            'run': run, 'expires': expires,
            'signature': _sign(db, 'signal', [deployment_id, run],
                               expires)}))


def signatures(db, agent_id, since, runs):
    """The signatures a server's transports hand out, to be masked where
    a caller may not see credentials: its metadata URL's, and each of
    `runs`' ((deployment id, run) on it) signal URL's."""
    expires = expiry(since)
    return [_sign(db, 'metadata', [agent_id], expires)] + [
        _sign(db, 'signal', [dep, run], expires) for dep, run in runs if run]
