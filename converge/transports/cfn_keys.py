"""POLL_SERVER_CFN's key pair: Heat makes a Keystone user and an EC2
credential per server; converge derives a key pair per server from its
agent credential's id under the engine's secret (drivers/tokens.py), so
nothing is made in Keystone and nothing per server is stored. The secret
key is what os-collect-config's `cfn` collector signs its
DescribeStackResource requests with (EC2 signature version 2); the
access key id names the server's credential, so converge-api finds whom
a request is from without a look-up table."""

import base64
import hashlib
import hmac
import urllib.parse

from converge import conf as conf_mod
from converge.drivers import tokens

#: an access key id is this prefix and the credential's id without dashes
PREFIX = 'CNV'


def access_key_id(agent_id):
    return PREFIX + agent_id.replace('-', '').upper()


def agent_of(access_key):
    """The credential id an access key id names, or None."""
    if not isinstance(access_key, str) or not access_key.startswith(
            PREFIX) or len(access_key) != len(PREFIX) + 32:
        return None
    h = access_key[len(PREFIX):].lower()
    try:
        int(h, 16)
    except ValueError:
        return None
    return '%s-%s-%s-%s-%s' % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def secret_key(db, agent_id):
    return hashlib.sha256(tokens.token_for(
        db, 'cfn-secret:%s' % agent_id).encode()).hexdigest()[:40]


def key_pair(db, agent_id):
    return access_key_id(agent_id), secret_key(db, agent_id)


def metadata_server_url():
    """Where the `cfn` collector asks (Heat's cfn API, heat-api-cfn's
    /v1/): converge-api's /v1/cfn/."""
    return '%s/v1/cfn/' % conf_mod.api_endpoint()


def _canonical_query(params):
    """AWS signature version 2's query string: the parameters sorted by
    name, each name and value percent-encoded (only -_~ left as they
    are)."""
    return '&'.join('%s=%s' % (urllib.parse.quote(k, safe=''),
                               urllib.parse.quote(str(params[k]),
                                                  safe='-_~'))
                    for k in sorted(params))


def signature_v2(secret, verb, host, path, params):
    """The signature of a request (EC2 signature version 2, HmacSHA256
    or HmacSHA1 as its SignatureMethod says)."""
    digest = hashlib.sha1 if params.get('SignatureMethod') == \
        'HmacSHA1' else hashlib.sha256
    text = '%s\n%s\n%s\n%s' % (verb, host, path, _canonical_query(params))
    return base64.b64encode(hmac.new(secret.encode(), text.encode(),
                                     digest).digest()).decode()


def verify(db, verb, host, path, params):
    """The credential id a signed CFN request is from, or None when its
    key or signature is not valid."""
    params = dict(params)
    given = params.pop('Signature', '')
    agent_id = agent_of(params.get('AWSAccessKeyId'))
    if agent_id is None or params.get('SignatureVersion') != '2':
        return None
    wanted = signature_v2(secret_key(db, agent_id), verb, host, path,
                          params)
    if not hmac.compare_digest(wanted.encode(), (given or '').encode()):
        return None
    return agent_id
