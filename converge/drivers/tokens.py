"""Tokens the engine hands out (a server's agent credential, a wait
condition handle's): an HMAC of the thing's id under one engine-wide
secret, so the same id always gets the same token (a retried create sends
the server the token it sent the first time) and nothing secret is stored
per token. Revoking is the owner's business (agent_credentials.revoked_at).
"""

import hashlib
import hmac

from converge.db import software as db_software

SECRET = 'agent-token-key'

#: the key, per database, once read (it never changes)
_KEYS = {}


def _key(db):
    key = _KEYS.get(db.url)
    if key is None:
        key = _KEYS[db.url] = db_software.secret(db, SECRET)
    return key


def token_for(db, ident):
    key = _key(db)
    return hmac.new(key.encode(), str(ident).encode(),
                    hashlib.sha256).hexdigest()


def verify(db, ident, token):
    """Whether `token` is the one made for `ident` (constant time)."""
    if not token or not ident:
        return False
    return hmac.compare_digest(token_for(db, ident), str(token))
