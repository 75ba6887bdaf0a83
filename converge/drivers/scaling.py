"""Signals to OS::Heat::ScalingPolicy, in the engine database.

Table ``scaling_signals``: one row per signal, with what became of it.
The engine (converge/engine/scaling.py) writes a row in the transaction
that handles the signal; a row of status SCALING names the capacity the
policy's group (by its resource row's uuid) is to converge to, and the
group's plug-in (converge/resources/autoscaling.py) reads the newest such
row through ``clients.scaling``. A signal sent again under its id finds
its row and is not applied twice.
"""

import time

import sqlalchemy as sa

from converge.db import models
from converge.drivers import tokens

SIGNALS = models.ScalingSignal.__table__

STATUSES = (SCALING, IGNORED, FAILED) = ('SCALING', 'IGNORED', 'FAILED')


def token_ident(stack_id, resource_name):
    """The identity a policy's signal token is derived from."""
    return 'scaling-policy:%s/%s' % (stack_id, resource_name)


def _record(row):
    return {'id': row.id, 'policy': row.policy, 'signal_id': row.signal_id,
            'status': row.status, 'reason': row.reason,
            'capacity': row.capacity, 'cooldown': row.cooldown,
            'created_at': row.created_at, 'stack_id': row.stack_id,
            'group_key': row.group_key}


class ScalingStore:
    def __init__(self, db):
        self._db = db

    # -- the plug-ins' side -------------------------------------------------
    def latest(self, group_key):
        """The newest SCALING record for the group whose resource row has
        uuid `group_key`, as a dict, or None."""
        with self._db.connect() as conn:
            row = conn.execute(
                sa.select(SIGNALS).where(SIGNALS.c.group_key == group_key,
                                         SIGNALS.c.status == SCALING)
                .order_by(SIGNALS.c.id.desc()).limit(1)).first()
        return _record(row) if row is not None else None

    def token(self, stack_id, resource_name):
        return tokens.token_for(self._db, token_ident(stack_id,
                                                      resource_name))

    def verify(self, stack_id, resource_name, token):
        return tokens.verify(self._db, token_ident(stack_id, resource_name),
                             token)

    # -- the engine's side: in the caller's transaction ----------------------
    @staticmethod
    def find(conn, stack_id, policy, signal_id):
        """The record of the signal `signal_id` to `policy`, or None."""
        if signal_id is None:
            return None
        row = conn.execute(sa.select(SIGNALS).where(
            SIGNALS.c.stack_id == stack_id, SIGNALS.c.policy == policy,
            SIGNALS.c.signal_id == signal_id)).first()
        return _record(row) if row is not None else None

    @staticmethod
    def add(conn, stack_id, policy, signal_id, status, reason,
            group_key=None, capacity=None, cooldown=None):
        """Record one signal; returns its record."""
        values = dict(stack_id=stack_id, policy=policy, signal_id=signal_id,
                      group_key=group_key, status=status, reason=reason,
                      capacity=capacity, cooldown=cooldown,
                      created_at=time.time())
        new_id = conn.execute(sa.insert(SIGNALS).values(**values)
                              ).inserted_primary_key[0]
        return dict(values, id=new_id)
