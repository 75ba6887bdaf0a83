"""A boot of a simulated server of image ``heat-agents`` (`image`): its
first boot as cloud-init runs Heat's boot config, then its service
``os-collect-config``, in the server's own root with the image's layers.

What cloud-init does with Heat's user data (a multipart: cloud-config,
a boothook, a part handler, the template's own parts, ``cfn-init-data``)
is `firstboot`'s, with the image's PATH: the part handler (Heat's
``part_handler.py``, run by the image's Python in the root) writes
``/var/lib/heat-cfntools/cfn-init-data``, which os-collect-config's
``heat_local`` collector reads at its first run; os-refresh-config then
writes ``/etc/os-collect-config.conf`` from its ``os-collect-config``
section (collectors, ``request`` metadata_url...), and os-collect-config
starts again on it (its own re-exec on a changed configuration).

os-collect-config runs as the image's service: started once the first
boot ended (at each boot after it: the first boot's record says it ran),
started again when it exits (systemd's ``Restart=always``, after
``RESTART_SEC``), and cut off with everything in the root when its
server stops or reboots. Its output goes to
``<disk>/var/log/os-collect-config.log``. What it and its hooks write is
on the server's disk under ``rootfs/`` (the image's /etc and /var as the
server changed them): ``rootfs/var/lib/heat-config/deployed/<id>.json``
is heat-config's record that a deployment ran (never again, reboot or
not), ``rootfs/var/lib/os-collect-config`` its collected metadata.
"""

import logging
import os
import threading

from converge.agent import hooks
from converge.agent import image
from converge.agent import rootfs

LOG = logging.getLogger(__name__)

SERVICE = ['/usr/local/bin/os-collect-config']
LOG_DIR = os.path.join('var', 'log')
SERVICE_LOG = 'os-collect-config.log'
#: seconds before a service that exited is started again (systemd's
#: RestartSec of os-collect-config's unit)
RESTART_SEC = float(os.environ.get('CONVERGE_SIM_RESTART_SEC', 10.0))


class HeatAgents:
    """Image ``heat-agents`` for the servers of an agent host: its tree
    (built on first use, `image.ensure`), each server's layers and
    services."""

    def __init__(self, images_dir=None, uid=None):
        self.images_dir = images_dir
        self.uid = rootfs.DEFAULT_UID if uid is None else uid
        self._tree = None
        self._lock = threading.Lock()
        #: the PATH of its first boot's scripts
        self.path = image.PATH

    def tree(self):
        with self._lock:
            if self._tree is None:
                self._tree = image.ensure(self.images_dir, self.uid)
            return self._tree

    def prepare(self, disk, processes):
        """Before the server's first process runs (in its boot's
        thread): the image built, its layers on `disk` made, `processes`
        given them. RuntimeError when the image cannot be built,
        rootfs.Unconfined when the server cannot have a root."""
        refused = rootfs.refused()
        if refused or not rootfs.confining():
            raise rootfs.Unconfined(refused or (
                'image %s runs only in a root of its own: this host does '
                'not make roots for its servers' % image.NAME))
        tree = self.tree()
        image.prepare(disk, rootfs.host_id(0))
        processes.layers = image.layers(tree, os.path.realpath(disk))

    def start(self, disk, processes):
        """The image's services on this boot (`Services`)."""
        return Services(disk, processes)


def env():
    """A service's environment: systemd's, not the agent host's."""
    found = {k: v for k, v in rootfs.base_env().items()
             if k not in ('LANG', 'LANGUAGE') and not k.startswith('LC_')}
    # The image's locale (UTF-8: ansible-playbook, the ansible hook's
    # tool, refuses any other), which the image carries: Python's
    # locale.getlocale() names it, and os-collect-config's local
    # collector sets back what it names
    found.update(PATH=image.PATH, HOME='/root', USER='root',
                 LOGNAME='root', LANG=image.LOCALE, PYTHONCOERCECLOCALE='0')
    return found


def _log_fd(disk):
    """A descriptor appending to the service's log on the disk (never
    through a link the server left there)."""
    dfd = hooks._open_dir(os.path.join(disk, LOG_DIR))
    try:
        return os.open(SERVICE_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT |
                       os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    finally:
        os.close(dfd)


class Services:
    """os-collect-config on one boot of a server: kept running until
    the server stops (`stop`, as a converge agent is stopped)."""

    def __init__(self, disk, processes):
        self.disk = disk
        self.processes = processes
        self.stopped = False
        self.starts = 0
        self._wake = threading.Event()
        self._thread = threading.Thread(
            target=self._run, daemon=True,
            name='services-%s' % os.path.basename(disk)[:8])
        self._thread.start()

    def _run(self):
        while not self.stopped:
            try:
                os.makedirs(os.path.join(self.disk, LOG_DIR), exist_ok=True)
                out = _log_fd(self.disk)
            except OSError as e:
                LOG.error('server %s: no log for its services: %s',
                          os.path.basename(self.disk), e)
                return
            try:
                proc = self.processes.start(SERVICE, env(), '/',
                                            disk=self.disk, output=out)
            except hooks.Stopped:
                return
            except OSError as e:   # rootfs.Unconfined included
                LOG.error('server %s: os-collect-config not started: %s',
                          os.path.basename(self.disk), e)
                return
            finally:
                os.close(out)
            self.starts += 1
            LOG.info('server %s: os-collect-config started (pid %d)',
                     os.path.basename(self.disk), proc.pid)
            self.processes.reap(proc)
            if self.stopped or self.processes.dead:   # powered off
                return
            LOG.warning('server %s: os-collect-config exited (%s): started '
                        'again in %.0f s', os.path.basename(self.disk),
                        proc.returncode, RESTART_SEC)
            self._wake.wait(RESTART_SEC)

    def stop(self, reason=None, kill_hooks=True):
        self.stopped = True
        self._wake.set()
        if kill_hooks:
            self.processes.kill_all()
        else:
            self.processes.close()
