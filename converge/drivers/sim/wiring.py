"""A sim server's ties to the cloud's other objects, in the server's own
create and delete transactions (api.py), as Nova makes them.

A nic naming a sim port binds it (``device_id`` the server,
``device_owner`` ``compute:nova``, ACTIVE) and the server's address on
its network is the port's; a nic naming a sim network (or subnet, with
or without ``fixed_ip``) gets a port the sim makes on it, which goes
with the server. A nic naming nothing of the cloud keeps the sim's
free-form networks: an address from the address counter (api.py).
Block devices naming a volume attach it; a ``group`` scheduler hint
makes the server a member of that server group (on a host its policy
likes). The server's delete lets go of all of it: ports it made go,
ports it was given are unbound, volumes are detached (or deleted, with
``delete_on_termination``), memberships end.

The default server (no nics, or ``{'network': 'private'}`` by name, and
no hints or block devices) never gets here (`plain`): its create and
delete run the statements they always ran.
"""

import json

import sqlalchemy as sa

from converge.drivers.sim import cinder
from converge.drivers.sim import ipam
from converge.drivers.sim import l3
from converge.drivers.sim import neutron
from converge.drivers.sim import rows
from converge.drivers.sim import store
from converge.drivers.sim.rows import bad, conflict, missing

#: the network a server is on when it names none: addresses from the
#: counter, no port
DEFAULT_NET = 'private'
S = store.servers.c


def _default(item):
    """Whether a nic is the default network by name (the counter's)."""
    return item.get('network') == DEFAULT_NET and not (
        item.get('port') or item.get('subnet') or item.get('uuid'))


def plain(networks, extra):
    """Whether a server asks for nothing of the cloud's objects: every nic
    is the default network by name, and no block device or hint."""
    if extra and (extra.get('scheduler_hints') or
                  extra.get('block_device_mapping') or
                  extra.get('block_device_mapping_v2')):
        return False
    for item in networks:
        if not _default(item):
            return False
    return True


def _one(ctx, kind, ref, ambiguous):
    """The live object of `kind` the server's request names (an id, else
    a name), or None when none is so named."""
    ref = str(ref)
    found = ctx.visible(kind, ref)
    if found is not None:
        return found
    named = ctx.all(kind, name=ref)
    if len(named) > 1 and not ctx.admin:
        named = [o for o in named if o.project_id == ctx.project_id] or \
            named
    if len(named) > 1:
        raise conflict(ambiguous)
    return named[0] if named else None


class Wiring:
    """What one server's create asks of the cloud's objects: found by the
    constructor (reads only), made by `ports` (writes, undone together
    when one of them is refused)."""

    def __init__(self, conn, now, networks, extra, server_id, hosts):
        project = (extra or {}).get('project_id')
        # a server of the sim has no project unless its caller says: it
        # sees every project's objects then
        self.ctx = rows.Ctx(conn, now, project, admin=project is None)
        self.server_id = server_id
        self.extra = extra or {}
        self.host = 'sim-host-%d' % (int(server_id.replace('-', ''), 16)
                                     % hosts + 1)
        self._hosts = hosts
        #: nic index -> ('port', Obj) | ('network', Obj, fixed_ips)
        self.nics = {}
        for index, item in enumerate(networks):
            found = self._nic(item)
            if found is not None:
                self.nics[index] = found
        self.group = self._group()
        self.volumes = self._volumes()
        self.made = {}   # port id -> the port, for the server's addresses

    def _nic(self, item):
        if _default(item):
            return None
        ctx = self.ctx
        if item.get('port'):
            port = _one(ctx, 'port', item['port'], 'Multiple ports are named '
                        '%s: use a port ID.' % item['port'])
            if port is None:
                return None
            if port.body.get('device_id') and \
                    port.body['device_id'] != self.server_id:
                raise conflict('Port %s is still in use.' % port.id)
            return ('port', port)
        fixed = {}
        if item.get('fixed_ip'):
            fixed['ip_address'] = item['fixed_ip']
        ref = item.get('network') or item.get('uuid')
        if item.get('subnet'):
            subnet = _one(ctx, 'subnet', item['subnet'], 'Multiple subnets '
                          'are named %s: use a subnet ID.' % item['subnet'])
            if subnet is not None:
                fixed['subnet_id'] = subnet.id
                return ('network', ctx.live('network', subnet.parent),
                        [fixed])
        if not ref:
            return None
        net = _one(ctx, 'network', ref, 'Multiple possible networks found, '
                   'use a Network ID to be more specific.')
        if net is None:
            return None
        if not ctx.all('subnet', parent=net.id, visible_only=False):
            # Nova's answer: it boots a server only where Neutron can
            # give it an address
            raise bad('Network %s requires a subnet in order to boot '
                      'instances on.' % net.id)
        return ('network', net, [fixed] if fixed else None)

    def _group(self):
        hints = self.extra.get('scheduler_hints') or {}
        ref = hints.get('group') if isinstance(hints, dict) else None
        if not ref:
            return None
        group = self.ctx.visible('server_group', ref)
        if group is None:
            raise missing('Instance group %s could not be found.' % ref)
        return group

    def _volumes(self):
        found = []
        for mapping in (list(self.extra.get('block_device_mapping') or [])
                        + list(self.extra.get('block_device_mapping_v2')
                               or [])):
            if not isinstance(mapping, dict) or not mapping.get('volume_id'):
                continue
            volume = self.ctx.visible('volume', mapping['volume_id'])
            if volume is None:
                raise rows.bad('Block Device Mapping is Invalid: failed to '
                               'get volume %s.' % mapping['volume_id'])
            device = mapping.get('device_name')
            if device and not device.startswith('/dev/'):
                device = '/dev/' + device
            found.append((volume, device, bool(
                mapping.get('delete_on_termination', False))))
        return found

    def ports(self, chosen, mine):
        """Make and bind the ports (`chosen`'s (None, index) entries
        become the (network name, address) of each), attach the volumes,
        join the group; every write undone if one is refused."""
        with self.ctx.conn.begin_nested():
            if self.group is not None:
                self._join()
            out = []
            for net_name, addr in chosen:
                if net_name is not None:
                    out.append((net_name, addr))
                    continue
                port, net = self._bind(self.nics[addr])
                for entry in port.body['fixed_ips']:
                    mine.setdefault(net.name, set()).add(entry['ip_address'])
                    out.append((net.name, entry['ip_address']))
                self.made[port.id] = port
            server = _Server(self.server_id, self.host)
            for volume, device, on_delete in self.volumes:
                cinder.attach(self.ctx, server, volume, device,
                              delete_on_termination=on_delete)
        return out

    def _bind(self, nic):
        ctx = self.ctx
        if nic[0] == 'port':
            port = nic[1]
            net = ctx.live('network', port.parent)
            port.body.update({'device_id': self.server_id,
                              'device_owner': 'compute:nova',
                              'binding:host_id': self.host,
                              'binding:vif_type': 'ovs'})
            port.device, port.status = self.server_id, 'ACTIVE'
            neutron.PORT.revised(port)
            ctx.save(port)
            return port, net
        _, net, fixed = nic
        body = {'device_id': self.server_id, 'device_owner': 'compute:nova',
                'binding:host_id': self.host, '_nova_made': True}
        if fixed:
            body['fixed_ips'] = fixed
        if self.extra.get('security_groups'):
            body['security_groups'] = list(self.extra['security_groups'])
        project = ctx.project_id if ctx.project_id is not None \
            else net.project_id
        port = neutron.PORT.make(ctx, net, body, project_id=project)
        port.status = 'ACTIVE'
        port.body['binding:vif_type'] = 'ovs'
        ctx.save(port, touch=False)
        return port, net

    def _join(self):
        group = self.group
        members = group.body.get('members') or []
        if members:
            hosts = [r.host for r in self.ctx.conn.execute(
                sa.select(S.host).where(S.id.in_(members)))]
            if group.body['policy'] in ('affinity', 'soft-affinity'):
                self.host = hosts[0] if hosts else self.host
            else:
                free = ['sim-host-%d' % n for n in range(1, self._hosts + 1)
                        if 'sim-host-%d' % n not in hosts]
                # strict or soft, the sim always finds a host: one the
                # other members are not on while there is one
                self.host = free[0] if free and self.host in hosts \
                    else self.host
        group.body['members'] = members + [self.server_id]
        self.ctx.save(group)

    def describe(self, addresses):
        """Nova's view of the ports' addresses: their IP version and
        MAC."""
        macs = {}
        for port in self.made.values():
            for entry in port.body['fixed_ips']:
                macs[entry['ip_address']] = port.body['mac_address']
        for entries in addresses.values():
            for entry in entries:
                if entry['addr'] in macs:
                    entry['OS-EXT-IPS-MAC:mac_addr'] = macs[entry['addr']]
                    if ':' in entry['addr']:
                        entry['version'] = 6

    def values(self):
        """The server's own columns this wiring decides."""
        return {'host': self.host, 'wired': True}


class _Server:
    """The server being made, as an attachment reads it."""

    def __init__(self, id, host):
        self.id, self.host, self.seq = id, host, None


#: seconds a port Nova made for a server outlives the server's delete:
#: Neutron shows it (and refuses to delete its subnet or network, 409)
#: until Nova's clean-up of the instance gets to it
PORT_LINGER = 0.5


def unwire(conn, now, row, gone_in=0.0):
    """A server's delete: let go of its objects (`row` its row, gone
    `gone_in` seconds from now)."""
    ctx = rows.Ctx(conn, now, None, admin=True)
    for port in ctx.all('port', device=row.id):
        if port.body.get('_nova_made'):
            _remove_made(ctx, port, after=gone_in + PORT_LINGER)
        else:
            port.body.update({'device_id': '', 'device_owner': '',
                              'binding:host_id': '',
                              'binding:vif_type': 'unbound'})
            port.device, port.status = None, 'DOWN'
            neutron.PORT.revised(port)
            ctx.save(port)
    for attachment in ctx.all('volume_attachment', device=row.id):
        cinder.detach(ctx, attachment)
        if attachment.body.get('delete_on_termination'):
            volume = ctx.live('volume', attachment.parent)
            if volume is not None:
                ctx.remove(volume)
    for group in ctx.all('server_group', where=rows.C.body.like(
            '%%"%s"%%' % row.id)):
        group.body['members'] = [m for m in group.body.get('members', [])
                                 if m != row.id]
        ctx.save(group)


def interfaces(conn, now, row):
    """Nova's interface list of the server `row`: its ports, as Neutron
    shows them. A server on the default network by name has no port of
    its own (its address came from the sim's counter: `plain`); the
    first look gives it the port Nova would have made at its boot, on
    the seeded network of that name, holding the address it has, and
    the server becomes wired (its delete lets the port go, as a port its
    create made). A floating IP can then be given to it."""
    ctx = rows.Ctx(conn, now, None, admin=True)
    ports = ctx.all('port', device=row.id)
    if not ports and not row.wired:
        made = _default_port(ctx, row)
        ports = [made] if made is not None else []
    return [neutron.PORT.show(ctx, p) for p in ports]


def _default_port(ctx, row):
    entries = json.loads(row.addresses or '{}').get(DEFAULT_NET) or []
    v4 = [e['addr'] for e in entries if ':' not in e['addr']]
    nets = [n for n in ctx.all('network', name=DEFAULT_NET)
            if n.project_id == rows.ADMIN_PROJECT]
    if not v4 or not nets:
        return None
    addr = v4[0]
    A = store.addresses.c
    held = sa.and_(A.seq == row.seq, A.net == DEFAULT_NET, A.addr == addr)
    # the address is the server's already (the counter's, which the
    # port's address management refuses to give): let go of it while the
    # port takes it, then the server holds it again, in this transaction
    ctx.conn.execute(store.addresses.delete().where(held))
    port = neutron.PORT.make(ctx, nets[0], {
        'device_id': row.id, 'device_owner': 'compute:nova',
        'binding:host_id': row.host or '', '_nova_made': True,
        'fixed_ips': [{'ip_address': addr}]},
        project_id=row.project_id or nets[0].project_id)
    ctx.conn.execute(store.addresses.insert().values(
        seq=row.seq, net=DEFAULT_NET, addr=addr))
    port.status = 'ACTIVE'
    port.body['binding:vif_type'] = 'ovs'
    ctx.save(port, touch=False)
    ctx.conn.execute(store.servers.update().where(
        S.seq == row.seq).values(wired=True))
    return port


def _remove_made(ctx, port, after=0.0):
    """A port the server's create made goes with it (its floating IPs
    let go of it; the server's addresses go with the server), `after`
    seconds from now. Its addresses are free at once (Neutron's are
    when the port goes: the sim's lingering port still holds its
    subnet, neutron.Subnet.delete)."""
    for fip in ctx.all('floating_ip', device=port.id):
        l3.FloatingIP.dissociate(ctx, fip)
        ctx.save(fip)
    ipam.release(ctx, port.id)
    ctx.remove(port, after=after)


def attach(conn, now, row, nic, project_id, hosts):
    """Nova's interface attach on the server `row`: the port a nic
    names is bound to it, or one is made on the network or subnet it
    names (Nova's, which its detach deletes); the server's addresses
    grow by the port's. The port, as Neutron shows it."""
    interfaces(conn, now, row)   # the default network's port, if due
    wiring = Wiring(conn, now, [nic], {'project_id': project_id}
                    if project_id else None, row.id, hosts)
    found = wiring.nics.get(0)
    if found is None:
        what = nic.get('port') or nic.get('subnet') or nic.get('network')
        raise missing('Network %s could not be found.' % what)
    wiring.host = row.host or wiring.host
    ctx = wiring.ctx
    port, _net = wiring._bind(found)
    _readdress(ctx, port, [], port.body.get('fixed_ips') or [])
    ctx.conn.execute(store.servers.update().where(
        S.seq == row.seq).values(wired=True))
    return neutron.PORT.show(ctx, port)


def detach(conn, now, row, port_id):
    """Nova's interface detach: the server loses the port's addresses;
    a port Nova made goes, one it was given is unbound (the sim does it
    at once, where Nova's detach ends a moment after its answer)."""
    ctx = rows.Ctx(conn, now, None, admin=True)
    interfaces(conn, now, row)
    port = ctx.live('port', port_id)
    if port is None or port.device != row.id:
        raise missing('Port %s is not attached' % port_id)
    port_gone(ctx, port)
    if port.body.get('_nova_made'):
        _remove_made(ctx, port)
        return
    port.body.update({'device_id': '', 'device_owner': '',
                      'binding:host_id': '', 'binding:vif_type': 'unbound'})
    port.device, port.status = None, 'DOWN'
    neutron.PORT.revised(port)
    ctx.save(port)


def _server_of(ctx, port):
    return ctx.conn.execute(sa.select(S.seq, S.addresses).where(
        S.id == port.body.get('device_id'), S.deleted == sa.false())).first()


def port_gone(ctx, port):
    """A port bound to a server was deleted: the server no longer has its
    addresses (Nova hears of it from Neutron)."""
    _readdress(ctx, port, port.body.get('fixed_ips') or [], [])


def readdress(ctx, port, old):
    """A bound port's fixed_ips changed: so do the server's addresses."""
    _readdress(ctx, port, old, port.body.get('fixed_ips') or [])


def _readdress(ctx, port, old, new):
    server = _server_of(ctx, port)
    if server is None:
        return
    net = ctx.live('network', port.parent)
    net_name = net.name if net is not None else port.parent
    addresses = json.loads(server.addresses or '{}')
    gone = {f['ip_address'] for f in old} - {f['ip_address'] for f in new}
    entries = [e for e in addresses.get(net_name, [])
               if e['addr'] not in gone]
    have = {e['addr'] for e in entries}
    for fixed in new:
        if fixed['ip_address'] not in have:
            entries.append({
                'addr': fixed['ip_address'],
                'version': 6 if ':' in fixed['ip_address'] else 4,
                'OS-EXT-IPS:type': 'fixed',
                'OS-EXT-IPS-MAC:mac_addr': port.body.get('mac_address')})
    if entries:
        addresses[net_name] = entries
    else:
        addresses.pop(net_name, None)
    ctx.conn.execute(store.servers.update().where(
        S.seq == server.seq).values(addresses=rows.dumps(addresses)))
    A = store.addresses.c
    if gone:
        ctx.conn.execute(store.addresses.delete().where(
            A.seq == server.seq, A.net == net_name, A.addr.in_(gone)))
    added = [f['ip_address'] for f in new if f['ip_address'] not in have]
    if added:
        ctx.conn.execute(store.addresses.insert(), [
            {'seq': server.seq, 'net': net_name, 'addr': a} for a in added])
