"""Signals to OS::Heat::WaitConditionHandle, in the engine database.

Table ``wait_condition_signals``: one row per (handle, signal id); a signal
sent again under the same id replaces the earlier one, as in Heat. Besides
the signals, each live handle has one *registration* row (signal id ``''``,
status ``HANDLE``) written when the handle is created: it names the
handle's stack, which the signal route needs to wake the stack's waiting
units (found by the indexed handle id), and it is how a signal to a deleted
handle is told apart from one to a live handle. Deleting the handle deletes
its rows, registration and signals.

What the plug-ins (converge/resources/wait_condition.py) and the signal
route (converge/engine/waitconditions.py) reach through
``clients.waitconditions``.
"""

import json
import time

import sqlalchemy as sa

from converge import exception
from converge.db import models
from converge.drivers import tokens

SIGNALS = models.WaitConditionSignal.__table__

#: the registration row's signal id and status (no signal has either)
REGISTRATION_ID = ''
REGISTERED = 'HANDLE'

STATUSES = (SUCCESS, FAILURE) = ('SUCCESS', 'FAILURE')
#: the keys a signal body may have (Heat's)
KEYS = ('status', 'reason', 'data', 'id')


def token_ident(handle_id):
    """The identity a handle's token is derived from (its own namespace,
    apart from agent ids)."""
    return 'waitcondition:%s' % handle_id


def normalise(body, number):
    """Heat's rules for one signal body; returns (id, status, reason, data).

    A missing body or key takes Heat's default: status SUCCESS, reason
    ``Signal <number> received``, data null, id `number` (the signal's
    place among the handle's signals). Raises exception.InvalidInput
    naming what is wrong.
    """
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise exception.InvalidInput(
            'A wait condition signal must be a JSON object with keys %s, '
            'not %s' % (', '.join(KEYS), type(body).__name__))
    unknown = sorted(set(body) - set(KEYS))
    if unknown:
        raise exception.InvalidInput(
            'Unknown key(s) in wait condition signal: %s (allowed: %s)'
            % (', '.join(map(str, unknown)), ', '.join(KEYS)))
    status = body.get('status')
    if status is None:
        status = SUCCESS
    if status not in STATUSES:
        raise exception.InvalidInput(
            'Wait condition signal status must be SUCCESS or FAILURE, '
            'not %r' % (status,))
    reason = body.get('reason')
    if reason is None:
        reason = 'Signal %d received' % number
    elif not isinstance(reason, str):
        reason = json.dumps(reason)
    signal_id = body.get('id')
    if signal_id is None:
        signal_id = number
    if isinstance(signal_id, (dict, list)):
        raise exception.InvalidInput(
            'Wait condition signal id must be a string or a number')
    signal_id = str(signal_id)
    if signal_id == REGISTRATION_ID or len(signal_id) > 255:
        raise exception.InvalidInput(
            'Wait condition signal id must have 1 to 255 characters')
    return signal_id, status, reason, body.get('data')


class WaitConditionStore:
    def __init__(self, db):
        self._db = db

    # -- the handle -------------------------------------------------------
    def register(self, handle_id, stack_id):
        """Make the handle live (again: a repeat is a no-op)."""
        with self._db.begin() as conn:
            if self._registration(conn, handle_id) is not None:
                return
            try:
                with conn.begin_nested():
                    conn.execute(sa.insert(SIGNALS).values(
                        handle_id=handle_id, stack_id=stack_id,
                        signal_id=REGISTRATION_ID, status=REGISTERED,
                        reason='', data=None, created_at=time.time()))
            except sa.exc.IntegrityError:
                pass  # registered meanwhile: the same handle, the same row

    def stack_of(self, handle_id):
        """The live handle's stack id; None when there is no such handle."""
        with self._db.connect() as conn:
            row = self._registration(conn, handle_id)
        return row.stack_id if row is not None else None

    def delete(self, handle_id):
        """Forget the handle and its signals (absent already is fine)."""
        with self._db.begin() as conn:
            conn.execute(sa.delete(SIGNALS).where(
                SIGNALS.c.handle_id == handle_id))

    def token(self, handle_id):
        return tokens.token_for(self._db, token_ident(handle_id))

    def verify(self, handle_id, token):
        return tokens.verify(self._db, token_ident(handle_id), token)

    # -- signals ----------------------------------------------------------
    def signals(self, handle_id):
        """The handle's signals in the order they first came: a list of
        {id, status, reason, data}."""
        with self._db.connect() as conn:
            rows = conn.execute(
                sa.select(SIGNALS.c.signal_id, SIGNALS.c.status,
                          SIGNALS.c.reason, SIGNALS.c.data)
                .where(SIGNALS.c.handle_id == handle_id,
                       SIGNALS.c.signal_id != REGISTRATION_ID)
                .order_by(SIGNALS.c.id)).all()
        return [dict(id=r.signal_id, status=r.status, reason=r.reason,
                     data=json.loads(r.data) if r.data is not None
                     else None)
                for r in rows]

    def add(self, handle_id, body):
        """Record one signal (Heat's body: status, reason, data, id; see
        `normalise`). Returns it as stored, a dict {id, status, reason,
        data}. Raises exception.NotFound when the handle is not live,
        exception.InvalidInput for a bad body.

        One transaction. A signal without an id takes the next number not
        taken (two at once get two numbers, never one the other's); one
        with an id replaces an earlier signal of that id.
        """
        if body is not None and not isinstance(body, dict):
            normalise(body, 0)  # raises, naming what is wrong
        explicit = isinstance(body, dict) and body.get('id') is not None
        with self._db.begin() as conn:
            reg = self._registration(conn, handle_id)
            if reg is None:
                raise exception.NotFound(
                    'Wait condition handle %s not found' % handle_id)
            number = conn.scalar(
                sa.select(sa.func.count()).select_from(SIGNALS).where(
                    SIGNALS.c.handle_id == handle_id,
                    SIGNALS.c.signal_id != REGISTRATION_ID)) + 1
            while True:
                signal_id, status, reason, data = normalise(body, number)
                values = dict(status=status, reason=reason,
                              data=json.dumps(data) if data is not None
                              else None)
                if explicit and self._replace(conn, handle_id, signal_id,
                                              values):
                    break
                try:
                    with conn.begin_nested():
                        conn.execute(sa.insert(SIGNALS).values(
                            handle_id=handle_id, stack_id=reg.stack_id,
                            signal_id=signal_id, created_at=time.time(),
                            **values))
                    break
                except sa.exc.IntegrityError:
                    if explicit:  # came meanwhile: replace it
                        if self._replace(conn, handle_id, signal_id,
                                         values):
                            break
                        raise
                    number += 1  # that number is taken: the next one
        return dict(id=signal_id, status=status, reason=reason, data=data)

    # -- helpers ----------------------------------------------------------
    @staticmethod
    def _registration(conn, handle_id):
        return conn.execute(
            sa.select(SIGNALS.c.stack_id).where(
                SIGNALS.c.handle_id == handle_id,
                SIGNALS.c.signal_id == REGISTRATION_ID)).first()

    @staticmethod
    def _replace(conn, handle_id, signal_id, values):
        return conn.execute(
            sa.update(SIGNALS).where(
                SIGNALS.c.handle_id == handle_id,
                SIGNALS.c.signal_id == signal_id).values(**values)
        ).rowcount == 1
