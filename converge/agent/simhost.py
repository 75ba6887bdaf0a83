"""The simulated cloud's agent host: the agents of every sim server.

One process per sim database runs the agent of each visible ACTIVE sim
server whose user_data has a bootstrap part, with the disk
``<disks>/<server id>``. It looks at the sim's database a few times a
second (one indexed query, user_data read once per server) and:

- starts the agent of a server that appeared (or became ACTIVE again);
- stops the agent of a server deleted, being deleted or stopped, its
  running hooks cut off as a power cut would;
- restarts the agent of a server rebooted (``sim_servers.reboots``
  moved): its memory is dropped and its journal read again, so a hook the
  reboot cut off is reported interrupted.

It holds an exclusive flock on ``<disks>/agent-host.lock`` for its life
(at most one runs per disks directory) and the lease of the sim's
database (at most one per cloud); `converge.drivers.sim.agents` starts
and stops it. It exits when its lease is taken or it is asked to stop
there, and when its sim database or disks directory is removed.
"""

import fcntl
import json
import logging
import os
import resource
import signal
import time

import sqlalchemy as sa

from converge import userdata
from converge.agent import client
from converge.agent import firstboot
from converge.agent import imageboot
from converge.agent import rootfs
from converge.agent import runner
from converge.drivers.sim import agents as sim_agents
from converge.drivers.sim import api as sim_api
from converge.drivers.sim import store

LOG = logging.getLogger(__name__)

LOCK_FILE = 'agent-host.lock'
PID_FILE = 'agent-host.pid'
LOG_FILE = 'agent-host.log'
#: written when the host stops: its requests by kind and its peak RSS
STATS_FILE = 'agent-host.stats.json'
SCAN_INTERVAL = 0.25

_C = store.servers.c
_SCAN = sa.select(
    _C.id, _C.status, _C.flavor, _C.ready_at, _C.outcome, _C.task_state,
    _C.task_started, _C.gone_at, _C.delete_started, _C.reboots,
    _C.first_boot).where(
    _C.agent == sa.true(), _C.deleted == sa.false())
_BOOT_DATA = sa.select(_C.id, _C.name, _C.image, _C.key_name,
                       _C.user_data).where(_C.id == sa.bindparam('id'))


def take_lock(disks):
    """The host's lock (an open file holding the flock), or None when
    another host holds it."""
    os.makedirs(disks, exist_ok=True)
    fd = os.open(os.path.join(disks, LOCK_FILE), os.O_RDWR | os.O_CREAT,
                 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    # the holder's pid, should the pid file be lost
    os.ftruncate(fd, 0)
    os.pwrite(fd, b'%d\n' % os.getpid(), 0)
    return fd


class SimHost:
    """Runs the agents of the sim at `url`, disks under `disks`."""

    def __init__(self, url, disks, scan_interval=SCAN_INTERVAL,
                 wait=runner.POLL_WAIT, backoff_max=None, confine=True,
                 uid=rootfs.DEFAULT_UID, endpoints=(), endpoint_file=None,
                 images_dir=None, reach=()):
        self.url = url
        self.disks = os.path.abspath(disks)
        self.scan_interval = scan_interval
        # the servers share this machine with the engine: each server's
        # software runs in a root of its own (unless told otherwise),
        # reaching converge-api (and Keystone, given in `reach`, where
        # POLL_SERVER_HEAT's tooling logs in) and nothing else of the
        # network
        rootfs.enable(confine=confine, uid=uid,
                      endpoints=list(endpoints) + list(reach),
                      endpoint_file=endpoint_file)
        if confine and not rootfs.available():
            LOG.error('the servers\' software will not run: %s',
                      rootfs.refused())
        elif confine:
            apis = list(endpoints) + (
                ['the URL kept in %s' % endpoint_file] if endpoint_file
                else [])
            LOG.info('the servers\' software reaches, of the network, '
                     'converge-api at %s%s only', ', '.join(apis) or
                     'nothing', ''.join(' and %s' % url for url in reach))
        self.host = runner.Host(batch=True, wait=wait,
                                backoff_max=backoff_max)
        # image heat-agents: Heat's own tooling instead of converge-agent
        self.heat_agents = imageboot.HeatAgents(images_dir, uid)
        self._engine = store.get_engine(url)
        self._db_file = None
        parsed = sa.engine.make_url(url)
        if parsed.get_backend_name() == 'sqlite':
            self._db_file = os.path.abspath(parsed.database)
        self._seen = {}      # server id -> (reboots, agent or None)
        self._creds = {}     # server id -> bootstrap settings (or None)
        self._boots = {}     # server id -> (its first-boot parts, server)
        # a plain flag: set from a signal handler, where taking a lock
        # the interrupted main thread may hold (an Event's) deadlocks
        self.stopping = False
        self.owner = sim_agents.owner_name(self.disks)
        self._renewed = None

    def stop(self):
        self.stopping = True

    def _lease(self):
        now = time.time()
        if self._renewed is not None and \
                now - self._renewed < sim_agents.LEASE / 3:
            return True
        try:
            held = sim_agents.take_lease(self.url, self.owner, now)
        except Exception:
            LOG.exception('cannot renew the lease of the sim database')
            # the lease lasts a while yet: keep serving until it runs out
            return self._renewed is not None and \
                now - self._renewed < sim_agents.LEASE * 2 / 3
        if held:
            self._renewed = now
        return held

    def run(self):
        """Serve until stopped; False when another host holds the lease
        of this cloud."""
        if not self._lease():
            LOG.info('another agent host serves %s: exiting', self.url)
            self.host.stop()
            return False
        LOG.info('agent host for %s started (pid %d), disks %s',
                 self.url, os.getpid(), self.disks)
        try:
            while not self.stopping:
                if not self._still_there():
                    LOG.info('sim database or disks directory removed: '
                             'exiting')
                    break
                if not self._lease():
                    LOG.info('asked to stop, or the lease of the sim '
                             'database was taken: exiting')
                    break
                try:
                    self.scan()
                except Exception:
                    LOG.exception('scan of the sim database failed')
                time.sleep(self.scan_interval)
        finally:
            for _reboots, booted in self._seen.values():
                if booted is not None:   # a first boot still running
                    booted.stop('host stopping', kill_hooks=True)
            self.host.stop(kill_hooks=True)
            self._write_stats()
            try:
                sim_agents.release_lease(self.url, self.owner)
            except Exception:
                LOG.exception('cannot release the lease (it expires)')
            LOG.info('agent host stopped')
        return True

    def _write_stats(self):
        me = resource.getrusage(resource.RUSAGE_SELF)
        hooks = resource.getrusage(resource.RUSAGE_CHILDREN)
        stats = {'pid': os.getpid(), 'requests': dict(client.REQUESTS),
                 'servers': len(self._creds),
                 'peak_rss_mb': me.ru_maxrss / 1024.0,
                 'cpu_s': me.ru_utime + me.ru_stime,
                 'hooks_cpu_s': hooks.ru_utime + hooks.ru_stime}
        path = os.path.join(self.disks, STATS_FILE)
        try:
            with open(path + '.tmp', 'w') as f:
                json.dump(stats, f)
            os.replace(path + '.tmp', path)
        except OSError:
            LOG.exception('cannot write %s', path)

    def _still_there(self):
        if not os.path.isdir(self.disks):
            return False
        return self._db_file is None or os.path.exists(self._db_file)

    def scan(self):
        now = sim_api.clock()
        with store.read(self._engine) as conn:
            rows = conn.execute(_SCAN).all()
            wanted = {}
            for row in rows:
                if row.gone_at is not None:
                    continue   # being deleted: powered off
                status = sim_api._state(row, now)[0]
                if status != 'ACTIVE':
                    continue
                if row.id not in self._creds:
                    boot = conn.execute(_BOOT_DATA, {'id': row.id}).first()
                    server = {'id': boot.id, 'name': boot.name,
                              'image': boot.image, 'key_name': boot.key_name}
                    if sim_agents.is_heat_agents(boot.image):
                        # the image's cloud-init and agents, not ours
                        self._creds[row.id] = None
                        server['heat_agents'] = True
                        self._boots[row.id] = (
                            userdata.mime_parts(boot.user_data), server)
                    else:
                        self._creds[row.id] = userdata.decode(
                            boot.user_data)
                        self._boots[row.id] = (
                            firstboot.parts(boot.user_data)
                            if row.first_boot else [], server)
                if self._creds[row.id] is not None or \
                        self._boots[row.id][0] or \
                        self._boots[row.id][1].get('heat_agents'):
                    wanted[row.id] = row.reboots or 0
        for server_id in list(self._seen):
            if server_id not in wanted:
                self._stop_agent(server_id, 'server deleted or stopped')
        for server_id, reboots in wanted.items():
            seen = self._seen.get(server_id)
            if seen is None:
                self._start_agent(server_id, reboots)
            elif seen[0] != reboots:
                self._stop_agent(server_id, 'server rebooted')
                self._start_agent(server_id, reboots)
        # a server seen gone for good is forgotten (ids are never reused)
        for server_id in list(self._creds):
            if server_id not in wanted and server_id not in {
                    r.id for r in rows}:
                del self._creds[server_id]
                self._boots.pop(server_id, None)

    def _start_agent(self, server_id, reboots):
        disk = os.path.join(self.disks, server_id)
        os.makedirs(disk, exist_ok=True)
        parts, server = self._boots[server_id]
        if server.get('heat_agents'):
            self._seen[server_id] = (reboots, firstboot.Boot(
                disk, parts, server, image=self.heat_agents))
        elif parts:
            # cloud-init's part first (once per instance), then the agent
            self._seen[server_id] = (reboots, firstboot.Boot(
                disk, parts, server, lambda: self._agent(server_id, disk)))
        else:
            self._seen[server_id] = (reboots, self._agent(server_id, disk))

    def _agent(self, server_id, disk):
        """The server's agent started, or None (it has none)."""
        creds = self._creds[server_id]
        if creds is None:
            return None
        try:
            agent = self.host.start(creds, disk)
        except (ValueError, KeyError) as e:
            LOG.error('server %s: cannot start its agent: %s', server_id, e)
            agent = None
        else:
            LOG.info('server %s: agent %s started (endpoint %s)',
                     server_id, agent.agent_id, agent.endpoint_url)
        return agent

    def _stop_agent(self, server_id, reason):
        _reboots, agent = self._seen.pop(server_id)
        if agent is not None and not agent.stopped:
            agent.stop(reason, kill_hooks=True)
            LOG.info('server %s: agent stopped: %s', server_id, reason)


def serve(url, disks, **kw):
    """Run the host until SIGTERM/SIGINT, holding its lock; False when
    another host already runs for `disks`."""
    lock = take_lock(disks)
    if lock is None:
        LOG.info('another agent host runs for %s: exiting', disks)
        return False
    pidfile = os.path.join(disks, PID_FILE)
    with open(pidfile + '.tmp', 'w') as f:
        f.write('%d\n' % os.getpid())
    os.replace(pidfile + '.tmp', pidfile)
    host = SimHost(url, disks, **kw)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_a: host.stop())
    try:
        host.run()
    finally:
        try:
            os.unlink(pidfile)
        except OSError:
            pass
        os.close(lock)
    return True
