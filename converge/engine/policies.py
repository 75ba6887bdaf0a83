"""A stack's continuous convergence policy, as stored: off, observe or
repair, how often, when next due (observers/loop.py runs the passes)."""

import random
import time

from converge import conf as conf_mod
from converge.db import models

MODES = ('off', 'observe', 'repair')


def parse(text):
    """A --converge-policy value: MODE or MODE:INTERVAL (seconds) ->
    (mode, interval or None)."""
    mode, _, interval = (text or '').partition(':')
    mode = mode.strip().lower()
    if mode not in MODES:
        raise ValueError('converge policy %r: the mode is one of %s' % (
            text, ', '.join(MODES)))
    if not interval:
        return mode, None
    try:
        seconds = float(interval)
    except ValueError:
        raise ValueError('converge policy %r: the interval is a number of '
                         'seconds' % text) from None
    if seconds < 1:
        raise ValueError('converge policy %r: the interval is at least 1 '
                         'second' % text)
    return mode, seconds


def set_policy(session, stack_id, mode, interval=None, jitter=None):
    """Store (or, for ``off``, drop) the stack's policy, in the caller's
    transaction. The first pass is due one interval from now."""
    CONF = conf_mod.CONF.observer
    row = session.get(models.ConvergePolicy, stack_id)
    if mode == 'off':
        if row is not None:
            session.delete(row)
        return None
    interval = interval or CONF.interval
    if row is None:
        row = models.ConvergePolicy(stack_id=stack_id, failures=0)
        session.add(row)
    row.mode, row.interval = mode, interval
    row.jitter = CONF.jitter if jitter is None else jitter
    row.next_at = next_due(time.time(), interval, row.jitter)
    return row


def policy(session, stack_id):
    """{mode, interval, next_at, failures} of the stack, or None."""
    row = session.get(models.ConvergePolicy, stack_id)
    if row is None:
        return None
    return {'mode': row.mode, 'interval': row.interval,
            'next_at': row.next_at, 'failures': row.failures}


def next_due(now, interval, jitter):
    """`interval` seconds after `now`, later by up to `jitter` of it."""
    return now + interval * (1 + random.uniform(0, jitter))
