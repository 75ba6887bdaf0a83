"""converge-bench --scenario cloud --os-cloud NAME --n 50 200: converge
on a real OpenStack beside the cloud's own time.

For each N: N servers with a port each on a network of their own, made
and deleted three ways in one run on the same cloud:

- ``sdk``: openstacksdk directly, with as many threads as converge has
  worker threads (a port, then its server; all watched with one list
  per interval until ACTIVE; then deleted and watched until gone): what
  the cloud itself takes for the burst;
- ``converge``: the same as a stack, created and deleted by the embedded
  engine (``--os-cloud``);
- ``heat`` (``--heat``): the same template through Heat (the cloud
  ``--heat-cloud``, default CLOUD-heat if clouds.yaml has it, as
  `tools/devcloud up --with-heat` writes, else CLOUD); its calls per
  server and engine CPU from the devcloud's heat-engine log and process
  group when $DEVCLOUD_HOME is set (`tools/devcloud env`), else '-'.

Each row: create and delete wall time, the ratio to the ``sdk`` row
(``x_cloud``), API calls per server, and the engine's CPU seconds.
"""

import concurrent.futures
import os
import re
import shutil
import tempfile
import threading
import time
import urllib.parse
import uuid

import yaml

from converge.bench import harness as harness_mod

#: seconds between two lists of the servers while waiting for them
LOOK = 0.5


def template(n, image, flavor):
    resources = {
        'net': {'type': 'OS::Neutron::Net'},
        'subnet': {'type': 'OS::Neutron::Subnet', 'properties': {
            'network': {'get_resource': 'net'}, 'cidr': '10.77.0.0/16'}},
    }
    for i in range(n):
        resources['port%d' % i] = {
            'type': 'OS::Neutron::Port', 'properties': {
                'network': {'get_resource': 'net'},
                'fixed_ips': [{'subnet': {'get_resource': 'subnet'}}]}}
        resources['server%d' % i] = {
            'type': 'OS::Nova::Server', 'properties': {
                'image': image, 'flavor': flavor,
                'networks': [{'port': {'get_resource': 'port%d' % i}}]}}
    return {'heat_template_version': '2018-08-31', 'resources': resources}


class Counted:
    """openstacksdk calls of the sdk row, counted as converge's driver
    counts its own."""

    def __init__(self):
        self.n = 0
        self._lock = threading.Lock()

    def __call__(self, fn, *args, **kwargs):
        with self._lock:
            self.n += 1
        return fn(*args, **kwargs)


def _wait(predicate, timeout):
    """Until `predicate()`; a 5xx of the cloud while it is asked (Nova's
    list, when a burst of 200 builds loads this 2-core machine) is asked
    again, as converge's driver retries it."""
    from openstack import exceptions
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except exceptions.HttpException as e:
            if (e.status_code or 0) < 500:
                raise
        if time.monotonic() > deadline:
            raise harness_mod.BenchError('the cloud did not get there in '
                                         '%d s' % timeout)
        time.sleep(LOOK)


def run_sdk(conn, n, threads, image, flavor, timeout):
    """The burst made by openstacksdk directly."""
    call = Counted()
    tag = 'bench-%s' % uuid.uuid4().hex[:8]
    image_id = call(conn.image.find_image, image, ignore_missing=False).id
    flavor_id = call(conn.compute.find_flavor, flavor,
                     ignore_missing=False).id
    start = time.monotonic()
    net = call(conn.network.create_network, name=tag)
    subnet = call(conn.network.create_subnet, network_id=net.id,
                  ip_version=4, cidr='10.78.0.0/16')

    def one(i):
        port = call(conn.network.create_port, network_id=net.id,
                    fixed_ips=[{'subnet_id': subnet.id}])
        server = call(conn.compute.create_server, name='%s-%d' % (tag, i),
                      image_id=image_id, flavor_id=flavor_id,
                      networks=[{'port': port.id}])
        return port.id, server.id

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        made = list(pool.map(one, range(n)))
    ids = {s for _, s in made}

    def all_active():
        servers = [s for s in call(lambda: list(conn.compute.servers(
            name='^%s-' % tag))) if s.id in ids]
        bad = [s for s in servers if s.status == 'ERROR']
        if bad:
            raise harness_mod.BenchError('server %s went ERROR: %s' % (
                bad[0].id, bad[0].fault))
        return len(servers) == n and all(s.status == 'ACTIVE'
                                          for s in servers)
    _wait(all_active, timeout)
    create_s = time.monotonic() - start
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda s: call(conn.compute.delete_server, s), ids))
    _wait(lambda: not [s for s in call(lambda: list(conn.compute.servers(
        name='^%s-' % tag))) if s.id in ids], timeout)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda p: call(conn.network.delete_port, p),
                      [p for p, _ in made]))
    call(conn.network.delete_subnet, subnet)
    call(conn.network.delete_network, net)
    delete_s = time.monotonic() - start
    return {'engine': 'sdk', 'n': n, 'create_s': create_s,
            'delete_s': delete_s, 'calls_per_server': call.n / float(n),
            'cpu_s': None, 'status': 'ok'}


def run_converge(cloud, n, threads, image, flavor, timeout):
    """The burst as a stack of the embedded engine in this process."""
    from converge import template as template_mod
    from converge.drivers import openstack
    from converge.engine import request
    from converge.engine import service
    home = tempfile.mkdtemp(prefix='converge-bench-cloud-')
    try:
        with harness_mod.Embedded(home, {'worker_threads': threads}) as h:
            svc = service.Service(h.engine)
            project = openstack.project_of(cloud)
            ctx = request.make(project_id=project, cloud=cloud)
            bundle = template_mod.Bundle(template(n, image, flavor), {}, {},
                                         'cloud-%d.yaml' % n)
            name = 'bench-cloud-%d-%s' % (n, uuid.uuid4().hex[:6])
            cpu = time.process_time()
            start = time.monotonic()
            made = svc.stack_create(ctx, name, bundle, {})
            _, status = h.wait(made['id'], made['traversal_id'])
            create_s = time.monotonic() - start
            if status != 'COMPLETE':
                raise harness_mod.BenchError('create ended %s' % status)
            start = time.monotonic()
            gone = svc.stack_delete(ctx, made['id'])
            _, status = h.wait(made['id'], gone['traversal_id'])
            delete_s = time.monotonic() - start
            cpu = time.process_time() - cpu
            real = h.engine.clients.for_stack(cloud, project).cloud
            calls = real.calls.total()
        return {'engine': 'converge', 'n': n, 'create_s': create_s,
                'delete_s': delete_s, 'calls_per_server': calls / float(n),
                'cpu_s': cpu, 'status': 'ok' if status == 'COMPLETE'
                else 'delete %s' % status}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def heat_cloud(cloud, name=None):
    """The clouds.yaml cloud that reaches Heat: NAME, else CLOUD-heat if
    clouds.yaml has it (tools/devcloud up --with-heat writes one per user:
    Heat beside converge-api), else CLOUD itself (its catalog's
    orchestration); a connection, checked to answer."""
    import openstack
    from openstack import config
    from openstack import exceptions
    if name is None:
        name = cloud + '-heat'
        try:
            config.OpenStackConfig().get_one(cloud=name)
        except exceptions.ConfigException:
            name = cloud
    try:
        conn = openstack.connect(cloud=name)
        next(iter(conn.orchestration.stacks(limit=1)), None)
    except Exception as e:
        raise harness_mod.BenchError(
            '--heat: no Heat answers through cloud %s (tools/devcloud up '
            '--with-heat; or --heat-cloud NAME): %s' % (name, e))
    return conn


class HeatEngine:
    """Heat's calls to the cloud's APIs and its engine's CPU seconds,
    read from the devcloud's heat-engine log (keystoneauth's "REQ: curl"
    lines, identity's left out) and the /proc of its process group;
    nothing (None) where $DEVCLOUD_HOME is not a devcloud's with Heat."""

    REQ = re.compile(r'REQ: curl .*? -X [A-Z]+ (\S+)')

    def __init__(self, conn):
        home = os.environ.get('DEVCLOUD_HOME')
        self.log = os.path.join(home, 'log', 'heat-engine.log') \
            if home else None
        self.pidfile = os.path.join(home, 'run', 'heat-engine.pid') \
            if home else None
        auth = urllib.parse.urlsplit(conn.config.get_auth_args()['auth_url'])
        self.identity = '%s://%s' % (auth.scheme, auth.netloc)

    def mark(self):
        try:
            return os.path.getsize(self.log), self.cpu()
        except (OSError, TypeError):
            return None

    def since(self, mark):
        """(calls, CPU seconds) since mark, or (None, None)."""
        if mark is None:
            return None, None
        calls = 0
        with open(self.log, errors='replace') as f:
            f.seek(mark[0])
            for line in f:
                found = self.REQ.search(line)
                if found and not found.group(1).startswith(self.identity):
                    calls += 1
        cpu = self.cpu()
        return calls, (cpu - mark[1] if None not in (cpu, mark[1])
                       else None)

    def cpu(self):
        """utime + stime of the heat-engine process group (its workers)."""
        try:
            with open(self.pidfile) as f:
                pgid = int(f.read().split()[0])
        except (OSError, ValueError, TypeError):
            return None
        ticks = 0
        for pid in filter(str.isdigit, os.listdir('/proc')):
            try:
                with open('/proc/%s/stat' % pid) as f:
                    fields = f.read().rsplit(')', 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                ticks += int(fields[11]) + int(fields[12])
        return ticks / float(os.sysconf('SC_CLK_TCK'))


def run_heat(conn, n, image, flavor, timeout):
    """The same template through Heat (conn: heat_cloud's)."""
    from openstack import exceptions
    engine = HeatEngine(conn)
    name = 'bench-heat-%d-%s' % (n, uuid.uuid4().hex[:6])
    mark = engine.mark()
    start = time.monotonic()
    stack = conn.orchestration.create_stack(
        name=name, template=template(n, image, flavor), timeout_mins=60)
    try:
        stack = conn.orchestration.wait_for_status(
            stack, 'CREATE_COMPLETE', failures=['CREATE_FAILED'],
            interval=1, wait=timeout)
    except exceptions.SDKException as e:
        conn.orchestration.delete_stack(stack, ignore_missing=True)
        raise harness_mod.BenchError('Heat: stack %s: %s' % (name, e))
    create_s = time.monotonic() - start
    start = time.monotonic()
    conn.orchestration.delete_stack(stack)
    try:
        conn.orchestration.wait_for_status(
            stack, 'DELETE_COMPLETE', failures=['DELETE_FAILED'],
            interval=1, wait=timeout)
    except exceptions.NotFoundException:
        pass
    except exceptions.SDKException as e:
        raise harness_mod.BenchError('Heat: stack %s: %s' % (name, e))
    delete_s = time.monotonic() - start
    calls, cpu = engine.since(mark)
    return {'engine': 'heat', 'n': n, 'create_s': create_s,
            'delete_s': delete_s,
            'calls_per_server': None if calls is None else calls / float(n),
            'cpu_s': cpu, 'status': 'ok'}


def run(cloud, sizes, threads=8, heat=False, image='cirros',
        flavor='m1.tiny', timeout=1800, on_row=None, heat_cloud_name=None):
    import openstack
    conn = openstack.connect(cloud=cloud)
    if heat:    # before any row: a run without the Heat it asks for ends
        heat_conn = heat_cloud(cloud, heat_cloud_name)
    rows = []
    for n in sizes:
        base = run_sdk(conn, n, threads, image, flavor, timeout)
        group = [base, run_converge(cloud, n, threads, image, flavor,
                                    timeout)]
        if heat:
            group.append(run_heat(heat_conn, n, image, flavor, timeout))
        for row in group:
            row['label'] = 'cloud'
            row['x_cloud'] = row['create_s'] / base['create_s']
            row['x_cloud_delete'] = row['delete_s'] / base['delete_s']
            rows.append(row)
            if on_row:
                on_row(row)
    return rows


COLUMNS = [('label', 'scenario', '%s'), ('engine', 'engine', '%s'),
           ('n', 'n', '%d'), ('create_s', 'create_s', '%.2f'),
           ('x_cloud', 'x_cloud', '%.2f'), ('delete_s', 'delete_s', '%.2f'),
           ('x_cloud_delete', 'x_cloud_del', '%.2f'),
           ('calls_per_server', 'calls/server', '%.1f'),
           ('cpu_s', 'engine_cpu_s', '%.1f'), ('status', 'status', '%s')]


def line(row):
    return '  '.join('-' if row.get(k) is None else f % row[k]
                     for k, _, f in COLUMNS)


def table(rows):
    return '\n'.join(['  '.join(h for _, h, _ in COLUMNS)]
                     + [line(row) for row in rows])


def dump(rows):
    return yaml.safe_dump(rows)

