"""AWS::IAM::AccessKey's secrets: converge's own credentials, derived
like a wait condition handle's token (drivers/tokens.py), never a
keystone user's.

A key's id is the resource's (derived from its uuid); its secret is the
HMAC of that id under the engine's secret: any engine or API process
derives the same one, a create repeated after a crash hands out the
same pair, and nothing but the id is stored.
"""

from converge.drivers import tokens


def token_ident(key_id):
    """The identity a key's secret is derived from (its own namespace)."""
    return 'access-key:%s' % key_id


class AccessKeyStore:
    def __init__(self, db):
        self._db = db

    def secret(self, key_id):
        return tokens.token_for(self._db, token_ident(key_id))

    def verify(self, key_id, secret):
        return tokens.verify(self._db, token_ident(key_id), secret)
