"""Fact stores, in the engine database (tables ``facts`` and
``fact_refreshes``).

A server's agent publishes facts with its own credential: a script writes
``${converge_facts_path}.KEY`` (as Heat's ``heat_outputs_path`` outputs),
the agent sends them with the deployment's signal, and the engine records
them under the stack at the top of the deployment's tree. An
OS::Converge::FactStore resource reads them (``get_attr: [facts, all]``,
``[facts, all, KEY]``); when a value changes, the stack is marked for a
refresh, which an observer runs as an update once the stack is not in
progress: the deployments whose inputs read the changed facts run again,
and only those.

What the plug-in (converge/resources/facts.py) and the signal route
(converge/engine/software.py) reach through ``clients.facts``.
"""

import time

import sqlalchemy as sa

from converge.db import models

FACTS = models.Fact.__table__
REFRESHES = models.FactRefresh.__table__
STACKS = models.Stack.__table__

#: the longest fact key and value (bytes of its JSON) an agent may publish
MAX_KEY = 255
MAX_VALUE = 65536


def root(conn, stack_id):
    """The stack at the top of `stack_id`'s tree."""
    seen = set()
    while stack_id not in seen:
        seen.add(stack_id)
        parent = conn.execute(sa.select(STACKS.c.parent_id).where(
            STACKS.c.id == stack_id)).scalar()
        if not parent:
            return stack_id
        stack_id = parent
    return stack_id


def record(conn, stack_id, facts, writer):
    """Store `facts` ({key: value}) under the top of `stack_id`'s tree, in
    the caller's transaction; returns (that stack's id, the keys whose
    value changed). A value that did not change is not written."""
    top = root(conn, stack_id)
    have = dict(conn.execute(sa.select(FACTS.c.key, FACTS.c.value).where(
        FACTS.c.stack_id == top,
        FACTS.c.key.in_(list(facts)))).all()) if facts else {}
    now = time.time()
    changed = []
    for key, value in sorted(facts.items()):
        if key in have and have[key] == value:
            continue
        values = dict(value=value, writer=writer, updated_at=now)
        if key in have:
            conn.execute(FACTS.update().where(
                FACTS.c.stack_id == top, FACTS.c.key == key).values(values))
        else:
            conn.execute(FACTS.insert().values(stack_id=top, key=key,
                                               **values))
        changed.append(key)
    if changed:
        _mark(conn, top, changed, now)
    return top, changed


def _mark(conn, stack_id, keys, now):
    old = conn.execute(sa.select(REFRESHES.c['keys']).where(
        REFRESHES.c.stack_id == stack_id)).first()
    if old is None:
        conn.execute(REFRESHES.insert().values(stack_id=stack_id,
                                               keys=sorted(keys), since=now))
    else:
        # a new `since`: a refresh taken before this mark does not
        # clear it (done_refresh)
        conn.execute(REFRESHES.update().where(
            REFRESHES.c.stack_id == stack_id).values(
            keys=sorted(set(old[0] or ()) | set(keys)), since=now))


def any_refresh(conn):
    """Whether any stack is marked (a cheap read: most looks find none)."""
    return conn.execute(sa.select(REFRESHES.c.stack_id).limit(1)).first() \
        is not None


#: how long a taken refresh is its taker's: one that died before the
#: update started leaves it to another engine after this
LEASE = 300.0


def take_refreshes(conn, now, limit=50):
    """Stacks whose facts changed and that are not in progress, each taken
    by one compare-and-swap (its mark leased: `since` made -(now + LEASE))
    so one engine refreshes it: [(stack id, keys, lease)]. The mark stays
    until the update has started (done_refresh): an engine that dies in
    between leaves it to another once the lease ends."""
    rows = conn.execute(
        sa.select(REFRESHES.c.stack_id, REFRESHES.c['keys'],
                  REFRESHES.c.since)
        .join(STACKS, STACKS.c.id == REFRESHES.c.stack_id)
        .where(STACKS.c.status != 'IN_PROGRESS',
               STACKS.c.deleted_at.is_(None),
               sa.or_(REFRESHES.c.since >= 0, REFRESHES.c.since > -now))
        .order_by(REFRESHES.c.since).limit(limit)).all()
    taken = []
    for stack_id, keys, since in rows:
        lease = -(now + LEASE)
        res = conn.execute(REFRESHES.update().where(
            REFRESHES.c.stack_id == stack_id,
            REFRESHES.c.since == since).values(since=lease))
        if res.rowcount == 1:
            taken.append((stack_id, list(keys or ()), lease))
    return taken


def done_refresh(conn, stack_id, lease):
    """The refresh taken with `lease` has started its update: clear the
    mark, unless the facts changed again since (a new mark)."""
    conn.execute(REFRESHES.delete().where(REFRESHES.c.stack_id == stack_id,
                                          REFRESHES.c.since == lease))


class FactStore:
    def __init__(self, db):
        self._db = db

    def all(self, stack_id):
        """Every fact of the top of `stack_id`'s tree: {key: value}."""
        with self._db.connect() as conn:
            top = root(conn, stack_id)
            return dict(conn.execute(sa.select(
                FACTS.c.key, FACTS.c.value).where(
                FACTS.c.stack_id == top).order_by(FACTS.c.key)).all())
