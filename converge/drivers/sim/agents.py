"""The sim's agent host: started when needed, stopped on request.

A sim server whose user_data has a bootstrap part (docs/software.md) runs
an agent, as a real server would: one host process per disks directory
(`converge.agent.simhost`) runs the agents of every such server. It is
started, detached, the first time such a server is created (or looked
at, or rebooted, while no host runs) and keeps running after the command
that started it; `shutdown` stops it (until the next of those calls).

Whether a host runs is told by its flock on ``<disks>/agent-host.lock``,
not by the pid file, which only says whom to signal.
"""

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time

from converge.agent import bootstrap

LOCK_FILE = 'agent-host.lock'   # as converge.agent.simhost
PID_FILE = 'agent-host.pid'
LOG_FILE = 'agent-host.log'
SIM_URL_ENV = 'CONVERGE_SIM_CONNECTION'

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
    return bool(user_data) and bootstrap.CONTENT_TYPE in user_data and \
        bootstrap.decode(user_data) is not None


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


def ensure_running(url, disks):
    """Start the host of `disks` unless one runs (or is starting)."""
    disks = os.path.abspath(disks)
    with _LOCK:
        proc = _SPAWNED.get(disks)
        if proc is not None and proc.poll() is None:
            return   # ours, starting or running
        if running(disks):
            return
        os.makedirs(disks, exist_ok=True)
        env = dict(os.environ)
        env[SIM_URL_ENV] = str(url)
        with open(os.path.join(disks, LOG_FILE), 'ab') as log:
            _SPAWNED[disks] = subprocess.Popen(
                [sys.executable, '-m', 'converge.agent.cli', '--disks',
                 disks], env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, close_fds=True, start_new_session=True,
                cwd=disks)


def shutdown(disks, timeout=20.0):
    """Stop the host of `disks` (SIGTERM, then SIGKILL after `timeout`);
    True when one was running."""
    disks = os.path.abspath(disks)
    with _LOCK:
        proc = _SPAWNED.pop(disks, None)
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
    try:
        with open(os.path.join(disks, PID_FILE)) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
