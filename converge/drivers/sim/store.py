"""The simulated cloud's own database: tables, engines, transactions.

The sim keeps its servers apart from the engine's state so that every
process of a deployment (CLI processes, workers on several hosts) sees
one cloud. Any SQLAlchemy URL works; only portable SQL is used. On
SQLite the database runs in WAL mode; writers queue for it on a lock
file beside it (``_Writer``), then start with ``BEGIN IMMEDIATE``
(tried again every few ms while a writer that does not queue holds the
lock, ``_locked_retry``, instead of failing with "database is
locked").

The schema is created on first use (no migrations: it is a fake cloud;
columns added since are added to an older database on first use, all of
them nullable). Tables carry a ``sim_`` prefix so the sim may share a
database with the engine.

Every other object of the cloud (networks, ports, volumes, images, ...:
objects.py) is a row of ``sim_objects``; the addresses ports hold are in
``sim_ips``. A new database is planted with the objects every sim
starts with (seed.py).

A server in the middle of a long action (a build, rebuild, resize or
delete) carries the end of that action as a time (``ready_at``,
``gone_at``) and what it becomes then (``outcome``); readers decide from
the clock whether the action is over, so nothing needs to run in the
background for a server to become ACTIVE, and every process agrees.
"""

import contextlib
import fcntl
import json
import os
import sqlite3
import threading
import time
import uuid

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc

from converge import exception
from converge import private

BUSY_TIMEOUT = 30  # seconds
#: SQLite's own wait for a lock (ms); longer waits are ours (_locked_retry)
SQLITE_BUSY_MS = 1
#: longest sleep between two tries at the write lock (seconds)
WRITE_RETRY_MAX = 0.002

# times are Double: MariaDB's FLOAT is single precision (a timestamp in it
# is off by minutes)
metadata = sa.MetaData()

servers = sa.Table(
    'sim_servers', metadata,
    # seq orders servers by creation; id is what users see
    sa.Column('seq', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('id', sa.String(36), nullable=False, unique=True),
    sa.Column('name', sa.String(255), nullable=False, default=''),
    sa.Column('status', sa.String(16), nullable=False),
    sa.Column('image', sa.String(255)),
    sa.Column('flavor', sa.String(255)),
    sa.Column('key_name', sa.String(255)),
    sa.Column('meta', sa.Text),           # JSON object
    sa.Column('user_data', sa.Text),
    sa.Column('networks', sa.Text),       # JSON list, as requested
    sa.Column('addresses', sa.Text),      # JSON object
    sa.Column('idempotency_key', sa.String(255), index=True),
    # the key while the server lives, NULL once deleted: the unique
    # constraint makes "check key, then insert" race-free everywhere
    sa.Column('live_key', sa.String(255), unique=True),
    sa.Column('resource', sa.String(255), index=True),
    sa.Column('host', sa.String(64)),
    sa.Column('created', sa.String(32), nullable=False),
    sa.Column('updated', sa.String(32), nullable=False),
    sa.Column('deleted', sa.Boolean, nullable=False, default=False),
    # the action under way (Nova's task_state: spawning, rebuilding,
    # resize_migrating), when it started and ends, and the values the
    # server takes when it ends (JSON: status, maybe flavor)
    sa.Column('task_state', sa.String(32)),
    sa.Column('task_started', sa.Double),
    sa.Column('ready_at', sa.Double),
    sa.Column('outcome', sa.Text),
    # a delete under way: the server reads NotFound from this time on
    sa.Column('delete_started', sa.Double),
    sa.Column('gone_at', sa.Double),
    # its user_data has a bootstrap part, or is run at its first boot:
    # the sim's agent host boots it (converge/agent/simhost.py)
    sa.Column('agent', sa.Boolean, index=True),
    # its user_data is run as cloud-init would ([sim] run_user_data when
    # it was created; converge/agent/firstboot.py)
    sa.Column('first_boot', sa.Boolean),
    # times it was rebooted: the host restarts its agent when this moves
    sa.Column('reboots', sa.Integer),
    # it holds objects of the cloud (ports bound or made for it, volumes
    # attached, a server group's membership) that its delete lets go of
    # (wiring.py); NULL for the servers of the default network, whose
    # delete then reads nothing more
    sa.Column('wired', sa.Boolean),
    # the project that made it: another project's server is not found
    # (as Nova answers a GET with that project's token); NULL for a
    # server made by no project's call (the bench, the operator)
    sa.Column('project_id', sa.String(255)),
)

api_log = sa.Table(
    'sim_api_log', metadata,
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('ts', sa.Double, nullable=False),
    sa.Column('op', sa.String(32), nullable=False, index=True),
    sa.Column('server_id', sa.String(36), index=True),
    sa.Column('idempotency_key', sa.String(255), index=True),
    sa.Column('resource', sa.String(255), index=True),
    sa.Column('ok', sa.Boolean, nullable=False),
    sa.Column('detail', sa.Text),         # JSON
    # the object of a call on another kind than servers (objects.py);
    # longer than a uuid: a router interface's is ROUTER:SUBNET
    sa.Column('object_id', sa.String(128), index=True),
)

faults = sa.Table(
    'sim_faults', metadata,
    sa.Column('op', sa.String(32), primary_key=True),
    sa.Column('latency', sa.Double),
    sa.Column('fail_rate', sa.Double),
    sa.Column('fail_count', sa.Integer),
    sa.Column('message', sa.Text),
    # HTTP status of the injected failures (None: 500)
    sa.Column('code', sa.Integer),
)

# every address a server was given, to find who holds one by index (the
# server's own ``addresses`` JSON is what users see)
addresses = sa.Table(
    'sim_addresses', metadata,
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('seq', sa.Integer, nullable=False),   # the server's
    sa.Column('net', sa.String(255), nullable=False),
    sa.Column('addr', sa.String(64), nullable=False, index=True),
)

# the one agent host of this cloud (converge/agent/simhost.py): a lease
# its holder renews, so hosts on other machines (or for other disks
# directories) sharing this database stand aside; `stop` asks it to exit
agent_host = sa.Table(
    'sim_agent_host', metadata,
    sa.Column('name', sa.String(32), primary_key=True),
    sa.Column('owner', sa.String(512), nullable=False),
    sa.Column('expires', sa.Double, nullable=False),
    sa.Column('stop', sa.Boolean),
)

counters = sa.Table(
    'sim_counters', metadata,
    sa.Column('name', sa.String(64), primary_key=True),
    sa.Column('value', sa.Integer, nullable=False),
)

# Every object of the cloud besides servers (drivers/cloud.py's kinds:
# networks, ports, volumes, images, ...), one row each, its API view's
# own fields in `body` (JSON). A delete keeps the row (deleted), as for
# servers. Columns beside the body are what calls look objects up by.
objects = sa.Table(
    'sim_objects', metadata,
    sa.Column('seq', sa.Integer, primary_key=True, autoincrement=True),
    # a uuid, or what the kind's id is made of (a key pair's name, a
    # router interface's ROUTER:SUBNET)
    sa.Column('id', sa.String(128), nullable=False, index=True),
    sa.Column('kind', sa.String(32), nullable=False),
    # the owner ('' for the ports Neutron owns itself: a router's
    # gateway, a floating IP's)
    sa.Column('project_id', sa.String(255), nullable=False),
    sa.Column('name', sa.String(255), index=True),
    sa.Column('key', sa.String(255)),
    # 'KIND:KEY' while the object lives, NULL once deleted: the unique
    # constraint makes "look for the key, then insert" race-free in every
    # process (as servers' live_key)
    sa.Column('live_key', sa.String(300), unique=True),
    # the natural identity of kinds that have one (a key pair's project
    # and name, a flavor's name, a router interface's id, a rule's
    # fields), unique while the object lives
    sa.Column('live_ident', sa.String(300), unique=True),
    # what it hangs off (a subnet's or port's network, a rule's group, a
    # router interface's router, an attachment's volume) and the device
    # it serves (a port's device_id, an attachment's server): the looks
    # of deletes ("ports still in use") and of servers
    sa.Column('parent', sa.String(128), index=True),
    sa.Column('device', sa.String(128), index=True),
    # other projects see it (a shared or external network and its
    # subnets, a public image or flavor)
    sa.Column('shared', sa.Boolean, nullable=False, default=False),
    sa.Column('status', sa.String(32)),
    sa.Column('body', sa.Text, nullable=False),
    sa.Column('created', sa.String(32), nullable=False),
    sa.Column('updated', sa.String(32), nullable=False),
    # an action under way (a volume creating, extending, attaching): when
    # it ends and what the object is then (JSON: status, fields), read
    # from the clock by every reader, as servers' ready_at
    sa.Column('ready_at', sa.Double),
    sa.Column('outcome', sa.Text),
    # a delete under way (a volume deleting): gone from this time on
    sa.Column('gone_at', sa.Double),
    sa.Column('deleted', sa.Boolean, nullable=False, default=False),
)
sa.Index('ix_sim_objects_kind_project', objects.c.kind, objects.c.project_id)

# Neutron's IP allocations: an address of a subnet is held by one port
# (the primary key makes two processes' picks of one address collide)
ips = sa.Table(
    'sim_ips', metadata,
    sa.Column('subnet_id', sa.String(64), primary_key=True),
    sa.Column('ip_address', sa.String(64), primary_key=True),
    sa.Column('network_id', sa.String(64), nullable=False, index=True),
    sa.Column('port_id', sa.String(64), nullable=False, index=True),
)

_LOCK = threading.Lock()
_ENGINES = {}


def _sqlite_engine(url):
    path = url.database
    if not path or path == ':memory:' or 'mode=memory' in str(url):
        raise exception.ConvergeError(
            'The sim needs a shared database; an in-memory SQLite '
            'database (%s) cannot be shared between connections or '
            'processes' % (url,))
    if path.startswith('file:'):
        path = path[5:].split('?', 1)[0]
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    private.file(path)   # what its servers were given (user_data) too
    engine = sa.create_engine(
        url, connect_args={'timeout': SQLITE_BUSY_MS / 1000.0,
                           'check_same_thread': False},
        pool_size=16, max_overflow=48)

    @event.listens_for(engine, 'connect')
    def _connect(dbapi_conn, _record):
        # take transaction control away from pysqlite: we BEGIN ourselves
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute('PRAGMA busy_timeout=%d' % SQLITE_BUSY_MS)
        cur.close()
        # the first switch to WAL takes the lock another process may hold
        _locked_retry(dbapi_conn, 'PRAGMA journal_mode=WAL')
        dbapi_conn.execute('PRAGMA synchronous=OFF')

    @event.listens_for(engine, 'begin')
    def _begin(conn):
        raw = conn.connection.dbapi_connection
        if conn.get_execution_options().get('sim_readonly'):
            _locked_retry(raw, 'BEGIN')
        else:
            _locked_retry(raw, 'BEGIN IMMEDIATE')

    return engine


def _locked_retry(raw, sql):
    """Run `sql` (a BEGIN), trying again every few ms while another
    process holds the lock. Every worker of a distributed deployment
    writes to the one sim database: SQLite's own busy handler sleeps
    longer and longer between tries (up to 100 ms), so a writer of one
    process waited tens of ms behind transactions of one ms in another.
    (In WAL mode only the write lock is ever waited for.)"""
    deadline = time.monotonic() + BUSY_TIMEOUT
    delay = 0.0002
    while True:
        try:
            raw.execute(sql)
            return
        except sqlite3.OperationalError as e:
            if 'locked' not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, WRITE_RETRY_MAX)


def _create_schema(engine):
    # Two processes may race to create the tables; on SQLite the
    # BEGIN IMMEDIATE serialises them, elsewhere the loser retries and
    # then finds the tables in place.
    older = (sa.inspect(engine).has_table(servers.name)
             and not sa.inspect(engine).has_table(addresses.name))
    for attempt in range(3):
        try:
            metadata.create_all(engine, checkfirst=True)
            break
        except (sa_exc.OperationalError, sa_exc.ProgrammingError,
                sa_exc.IntegrityError):
            if attempt == 2:
                raise
    if older:
        _index_addresses(engine)
    try:
        with engine.begin() as conn:
            present = conn.execute(
                sa.select(counters.c.name).where(counters.c.name == 'ip')
            ).first()
            if present is None:
                conn.execute(counters.insert().values(name='ip', value=0))
    except sa_exc.IntegrityError:
        pass  # another process inserted it first


def _index_addresses(engine):
    """A cloud made before ``sim_addresses`` existed: index the addresses
    its servers hold, so a new server is not given one of them."""
    with engine.begin() as conn:
        if conn.execute(sa.select(addresses.c.id).limit(1)).first():
            return  # another process did it first
        rows = []
        for seq, text in conn.execute(sa.select(servers.c.seq,
                                                servers.c.addresses)):
            for net, entries in json.loads(text or '{}').items():
                rows += [{'seq': seq, 'net': net, 'addr': e['addr']}
                         for e in entries]
        if rows:
            conn.execute(addresses.insert(), rows)


def _add_missing_columns(engine):
    """A database made by an older sim lacks the newer (nullable)
    columns: add them, so an existing home keeps its cloud."""
    for attempt in range(3):
        inspector = sa.inspect(engine)
        missing = [(table, column) for table in metadata.sorted_tables
                   for column in table.columns
                   if column.name not in {
                       c['name'] for c in inspector.get_columns(table.name)}]
        if not missing:
            return
        try:
            with engine.begin() as conn:
                for table, column in missing:
                    kind = column.type.compile(dialect=engine.dialect)
                    quote = engine.dialect.identifier_preparer.quote
                    conn.exec_driver_sql('ALTER TABLE %s ADD COLUMN %s %s' % (
                        quote(table.name), quote(column.name), kind))
            return
        except (sa_exc.OperationalError, sa_exc.ProgrammingError):
            # another process added them first: look again
            if attempt == 2:
                raise


def _seed(engine):
    """The objects a new cloud has (seed.py: its networks, images,
    flavors), planted once per database. Imported here, on first use of
    a database: the seed is made by the kinds' own code, which reads and
    writes through this module."""
    from converge.drivers.sim import seed
    seed.ensure(engine)


def get_engine(url):
    """One engine per URL per process; the schema (and the seeded
    objects) exist once returned."""
    key = str(url)
    with _LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            parsed = sa.engine.make_url(key)
            if parsed.get_backend_name() == 'sqlite':
                engine = _sqlite_engine(parsed)
            else:
                engine = sa.create_engine(parsed, pool_pre_ping=True,
                                          pool_recycle=3600)
            _create_schema(engine)
            _add_missing_columns(engine)
            _seed(engine)
            _ENGINES[key] = engine
        return engine


def forget(url=None):
    """Drop cached engines (tests; after fork)."""
    with _LOCK:
        for key in list(_ENGINES):
            if url is None or key == str(url):
                _ENGINES.pop(key).dispose()


def _after_fork_in_child():
    # connections inherited from the parent must not be used (or closed)
    # here: start afresh with new pools
    global _LOCK
    _LOCK = threading.Lock()
    # a writer's turn (its thread lock, its flock) is the parent's: a
    # thread of the parent may hold them, and the flock's open file is
    # shared with the parent (closing the child's copy leaves it held)
    for writer in _QUEUES.values():
        writer.forget()
    _QUEUES.clear()
    for engine in _ENGINES.values():
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_after_fork_in_child)


class CommitUnknown(Exception):
    """The connection dropped while committing: the transaction may or
    may not have been applied. Only a call that is safe to repeat may be
    retried (see ``SimCompute``)."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


def dropped(error):
    """True when a database error means "the connection is gone or the
    database is unavailable for now" (worth retrying), not a bad query."""
    if isinstance(error, CommitUnknown):
        return True
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    return isinstance(error, (sa_exc.OperationalError,
                              sa_exc.InterfaceError))


@contextlib.contextmanager
def write(engine):
    """One write transaction: commit on success, roll back on error.

    Raises CommitUnknown when the connection drops during the commit
    itself (the body had finished)."""
    writer = _writer(engine)
    with writer.turn() if writer is not None else contextlib.nullcontext():
        with _committed(engine) as conn:
            yield conn


def run(engine, fn):
    """fn(conn) in a write transaction; returns what it returns (or
    raises what it raises, or CommitUnknown as write() does). On SQLite
    the calls of this process's threads that wait for the one writer are
    run together, one after the other in one transaction (_Writer.run):
    the calls of the cloud's API the engine makes by the thousand
    (creates, looks) each wrote one or two rows, and their transactions
    one at a time, with the lock handed from thread to thread and process
    to process, held back both workers of a distributed ramp."""
    writer = _writer(engine)
    if writer is None:
        with write(engine) as conn:
            return fn(conn)
    return writer.run(engine, fn)


@contextlib.contextmanager
def _committed(engine):
    body_done = False
    try:
        with engine.begin() as conn:
            yield conn
            body_done = True
    except sa_exc.DBAPIError as e:
        if body_done and dropped(e):
            raise CommitUnknown(e) from e
        raise


_QUEUES = {}

#: most calls run together in one transaction (_Writer.run)
GROUP_MAX = 32


def _writer(engine):
    """The writers' queue of this database; None elsewhere than on
    SQLite, where the database's own locks are all there is."""
    if engine.dialect.name != 'sqlite':
        return None
    with _LOCK:
        writer = _QUEUES.get(id(engine))
        if writer is None:
            writer = _QUEUES[id(engine)] = _Writer(
                _beside(engine, '-writer'))
        return writer


class _Call:
    __slots__ = ('fn', 'done', 'result', 'error')

    def __init__(self, fn):
        self.fn = fn
        self.done = False
        self.result = self.error = None


class _Writer:
    """SQLite has one writer at a time. Writers wait their turn here,
    each woken as soon as the one before it is done: the threads of this
    process on a condition, the processes on an exclusive flock of a
    file beside the database, which the kernel hands on at once (and
    drops with a process that dies). SQLite's busy handler sleeps up to
    100 ms between tries, and even our own retry (``_locked_retry``)
    sleeps up to WRITE_RETRY_MAX.

    A thread that has the turn for run() takes the calls waiting then
    (up to GROUP_MAX, its own among them) and runs them in one
    transaction: one BEGIN, one COMMIT, one handing on of the lock for
    them all, and no thread woken between them. If one of them raises,
    or the commit fails, the transaction is rolled back and each is run
    again alone, as it would have been (its error is its own)."""

    def __init__(self, path):
        self._path = path
        self._fd = None
        self._cv = threading.Condition(threading.Lock())
        self._busy = False   # a thread of this process has the turn
        self._waiting = []   # run()'s calls not yet taken

    def forget(self):
        """In a child after fork: let go of the parent's open file."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @contextlib.contextmanager
    def turn(self):
        with self._cv:
            while self._busy:
                self._cv.wait()
            self._busy = True
        try:
            with self._flocked():
                yield
        finally:
            self._hand_on()

    def run(self, engine, fn):
        call = _Call(fn)
        with self._cv:
            self._waiting.append(call)
            while True:
                while self._busy and not call.done:
                    self._cv.wait()
                if call.done:
                    break
                # the turn is this thread's: its call is still waiting
                self._busy = True
                calls = self._waiting[:GROUP_MAX]
                del self._waiting[:GROUP_MAX]
                self._cv.release()
                try:
                    try:
                        with self._flocked():
                            _run_together(engine, calls)
                    finally:
                        for taken in calls:
                            if not taken.done:   # interrupted midway
                                taken.error = CommitUnknown(RuntimeError(
                                    'the thread running it was stopped'))
                                taken.done = True
                        self._hand_on()
                finally:
                    self._cv.acquire()
        if call.error is not None:
            raise call.error
        return call.result

    def _hand_on(self):
        with self._cv:
            self._busy = False
            # those whose calls are done return; one of the others takes
            # the turn
            self._cv.notify_all()

    @contextlib.contextmanager
    def _flocked(self):
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT |
                               os.O_CLOEXEC, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


def _run_together(engine, calls):
    """Run `calls` in one transaction, or each alone if that fails;
    every call is done after."""
    if len(calls) > 1:
        try:
            with _committed(engine) as conn:
                results = [call.fn(conn) for call in calls]
        except CommitUnknown as e:
            # may have committed: none may run again here (their callers
            # know which calls are safe to repeat)
            for call in calls:
                call.error, call.done = e, True
            return
        except Exception:
            pass   # rolled back: each alone, below
        else:
            for call, result in zip(calls, results):
                call.result, call.done = result, True
            return
    for call in calls:
        try:
            with _committed(engine) as conn:
                call.result = call.fn(conn)
        except Exception as e:
            call.error = e
        call.done = True


def _beside(engine, suffix):
    """A file beside the SQLite database of `engine`."""
    path = engine.url.database
    if path.startswith('file:'):
        path = path[5:].split('?', 1)[0]
    return os.path.abspath(path) + suffix


def _faults_file(engine):
    if engine.dialect.name != 'sqlite':
        return None
    return _beside(engine, '-faults')


def faults_version(engine):
    """What the faults were last changed to, on SQLite: the identity of a
    file beside the database, replaced after every change (set_faults,
    clear_faults, reset) commits (its inode and time: a stat, not an
    open and read, on every call of the cloud); '' before any. None on
    other databases, where callers read the faults every time."""
    path = _faults_file(engine)
    if path is None:
        return None
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return ''
    return (found.st_ino, found.st_mtime_ns, found.st_size)


def faults_changed(engine):
    """After a change to the faults commits: a new token (written aside
    and renamed over the old, so a reader sees one or the other)."""
    path = _faults_file(engine)
    if path is None:
        return
    aside = '%s.%d.%d' % (path, os.getpid(), threading.get_ident())
    with open(aside, 'w') as f:
        f.write(uuid.uuid4().hex)
    # its time to the nanosecond, set rather than left to the file
    # system's clock (a few ms coarse): two changes in a row (an inode
    # freed and used again) must never look the same to faults_version
    stamp = time.time_ns()
    os.utime(aside, ns=(stamp, stamp))
    os.replace(aside, path)


@contextlib.contextmanager
def read(engine):
    """A read-only transaction (a deferred BEGIN on SQLite)."""
    with engine.connect() as conn:
        conn.execution_options(sim_readonly=True)
        with conn.begin():
            yield conn
