"""Hot statements, run on the database driver's own cursor.

The engine's unit of work (db/api.py: its load, the compare-and-swap of
a row, events, sync points) and the simulated cloud's calls run a few
statements each, thousands of times a minute, on one core.

A server create runs nine statements in the sim's database (the faults,
the key, the address counter, the insert of the server, its addresses
and the log line), a get or a find three; embedded, on the engine's own
core, at thousands a minute. SQLAlchemy's execution of a statement built
once (its execution context, event dispatch, result set-up) was about
half of a create's CPU time, the statements themselves 6%
(cProfile on CPU time, 2,000 creates). On SQLite a `Statement` is
compiled once and run on the DBAPI cursor through the dialect's own
``do_execute``, inside the transaction SQLAlchemy began; its rows are
named tuples. On other databases it runs through SQLAlchemy as any
statement does.

``typed``: values go in and come out as SQLAlchemy's column types make
them (JSON encoded and decoded, datetimes), through the same bind and
result processors SQLAlchemy runs; the sim's statements are untyped
(their values are already what the driver takes).

What SQLAlchemy would do on an error is kept: the driver's error is
raised as SQLAlchemy's (``IntegrityError``, ``OperationalError``), and a
disconnect invalidates the connection, so ``store.dropped`` and the
sim's retries see what they saw before.
"""

import collections

from sqlalchemy import exc as sa_exc
from sqlalchemy import orm


class Statement:
    """`stmt` (a Core statement with bind parameters), run by `run`."""

    def __init__(self, stmt, typed=False):
        self.stmt = stmt
        self.typed = typed
        self._insert = getattr(stmt, 'is_insert', False)
        # (paramstyle, parameter names) -> (SQL, positional parameter
        # order, the values of the statement's own literals); SQLite's
        # SQL is the same for every engine of this process
        self._compiled = {}
        # column names -> the row type
        self._rows = {}

    def run(self, conn, params=None):
        """Execute on `conn` (a Connection in a transaction, or a Session)
        with `params`
        (a dict, or a list of dicts for many rows); returns a result with
        first(), all(), scalar_one(), rowcount and inserted_primary_key."""
        if isinstance(conn, orm.Session):   # its transaction's connection
            conn = conn.connection()
        many = isinstance(params, list)
        if many and not params:
            # no rows to write (SQLAlchemy would run the statement once
            # without parameters)
            return _Result(None, 0, None)
        dialect = conn.dialect
        if dialect.name != 'sqlite' and (
                dialect.name != 'postgresql' or many or self._insert):
            # PostgreSQL: a row's id comes back through RETURNING, and
            # rows many at a time through SQLAlchemy's batching
            return conn.execute(self.stmt, params)
        first = (params[0] if many else params) or {}
        sql, order, fixed, binds, results = self._compile(dialect,
                                                          tuple(first))
        if sql is None:   # rendered per call (an expanding IN)
            return conn.execute(self.stmt, params)
        names = None
        if dialect.paramstyle == 'pyformat':   # psycopg2: by name
            order, names = order
        if many:
            args = [self._args({**fixed, **p}, order, binds) for p in params]
        else:
            args = self._args({**fixed, **first}, order, binds)
        if names is not None:
            args = dict(zip(names, args))
        if not conn.in_transaction():
            conn.begin()    # as SQLAlchemy's autobegin would (BEGIN)
        raw = conn.connection.dbapi_connection
        cursor = raw.cursor()
        if conn._has_events or conn.engine._has_events:
            # what listens to SQLAlchemy's statements (the statement
            # counter of benchmarks and tests) hears these too
            conn.dispatch.before_cursor_execute(conn, cursor, sql, args,
                                                None, many)
        try:
            if many:
                dialect.do_executemany(cursor, sql, args, None)
            else:
                dialect.do_execute(cursor, sql, args, None)
            rows = None
            if cursor.description is not None:
                row = self._row([d[0] for d in cursor.description])
                if isinstance(results, list):
                    results = self._processors(dialect, results,
                                               cursor.description)
                if results:
                    rows = [row(*[v if f is None else f(v)
                                  for f, v in zip(results, r)])
                            for r in cursor.fetchall()]
                else:
                    rows = [row(*r) for r in cursor.fetchall()]
            result = _Result(rows, cursor.rowcount, cursor.lastrowid)
            cursor.close()
            return result
        except dialect.loaded_dbapi.Error as e:
            gone = dialect.is_disconnect(e, raw, cursor)
            if gone:
                conn.invalidate(e)   # closes the cursor with it
            else:
                cursor.close()
            raise sa_exc.DBAPIError.instance(
                sql, args, e, dialect.loaded_dbapi.Error,
                connection_invalidated=gone, dialect=dialect) from e

    def _compile(self, dialect, keys):
        key = (dialect.paramstyle, keys)
        found = self._compiled.get(key)
        if found is None:
            compiled = self.stmt.compile(dialect=dialect,
                                         column_keys=list(keys))
            order = tuple(compiled.positiontup or ())
            binds = results = None
            if self.typed:
                procs = compiled._bind_processors
                binds = tuple(procs.get(k) for k in order)
                if not any(binds):
                    binds = None
                # made at the first run, from the driver's column types
                # (PostgreSQL's numeric processors need them)
                results = [c.type for c in compiled._result_columns] or None
            sql = compiled.string
            if dialect.paramstyle == 'pyformat':
                # named, not positional: every bind the statement has,
                # under the name it is rendered with
                escaped = compiled.escaped_bind_names or {}
                order = tuple(compiled.params)
                names = tuple(escaped.get(k, k) for k in order)
                binds = None
                if self.typed:
                    procs = compiled._bind_processors
                    binds = tuple(procs.get(k) for k in order)
                    if not any(binds):
                        binds = None
                order = (order, names)
            if '__[POSTCOMPILE' in sql:
                sql = None
            found = (sql, order,
                     {k: v for k, v in compiled.params.items()
                      if k not in keys}, binds, results)
            self._compiled[key] = found
        return found

    def _processors(self, dialect, types, description):
        """The result processors of a statement's columns, made once
        (replacing the list of their types in its compiled entry)."""
        procs = tuple(t._cached_result_processor(dialect, d[1])
                      for t, d in zip(types, description))
        if not any(procs):
            procs = None
        for key, found in self._compiled.items():
            if found[4] is types:
                self._compiled[key] = found[:4] + (procs,)
        return procs

    @staticmethod
    def _args(values, order, binds):
        if binds is None:
            return tuple(values[k] for k in order)
        return tuple(values[k] if f is None else f(values[k])
                     for f, k in zip(binds, order))

    def _row(self, names):
        names = tuple(names)
        row = self._rows.get(names)
        if row is None:
            row = self._rows[names] = type(
                'Row', (collections.namedtuple('Row', names),),
                {'__slots__': (), '_mapping': property(_mapping)})
        return row


def _mapping(row):
    """name -> value, as SQLAlchemy's Row._mapping."""
    return dict(zip(row._fields, row))


class _Result:
    def __init__(self, rows, rowcount, lastrowid):
        self._rows = rows or []
        self.rowcount = rowcount
        self.inserted_primary_key = (lastrowid,)

    def first(self):
        return self._rows[0] if self._rows else None

    def all(self):
        return list(self._rows)

    def scalar_one(self):
        (row,) = self._rows
        return row[0]

    def scalar(self):
        return self._rows[0][0] if self._rows else None

    def __iter__(self):
        return iter(self._rows)
