"""Neutron's IP address management, as the sim does it: a subnet's
defaults (gateway, allocation pools), and the addresses ports hold
(``sim_ips``: a subnet's address is one port's, by its primary key).
Allocations on one subnet take turns (a lock on the subnet's row), so
concurrent ports of every process get distinct addresses at the first
try.

A port's address is the lowest free one of its subnet's pools (Neutron
picks among the first free ones); a subnet marked ``_from_top`` (the
seeded ``private`` network's) gives the highest first, because the
servers booted on ``private`` by name take addresses from the bottom of
10.0.0.0/16 through the sim's address counter (api.py), which looks at
servers only. Every candidate is also checked against the addresses
servers hold on a network of that name (``sim_addresses``), so a port
never takes an address a server was given by that counter or by hand.
"""

import ipaddress

import sqlalchemy as sa

from converge.drivers.sim import rows
from converge.drivers.sim import store

I = store.ips.c


def network(cidr, field='cidr'):
    """The ip_network of `cidr`, or Neutron's 400."""
    try:
        net = ipaddress.ip_network(str(cidr), strict=False)
    except ValueError:
        raise rows.bad("Invalid input for %s. Reason: '%s' is not a valid "
                       "IP subnet." % (field, cidr))
    if str(net) != str(cidr) and str(net) != str(cidr).lower():
        raise rows.bad("Invalid input for %s. Reason: '%s' isn't a "
                       "recommended CIDR, use '%s' instead." % (
                           field, cidr, net))
    return net


def address(value, field='ip_address'):
    try:
        return ipaddress.ip_address(str(value))
    except ValueError:
        raise rows.bad("Invalid input for %s. Reason: '%s' is not a valid "
                       "IP address." % (field, value))


def hosts(net):
    """(first, last) address a port may have on `net` (IPv4: not the
    network's nor the broadcast address)."""
    if net.version == 4 and net.prefixlen < 31:
        return net[1], net[-2]
    if net.version == 6 and net.prefixlen < 127:
        return net[1], net[-1]
    return net[0], net[-1]


def default_gateway(net):
    return str(hosts(net)[0])


def default_pools(net, gateway):
    """The whole of `net` but the gateway, as Neutron makes them."""
    first, last = hosts(net)
    pools = []
    if gateway is None:
        return [{'start': str(first), 'end': str(last)}]
    gw = ipaddress.ip_address(gateway)
    if first < gw:
        pools.append({'start': str(first), 'end': str(gw - 1)})
    if gw < last:
        pools.append({'start': str(gw + 1), 'end': str(last)})
    if gw < first or gw > last:
        pools = [{'start': str(first), 'end': str(last)}]
    return pools


def check_pools(net, pools, gateway):
    """Neutron's checks of given allocation pools; the pools as stored."""
    checked = []
    for pool in pools:
        try:
            start = address(pool['start'], 'allocation_pools')
            end = address(pool['end'], 'allocation_pools')
        except (KeyError, TypeError):
            raise rows.bad('Invalid input for allocation_pools. Reason: '
                           'each pool needs a start and an end.')
        if start not in net or end not in net:
            raise rows.bad('The allocation pool %s-%s spans beyond the '
                           'subnet cidr %s.' % (start, end, net))
        if start > end:
            raise rows.bad('Invalid input for operation: the allocation '
                           'pool %s-%s ends before it starts.'
                           % (start, end))
        if gateway is not None and \
                start <= ipaddress.ip_address(gateway) <= end:
            raise rows.bad('Gateway ip %s conflicts with allocation pool '
                           '%s-%s.' % (gateway, start, end))
        for other in checked:
            if start <= ipaddress.ip_address(other['end']) and \
                    ipaddress.ip_address(other['start']) <= end:
                raise rows.bad('Found overlapping allocation pools: '
                               '%s-%s and %s-%s.' % (
                                   start, end, other['start'],
                                   other['end']))
        checked.append({'start': str(start), 'end': str(end)})
    return checked


def in_pools(addr, pools):
    addr = ipaddress.ip_address(addr)
    return any(ipaddress.ip_address(p['start']) <= addr <=
               ipaddress.ip_address(p['end']) for p in pools)


def _candidates(pools, from_top):
    ranges = [(ipaddress.ip_address(p['start']),
               ipaddress.ip_address(p['end'])) for p in pools]
    ranges.sort(reverse=from_top)
    for start, end in ranges:
        if from_top:
            addr = end
            while addr >= start:
                yield str(addr)
                addr -= 1
        else:
            addr = start
            while addr <= end:
                yield str(addr)
                addr += 1


def eui64(net, mac):
    """The SLAAC address of `mac` on IPv6 `net` (RFC 4291's modified
    EUI-64 interface id)."""
    parts = [int(b, 16) for b in mac.split(':')]
    parts[0] ^= 0x02
    iid = parts[:3] + [0xff, 0xfe] + parts[3:]
    value = int.from_bytes(bytes(iid), 'big')
    return str(ipaddress.ip_address(int(net.network_address) | value))


_SERVER_HOLDS = sa.select(store.addresses.c.seq).select_from(
    store.addresses.join(store.servers,
                         store.servers.c.seq == store.addresses.c.seq)).where(
    store.addresses.c.addr == sa.bindparam('addr'),
    store.addresses.c.net == sa.bindparam('net'),
    store.servers.c.deleted == sa.false(),
    sa.or_(store.servers.c.gone_at.is_(None),
           store.servers.c.gone_at > sa.bindparam('now'))).limit(1)


def server_holds(ctx, net_name, addr):
    """Whether a live server was given `addr` on a network named so."""
    return ctx.conn.execute(_SERVER_HOLDS, {
        'addr': addr, 'net': net_name, 'now': ctx.now}).first() is not None


def taken(ctx, subnet_id):
    return {r.ip_address for r in ctx.conn.execute(
        sa.select(I.ip_address).where(I.subnet_id == subnet_id))}


def holder(ctx, subnet_id, addr):
    """The port holding `addr` on the subnet, or None."""
    row = ctx.conn.execute(sa.select(I.port_id).where(
        I.subnet_id == subnet_id, I.ip_address == addr)).first()
    return row.port_id if row else None


def allocate(ctx, subnet, port_id, net_name, addr=None, mac=None):
    """An address of `subnet` (an Obj) for the port: `addr` if free, else
    Neutron's 409; without `addr` the next free one of the pools (the
    SLAAC address of `mac` on an IPv6 SLAAC subnet)."""
    body = subnet.body
    # one allocation at a time per subnet: those of other transactions
    # wait here for this one's commit and then see its address (a row
    # lock on PostgreSQL and MariaDB; SQLite has one writer anyway), where
    # they would all pick the same lowest free address and collide
    ctx.conn.execute(sa.select(rows.C.seq).where(
        rows.C.seq == subnet.seq).with_for_update())
    if addr is not None:
        ip = address(addr)
        if ip not in ipaddress.ip_network(body['cidr']):
            raise rows.bad('IP address %s is not a valid IP for the '
                           'specified subnet.' % addr)
        addr = str(ip)
        if holder(ctx, subnet.id, addr) is not None or \
                server_holds(ctx, net_name, addr):
            raise rows.conflict('IP address %s already allocated in subnet '
                                '%s' % (addr, subnet.id))
    elif body.get('ipv6_address_mode') in ('slaac', 'dhcpv6-stateless') \
            and mac:
        addr = eui64(ipaddress.ip_network(body['cidr']), mac)
    else:
        held = taken(ctx, subnet.id)
        for candidate in _candidates(body.get('allocation_pools') or [],
                                     bool(body.get('_from_top'))):
            if candidate in held or candidate == body.get('gateway_ip'):
                continue
            if not server_holds(ctx, net_name, candidate):
                addr = candidate
                break
        else:
            raise rows.conflict('No more IP addresses available on network '
                                '%s.' % subnet.parent)
    ctx.conn.execute(store.ips.insert().values(
        subnet_id=subnet.id, ip_address=addr, network_id=subnet.parent,
        port_id=port_id))
    return addr


def release(ctx, port_id, keep=()):
    """Let go of the port's addresses (but those in `keep`: (subnet,
    address) pairs)."""
    query = store.ips.delete().where(I.port_id == port_id)
    for subnet_id, addr in keep:
        query = query.where(sa.not_(sa.and_(I.subnet_id == subnet_id,
                                            I.ip_address == addr)))
    ctx.conn.execute(query)


def allocated(ctx, subnet_id):
    """Ports holding an address of the subnet."""
    return [r.port_id for r in ctx.conn.execute(
        sa.select(I.port_id).where(I.subnet_id == subnet_id))]
