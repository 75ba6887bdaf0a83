"""The sim's hot statements, run on the database driver's own cursor.

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

What SQLAlchemy would do on an error is kept: the driver's error is
raised as SQLAlchemy's (``IntegrityError``, ``OperationalError``), and a
disconnect invalidates the connection, so ``store.dropped`` and the
sim's retries see what they saw before.
"""

import collections

from sqlalchemy import exc as sa_exc


class Statement:
    """`stmt` (a Core statement with bind parameters), run by `run`."""

    def __init__(self, stmt):
        self.stmt = stmt
        # (paramstyle, parameter names) -> (SQL, positional parameter
        # order, the values of the statement's own literals); SQLite's
        # SQL is the same for every engine of this process
        self._compiled = {}
        # column names -> the row type
        self._rows = {}

    def run(self, conn, params=None):
        """Execute on `conn` (a Connection in a transaction) with `params`
        (a dict, or a list of dicts for many rows); returns a result with
        first(), all(), scalar_one(), rowcount and inserted_primary_key."""
        many = isinstance(params, list)
        if many and not params:
            # no rows to write (SQLAlchemy would run the statement once
            # without parameters)
            return _Result(None, 0, None)
        dialect = conn.dialect
        if dialect.name != 'sqlite':
            return conn.execute(self.stmt, params)
        first = (params[0] if many else params) or {}
        sql, order, fixed = self._compile(dialect, tuple(first))
        if many:
            args = [tuple({**fixed, **p}[k] for k in order) for p in params]
        else:
            values = {**fixed, **first}
            args = tuple(values[k] for k in order)
        raw = conn.connection.dbapi_connection
        cursor = raw.cursor()
        try:
            if many:
                dialect.do_executemany(cursor, sql, args, None)
            else:
                dialect.do_execute(cursor, sql, args, None)
            rows = None
            if cursor.description is not None:
                row = self._row([d[0] for d in cursor.description])
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
            found = (compiled.string, order,
                     {k: v for k, v in compiled.params.items()
                      if k not in keys})
            self._compiled[key] = found
        return found

    def _row(self, names):
        names = tuple(names)
        row = self._rows.get(names)
        if row is None:
            row = self._rows[names] = collections.namedtuple('Row', names)
        return row


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
