"""Tokens derived from one secret the engine keeps in its database.

A token is the hex HMAC-SHA256 of an identity (an agent id, a wait
condition handle id) under the secret ``engine_secrets['agent-token-key']``.
Nothing per token is stored: any engine or API process that reaches the
database derives the same token for the same identity, so a create repeated
after a crash hands out the same one, and `verify` needs no lookup but the
secret.

The secret is made on first use. Several processes may make it at once:
each inserts its own, one insert wins on the primary key, and the losers
read the winner's, so every process ends up with the same secret.
"""

import hashlib
import hmac

from converge.db import software as db_software

KEY_NAME = 'agent-token-key'


def _secret(db):
    """The shared secret (bytes), made once for the whole deployment.

    Kept on the Database object once read: a secret is never changed in
    place, and a database made anew (tests, `session.forget`) is a new
    Database object, so no process holds a secret its database no longer
    has. (Reading it on every signal cost a query per signal.)"""
    key = getattr(db, '_agent_token_key', None)
    if key is None:
        key = db_software.secret(db, KEY_NAME).encode('ascii')
        db._agent_token_key = key
    return key


def _mac(key, ident):
    if not isinstance(ident, str) or not ident:
        raise ValueError('a token needs a non-empty string identity')
    return hmac.new(key, ident.encode('utf-8'), hashlib.sha256).hexdigest()


def _matches(key, ident, token):
    if not isinstance(token, str) or not token or not ident:
        return False
    return hmac.compare_digest(_mac(key, ident).encode('ascii'),
                               token.encode('utf-8', 'replace'))


def token_for(db, ident):
    """The token of `ident` (a string): hex HMAC-SHA256 under the secret."""
    return _mac(_secret(db), ident)


def verify(db, ident, token):
    """True when `token` is the token of `ident` (compared in constant
    time, so a wrong token says nothing of the right one)."""
    return _matches(_secret(db), ident, token)


def verifier(db):
    """verify(ident, token) for many at once: the secret read once."""
    key = _secret(db)
    return lambda ident, token: _matches(key, ident, token)
