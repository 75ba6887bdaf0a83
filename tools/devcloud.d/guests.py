"""devcloud guests: the fake driver's servers run their user data, as
booted VMs would with cloud-init.

Nova's fake virt driver boots nothing: a server is a row and an entry in
nova-compute's memory. This service (started and stopped by
tools/devcloud like the others, log `.devcloud/log/guests.log`) watches
Nova's API as the devcloud's admin (microversion 2.3, which shows
``OS-EXT-SRV-ATTR:user_data`` and ``:host`` to admins) for servers that
are ACTIVE on the devcloud's fake computes, and runs each one's user data
once, as cloud-init would: converge's own first boot
(`converge.agent.firstboot`: a ``#!`` script, ``#cloud-config`` users,
write_files and runcmd; a MIME multipart's ``text/x-shellscript``,
``text/cloud-config`` and ``text/cloud-boothook`` parts, and its
``text/part-handler`` parts given the parts of their types, as
`converge.userdata.mime_parts` reads them: so Heat's boot configs,
HEAT_CFNTOOLS's part handler writing ``cfn-userdata`` and
``cfn-init-data`` to /var/lib/heat-cfntools and its script running
them, run too), in a root of the server's own
(`converge.agent.rootfs`: mount, PID, IPC, user and network namespaces;
docs/software.md "A simulated server's root"). What the root reaches of
the network is the devcloud's API endpoints (Keystone, Nova, Neutron,
Glance, Cinder, Placement, converge-api, heat-api), at their own
addresses and ports, forwarded by this process (`netns`, `relay`): a wait
condition's ``curl_cli`` or a deployment's signal URL works as from a VM
on a real cloud.

Per server, under ``.devcloud/state/guests/<server id>/``: ``disk/`` (the
server's own files: firstboot's journal ``firstboot.json``, its /tmp and
/home, cloud-init's output) and ``guest.json`` (when Nova last launched
it, the rebuilds seen). Its console, what its user data printed, is
``.devcloud/log/guests/<server id>.log``.

Exactly once: firstboot's journal marks each part started before it runs
and done after it, so a restart of this service does not run a server's
user data again (a part cut off by it is recorded interrupted, as a VM
losing power). A rebuild (a new ``rebuild`` instance action, found when
Nova's ``launched_at`` moved) gives the server a new disk: its user data
runs again. A resize or unshelve moves ``launched_at`` too but keeps the
disk, as on a real cloud. A server that stops (any state but ACTIVE) has
its processes killed (a power cut); started again, it boots without
running its user data again. A deleted server's guest is stopped and its
disk removed; its console log stays.
"""

import argparse
import base64
import datetime
import json
import logging
import os
import shutil
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from converge import userdata
from converge.agent import firstboot
from converge.agent import hooks
from converge.agent import rootfs

LOG = logging.getLogger('devcloud-guests')

#: shows OS-EXT-SRV-ATTR:user_data (and :host) to an admin
MICROVERSION = '2.3'
RECORD = 'guest.json'


class Nova:
    """The compute API as the devcloud's admin (urllib: this process
    runs on converge's venv, which has no OpenStack client)."""

    def __init__(self, auth_url, user, password, project):
        self.auth_url = auth_url.rstrip('/')
        self.user, self.password, self.project = user, password, project
        self.token = self.url = None

    def _login(self):
        body = {'auth': {
            'identity': {'methods': ['password'], 'password': {'user': {
                'name': self.user, 'password': self.password,
                'domain': {'name': 'Default'}}}},
            'scope': {'project': {'name': self.project,
                                  'domain': {'name': 'Default'}}}}}
        req = urllib.request.Request(
            self.auth_url + '/auth/tokens', json.dumps(body).encode(),
            {'Content-Type': 'application/json'})
        with urllib.request.urlopen(req, timeout=60) as resp:
            self.token = resp.headers['X-Subject-Token']
            catalog = json.load(resp)['token']['catalog']
        for service in catalog:
            if service['type'] == 'compute':
                self.url = next(e['url'] for e in service['endpoints']
                                if e['interface'] == 'public').rstrip('/')
                return
        raise RuntimeError('no compute service in the catalog')

    def get(self, path):
        for attempt in (1, 2):
            if self.token is None:
                self._login()
            req = urllib.request.Request(self.url + path, headers={
                'X-Auth-Token': self.token, 'Accept': 'application/json',
                'X-OpenStack-Nova-API-Version': MICROVERSION})
            try:
                with urllib.request.urlopen(req, timeout=120) as resp:
                    return json.load(resp)
            except urllib.error.HTTPError as e:
                if e.code == 401 and attempt == 1:   # the token expired
                    self.token = None
                    continue
                if e.code == 404:
                    return None
                raise

    def servers(self, changes_since=None):
        """Every server of every project (with changes_since, those
        changed since then, deleted ones too: status DELETED)."""
        query = {'all_tenants': '1', 'limit': '500'}
        if changes_since:
            query['changes-since'] = changes_since
        found = []
        while True:
            page = self.get('/servers/detail?' +
                            urllib.parse.urlencode(query))['servers']
            found += page
            if len(page) < int(query['limit']):
                return found
            query['marker'] = page[-1]['id']

    def rebuilds(self, server_id):
        """The request ids of the server's rebuild actions."""
        found = self.get('/servers/%s/os-instance-actions' % server_id)
        return sorted(a['request_id'] for a in (found or {}).get(
            'instanceActions', ()) if a.get('action') == 'rebuild')


class Console:
    """A guest's console log on the host (the guest cannot reach it)."""

    def __init__(self, path):
        self.path = path
        self._lock = threading.Lock()

    def write(self, data):
        if isinstance(data, str):
            data = data.encode('utf-8', 'replace')
        with self._lock, open(self.path, 'ab') as f:
            f.write(data)

    def say(self, text):
        self.write('[%s] [devcloud guests] %s\n' % (
            datetime.datetime.now(datetime.timezone.utc).strftime(
                '%Y-%m-%d %H:%M:%S'), text))


class ConsoleRunner(hooks.ProcessRunner):
    """firstboot's process runner, each program's output (stdout then
    stderr, as firstboot keeps them) also on the console."""

    def __init__(self, console):
        super().__init__()
        self.console = console

    def run(self, argv, env, cwd, disk=None):
        name = os.path.basename(argv[-1])
        self.console.say('running %s' % name)
        code, out, err = super().run(argv, env, cwd, disk=disk)
        self.console.write(out + err)
        if (out + err) and not (out + err).endswith(b'\n'):
            self.console.write(b'\n')
        self.console.say('%s exited %d' % (name, code))
        return code, out, err


class Guest:
    """One boot of a server: its user data's first boot in a thread of
    its own, its processes killed when it stops."""

    def __init__(self, server_id, disk, parts, server, console):
        self.server_id = server_id
        self.processes = ConsoleRunner(console)
        self.console = console
        self.thread = threading.Thread(
            target=self._run, args=(disk, parts, server), daemon=True,
            name='guest-%s' % server_id[:8])
        self.thread.start()

    def _run(self, disk, parts, server):
        try:
            state = firstboot.run(disk, parts, server, self.processes)
        except hooks.Stopped:
            return
        except Exception as e:
            LOG.exception('server %s: first boot failed', self.server_id)
            self.console.say('first boot failed: %s' % e)
            return
        summary = ', '.join('%s %s%s' % (
            p.get('type'), p.get('state'),
            '' if p.get('exit_code') is None else ' (exit %s)' %
            p['exit_code']) for p in state.get('parts', ()))
        self.console.say('boot %d: user data %s' % (
            state.get('boots', 0), summary or 'has nothing to run'))
        for part in state.get('parts', ()):
            if part.get('note'):
                self.console.say('%s: %s' % (part.get('type'), part['note']))
        LOG.info('server %s: boot %d, %s', self.server_id,
                 state.get('boots', 0), summary or 'nothing to run')

    def stop(self):
        self.processes.kill_all()


class Guests:
    """The servers of the fake computes, each booted once per instance."""

    def __init__(self, nova, state_dir, log_dir, computes):
        self.nova = nova
        self.state_dir = state_dir
        self.log_dir = log_dir
        self.computes = set(computes)
        self.running = {}      # server id -> Guest (ACTIVE, in this process)
        self.stopped = set()   # seen not ACTIVE here: its start is a boot
        os.makedirs(state_dir, exist_ok=True)
        os.makedirs(log_dir, exist_ok=True)

    def _dir(self, server_id):
        return os.path.join(self.state_dir, server_id)

    def _record(self, server_id):
        try:
            with open(os.path.join(self._dir(server_id), RECORD)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _save(self, server_id, record):
        path = os.path.join(self._dir(server_id), RECORD)
        with open(path + '.tmp', 'w') as f:
            json.dump(record, f, sort_keys=True)
        os.replace(path + '.tmp', path)

    def console(self, server_id):
        return Console(os.path.join(self.log_dir, server_id + '.log'))

    def poll(self, changes_since=None):
        servers = self.nova.servers(changes_since)
        for server in servers:
            try:
                self.consider(server)
            except Exception:
                LOG.exception('server %s', server.get('id'))
        if changes_since is None:   # a full list: what is not there is gone
            listed = {s['id'] for s in servers}
            for server_id in os.listdir(self.state_dir):
                if server_id not in listed:
                    self.gone(server_id)
        return len(servers)

    def consider(self, server):
        server_id = server['id']
        if server.get('status') == 'DELETED' or \
                server.get('OS-EXT-STS:vm_state') in ('deleted',
                                                      'soft-delete'):
            self.gone(server_id)
            return
        if server.get('OS-EXT-SRV-ATTR:host') not in self.computes:
            return
        if server.get('status') != 'ACTIVE':
            if server.get('status') not in ('BUILD',):
                self.power_off(server_id, server.get('status'))
            return
        launched = server.get('OS-SRV-USG:launched_at')
        record = self._record(server_id)
        if record is None:
            os.makedirs(self._dir(server_id), exist_ok=True)
            # rebuilds before it was first seen: its user data is now's
            record = {'launched_at': launched,
                      'rebuilds': self.nova.rebuilds(server_id)}
            self._save(server_id, record)
        elif record.get('launched_at') != launched:
            rebuilds = self.nova.rebuilds(server_id)
            if set(rebuilds) - set(record.get('rebuilds', ())):
                self.rebuilt(server_id)
            record.update(launched_at=launched, rebuilds=rebuilds)
            self._save(server_id, record)
        if server_id in self.running:
            return
        disk = os.path.join(self._dir(server_id), 'disk')
        journal = firstboot.status(disk)
        if journal is not None and journal.get('state') == 'done' and \
                server_id not in self.stopped:
            return   # booted by an earlier run of this service
        self.stopped.discard(server_id)
        os.makedirs(disk, exist_ok=True)
        user_data = server.get('OS-EXT-SRV-ATTR:user_data') or ''
        try:
            user_data = base64.b64decode(user_data).decode('utf-8', 'replace')
        except ValueError:
            user_data = ''
        # every part: boothooks and part handlers too (Heat's boot
        # configs), as the heat-agents image's cloud-init reads them
        parts = userdata.mime_parts(user_data)
        console = self.console(server_id)
        console.say('server %s (%s) is ACTIVE on %s: booting, %s' % (
            server_id, server.get('name'),
            server.get('OS-EXT-SRV-ATTR:host'),
            'user data parts: %s' % ', '.join(p[0] for p in parts)
            if parts else 'no user data cloud-init would run'))
        LOG.info('server %s (%s): booting (%d part(s) of user data)',
                 server_id, server.get('name'), len(parts))
        image = server.get('image')
        self.running[server_id] = Guest(server_id, disk, parts, {
            'id': server_id, 'name': server.get('name'),
            'image': image.get('id') if isinstance(image, dict) else image,
            'key_name': server.get('key_name')}, console)

    def power_off(self, server_id, status):
        guest = self.running.pop(server_id, None)
        self.stopped.add(server_id)
        if guest is not None:
            guest.stop()
            guest.console.say('server is %s: its processes are stopped'
                              % status)
            LOG.info('server %s is %s: guest stopped', server_id, status)

    def rebuilt(self, server_id):
        guest = self.running.pop(server_id, None)
        if guest is not None:
            guest.stop()
        shutil.rmtree(os.path.join(self._dir(server_id), 'disk'),
                      ignore_errors=True)
        self.console(server_id).say('server rebuilt: a new disk, its user '
                                    'data runs again')
        LOG.info('server %s rebuilt: a new disk', server_id)

    def gone(self, server_id):
        guest = self.running.pop(server_id, None)
        self.stopped.discard(server_id)
        if guest is not None:
            guest.stop()
        if os.path.isdir(self._dir(server_id)):
            shutil.rmtree(self._dir(server_id), ignore_errors=True)
            self.console(server_id).say('server deleted: guest stopped, '
                                        'its disk removed')
            LOG.info('server %s deleted: guest stopped', server_id)


def _utc(t):
    return datetime.datetime.fromtimestamp(
        t, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def main(argv=None):
    p = argparse.ArgumentParser(prog='devcloud guests', description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument('--home', required=True, help='the devcloud (.devcloud)')
    p.add_argument('--auth-url', required=True)
    p.add_argument('--compute-host', action='append', default=[],
                   help='a fake compute host whose servers boot here')
    p.add_argument('--endpoint', action='append', default=[],
                   help='a URL the guests reach (forwarded into each root)')
    p.add_argument('--interval', type=float, default=2.0,
                   help='seconds between looks at Nova')
    p.add_argument('--resync', type=float, default=60.0,
                   help='seconds between full lists of the servers')
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format='%(asctime)s %(levelname)s %(name)s '
                               '%(message)s')
    with open(os.path.join(args.home, 'state', 'secrets.json')) as f:
        password = json.load(f)['admin']
    rootfs.enable(confine=True, endpoints=args.endpoint)
    if not rootfs.available():
        LOG.warning('guests cannot be confined here (%s): user data is not '
                    'run, each guest\'s console says so', rootfs.refused())
    LOG.info('watching Nova for servers on %s; guests reach %s',
             ', '.join(args.compute_host), ', '.join(args.endpoint))
    guests = Guests(Nova(args.auth_url, 'admin', password, 'admin'),
                    os.path.join(args.home, 'state', 'guests'),
                    os.path.join(args.home, 'log', 'guests'),
                    args.compute_host)
    last_full = since = None
    while True:
        started = time.time()
        try:
            if last_full is None or started - last_full >= args.resync:
                guests.poll()
                last_full = started
            else:
                guests.poll(_utc(since))
            # Nova's updated_at is its clock's (this machine's): a margin
            # for a change committed while the list ran
            since = started - 5
        except Exception as e:   # Nova or Keystone restarting: next time
            LOG.warning('cannot list the servers: %s', e)
        time.sleep(args.interval)


if __name__ == '__main__':
    sys.exit(main())
