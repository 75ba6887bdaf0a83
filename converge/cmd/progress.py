"""Following a traversal through the service layer: a progress line on a
terminal, one line per event otherwise.

Every read goes through the service, whose reads survive a dropped
database connection; none is made outside that.
"""

import os
import sys
import time

# the reader of events exactly once, shared with converge-api's event
# stream (converge/api/v1/live.py)
from converge.following import EventStream  # noqa: F401

POLL = 0.1
#: a traversal this large has its progress counted at most once a second
#: (counting reads a row per node)
BIG_TRAVERSAL = 5000


class Outcome:
    """How following ended: the stack's record, the traversal that took
    the stack from us (a dict) if one did, and whether we followed our own
    traversal's rollback (its goal was not reached)."""

    def __init__(self, stack, superseded_by=None, rolled_back=False,
                 paused=False):
        self.stack = stack
        self.superseded_by = superseded_by
        self.rolled_back = rolled_back
        #: stopped where `until` said (the stack held by its hooks)
        self.paused = paused


def duration(seconds):
    """M:SS, or H:MM:SS from an hour."""
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    if hours:
        return '%d:%02d:%02d' % (hours, rest // 60, rest % 60)
    return '%d:%02d' % (rest // 60, rest % 60)


def progress_line(action, status, done, total, busy, failed, elapsed):
    """The terminal's progress line: the counts, the time since following
    started and, while the traversal runs, an estimate of what is left
    at the pace so far (unknown until a resource is done)."""
    line = '%s_%s  %d/%d done, %d in progress, %d failed, %s elapsed' % (
        action, status, done, total, busy, failed, duration(elapsed))
    if status == 'IN_PROGRESS' and total:
        if done and done < total:
            line += ', about %s left' % duration(
                elapsed / done * (total - done))
        elif not done:
            line += ', ? left'
    return line


def event_line(ev):
    ts = ev['timestamp']
    stamp = time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(ts))
    return '%s.%03dZ [%s]: %s  %s' % (
        stamp, int((ts % 1) * 1000), ev['resource_name'],
        ev['resource_status'], ev['resource_status_reason'])


def follow(svc, ctx, stack_id, traversal_id, out=None, tty=None,
           local_workers=False, until=None):
    """Block until the stack leaves IN_PROGRESS or another traversal takes
    it (or `until()` says so: the stack waits for its hooks). A rollback
    started by this traversal's failure is followed too.

    `svc` is the service layer (converge.engine.service.Service), `ctx`
    the request context the stack is read with.
    """
    out = out or sys.stdout
    if tty is None:
        tty = out.isatty() and os.environ.get('TERM') != 'dumb'
    followed = [traversal_id]
    stream = EventStream(
        lambda after, ids=None: svc.events_since(ctx, stack_id, followed,
                                                 after_id=after, ids=ids),
        lambda after: svc.event_ids_since(ctx, stack_id, followed, after))
    rolled_back = False
    shown = ''
    done = total = busy = failed = 0
    counted = 0.0
    started = time.monotonic()
    while True:
        status = svc.traversal_status(ctx, stack_id, traversal_id)
        stack, nxt = status['stack'], status['superseded_by']
        if nxt is not None and nxt['parent'] == traversal_id:
            # our own rollback: keep following
            traversal_id = nxt['id']
            followed.append(traversal_id)
            rolled_back = True
            continue
        ended = nxt is not None or stack.status != 'IN_PROGRESS'
        paused = not ended and until is not None and until()
        ended = ended or paused
        if tty:
            if ended or total < BIG_TRAVERSAL or \
                    time.monotonic() - counted >= 1.0:
                counted = time.monotonic()
                p = svc.traversal_progress(ctx, stack_id, traversal_id)
                busy, failed = p['in_progress'], p['failed']
                if p['total']:  # sync points go when the traversal ends
                    done, total = p['done'], p['total']
                elif stack.status == 'COMPLETE':
                    done = total
            line = progress_line(stack.action, stack.status, done, total,
                                 busy, failed, time.monotonic() - started)
            if line != shown:
                out.write('\r\x1b[K' + line)
                out.flush()
                shown = line
        else:
            # read after the status: once that says the traversal ended,
            # every event of it has committed, and the final poll's rescan
            # picks up the ones that committed out of id order
            for ev in stream.poll(final=ended):
                out.write(event_line(ev) + '\n')
            out.flush()
        if ended:
            if local_workers:
                svc.drain_local()
            if tty:
                out.write('\n')
            return Outcome(stack, superseded_by=nxt, rolled_back=rolled_back,
                           paused=paused)
        time.sleep(POLL)
