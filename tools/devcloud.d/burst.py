"""A burst of servers on the devcloud, to measure it (docs/devcloud.md).

  .devcloud/venv/bin/python tools/devcloud.d/burst.py [N] [--keep] [--no-net]
      [--threads T] [--cloud devcloud-alice]

Creates N servers (m1.tiny, cirros) from T client threads, each on a port of
one network made for the burst (or with networks='none'), waits until all
are ACTIVE, prints the times, then deletes them (unless --keep; `tools/devcloud
status -m` in between gives the memory) and the network.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import time

import openstack


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('count', type=int, nargs='?', default=20)
    parser.add_argument('--threads', type=int, default=8)
    parser.add_argument('--keep', action='store_true')
    parser.add_argument('--no-net', action='store_true')
    parser.add_argument('--cloud', default='devcloud-alice')
    args = parser.parse_args()

    conn = openstack.connect(cloud=args.cloud)
    image = conn.image.find_image('cirros')
    flavor = conn.compute.find_flavor('m1.tiny')
    tag = 'burst%d' % os.getpid()
    net = None
    if not args.no_net:
        net = conn.network.create_network(name=tag)
        conn.network.create_subnet(network_id=net.id, ip_version=4,
                                   cidr='10.123.0.0/16', name=tag)
        networks = [{'uuid': net.id}]
    else:
        networks = 'none'

    def create(i):
        return conn.compute.create_server(
            name='%s-%d' % (tag, i), image_id=image.id, flavor_id=flavor.id,
            networks=networks).id

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        ids = list(pool.map(create, range(args.count)))
    t_calls = time.monotonic() - t0
    pending = set(ids)
    errors = []
    while pending and time.monotonic() - t0 < 900:
        for server in conn.compute.servers(name='^%s-' % tag):
            if server.id in pending and server.status in ('ACTIVE', 'ERROR'):
                pending.discard(server.id)
                if server.status == 'ERROR':
                    errors.append(server.id)
        time.sleep(0.5)
    t_active = time.monotonic() - t0
    print('%d servers (%s, %d threads): create calls %.1fs, all ACTIVE '
          '%.1fs, %d ERROR, %d not done' % (
              args.count, 'no network' if args.no_net else 'on a network',
              args.threads, t_calls, t_active, len(errors), len(pending)))
    if args.keep:
        root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        subprocess.run([os.path.join(root, 'tools', 'devcloud'), 'status',
                        '--memory'])
    t1 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(conn.compute.delete_server, ids))
    while list(conn.compute.servers(name='^%s-' % tag)) and \
            time.monotonic() - t1 < 600:
        time.sleep(0.5)
    print('all deleted in %.1fs' % (time.monotonic() - t1))
    if net is not None:
        for port in conn.network.ports(network_id=net.id):
            conn.network.delete_port(port)
        conn.network.delete_network(net)
    return 1 if errors or pending else 0


if __name__ == '__main__':
    sys.exit(main())
