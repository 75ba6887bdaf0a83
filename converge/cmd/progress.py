"""Following a traversal from the database: a progress line on a terminal,
event lines otherwise."""

import os
import sys
import time

from sqlalchemy import exc as sa_exc

from converge.db import api
from converge.db import models

POLL = 0.1
#: dropped connections in a row that following survives
DROPPED_RETRIES = 5


class Outcome:
    def __init__(self, stack, superseded_by=None):
        self.stack = stack
        self.superseded_by = superseded_by


def event_line(ev):
    stamp = time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(ev.timestamp))
    return '%s.%03dZ [%s]: %s_%s  %s' % (
        stamp, int((ev.timestamp % 1) * 1000), ev.resource_name, ev.action,
        ev.status, ev.reason)


def follow(engine, stack_id, traversal_id, out=None, tty=None,
           local_workers=False):
    """Block until the stack leaves IN_PROGRESS or another traversal takes it.

    A rollback started by this traversal's failure is followed too.
    """
    out = out or sys.stdout
    if tty is None:
        tty = out.isatty() and os.environ.get('TERM') != 'dumb'
    last_event = _last_event_id(engine, stack_id)
    shown = ''
    done = total = 0
    dropped = 0
    while True:
        try:
            with engine.db.read() as s:
                stack = s.get(models.Stack, stack_id)
                events = api.events_list(s, stack_id, after_id=last_event)
                current = stack.current_traversal
                nxt = (api.traversal_get(s, current)
                       if current and current != traversal_id else None)
                if tty:
                    now_done, now_total = api.sync_progress(s, traversal_id)
                    if now_total:  # sync points go when the traversal ends
                        done, total = now_done, now_total
                    elif stack.status == 'COMPLETE':
                        done = total
                    busy, failed = _resource_counts(s, stack_id,
                                                    traversal_id)
        except sa_exc.DBAPIError as exc:
            # the server dropped our connection (restart, failover, an
            # operator's kill): the pool reconnects, so look again
            if not exc.connection_invalidated or dropped >= DROPPED_RETRIES:
                raise
            dropped += 1
            time.sleep(POLL)
            continue
        dropped = 0
        if events:
            last_event = events[-1].id
            if not tty:
                for ev in events:
                    out.write(event_line(ev) + '\n')
                out.flush()
        if tty:
            line = '%s_%s  %d/%d done, %d in progress, %d failed' % (
                stack.action, stack.status, done, total, busy, failed)
            if line != shown:
                out.write('\r\x1b[K' + line)
                out.flush()
                shown = line
        if nxt is not None:
            if (nxt.options or {}).get('parent') == traversal_id:
                traversal_id = nxt.id  # our own rollback: keep following
                continue
            _drain(engine, local_workers)
            if tty:
                out.write('\n')
            return Outcome(stack, superseded_by=nxt)
        if stack.status != 'IN_PROGRESS':
            _drain(engine, local_workers)
            if tty:
                out.write('\n')
            return Outcome(stack)
        time.sleep(POLL)


def _drain(engine, local_workers):
    """Let this process's in-flight units of work end before we exit."""
    if local_workers:
        engine.idle.wait(timeout=engine.lock_wait)


def _last_event_id(engine, stack_id):
    import sqlalchemy as sa
    with engine.db.read() as s:
        return s.scalar(sa.select(sa.func.max(models.Event.id)).where(
            models.Event.stack_id == stack_id)) or 0


def _resource_counts(s, stack_id, traversal_id):
    import sqlalchemy as sa
    rows = s.execute(
        sa.select(models.Resource.status, sa.func.count())
        .where(models.Resource.stack_id == stack_id,
               models.Resource.traversal_id == traversal_id)
        .group_by(models.Resource.status)).all()
    counts = dict(rows)
    return counts.get('IN_PROGRESS', 0), counts.get('FAILED', 0)
