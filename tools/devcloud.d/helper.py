"""The part of tools/devcloud that runs inside .devcloud/venv.

tools/devcloud itself uses only the standard library; what needs a database
driver or openstacksdk is done here, one subcommand per step:

  db-list PREFIX              databases whose name starts with PREFIX (JSON)
  db-create NAME...           create databases that do not exist
  db-drop NAME...             drop databases that exist
  db-query DB SQL             first column of every row (JSON)
  keystone-setup SPEC.json    service project/users/roles, catalog, alice, bob
  wait-nova SPEC.json         services heartbeating since their start, hosts
                              mapped to cell1, hypervisors and resource
                              providers listed
  wait-cinder SPEC.json       cinder-volume heartbeating, pools in scheduler
  seed SPEC.json              flavors, image, public network + subnet
  wait-heat SPEC.json         heat-engine's workers reporting since its start

Database settings come from the environment: DEVCLOUD_DB_KIND (mysql or
postgresql), DEVCLOUD_DB_HOST, DEVCLOUD_DB_PORT, DEVCLOUD_DB_USER,
DEVCLOUD_DB_PASSWORD.  The clouds come from OS_CLIENT_CONFIG_FILE.
"""
import datetime
import json
import os
import subprocess
import sys
import time


def log(msg):
    print('  [helper] %s' % msg, flush=True)


# --- databases -------------------------------------------------------------

def _db_connect(database=None):
    kind = os.environ.get('DEVCLOUD_DB_KIND', 'mysql')
    host = os.environ.get('DEVCLOUD_DB_HOST', '127.0.0.1')
    user = os.environ.get('DEVCLOUD_DB_USER', 'root')
    password = os.environ.get('DEVCLOUD_DB_PASSWORD', '')
    if kind == 'postgresql':
        import psycopg2
        conn = psycopg2.connect(
            host=host, port=int(os.environ.get('DEVCLOUD_DB_PORT', '5432')),
            user=user, password=password or None,
            dbname=database or 'postgres')
        conn.autocommit = True
        return kind, conn
    import pymysql
    conn = pymysql.connect(
        host=host, port=int(os.environ.get('DEVCLOUD_DB_PORT', '3306')),
        user=user, password=password, database=database, autocommit=True)
    return kind, conn


def _db_names(prefix):
    kind, conn = _db_connect()
    with conn.cursor() as cur:
        if kind == 'postgresql':
            cur.execute('SELECT datname FROM pg_database')
        else:
            cur.execute('SHOW DATABASES')
        names = [row[0] for row in cur.fetchall()]
    conn.close()
    return sorted(n for n in names if n.startswith(prefix))


def _check_name(name):
    if not name.replace('_', '').isalnum():
        raise SystemExit('bad database name %r' % name)


def cmd_db_list(args):
    print(json.dumps(_db_names(args[0])))


def cmd_db_create(args):
    kind, conn = _db_connect()
    existing = set(_db_names(''))
    with conn.cursor() as cur:
        for name in args:
            _check_name(name)
            if name in existing:
                continue
            if kind == 'postgresql':
                cur.execute('CREATE DATABASE "%s" ENCODING \'UTF8\' '
                            'TEMPLATE template0' % name)
            else:
                cur.execute('CREATE DATABASE `%s` CHARACTER SET utf8mb4 '
                            'COLLATE utf8mb4_general_ci' % name)
    conn.close()


def cmd_db_drop(args):
    kind, conn = _db_connect()
    existing = set(_db_names(''))
    with conn.cursor() as cur:
        for name in args:
            _check_name(name)
            if name not in existing:
                continue
            if kind == 'postgresql':
                cur.execute('DROP DATABASE "%s" WITH (FORCE)' % name)
            else:
                cur.execute('DROP DATABASE `%s`' % name)
    conn.close()


def _db_query(database, sql):
    _check_name(database)
    _, conn = _db_connect(database)
    with conn.cursor() as cur:
        cur.execute(sql)
        rows = [row[0] for row in cur.fetchall()]
    conn.close()
    return rows


def cmd_db_query(args):
    print(json.dumps(_db_query(args[0], args[1]), default=str))


# --- clouds ----------------------------------------------------------------

def _connect(cloud='devcloud-admin'):
    import openstack
    return openstack.connect(cloud=cloud)


def _password_works(conn, user_id, password):
    """Whether the user logs in with `password`. A user's password is
    set only when it does not: Keystone revokes every token of a user
    whose password is updated, even to the same one, and the services'
    long-lived tokens (nova-conductor's to Placement) then get 401 until
    they restart (a resize failed after an `up` had run again)."""
    from keystoneauth1 import exceptions
    from keystoneauth1 import session
    from keystoneauth1.identity import v3
    auth = v3.Password(auth_url=conn.config.get_auth_args()['auth_url'],
                       user_id=user_id, password=password)
    try:
        auth.get_auth_ref(session.Session())
        return True
    except exceptions.Unauthorized:
        return False


def _load(path):
    with open(path) as f:
        return json.load(f)


def _utc_epoch(stamp):
    if not stamp:
        return 0.0
    stamp = stamp.replace('Z', '').split('+')[0]
    fmt = '%Y-%m-%dT%H:%M:%S.%f' if '.' in stamp else '%Y-%m-%dT%H:%M:%S'
    parsed = datetime.datetime.strptime(stamp, fmt)
    return parsed.replace(tzinfo=datetime.timezone.utc).timestamp()


def _retry(what, fn, timeout, interval=1.0):
    """Call fn until it returns something true; raise after timeout."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            result = fn()
            if result:
                return result
        except Exception as e:  # services still starting
            last_error = e
        if time.monotonic() > deadline:
            raise SystemExit('timed out after %ds waiting for %s%s' % (
                timeout, what,
                ' (last error: %s)' % last_error if last_error else ''))
        time.sleep(interval)


def cmd_keystone_setup(args):
    spec = _load(args[0])
    conn = _connect()
    ident = conn.identity
    domain = ident.find_domain('default') or ident.find_domain('Default')
    roles = {}
    for name in ('admin', 'member', 'reader', 'service'):
        role = ident.find_role(name)
        if role is None:
            role = ident.create_role(name=name)
            log('role %s created' % name)
        roles[name] = role

    def project(name, description):
        p = ident.find_project(name, domain_id=domain.id)
        if p is None:
            p = ident.create_project(name=name, domain_id=domain.id,
                                     description=description)
            log('project %s created' % name)
        return p

    def user(name, password, default_project):
        u = ident.find_user(name, domain_id=domain.id)
        if u is None:
            u = ident.create_user(name=name, password=password,
                                  domain_id=domain.id,
                                  default_project_id=default_project.id)
            log('user %s created' % name)
        elif not _password_works(conn, u.id, password):
            ident.update_user(u, password=password)
        return u

    def grant(u, p, role_name):
        ident.assign_project_role_to_user(p, u, roles[role_name])

    service_project = project('service', 'devcloud service users')
    for name, password in sorted(spec['service_users'].items()):
        u = user(name, password, service_project)
        grant(u, service_project, 'admin')
        grant(u, service_project, 'service')
    for name, password in sorted(spec['tenants'].items()):
        p = project(name, 'devcloud project of %s' % name)
        u = user(name, password, p)
        grant(u, p, 'member')

    heat = spec.get('heat')
    if heat:
        for name in heat['roles']:
            if ident.find_role(name) is None:
                ident.create_role(name=name)
                log('role %s created' % name)
        hdomain = ident.find_domain(heat['domain'])
        if hdomain is None:
            hdomain = ident.create_domain(
                name=heat['domain'],
                description='users Heat makes for its stacks')
            log('domain %s created' % heat['domain'])
        admin = ident.find_user(heat['admin'], domain_id=hdomain.id)
        if admin is None:
            admin = ident.create_user(name=heat['admin'],
                                      password=heat['password'],
                                      domain_id=hdomain.id)
            log('user %s created in domain %s' % (heat['admin'],
                                                  heat['domain']))
        elif not _password_works(conn, admin.id, heat['password']):
            ident.update_user(admin, password=heat['password'])
        ident.assign_domain_role_to_user(hdomain, admin, roles['admin'])

    region = spec['region']
    services = list(ident.services())
    # a service of a type the spec has but not named in it goes (converge's
    # `orchestration` once only Heat runs, or the other way round): else
    # clients would pick either
    wanted = {(e['type'], e['name']) for e in spec['catalog']}
    for svc in services:
        if svc.type in {t for t, _ in wanted} and \
                (svc.type, svc.name) not in wanted:
            for endpoint in ident.endpoints(service_id=svc.id):
                ident.delete_endpoint(endpoint)
            ident.delete_service(svc)
            log('service %s (%s) removed from the catalog' % (svc.name,
                                                              svc.type))
    services = [s for s in services if s.type not in {t for t, _ in wanted}
                or (s.type, s.name) in wanted]
    for entry in spec['catalog']:
        svc = next((s for s in services if s.type == entry['type']
                    and s.name == entry['name']), None)
        if svc is None:
            svc = ident.create_service(name=entry['name'], type=entry['type'],
                                       description=entry.get('description',
                                                             ''),
                                       is_enabled=True)
            log('service %s (%s) created' % (entry['name'], entry['type']))
        endpoints = list(ident.endpoints(service_id=svc.id))
        interfaces = entry.get('interfaces', ['public', 'internal', 'admin'])
        for endpoint in endpoints:
            if endpoint.interface not in interfaces:
                ident.delete_endpoint(endpoint)
        for interface in interfaces:
            found = [e for e in endpoints if e.interface == interface]
            if found:
                for extra in found[1:]:
                    ident.delete_endpoint(extra)
                if found[0].url != entry['url']:
                    ident.update_endpoint(found[0], url=entry['url'])
            else:
                ident.create_endpoint(service_id=svc.id, interface=interface,
                                      url=entry['url'], region_id=region)
    # catalog entries of types the spec no longer has are left alone: a
    # service that is switched off (say --with-converge not given) keeps
    # its endpoints.
    log('keystone: %d service users, %d tenants, %d catalog entries' % (
        len(spec['service_users']), len(spec['tenants']),
        len(spec['catalog'])))


def cmd_wait_nova(args):
    """Wait until the nova services started by this `up` heartbeat.

    spec: {"services": [{"binary", "host", "since"}], "computes": [host],
           "nova_manage": [argv of discover_hosts], "api_db": name,
           "timeout": s}
    """
    spec = _load(args[0])
    timeout = spec.get('timeout', 180)
    conn = _connect()

    def beats():
        now = {(s.binary, s.host): s for s in conn.compute.services()}
        missing = []
        for want in spec['services']:
            s = now.get((want['binary'], want['host']))
            if (s is None or s.state != 'up'
                    or _utc_epoch(s.updated_at) < int(want['since'])):
                missing.append('%s@%s' % (want['binary'], want['host']))
        if missing:
            beats.missing = missing
            return False
        return True
    beats.missing = []
    if spec['services']:
        _retry('a heartbeat newer than the start of %s' % ', '.join(
            w['binary'] + '@' + w['host'] for w in spec['services']),
            beats, timeout)
        log('nova: %d service(s) heartbeating since their start' %
            len(spec['services']))

    computes = spec['computes']
    if not computes:
        return
    def mapped():
        return set(computes) <= set(_db_query(
            spec['api_db'], 'SELECT host FROM host_mappings'))

    if not mapped():
        def discover():
            out = subprocess.run(spec['nova_manage'], capture_output=True,
                                 text=True)
            if out.returncode != 0:
                sys.stderr.write(out.stdout + out.stderr)
                raise SystemExit('nova-manage cell_v2 discover_hosts failed')
            return mapped()
        _retry('hosts %s mapped to cell1 by discover_hosts' % computes,
               discover, timeout, interval=2)
        log('nova: hosts mapped to cell1: %s' % ', '.join(sorted(computes)))

    def hypervisors():
        hv = {h.name: h for h in conn.compute.hypervisors(details=True)}
        return all(c in hv and hv[c].state == 'up' and hv[c].status ==
                   'enabled' for c in computes)
    _retry('hypervisors %s listed' % computes, hypervisors, timeout)

    def providers():
        for c in computes:
            rps = conn.placement.get('/resource_providers?name=%s' % c).json()
            rps = rps.get('resource_providers', [])
            if not rps:
                return False
            inv = conn.placement.get('/resource_providers/%s/inventories' %
                                     rps[0]['uuid']).json()
            if 'VCPU' not in inv.get('inventories', {}):
                return False
        return True
    _retry('resource providers of %s in placement' % computes, providers,
           timeout)
    log('nova: hypervisors and resource providers of %s ready' %
        ', '.join(computes))


def cmd_wait_cinder(args):
    """spec: {"services": [{"binary", "host", "since"}], "timeout": s}"""
    spec = _load(args[0])
    timeout = spec.get('timeout', 180)
    conn = _connect()

    def beats():
        now = {(s.binary, s.host): s for s in conn.block_storage.services()}
        for want in spec['services']:
            s = now.get((want['binary'], want['host']))
            if (s is None or s.state != 'up'
                    or _utc_epoch(s.updated_at) < int(want['since'])):
                return False
        return True
    if spec['services']:
        _retry('cinder services heartbeating since their start', beats,
               timeout)

    def pools():
        r = conn.block_storage.get('/scheduler-stats/get_pools')
        return r.status_code == 200 and r.json().get('pools')
    _retry('cinder-scheduler to know the volume backend', pools, timeout)
    log('cinder: volume service up and known to the scheduler')


def cmd_seed(args):
    """Flavors, image, public network.  Idempotent: creates what is missing.

    spec: {"flavors": [{name, vcpus, ram, disk}], "image": {name, file},
           "public": {network, subnet, physnet, cidr, gateway, pool_start,
           pool_end}}
    """
    spec = _load(args[0])
    conn = _connect()
    for f in spec['flavors']:
        if conn.compute.find_flavor(f['name'], ignore_missing=True) is None:
            conn.compute.create_flavor(name=f['name'], vcpus=f['vcpus'],
                                       ram=f['ram'], disk=f['disk'],
                                       is_public=True)
            log('flavor %s created' % f['name'])

    img = spec['image']
    image = conn.image.find_image(img['name'], ignore_missing=True)
    if image is not None and image.status != 'active':
        conn.image.delete_image(image)
        image = None
    if image is None:
        image = conn.image.create_image(
            name=img['name'], filename=img['file'], disk_format='raw',
            container_format='bare', visibility='public', wait=True,
            allow_duplicates=False, validate_checksum=False)
        log('image %s uploaded' % img['name'])

    pub = spec['public']
    net = conn.network.find_network(pub['network'])
    if net is None:
        net = conn.network.create_network(
            name=pub['network'], is_router_external=True, is_shared=True,
            provider_network_type='flat',
            provider_physical_network=pub['physnet'])
        log('network %s created' % pub['network'])
    subnet = conn.network.find_subnet(pub['subnet'], network_id=net.id)
    if subnet is None:
        conn.network.create_subnet(
            name=pub['subnet'], network_id=net.id, ip_version=4,
            cidr=pub['cidr'], gateway_ip=pub['gateway'], is_dhcp_enabled=False,
            allocation_pools=[{'start': pub['pool_start'],
                               'end': pub['pool_end']}])
        log('subnet %s created' % pub['subnet'])


def cmd_wait_heat(args):
    """spec: {"db": heat's database, "since": epoch, "workers": n,
    "timeout": s}: n heat-engine workers reported since `since`."""
    spec = _load(args[0])
    _check_name(spec['db'])
    since = datetime.datetime.fromtimestamp(
        int(spec['since']), datetime.timezone.utc).replace(tzinfo=None)

    def reported():
        kind, conn = _db_connect(spec['db'])
        quote = '"' if kind == 'postgresql' else '`'   # binary is reserved
        with conn.cursor() as cur:
            cur.execute("SELECT created_at, updated_at FROM service WHERE "
                        "%sbinary%s = 'heat-engine' AND deleted_at IS NULL"
                        % (quote, quote))
            rows = cur.fetchall()
        conn.close()
        return sum(1 for created, updated in rows
                   if max(created, updated or created) >= since) >= \
            spec['workers']
    _retry('%d heat-engine workers to report' % spec['workers'], reported,
           spec.get('timeout', 180))
    log('heat: %d engine workers up' % spec['workers'])


COMMANDS = {
    'db-list': cmd_db_list,
    'db-create': cmd_db_create,
    'db-drop': cmd_db_drop,
    'db-query': cmd_db_query,
    'keystone-setup': cmd_keystone_setup,
    'wait-nova': cmd_wait_nova,
    'wait-cinder': cmd_wait_cinder,
    'seed': cmd_seed,
    'wait-heat': cmd_wait_heat,
}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        raise SystemExit('usage: helper.py {%s} ...' % ','.join(COMMANDS))
    COMMANDS[sys.argv[1]](sys.argv[2:])


if __name__ == '__main__':
    main()
