"""POLL_SERVER_CFN's key pair: Heat makes a Keystone user and an EC2
credential per server; converge derives a key pair per server from its
agent credential's id under the engine's secret (drivers/tokens.py), so
nothing is made in Keystone and nothing per server is stored. The secret
key is what os-collect-config's `cfn` collector signs its
DescribeStackResource requests with (EC2 signature version 2); the
access key id names the server's credential, so converge-api finds whom
a request is from without a look-up table."""

import hashlib

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
