"""The rolling scenario's figures: what its update did to the group's
members, read from the member stack's events and the simulated cloud's
log after the update.

From the events (each member's UPDATE_IN_PROGRESS and UPDATE_COMPLETE,
in time order): the most members updating at once, the batches as they
happened (a batch starts when a member starts updating while none is,
and ends when none is left updating), and each batch's times: when its
first and last member started and when its last member completed, as
seconds from the update's call. From the cloud's log: the rebuilds of
each server. Every member was updated exactly once when each has one
UPDATE_IN_PROGRESS and one UPDATE_COMPLETE and its server was rebuilt
once.
"""

import collections
import datetime


#: the figures of a scenario without a rolling update
NONE = dict.fromkeys(('update_s', 'update_cpu_s', 'batch', 'batches',
                      'batches_planned', 'batches_seen', 'busy_max',
                      'rollout'))


def member_events(engine, stack_id):
    """The UPDATE events of the members of the group stack `stack_id`
    owns (its one nested stack), oldest first, as dicts; and the member
    stack's UPDATE traversals, [(started, finished)] in epoch seconds, in
    order (one per batch pushed, and the last update's if it made
    one)."""
    import sqlalchemy as sa

    from converge.db import api
    from converge.db import models
    with engine.db.read() as s:
        child = s.scalars(sa.select(models.Stack.id).where(
            models.Stack.parent_id == stack_id)).first()
        if child is None:
            return [], []
        events = [dict(name=e.resource_name, status=e.status,
                       physical_id=e.physical_id, timestamp=e.timestamp,
                       id=e.id)
                  for e in api.events_list(s, child)
                  if e.action == 'UPDATE']
        travs = [(_epoch(t.created_at), _epoch(t.finished_at))
                 for t in s.scalars(sa.select(models.Traversal).where(
                     models.Traversal.stack_id == child,
                     models.Traversal.action == 'UPDATE'))]
    events.sort(key=lambda e: (e['timestamp'], e['id']))
    return events, sorted(travs, key=lambda t: t[0])


def _span(names):
    """'lowest-highest' of member names (numbers where they are)."""
    ordered = sorted(names, key=lambda n: (not n.isdigit(),
                                           int(n) if n.isdigit() else 0, n))
    return '%s-%s' % (ordered[0], ordered[-1]) if ordered else ''


def _epoch(utc):
    """A naive UTC datetime of the database as epoch seconds."""
    if utc is None:
        return None
    return utc.replace(tzinfo=datetime.timezone.utc).timestamp()


def batches(events, t0):
    """The batches as the events show them: [{'members', 'first_start',
    'last_start', 'end'}] (times in seconds from `t0`), and the most
    members updating at once."""
    busy, most, seen = set(), 0, []
    for e in events:
        at = e['timestamp'] - t0
        if e['status'] == 'IN_PROGRESS':
            if not busy:
                seen.append(dict(members=set(), first_start=at,
                                 last_start=at, end=None))
            if e['name'] not in seen[-1]['members']:
                seen[-1]['last_start'] = at
            busy.add(e['name'])
            seen[-1]['members'].add(e['name'])
            most = max(most, len(busy))
        elif e['status'] in ('COMPLETE', 'FAILED') and e['name'] in busy:
            busy.discard(e['name'])
            seen[-1]['end'] = at
    return seen, most


def once(events, rebuilds, n):
    """'yes' when each of the `n` members has one UPDATE_IN_PROGRESS and
    one UPDATE_COMPLETE and each of their servers was rebuilt once (by
    `rebuilds`, {server id: rebuilds logged}); else what was not."""
    starts = collections.Counter(e['name'] for e in events
                                 if e['status'] == 'IN_PROGRESS')
    ends = collections.Counter(e['name'] for e in events
                               if e['status'] == 'COMPLETE')
    problems = []
    if len(starts) != n or len(ends) != n:
        problems.append('%d of %d started, %d completed'
                        % (len(starts), n, len(ends)))
    twice = sorted(m for m in set(starts) | set(ends)
                   if starts[m] > 1 or ends[m] > 1)
    if twice:
        problems.append('%d updated twice' % len(twice))
    counts = collections.Counter(rebuilds.values())
    if len(rebuilds) != n or set(counts) != {1}:
        problems.append('rebuilds per server: %s (%d servers)' % (
            dict(sorted(counts.items())), len(rebuilds)))
    return 'yes' if not problems else 'NO: ' + '; '.join(problems)


def figures(engine, stack_id, t0, update_s, scenario):
    """The rolling update's figures: the batches seen (and planned), the
    most members updating at once, whether each was updated once, and
    where the wall time went (JSON: 'rollout')."""
    events, travs = member_events(engine, stack_id)
    seen, most = batches(events, t0)
    log = engine.clients.compute.api_log(op='rebuild')
    rebuilds = collections.Counter(r['server_id'] for r in log if r['ok'])
    done = [b for b in seen if b['end'] is not None]
    rebuild_s = [b['end'] - b['last_start'] for b in done]
    spread_s = [b['last_start'] - b['first_start'] for b in seen]
    gaps_s = [b['first_start'] - a['end']
              for a, b in zip(seen, seen[1:]) if a['end'] is not None]
    return {
        'batch': scenario.batch,
        'batches_planned': scenario.batches,
        'batches_seen': len(seen),
        'batches': '%d/%d' % (len(seen), scenario.batches),
        'busy_max': most,
        'exactly_once': once(events, rebuilds, scenario.n),
        'rollout': {
            # seconds from the update's call
            'batch_sizes': [len(b['members']) for b in seen],
            # each batch's lowest and highest member name
            'batch_ranges': [_span(b['members']) for b in seen],
            'first_start_s': [b['first_start'] for b in seen],
            'last_start_s': [b['last_start'] for b in seen],
            'end_s': [b['end'] for b in seen],
            # per batch: its first to its last member's start; its last
            # member's start to its end (the per-member update, and how
            # late it was seen done); the end of one batch to the first
            # start of the next
            'spread_s': spread_s,
            'last_member_s': rebuild_s,
            'gap_s': gaps_s,
            # the call to the first member's start; the last member's end
            # to the stack's UPDATE_COMPLETE as the bench saw it
            'lead_s': seen[0]['first_start'] if seen else None,
            'tail_s': update_s - done[-1]['end'] if done else None,
            # the member stack's update traversals: started, finished
            'child_traversals_s': [
                [None if t is None else t - t0 for t in pair]
                for pair in travs],
        },
    }
