"""converge's own tokens for the REST API, where no keystone is configured.

A token speaks for one project (and a user, and roles). Only its SHA-256
is stored, so a copy of the database gives nobody a usable token; the token
is shown once, when `converge-manage token create` makes it. A token is
refused (401) once expired or revoked; every API process reads the same
rows, so a revocation holds on every host at once.
"""

import hashlib
import re
import secrets
import threading
import time
import uuid

import sqlalchemy as sa

from converge import exception
from converge.db import models

TOKENS = models.ApiToken.__table__
#: what `--role` adds when none is given: keystone's implied roles of
#: "member" (a member is a reader too)
DEFAULT_ROLES = ('member', 'reader')
_IMPLIED = {'admin': ('member', 'reader'), 'member': ('reader',)}
_DURATION = re.compile(r'^(\d+(?:\.\d+)?)([smhd]?)$')
_UNITS = {'': 1, 's': 1, 'm': 60, 'h': 3600, 'd': 86400}


def _digest(token):
    return hashlib.sha256(token.encode('utf-8', 'replace')).hexdigest()


def roles_with_implied(roles):
    """The roles and those they imply (admin > member > reader), as
    keystone puts them in a token."""
    out = []
    for role in roles or DEFAULT_ROLES:
        for r in (role,) + _IMPLIED.get(role, ()):
            if r not in out:
                out.append(r)
    return out


def parse_expiry(text, now=None):
    """Epoch seconds of an expiry given as a duration ("3600", "90m",
    "12h", "30d") from now, or None for "never"."""
    if text in (None, '', 'never'):
        return None
    m = _DURATION.match(str(text).strip())
    if not m:
        raise exception.InvalidInput(
            'expires: %r is not a duration (e.g. 3600, 90m, 12h, 30d, '
            'or never)' % text)
    return (now or time.time()) + float(m.group(1)) * _UNITS[m.group(2)]


def create(db, project_id, user_id=None, roles=(), expires_at=None,
           description=''):
    """Make a token; returns (its id, the token). The token itself is not
    kept: this is the only time it can be read."""
    if not project_id:
        raise exception.InvalidInput('A token needs a project')
    token = 'cvg-' + secrets.token_urlsafe(32)
    token_id = str(uuid.uuid4())
    with db.begin() as conn:
        conn.execute(TOKENS.insert().values(
            id=token_id, token_hash=_digest(token), project_id=project_id,
            user_id=user_id, roles=roles_with_implied(roles),
            description=description or '', created_at=time.time(),
            expires_at=expires_at))
    return token_id, token


def _public(row):
    now = time.time()
    state = 'revoked' if row.revoked_at else (
        'expired' if row.expires_at and row.expires_at <= now else 'valid')
    return {'id': row.id, 'project_id': row.project_id,
            'user_id': row.user_id, 'roles': list(row.roles or ()),
            'description': row.description, 'created_at': row.created_at,
            'expires_at': row.expires_at, 'state': state}


def listing(db, project_id=None):
    """The tokens (never their values), newest first."""
    q = sa.select(TOKENS).order_by(TOKENS.c.created_at.desc())
    if project_id:
        q = q.where(TOKENS.c.project_id == project_id)
    with db.connect() as conn:
        return [_public(r) for r in conn.execute(q)]


def revoke(db, token_id):
    """Revoke a token by its id; NotFound when there is none."""
    with db.begin() as conn:
        res = conn.execute(TOKENS.update().where(
            TOKENS.c.id == token_id, TOKENS.c.revoked_at.is_(None))
            .values(revoked_at=time.time()))
        if res.rowcount == 0 and conn.execute(sa.select(TOKENS.c.id).where(
                TOKENS.c.id == token_id)).first() is None:
            raise exception.NotFound('Token %s not found' % token_id)


def authenticate(db, token):
    """Who `token` speaks for: {'project_id', 'user_id', 'roles'}; raises
    Unauthorized when it is unknown, expired or revoked (one answer for
    all three, so a caller learns nothing of which)."""
    if not token:
        raise exception.Unauthorized('Authentication required: send a token '
                                     'in X-Auth-Token')
    with db.connect() as conn:
        row = conn.execute(sa.select(TOKENS).where(
            TOKENS.c.token_hash == _digest(token))).first()
    if row is None or row.revoked_at or \
            (row.expires_at and row.expires_at <= time.time()):
        raise exception.Unauthorized('The token is unknown, expired or '
                                     'revoked')
    return {'project_id': row.project_id, 'user_id': row.user_id,
            'roles': list(row.roles or ()), 'token_id': row.id}


RATES = models.ApiRate.__table__


#: requests counted in this process and not yet written, per caller
_TALLY = {}
_TALLY_LOCK = threading.Lock()
#: a process writes its count at least this often (seconds)
TALLY_FLUSH = 1.0
#: callers kept before those of past minutes are dropped
TALLY_CALLERS = 4096


class _Tally:
    __slots__ = ('window', 'pending', 'known', 'written_at')

    def __init__(self, window):
        self.window = window
        self.pending = 0      # counted here, not written yet
        self.known = 0        # the window's count as last written
        self.written_at = 0.0


def count_request(db, caller, cap, now=None):
    """Count one request of `caller` in this minute; raise TooMany when
    it is beyond `cap`. A fixed window per minute, counted in the
    database so that it holds across API processes; each process writes
    its count in batches (a fiftieth of the cap, or each second), not a
    row per request: a write per request cost every API call 1.4 ms and
    the database's write lock. With a small cap every request is
    written; with several processes the cap may be passed by up to a
    batch each."""
    now = now or time.time()
    window = int(now // 60)
    batch = max(1, cap // 50)
    with _TALLY_LOCK:
        tally = _TALLY.get(caller)
        if tally is None or tally.window != window:
            if len(_TALLY) >= TALLY_CALLERS:
                # callers of minutes gone by (a token per client...):
                # what they counted is written already, or never will be
                for old in [c for c, t in _TALLY.items()
                            if t.window != window]:
                    del _TALLY[old]
            tally = _TALLY[caller] = _Tally(window)
        if tally.known + tally.pending >= cap:
            _refuse(cap, now)   # counts only grow in a window
        tally.pending += 1
        due = tally.pending >= batch or \
            time.monotonic() - tally.written_at >= TALLY_FLUSH
        if not due:
            return
        add, tally.pending = tally.pending, 0
        tally.written_at = time.monotonic()
    try:
        total = _add(db, caller, window, add)
    except sa.exc.IntegrityError:
        # the first request of the minute came twice at once: the other
        # one made the row, count on it
        total = _add(db, caller, window, add)
    with _TALLY_LOCK:
        if tally.window == window:
            tally.known = max(tally.known, total)
    if total > cap and total - add >= cap:
        _refuse(cap, now)   # the cap was reached before this batch


def _add(db, caller, window, add):
    """Adds `add` to the caller's count of `window`; its total."""
    with db.begin() as conn:
        res = conn.execute(RATES.update().where(
            RATES.c.caller == caller, RATES.c.minute == window).values(
                count=RATES.c.count + add))
        if res.rowcount == 1:
            return conn.execute(sa.select(RATES.c.count).where(
                RATES.c.caller == caller,
                RATES.c.minute == window)).scalar()
        conn.execute(RATES.delete().where(RATES.c.caller == caller,
                                          RATES.c.minute < window - 1))
        conn.execute(RATES.insert().values(caller=caller, minute=window,
                                           count=add))
        return add


def _refuse(cap, now):
    raise exception.TooMany(
        'More than %d requests in a minute ([api] max_requests_per_minute);'
        ' try again in %d s' % (cap, 60 - int(now % 60)),
        retry_after=60 - int(now % 60))
