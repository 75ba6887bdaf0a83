"""A seeded chaos test: three workers on PostgreSQL, RabbitMQ and Redis
create, update (with replacements) and delete a stack of a few hundred
resources while faults hit them, and the promises are checked after every
phase.

Faults: SIGKILL of a worker (a new one is started), SIGSTOP of 3-8 s
(3-5 s under CI=true; longer than the coordination timeout either way,
so the paused worker falls out of the group), pg_terminate_backend of the
test database's backends, a database outage (connections refused,
backends terminated) during the first create, and a RabbitMQ stop/start
in each round's update (it is shared with other tests, so it is always
started again). Invariants after each phase: the stack reached its goal
with no operator action, no server was created twice (the simulated
cloud's API log), no event is duplicated, no lock is left held, every
live worker is in the group, and nothing of a worker was re-dispatched as
"gone" while it was running.

Environment:
  CONVERGE_CHAOS_SEED      the seed (printed; random when unset)
  CONVERGE_CHAOS_ROUNDS    create/update/delete rounds (default 1)
  CONVERGE_CHAOS_OUTAGE    seconds of the database outage (default 60;
                           35 under CI=true: still longer than the 31 s a
                           unit used to retry for)
  CONVERGE_CHAOS_FAULTS    comma-separated subset of kill,pause,terminate,
                           outage,rabbitmq (default: all; empty: none,
                           a baseline)
  CONVERGE_CHAOS_SERVERS   servers in the stack (default 30: 281
                           resources; 16, 155 resources, under CI=true)
  CONVERGE_CHAOS_PAUSE     longest pause in seconds (default 8; 5 under
                           CI=true), at least 3
"""

import datetime
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import threading
import time

import pytest

from converge.bench import fleet
from tests.distributed import Deployment, require, wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.long, pytest.mark.distributed,
              pytest.mark.xdist_group('services')]

CI = os.environ.get('CI') == 'true'
ALL_FAULTS = ('kill', 'pause', 'terminate', 'outage', 'rabbitmq')
CHAIN = 8
FANIN = 10
# seconds without a heartbeat before a worker leaves the group: below the
# shortest pause, so every pause takes the worker out; its locks last
# longer than the longest pause, so the sweeper sees that a paused
# worker's units are still held and leaves them alone (a killed worker's
# work is taken over after LOCK_TIMEOUT)
MEMBERSHIP_TIMEOUT = 2
LOCK_TIMEOUT = 12


def _env_faults():
    raw = os.environ.get('CONVERGE_CHAOS_FAULTS')
    if raw is None:
        return set(ALL_FAULTS)
    faults = {f.strip() for f in raw.split(',') if f.strip()}
    unknown = faults - set(ALL_FAULTS)
    assert not unknown, 'CONVERGE_CHAOS_FAULTS: unknown %s' % sorted(unknown)
    return faults


def template(path, servers, version, waits=(1, 0.5, 0.3)):
    """`servers` servers behind a hub, each followed by a chain of test
    resources; values fan the chain ends back in. Version 1 changes the
    user_data of every other server (a replacement) and the
    update_replace_value of every third chain link (a replacement too);
    their dependents update in place."""
    lines = ['heat_template_version: 2018-08-31', 'resources:',
             '  hub: {type: OS::Heat::Value, properties: {value: hub}}']
    for s in range(servers):
        user_data = 'v%d' % (version if s % 2 == 0 else 0)
        lines += ['  s%d:' % s, '    type: OS::Nova::Server',
                  '    properties:', '      image: cirros',
                  '      flavor: m1.tiny', '      user_data: %s' % user_data,
                  '      metadata: {hub: {get_attr: [hub, value]}}']
        prev = 's%d' % s
        for c in range(CHAIN):
            name = 't%d_%d' % (s, c)
            replace = 'r%d' % (version if (s + c) % 3 == 0 else 0)
            lines += ['  %s:' % name, '    type: OS::Heat::TestResource',
                      '    properties:',
                      '      value: {get_resource: %s}' % prev,
                      '      update_replace_value: %s' % replace,
                      # slow enough for faults to land mid-phase
                      '      action_wait_secs: {create: %s, update: %s, '
                      'delete: %s}' % waits]
            prev = name
    for k in range(FANIN):
        ends = ['t%d_%d' % (s, CHAIN - 1) for s in range(k, servers, FANIN)]
        lines += ['  sum%d:' % k, '    type: OS::Heat::Value',
                  '    properties:', '      value: {list_join: [",", [%s]]}'
                  % ', '.join('{get_attr: [%s, output]}' % e for e in ends)]
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def resource_names(servers):
    names = {'hub'} | {'sum%d' % k for k in range(FANIN)}
    for s in range(servers):
        names |= {'s%d' % s} | {'t%d_%d' % (s, c) for c in range(CHAIN)}
    return names


class Chaos:
    """The deployment, its workers' lives and the faults applied."""

    def __init__(self, d, rng, faults, outage, longest_pause=8):
        self.d, self.rng, self.faults, self.outage = d, rng, faults, outage
        self.longest_pause = longest_pause
        self.slots = []       # index into d.workers of each live worker
        self.lives = {}       # engine id -> {'start', 'end', 'pauses'}
        self.applied = []     # what was done, when, and what it measured

    # -- workers ------------------------------------------------------------
    def start(self, slot=None):
        started = time.time()
        self.d.start_worker()
        index = len(self.d.workers) - 1
        engine_id = self.d.engine_id(index)
        self.lives[engine_id] = {'start': started, 'end': None, 'pauses': []}
        if slot is None:
            self.slots.append(index)
        else:
            self.slots[slot] = index
        return engine_id

    def engine(self, slot):
        return self.d.engine_id(self.slots[slot])

    def pid(self, slot):
        return self.d.workers[self.slots[slot]][0].pid

    # -- faults ---------------------------------------------------------------
    def kill(self):
        slot = self.rng.randrange(len(self.slots))
        victim = self.engine(slot)
        held = "SELECT count(*) FROM resources WHERE status = " \
            "'IN_PROGRESS' AND engine_id = '%s'" % victim
        stranded = self._sql(held)[0][0]
        at = time.time()
        self.d.kill(self.slots[slot])
        self.lives[victim]['end'] = at
        # recovered: the survivors took over everything the dead worker
        # held (after the coordination timeout and a sweep)
        taken = _poll(lambda: self._sql(held)[0][0] == 0, 60 + LOCK_TIMEOUT)
        self.start(slot)
        self._record('kill', at, worker=victim, stranded=stranded,
                     recovered_s=taken)

    def pause(self):
        slot = self.rng.randrange(len(self.slots))
        engine_id, pid = self.engine(slot), self.pid(slot)
        seconds = round(self.rng.uniform(3, self.longest_pause), 1)
        at = time.time()
        os.killpg(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)  # the fault itself: a process frozen
        finally:
            os.killpg(pid, signal.SIGCONT)
        back = time.time()
        self.lives[engine_id]['pauses'].append((at, back))
        probe = self.d.coordinator()
        try:
            rejoined = _poll(lambda: engine_id in self.d.members(probe), 10)
        finally:
            probe.stop()
        assert rejoined is not None, \
            'worker %s paused %.1f s is not back in the group 10 s after ' \
            'it resumed' % (engine_id, seconds)
        self._record('pause', at, worker=engine_id, seconds=seconds,
                     rejoined_s=rejoined)

    def terminate(self):
        at = time.time()
        n = self._terminate_backends()
        self._record('terminate', at, backends=n)

    def database_outage(self, seconds):
        """Refuse the test database's connections and drop its backends
        for `seconds` (this database only: the server is shared)."""
        at = time.time()
        try:
            self._admin("ALTER DATABASE %s ALLOW_CONNECTIONS false"
                        % self.d.name)
            self._terminate_backends()
            time.sleep(seconds)  # the fault itself: the database away
        finally:
            self._admin("ALTER DATABASE %s ALLOW_CONNECTIONS true"
                        % self.d.name)
        back = time.time()
        resumed = _poll(lambda: self._sql(
            "SELECT count(*) FROM events WHERE timestamp > %f" % back)[0][0],
            300)
        self._record('outage', at, seconds=seconds,
                     progress_after_s=resumed)

    def rabbitmq_restart(self):
        at = time.time()
        try:
            subprocess.run(['rabbitmqctl', 'stop_app'], check=True,
                           capture_output=True, timeout=120)
        finally:
            # shared with other tests and agents: leave it serving
            for step in ('start_app', 'await_startup'):
                subprocess.run(['rabbitmqctl', step], check=True,
                               capture_output=True, timeout=300)
            assert not fleet.missing('rabbitmq', wait=120)
        back = time.time()
        resumed = _poll(lambda: self._sql(
            "SELECT count(*) FROM events WHERE timestamp > %f" % back)[0][0],
            300)
        self._record('rabbitmq', at, down_s=round(back - at, 1),
                     progress_after_s=resumed)

    def one_fault(self):
        choices = [f for f in ('kill', 'pause', 'terminate')
                   if f in self.faults]
        if not choices:
            return
        fault = self.rng.choice(choices)
        {'kill': self.kill, 'pause': self.pause,
         'terminate': self.terminate}[fault]()

    # -- helpers ------------------------------------------------------------
    def _record(self, fault, at, **measured):
        entry = dict(fault=fault, at=round(at - self.t0, 1), **measured)
        self.applied.append(entry)
        print('CHAOS fault', json.dumps(entry), flush=True)

    def _admin(self, query):
        import psycopg2
        conn = psycopg2.connect(dbname='postgres', **fleet.PG)
        conn.autocommit = True
        try:
            cur = conn.cursor()
            cur.execute(query)
            return cur.fetchall() if cur.description else []
        finally:
            conn.close()

    def _terminate_backends(self):
        return self._admin(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = '%s' AND pid <> pg_backend_pid()"
            % self.d.name)[0][0]

    def _sql(self, query):
        """The test database, through outages: retried until it answers."""
        deadline = time.time() + 600
        while True:
            try:
                return self.d.sql(query)
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)


def _poll(predicate, timeout, interval=0.2):
    """Seconds until predicate() held, or None after `timeout`."""
    start = time.time()
    while time.time() - start < timeout:
        if predicate():
            return round(time.time() - start, 2)
        time.sleep(interval)
    return None


class _Faults(threading.Thread):
    """Applies faults one after another, a seeded 0.5-2.5 s apart, until
    told to stop; an error is kept for the test to raise."""

    def __init__(self, chaos):
        super().__init__(daemon=True)
        self.chaos, self.stop, self.error = chaos, threading.Event(), None

    def run(self):
        try:
            while not self.stop.wait(self.chaos.rng.uniform(0.5, 2.5)):
                self.chaos.one_fault()
        except BaseException as exc:  # surfaced by the test
            self.error = exc


def _stack(chaos, name):
    rows = chaos._sql("SELECT id, action, status, status_reason FROM stacks "
                      "WHERE name = '%s'" % name)
    return rows[0] if rows else None


def _run_phase(chaos, name, goal, start, deadline, during=None):
    """Start a phase (the CLI returns once the traversal started), apply
    faults until the stack reaches `goal` (action, status) or is gone
    (goal None), and return the seconds it took."""
    t0 = time.time()
    start()
    faults = _Faults(chaos)
    if during is not None:
        during()
    faults.start()
    try:
        def reached():
            if faults.error is not None:
                raise faults.error
            row = _stack(chaos, name)
            if goal is None:
                return row is None or row[1:3] == ('DELETE', 'COMPLETE')
            if row and row[2] == 'FAILED':
                raise AssertionError('%s: %s_FAILED: %s' % (name, row[1],
                                                            row[3]))
            return row is not None and row[1:3] == goal
        took = _poll(reached, deadline, interval=0.5)
    finally:
        faults.stop.set()
        faults.join()
    if faults.error is not None:
        raise faults.error
    if took is None:
        stuck = chaos._sql("SELECT name, action, status, engine_id FROM "
                           "resources WHERE status = 'IN_PROGRESS'")
        raise AssertionError('%s did not reach %s in %d s (IN_PROGRESS: %s)'
                             % (name, goal, deadline, stuck[:20]))
    return round(time.time() - t0, 1)


# -- invariants ----------------------------------------------------------

def check_invariants(chaos, stack_id, names, servers_expected):
    d = chaos.d
    # no server created twice: one create (not an adoption) per key
    sim = sqlite3.connect(os.path.join(str(d.dir), 'sim.db'))
    try:
        twice = [r for r in sim.execute(
            "SELECT idempotency_key, count(*) FROM sim_api_log "
            "WHERE op = 'create' AND ok AND (detail IS NULL OR detail NOT "
            "LIKE '%\"adopted\": true%') GROUP BY idempotency_key "
            "HAVING count(*) > 1")]
        live = sim.execute("SELECT count(*) FROM sim_servers WHERE NOT "
                           "deleted").fetchone()[0]
    finally:
        sim.close()
    assert twice == [], 'servers created twice: %s' % twice
    assert live == servers_expected

    # no duplicated event: one COMPLETE per resource, action, traversal
    dup = chaos._sql(
        "SELECT traversal_id, resource_name, action, count(*) FROM events "
        "WHERE stack_id = '%s' AND status = 'COMPLETE' GROUP BY "
        "traversal_id, resource_name, action HAVING count(*) > 1"
        % stack_id)
    assert dup == [], 'duplicated events: %s' % dup[:10]
    assert chaos._sql("SELECT count(*) FROM resources WHERE stack_id = '%s' "
                      "AND status = 'IN_PROGRESS'" % stack_id)[0][0] == 0

    # no lock left held (a late duplicate message may still hold one for
    # a moment; a leaked lock stays held)
    probe = d.coordinator()
    try:
        held = _poll(lambda: all(probe.idle(stack_id, n) for n in names), 15)
        assert held is not None, 'resource locks still held 15 s after ' \
            'the phase ended'
        # every live worker is a member of the group
        alive = {e for e, life in chaos.lives.items() if life['end'] is None}
        assert _poll(lambda: alive <= d.members(probe), 10) is not None, \
            'live workers missing from the group: %s' % (
                alive - d.members(probe))
    finally:
        probe.stop()

    # nothing of a worker re-dispatched as gone while it was running
    wrongly = []
    for ts, engine_id, line in _gone_redispatches(d):
        life = chaos.lives.get(engine_id)
        if life is None:
            wrongly.append(('unknown worker', line))
            continue
        if life['end'] is None or ts < life['end']:
            wrongly.append(line)  # running, or paused with its locks held
    assert wrongly == [], 're-dispatched while alive: %s' % wrongly[:5]


_GONE = re.compile(r'^(\S+ \S+) .*re-dispatching .* worker (\S+) is gone')


def _gone_redispatches(d):
    for _, log in d.workers:
        if not os.path.exists(log):
            continue
        for line in open(log):
            m = _GONE.match(line)
            if m:
                ts = datetime.datetime.strptime(
                    m.group(1), '%Y-%m-%d %H:%M:%S.%f').timestamp()
                yield ts, m.group(2), line.strip()


def _rejoins(d):
    return sum(1 for _, log in d.workers if os.path.exists(log)
               for line in open(log) if 'rejoined' in line)


# -- the test ------------------------------------------------------------

def test_chaos_create_update_delete(tmp_path):
    require('postgresql', 'rabbitmq', 'redis')
    seed = int(os.environ.get('CONVERGE_CHAOS_SEED') or
               random.SystemRandom().randrange(1 << 32))
    rounds = int(os.environ.get('CONVERGE_CHAOS_ROUNDS') or 1)
    outage = float(os.environ.get('CONVERGE_CHAOS_OUTAGE') or
                   (35 if CI else 60))
    servers = int(os.environ.get('CONVERGE_CHAOS_SERVERS') or
                  (16 if CI else 30))
    # a pause holds the fault thread and a third of the workers, so in CI
    # pauses are kept short (every one still outlasts the 2 s membership
    # timeout); with fewer resources, CI's run is about a minute and a
    # half, the outage and the worker starts most of it
    longest_pause = float(os.environ.get('CONVERGE_CHAOS_PAUSE') or
                          (5 if CI else 8))
    assert longest_pause >= 3, 'CONVERGE_CHAOS_PAUSE: at least 3 s'
    waits = (0.5, 0.3, 0.2) if CI else (1, 0.5, 0.3)
    faults = _env_faults()
    print('\nCHAOS seed=%d rounds=%d outage=%ss faults=%s servers=%d '
          'pauses<=%ss (CONVERGE_CHAOS_SEED=%d reproduces the schedule)'
          % (seed, rounds, outage, ','.join(sorted(faults)), servers,
             longest_pause, seed), flush=True)
    rng = random.Random(seed)
    d = Deployment(tmp_path, coordination_timeout=5, coordination_options=(
        '&membership_timeout=%d&lock_timeout=%d'
        % (MEMBERSHIP_TIMEOUT, LOCK_TIMEOUT)))
    chaos = Chaos(d, rng, faults, outage, longest_pause)
    names = resource_names(servers)
    v0 = template(tmp_path / 'v0.yaml', servers, 0, waits)
    v1 = template(tmp_path / 'v1.yaml', servers, 1, waits)
    phases = []
    try:
        for _ in range(3):
            chaos.start()
        chaos.t0 = time.time()
        deadline = 300 + outage
        for r in range(rounds):
            name = 'chaos%d' % r

            def outage_mid_create():
                # the first create loses its database once work is under
                # way, for longer than a unit's old retry budget
                wait_for(lambda: chaos._sql(
                    "SELECT count(*) FROM events WHERE status = 'COMPLETE'"
                    " AND resource_name LIKE 't%'")[0][0] >= 20,
                    timeout=120, interval=0.1)
                chaos.database_outage(outage)

            during = (outage_mid_create if r == 0 and 'outage' in faults
                      else None)
            took = _run_phase(
                chaos, name, ('CREATE', 'COMPLETE'),
                lambda: d.cli('stack', 'create', name, '-t', v0), deadline,
                during)
            stack_id = _stack(chaos, name)[0]
            check_invariants(chaos, stack_id, names, servers)
            phases.append(dict(round=r, phase='create', seconds=took))

            # the broker is shared with other tests and agents: one
            # restart a round, in the update (after its CLI call returned)
            took = _run_phase(
                chaos, name, ('UPDATE', 'COMPLETE'),
                lambda: d.cli('stack', 'update', name, '-t', v1), deadline,
                chaos.rabbitmq_restart if 'rabbitmq' in faults else None)
            check_invariants(chaos, stack_id, names, servers)
            phases.append(dict(round=r, phase='update', seconds=took))

            took = _run_phase(
                chaos, name, None,
                lambda: d.cli('stack', 'delete', name, '--yes'), deadline)
            check_invariants(chaos, stack_id, names, 0)
            phases.append(dict(round=r, phase='delete', seconds=took))
        summary = dict(seed=seed, rounds=rounds, resources=len(names),
                       phases=phases, faults=chaos.applied,
                       rejoins_logged=_rejoins(d),
                       wall_s=round(time.time() - chaos.t0, 1))
        print('CHAOS summary', json.dumps(summary), flush=True)
    finally:
        for slot in range(len(chaos.slots)):  # never leave one frozen
            try:
                os.killpg(chaos.pid(slot), signal.SIGCONT)
            except ProcessLookupError:
                pass
        d.close()
