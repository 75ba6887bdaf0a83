"""Reading a stack's events as they are written, each exactly once: what
follows a traversal (the CLI's `--wait`, converge/cmd/progress.py) and
converge-api's event stream (converge/api/v1/live.py) share."""

import time


class EventStream:
    """Each event of the followed traversals, exactly once.

    Event ids are assigned at INSERT, but transactions commit in another
    order: "id > last seen" skips a lower id that commits after a higher
    one (a distributed delete printed 502 of 581 events). So new events
    are read above the highest id seen, and every RESCAN seconds (and at
    the end) the ids above a low-water mark are read again and the ones
    not seen yet fetched. The mark only passes ids seen GRACE seconds ago:
    a unit's transaction is far shorter than that.
    """

    GRACE = 30.0
    RESCAN = 1.0

    def __init__(self, fetch, fetch_ids, clock=time.monotonic):
        self._fetch = fetch          # (after_id, ids=None) -> [event dict]
        self._fetch_ids = fetch_ids  # (after_id) -> [event id]
        self._clock = clock
        self.floor = 0    # ids at or below are done with
        self.high = 0     # highest id seen
        self.seen = {}    # id above the floor -> when first seen
        self._rescanned = clock()

    def poll(self, final=False):
        """The events not returned before, in id order."""
        new = [e for e in self._fetch(self.high) if e['id'] not in self.seen]
        now = self._clock()
        if final or now - self._rescanned >= self.RESCAN:
            self._rescanned = now
            got = {e['id'] for e in new}
            late = [i for i in self._fetch_ids(self.floor)
                    if i <= self.high and i not in self.seen
                    and i not in got]
            if late:
                new += self._fetch(self.floor, ids=late)
        new.sort(key=lambda e: e['id'])
        for ev in new:
            self.seen[ev['id']] = now
            self.high = max(self.high, ev['id'])
        settled = [i for i, t in self.seen.items() if now - t >= self.GRACE]
        if settled:
            self.floor = max(self.floor, max(settled))
            self.seen = {i: t for i, t in self.seen.items() if i > self.floor}
        return new
