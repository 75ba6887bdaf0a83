"""The sim's agent host: started when needed, stopped on request.

A sim server whose user_data has a bootstrap part (docs/software.md) runs
an agent, as a real server would: one host process per disks directory
(`converge.agent.simhost`) runs the agents of every such server. It is
started, detached, the first time such a server is created (or looked
at, or rebooted, while no host runs) and keeps running after the command
that started it; `shutdown` stops it (until the next of those calls).

Whether a host runs here is told by its flock on
``<disks>/agent-host.lock``, not by the pid file, which only says whom to
signal. Across machines (a sim database shared by several hosts, or homes
with different disks directories) the host also holds a lease in the
sim's database (``sim_agent_host``), renewed every few seconds: at most
one host runs per sim database, and a shutdown from anywhere reaches it.
"""

import fcntl
import os
import socket
import signal
import subprocess
import sys
import threading
import time

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from converge import userdata
from converge.drivers.sim import store

LOCK_FILE = 'agent-host.lock'   # as converge.agent.simhost
PID_FILE = 'agent-host.pid'
LOG_FILE = 'agent-host.log'
SIM_URL_ENV = 'CONVERGE_SIM_CONNECTION'

#: seconds a host's lease lasts unless renewed (it renews every third)
LEASE = 15.0
_LEASE_NAME = 'host'

_LOCK = threading.Lock()
_SPAWNED = {}   # disks dir -> the Popen this process started


def default_disks_dir():
    """[sim] disks_dir, else <home>/sim-disks."""
    from converge import conf
    return os.path.abspath(conf.CONF.sim.disks_dir or os.path.join(
        conf.home_dir(), 'sim-disks'))


def has_agent(user_data):
    """Whether a server with this user_data runs an agent (cheap: only a
    user_data naming the bootstrap part is decoded)."""
    return bool(user_data) and userdata.CONTENT_TYPE in user_data and \
        userdata.decode(user_data) is not None


def first_boot(user_data, image=None):
    """Whether a server created now with this user_data has it run as
    cloud-init would ([sim] run_user_data, and parts it would act on);
    always for image heat-agents, whose cloud-init and agents run what
    its user data says (converge/agent/imageboot.py)."""
    from converge import conf
    if is_heat_agents(image):
        return True
    return bool(conf.CONF.sim.run_user_data and userdata.parts(user_data))


def is_heat_agents(image):
    """Whether a server's image (its name, or the sim's id of it) is
    heat-agents, whose software is Heat's (converge/agent/image.py)."""
    from converge.drivers.sim import rows
    name = userdata.HEAT_AGENTS_IMAGE
    return bool(image) and str(image) in (
        name, rows.derived_id('image', name))


def heat_agents_mismatch(image, user_data):
    """Why a server of image heat-agents cannot be served with this
    user_data, or None. The image runs Heat's os-collect-config, not
    converge-agent (a real image with Heat's tooling has no converge-agent
    either): a SOFTWARE_CONFIG server whose transport is converge's own
    (CONVERGE_AGENT, the default) gets only converge-agent's part and no
    Heat boot config (cfn-init-data), so nothing on it would ever collect
    its deployments, which would wait until their timeout. Refused at
    create, naming the transports to use instead."""
    if not is_heat_agents(image) or not has_agent(user_data) or \
            'text/x-cfninitdata' in user_data:
        return None
    return ('Image %s runs Heat\'s guest tooling (os-collect-config), not '
            'converge-agent: a server of it needs one of Heat\'s '
            'software_config_transport values (POLL_TEMP_URL, '
            'POLL_SERVER_CFN or POLL_SERVER_HEAT), not converge\'s own '
            'CONVERGE_AGENT (the default); or an image with converge-agent '
            '(cirros)' % userdata.HEAT_AGENTS_IMAGE)


def boots(server):
    """Whether the agent host has something to do for `server` (a dict):
    run its agent, or its first boot (converge.agent.firstboot)."""
    return bool(server.get('first_boot')) or has_agent(
        server.get('user_data'))


def disk_of(disks, server_id):
    return os.path.join(disks, server_id)


def running(disks):
    """Whether a host holds the lock of `disks`."""
    path = os.path.join(disks, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)   # closing drops the flock if we took it
    return False


def owner_name(disks):
    return '%s:%d:%s' % (socket.gethostname(), os.getpid(),
                         os.path.abspath(disks))


def _place(owner):
    """(machine, disks) of a lease owner: a host in the same place as a
    new one that holds the flock there is dead."""
    machine, _pid, disks = owner.split(':', 2)
    return machine, disks


def lease(url, now):
    """The row of the live lease, or None."""
    with store.read(store.get_engine(url)) as conn:
        row = conn.execute(sa.select(store.agent_host).where(
            store.agent_host.c.name == _LEASE_NAME)).first()
    return row if row is not None and row.expires > now else None


def take_lease(url, owner, now):
    """Take or renew the lease for `owner`: True when held, False when
    another live host holds it or asked this one to stop."""
    table = store.agent_host
    try:
        with store.write(store.get_engine(url)) as conn:
            row = conn.execute(sa.select(table).where(
                table.c.name == _LEASE_NAME)).first()
            if row is None:
                conn.execute(table.insert().values(
                    name=_LEASE_NAME, owner=owner, expires=now + LEASE,
                    stop=False))
                return True
            if row.owner == owner:
                if row.stop:
                    return False
            elif row.expires > now and _place(row.owner) != _place(owner):
                return False
            conn.execute(table.update().where(
                table.c.name == _LEASE_NAME).values(
                owner=owner, expires=now + LEASE, stop=False))
            return True
    except sa_exc.IntegrityError:
        return False   # another host inserted it first


def release_lease(url, owner):
    with store.write(store.get_engine(url)) as conn:
        conn.execute(store.agent_host.delete().where(
            store.agent_host.c.owner == owner))


def _ask_to_stop(url):
    """Ask the lease holder, wherever it runs, to exit; its owner or
    None."""
    table = store.agent_host
    with store.write(store.get_engine(url)) as conn:
        row = conn.execute(sa.select(table).where(
            table.c.name == _LEASE_NAME)).first()
        if row is None or row.expires <= time.time():
            return None
        conn.execute(table.update().where(
            table.c.name == _LEASE_NAME).values(stop=True))
        return row.owner


def ensure_running(url, disks):
    """Start the host of `disks` unless one runs (or is starting) here,
    or another holds the sim's lease."""
    disks = os.path.abspath(disks)
    with _LOCK:
        proc = _SPAWNED.get(disks)
        if proc is not None and proc.poll() is None:
            return   # ours, starting or running
        if running(disks):
            return
        held = lease(url, time.time())
        if held is not None and _place(held.owner) != (
                socket.gethostname(), disks):
            return   # a host elsewhere serves this cloud
        os.makedirs(disks, exist_ok=True)
        env = dict(os.environ)
        env[SIM_URL_ENV] = str(url)
        with open(os.path.join(disks, LOG_FILE), 'ab') as log:
            _SPAWNED[disks] = subprocess.Popen(
                [sys.executable, '-m', 'converge.agent.cli', '--disks',
                 disks] + _confinement(), env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, close_fds=True,
                start_new_session=True, cwd=disks)


def _confinement():
    """The agent host's arguments for [sim] confine_servers, server_uid,
    and the converge-api URL the servers are given (all a confined
    server reaches of the network, with [trustee]'s Keystone where one
    is configured): [api] public_endpoint, else the one the home keeps
    (api.url, read again as servers boot: the first command of a home
    may start the host before it serves), else where it is configured
    to listen."""
    from converge import conf
    images = ['--images-dir', os.path.abspath(conf.CONF.sim.images_dir)] \
        if conf.CONF.sim.images_dir else []
    if not conf.CONF.sim.confine_servers:
        return ['--unconfined'] + images
    args = ['--server-uid', str(conf.CONF.sim.server_uid)] + images
    endpoint = conf.api_endpoint()
    if endpoint:
        args += ['--api-endpoint', endpoint]
    if not conf.CONF.api.public_endpoint:
        args += ['--api-url-file', conf.api_url_file()]
    from converge.transports import keystone_users
    if keystone_users.configured():
        # a POLL_SERVER_HEAT server's collector and heat-config-notify
        # log in to Keystone, then reach converge-api by its catalog
        args += ['--reach', keystone_users.auth_url()]
    return args


def shutdown(url, disks, timeout=20.0):
    """Stop the host of `disks` (SIGTERM, then SIGKILL after `timeout`)
    and whichever host holds the lease of the sim at `url`; True when
    one was running."""
    disks = os.path.abspath(disks)
    with _LOCK:
        proc = _SPAWNED.pop(disks, None)
    stopped = _stop_local(disks, proc, timeout)
    held = lease(url, time.time())
    if held is not None and _place(held.owner) == (socket.gethostname(),
                                                   disks):
        # the host of this directory, stopped above (killed, if it did
        # not stop): its lease is free
        release_lease(url, held.owner)
    holder = _ask_to_stop(url)
    if holder is not None:
        stopped = True
        deadline = time.monotonic() + LEASE + timeout
        while lease(url, time.time()) is not None:
            if time.monotonic() > deadline:
                raise RuntimeError('the sim agent host %s does not stop'
                                   % holder)
            time.sleep(0.05)
    return stopped


def _stop_local(disks, proc, timeout):
    stopped = False
    deadline = time.monotonic() + timeout
    while running(disks) or (proc is not None and proc.poll() is None):
        pid = _pid(disks)
        if pid is None and proc is not None:
            pid = proc.pid
        if pid is not None:
            sig = signal.SIGTERM if time.monotonic() < deadline \
                else signal.SIGKILL
            try:
                os.kill(pid, sig)
                stopped = True
            except ProcessLookupError:
                pass
        if proc is not None:
            try:
                proc.wait(0.1)
            except subprocess.TimeoutExpired:
                pass
        else:
            time.sleep(0.05)   # a process not ours: look again
        if time.monotonic() > deadline + timeout:
            raise RuntimeError('the sim agent host of %s (pid %s) does '
                               'not stop' % (disks, pid))
    return stopped


def _pid(disks):
    """The host's pid: its pid file, else what it wrote in its lock file
    (which only the lock's holder writes)."""
    for name in (PID_FILE, LOCK_FILE):
        try:
            with open(os.path.join(disks, name)) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            continue
    return None
