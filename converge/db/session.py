"""Database engines and transactions.

Two ways in, one per kind of caller:

- ``begin()`` / ``connect()``: a SQLAlchemy Core connection. The unit of
  work runs on these: a few prebuilt statements, no ORM bookkeeping (an
  ORM session costs several times the statements it runs).
- ``write()`` / ``read()``: an ORM session, for stack operations and views
  that build or show whole objects.

SQLite (the embedded default) runs in WAL mode; write transactions start
with BEGIN IMMEDIATE so concurrent writers queue on the busy timeout
instead of failing when a read lock cannot be upgraded. Reads use plain
deferred transactions and never block writers.
"""

import contextlib
import sqlite3
import threading
import time
import weakref

import sqlalchemy as sa
from sqlalchemy import event, exc as sa_exc, orm

from converge import private

_LOCK = threading.Lock()
_DATABASES = {}
#: seconds a kept server connection (PostgreSQL, MariaDB) may lie unused
#: before its next use pings it first, as the pool does at every checkout
KEPT_PING_AFTER = 5.0


#: every live Counter of this process, and what those gone had counted
#: (statements_issued: the metrics read them at each scrape, so counting
#: costs the hot path nothing more)
_COUNTERS = weakref.WeakSet()
_GONE = [0]


class Counter:
    """SQL statements issued, counted by SQLAlchemy events (benchmarks and
    tests read it; it is never estimated)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.statements = 0
        _COUNTERS.add(self)

    def __call__(self, *args, **kwargs):
        with self._lock:
            self.statements += 1

    def __del__(self):
        _GONE[0] += self.statements


def statements_issued():
    """SQL statements this process has issued, on every database (a
    counter that only grows: converge_db_statements_total)."""
    return _GONE[0] + sum(c.statements for c in list(_COUNTERS))


class Database:
    def __init__(self, url, pool_size=20):
        self.url = url
        self.counter = Counter()
        self.is_sqlite = url.startswith('sqlite')
        if self.is_sqlite:
            private.sqlite(url)
            self.writer_engine = self._sqlite_engine(url, True, self.counter)
            self.reader_engine = self._sqlite_engine(url, False,
                                                     self.counter)
        else:
            kw = dict(pool_size=pool_size, max_overflow=pool_size,
                      pool_pre_ping=True, pool_recycle=3600)
            self.writer_engine = sa.create_engine(url, **kw)
            self.reader_engine = self.writer_engine
            # connect()'s reads: each statement its own transaction, so a
            # read is one round trip, not BEGIN, the read and ROLLBACK.
            # The same as the read committed isolation the engine runs
            # PostgreSQL at (each statement sees what committed before it)
            self._autocommit_engine = self.writer_engine.execution_options(
                isolation_level='AUTOCOMMIT')
        for eng in {self.writer_engine, self.reader_engine}:
            event.listen(eng, 'before_cursor_execute', self.counter)
        self._writer = orm.sessionmaker(self.writer_engine,
                                        expire_on_commit=False)
        self._reader = orm.sessionmaker(self.reader_engine,
                                        expire_on_commit=False)
        # SQLite has one writer at a time; threads of this process queue
        # here (woken at once) rather than in SQLite's sleeping busy handler
        self._write_lock = (threading.Lock() if self.is_sqlite
                            else contextlib.nullcontext())
        # SQLite: each thread's own reader and writer connections (_kept)
        self._local = threading.local()
        self._holders = weakref.WeakSet()

    @staticmethod
    def _sqlite_engine(url, immediate, counter):
        engine = sa.create_engine(
            url, connect_args={'timeout': 60, 'check_same_thread': False},
            pool_size=32, max_overflow=32)

        @event.listens_for(engine, 'connect')
        def _connect(dbapi_conn, _record):
            # take transaction control away from pysqlite; we BEGIN below
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute('PRAGMA journal_mode=WAL')
            cur.execute('PRAGMA synchronous=NORMAL')
            cur.execute('PRAGMA foreign_keys=ON')
            cur.execute('PRAGMA busy_timeout=60000')
            cur.close()

        begin = 'BEGIN IMMEDIATE' if immediate else 'BEGIN'

        @event.listens_for(engine, 'begin')
        def _begin(conn):
            # on the driver's connection: through SQLAlchemy's execution
            # (context, events, result) it cost more than the statement.
            # Counted as the statement it is
            counter()
            try:
                conn.connection.dbapi_connection.execute(begin)
            except sqlite3.Error as e:  # as SQLAlchemy would raise it
                raise sa_exc.DBAPIError.instance(
                    begin, (), e, sqlite3.Error) from e

        return engine

    @contextlib.contextmanager
    def begin(self):
        """One write transaction on a Core connection: commit on success,
        roll back on any error."""
        with self._write_lock:
            with self._kept(self.writer_engine) as conn, conn.begin():
                yield conn

    @contextlib.contextmanager
    def connect(self):
        """A Core connection for reading (rolled back when done; on a
        database server, in autocommit)."""
        if self.is_sqlite:
            engine = self.reader_engine
        else:
            engine = self._autocommit_engine
        with self._kept(engine) as conn:
            try:
                yield conn
            finally:
                if conn.in_transaction():
                    conn.rollback()

    def keep_connections(self):
        """This thread keeps its own connections to a database server, as
        every thread does on SQLite: the threads that run units of work
        ask (workers/pool.py). A unit opens a couple of transactions, and
        each checkout from the pool pinged the server first: a round
        trip, as long as a statement's (16% of a worker thread's time in
        a ramp of 2,000 creates). Other threads (the API's, the CLI's)
        keep checking connections out, so that they cannot hold more of
        the pool than it has."""
        self._local.keep = True

    @contextlib.contextmanager
    def _kept(self, engine):
        """On SQLite, and on a server for a thread that asked
        (keep_connections), the connection this thread keeps for
        `engine`: a unit of work opens a few transactions, and checking a
        connection out of the pool and back (a Connection, its events,
        the pool's queue, on a server a ping) cost more than a
        transaction's statements. Otherwise, and for a connection opened
        while this thread's is in use, one from the pool."""
        local = self._local
        if not self.is_sqlite and not getattr(local, 'keep', False):
            with engine.connect() as conn:
                yield conn
            return
        kept = getattr(local, 'kept', None)
        if kept is None:
            kept = local.kept = _Kept()
            self._holders.add(kept)
        key = id(engine)
        if key in kept.busy:
            with engine.connect() as other:   # nested: this one is busy
                yield other
            return
        conn = kept.conns.get(key)
        if conn is None or conn.closed or conn.invalidated:
            conn = kept.conns[key] = engine.connect()
        elif not self.is_sqlite and (time.monotonic() - kept.used.get(
                key, 0.0) > KEPT_PING_AFTER):
            conn = kept.conns[key] = _pinged(engine, conn)
        kept.busy.add(key)
        try:
            yield conn
        finally:
            kept.busy.discard(key)
            kept.used[key] = time.monotonic()

    @contextlib.contextmanager
    def write(self):
        """One ORM transaction: commit on success, roll back on any error."""
        with self._write_lock, self._writer.begin() as session:
            yield session

    @contextlib.contextmanager
    def read(self):
        with self._reader() as session:
            yield session

    def warm(self, count):
        """Open up to `count` connections to a database server now, into
        the pool (a worker's threads keep two each): opened by the first
        units of the first traversal instead, on cores busy with its
        start, each took 10-70 ms. Nothing on SQLite, where each thread
        opens its own."""
        if self.is_sqlite:
            return
        opened = []
        try:
            for _ in range(min(count, self.writer_engine.pool.size())):
                opened.append(self.writer_engine.connect())
        finally:
            for conn in opened:
                conn.close()

    def analyze(self, *tables):
        """Bring the query planner's statistics of `tables` up to date
        after a bulk insert (PostgreSQL; elsewhere nothing). A traversal's
        thousands of sync points are new to a planner that last looked at
        the table when it held a few: it took every lookup of a few nodes
        of that traversal for one of a single row, read all of its nodes
        to find them (1-2 ms a statement at 2,000 nodes, growing with the
        stack), until autovacuum happened to analyze the table. As
        PostgreSQL's manual advises after adding much data."""
        if self.writer_engine.dialect.name != 'postgresql':
            return
        with self._autocommit_engine.connect() as conn:
            conn.exec_driver_sql('ANALYZE %s' % ', '.join(tables))

    def dispose(self):
        for kept in list(self._holders):
            # one in use is its thread's until it is done with it; the
            # thread opens a new one next time (closed)
            _close_all(kept.conns, but=kept.busy)
        self.writer_engine.dispose()
        if self.reader_engine is not self.writer_engine:
            self.reader_engine.dispose()


class _Kept:
    """One thread's kept connections (Database._kept), given back to the
    pool when the thread ends (its thread-local goes, and this with it)."""

    def __init__(self):
        self.conns = {}    # id(engine) -> Connection
        self.busy = set()  # engines whose connection is in use
        self.used = {}     # id(engine) -> when last given back
        weakref.finalize(self, _close_all, self.conns)


def _pinged(engine, conn):
    """`conn` if the server still answers it, else a new connection (a
    kept connection idle for a while: the server may have restarted or
    ended it, as a pooled one is pinged at checkout for)."""
    try:
        if engine.dialect.do_ping(conn.connection.dbapi_connection):
            return conn
    except Exception:   # its server went away: the next is checked out
        pass
    try:
        conn.invalidate()
        conn.close()
    except Exception:   # pragma: no cover - gone already
        pass
    return engine.connect()


def _close_all(conns, but=()):
    for key, conn in list(conns.items()):
        if key in but:
            continue
        try:
            conn.close()
        except Exception:  # pragma: no cover - gone with its process
            pass
        del conns[key]


def get(url):
    """One Database per URL per process."""
    with _LOCK:
        db = _DATABASES.get(url)
        if db is None:
            db = _DATABASES[url] = Database(url)
        return db


def forget(url=None):
    """Drop cached engines (tests; after fork)."""
    with _LOCK:
        for key in list(_DATABASES):
            if url is None or key == url:
                _DATABASES.pop(key).dispose()
