"""Where converge-bench runs the engine, and how it reads the engine's counts.

``Embedded``: one process (SQLite, in-process messaging, file locks); the
bench's thread is the API, the engine's worker threads do the units.
``Distributed``: a fresh PostgreSQL database, RabbitMQ and Redis on
loopback and N `converge-worker` processes (fleet.py); the bench's process
is the API only. Either way ``snapshot()`` gives the engine's counts so far
(measure.combine of every engine process) and ``wait()`` blocks until a
traversal ends.
"""

import glob
import json
import os
import shutil
import time

from converge.bench import fleet
from converge.bench import measure
from converge.bench import probe

#: how often wait() reads the stack's status (one small query), at first;
#: a long traversal is read less often (1/200 of the time so far, at most
#: POLL_MAX apart): the bench's own reads must not be what it measures,
#: nor its pauses (0.25 s apart, a 30 s create was seen done up to a
#: quarter of a second late, 0.8 % of its time)
POLL = 0.02
POLL_MAX = 0.05
#: how long a worker may take to start or to answer a snapshot request
PATIENCE = 120


class BenchError(Exception):
    pass


class _Harness:
    engine = None
    recorder = None

    def wait(self, stack_id, traversal_id):
        """Block until the traversal ends (or another takes the stack);
        return the stack's (action, status)."""
        from converge.db import api
        start = time.monotonic()
        while True:
            with self.engine.db.connect() as conn:
                st = api.stack_status(conn, stack_id)
            if st.status != 'IN_PROGRESS' or \
                    st.current_traversal != traversal_id:
                return st.action, st.status
            time.sleep(min(POLL_MAX, max(
                POLL, (time.monotonic() - start) / 200)))

    def processes(self):
        return 1

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            # __exit__ is not called for a failed __enter__: the workers
            # started so far would be left running, serving the next run
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Embedded(_Harness):
    mode = 'embedded'
    api = None

    def __init__(self, home, options=None, agents=False):
        self.home = home
        self.options = options or {}
        #: serve the agents' routes (a scenario with deployments)
        self.agents = agents

    def start(self):
        from converge import conf
        from converge.engine import context
        conf.setup([], home=self.home, log=False)
        for name, value in self.options.items():
            conf.CONF.set_override(name, value)
        self.engine = context.Engine()
        from converge.workers import pool
        pool.start(self.engine)
        if self.agents:
            # the agents' routes, served from the engine's process as the
            # CLI serves them (the tripleo scenario's servers run agents)
            from converge.api import server
            self.api = server.serve_embedded(self.engine)
        # the bench's thread stores stacks and waits: not check_resource's
        self.recorder = measure.Recorder(self.engine, 'exclude').install()

    def snapshot(self):
        # the unit that ended the traversal records its duration after the
        # stack shows COMPLETE: wait for it, as each worker's probe does
        self.engine.idle.wait()
        return measure.combine([self.recorder.snapshot()])

    def close(self):
        from converge.db import session
        if self.recorder:
            self.recorder.remove()
        if self.engine:
            # the simulated servers' agents stop with the run
            self.engine.clients.compute.shutdown_agents()
            if self.api:
                self.api.stop()
            self.engine.close()
        session.forget()


class Distributed(_Harness):
    mode = 'distributed'

    def __init__(self, workdir, workers, options=None, db='postgresql',
                 agents=False):
        self.agents = agents
        self.workdir = workdir
        self.n_workers = workers
        self.options = options or {}
        self.db = db
        self.stats = os.path.join(workdir, 'stats')
        self.deployment = None
        self.seq = 0

    def processes(self):
        return self.n_workers

    def start(self):
        gone = fleet.missing(self.db, 'rabbitmq', 'redis')
        if gone:
            raise BenchError('--mode distributed needs %s on 127.0.0.1 '
                             '(not reachable)' % ', '.join(gone))
        # a previous run's request left here would have the new workers
        # answer its sequence number instead of 0: start from nothing
        shutil.rmtree(self.stats, ignore_errors=True)
        os.makedirs(self.stats)
        # each worker's engine loads the probe (probe.listener) as one of
        # its listeners: the workers import nothing of the bench themselves
        options = {'DEFAULT': dict(self.options, listeners=probe.LISTENER),
                   'sim': {'disks_dir': os.path.join(self.workdir,
                                                     'disks')}}
        port = fleet.free_port() if self.agents else None
        if port:
            options['api'] = {
                'public_endpoint': 'http://127.0.0.1:%d' % port}
        self.deployment = fleet.Deployment(self.workdir, self.db, options,
                                           env={probe.ENV: self.stats})
        if port:
            # the agents' endpoint: converge-api, a process of its own
            try:
                self.deployment.start_api('127.0.0.1', port,
                                          timeout=PATIENCE)
            except RuntimeError as e:
                raise BenchError(str(e))
        for _ in range(self.n_workers):
            self.deployment.start_worker()
        # serving (a message cast before its queue exists is lost), and
        # counting (each probe answers 0 when its engine is built)
        for index in range(self.n_workers):
            try:
                self.deployment.engine_id(index, timeout=PATIENCE)
            except RuntimeError as e:
                raise BenchError(str(e))
        self._collect(0)

        from converge import conf
        from converge.engine import context
        conf.setup(['--config-file', self.deployment.conf], log=False)
        # this process counts with a recorder of its own, not the probe
        conf.CONF.set_override('listeners', [])
        self.engine = context.Engine(auto_migrate=False)
        # this process only stores stacks and casts the first nodes: count
        # its casts, not its statements
        self.recorder = measure.Recorder(self.engine, 'none').install()
        # its client made now, as a long-lived API process has it before
        # its requests (made at the first create, its transport was a
        # fifth of a second of that create's time)
        self.engine.client

    def _collect(self, seq):
        """Every worker's answer to request `seq`. (The launcher forks the
        process that serves, so answers are told apart by file, not by the
        pid this process started.)"""
        deadline = time.monotonic() + PATIENCE
        while True:
            answers = [snap for snap in map(_read, glob.glob(
                os.path.join(self.stats, '[0-9]*.json')))
                if snap is not None and snap.get('seq') == seq]
            if len(answers) >= self.n_workers:
                return answers
            dead = [i for i, (proc, _) in enumerate(self.deployment.workers)
                    if proc.poll() is not None]
            if dead:
                raise BenchError('worker %d exited (see %s)' % (
                    dead[0], self.deployment.workers[dead[0]][1]))
            if time.monotonic() > deadline:
                raise BenchError('%d of %d workers answered within %ds (see '
                                 'their logs in %s)' % (
                                     len(answers), self.n_workers, PATIENCE,
                                     self.workdir))
            time.sleep(POLL)

    def snapshot(self):
        self.seq += 1
        probe.write_json(os.path.join(self.stats, probe.REQUEST), self.seq)
        workers = self._collect(self.seq)
        local = self.recorder.snapshot()
        # the API process: not an engine
        local.update(peak_rss_mb=None, threads_peak=None)
        return measure.combine([local] + workers)

    def close(self):
        from converge.db import session
        if self.recorder:
            self.recorder.remove()
        if self.engine:
            self.engine.clients.compute.shutdown_agents()
        session.forget()
        if self.deployment:
            self.deployment.close()


def _read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
