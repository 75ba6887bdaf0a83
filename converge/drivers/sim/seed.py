"""What every sim cloud starts with, owned by its admin project: the
shared network ``private`` (10.0.0.0/16, where servers that name no
network are), the external network ``public`` (172.24.4.0/24, for
routers' gateways and floating IPs), the public images cirros, fedora,
ubuntu and heat-agents (Heat's guest tooling: converge/agent/image.py)
and Nova's five default flavors. Their ids are the same in
every sim (derived from their names).

Planted once per database (store.get_engine), in one transaction with
the marker that says so: processes starting together plant it once,
the loser of the race colliding with the marker.
"""

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from converge.drivers.sim import glance
from converge.drivers.sim import neutron
from converge.drivers.sim import nova
from converge.drivers.sim import rows

#: the marker the seed is planted with: a row of sim_objects of its own
#: kind (no call looks at), whose unique identity a second planter
#: collides with
MARKER = 'seed:1'

NETWORKS = (
    # name, its network's fields, its subnet's
    ('private', {'shared': True},
     {'name': 'private-subnet', 'cidr': '10.0.0.0/16',
      'gateway_ip': '10.0.0.1'}),
    ('public', {'shared': True, 'router:external': True},
     {'name': 'public-subnet', 'cidr': '172.24.4.0/24',
      'gateway_ip': '172.24.4.1', 'enable_dhcp': False}),
)
IMAGES = ('cirros', 'fedora', 'ubuntu', 'heat-agents')
#: Nova's default flavors: id, name, ram (MB), vcpus, disk (GB)
FLAVORS = (('1', 'm1.tiny', 512, 1, 1), ('2', 'm1.small', 2048, 1, 20),
           ('3', 'm1.medium', 4096, 2, 40), ('4', 'm1.large', 8192, 4, 80),
           ('5', 'm1.xlarge', 16384, 8, 160))


#: planted by a seed that has image heat-agents: a database seeded
#: before it gets that image once (`ensure`)
MARKER_IMAGES = 'seed:images:2'


def ensure(engine):
    """Plant the seed unless this database has it (and the images added
    to the seed since, once)."""
    for marker, planter in ((MARKER, plant), (MARKER_IMAGES, _add_images)):
        marked = sa.select(rows.C.seq).where(rows.C.live_ident == marker)
        with engine.connect() as conn:
            conn.execution_options(sim_readonly=True)   # no write lock
            if conn.execute(marked).first() is not None:
                continue
        try:
            with engine.begin() as conn:
                if conn.execute(marked).first() is None:
                    planter(conn)
        except sa_exc.IntegrityError:
            pass   # another process planted it first


def _add_images(conn, now=0.0):
    """The seed's images a database lacks, with the marker that says
    they were added."""
    ctx = rows.Ctx(conn, now, rows.ADMIN_PROJECT)
    ctx.derive_ids = True
    ctx.insert(rows.Obj(id='seed-images', kind='seed',
                        project_id=ctx.project_id, live_ident=MARKER_IMAGES,
                        body={}))
    kind = glance.KINDS['image']
    for name in IMAGES:
        if ctx.live('image', rows.derived_id('image', name)) is None:
            kind.create(ctx, {
                'name': name, 'disk_format': 'qcow2',
                'container_format': 'bare', 'visibility': 'public'},
                None, 0)


def plant(conn, now=0.0):
    """Make the seeded objects in `conn`'s transaction."""
    ctx = rows.Ctx(conn, now, rows.ADMIN_PROJECT)
    ctx.derive_ids = True
    ctx.insert(rows.Obj(id='seed', kind='seed', project_id=ctx.project_id,
                        live_ident=MARKER, body={}))
    ctx.insert(rows.Obj(id='seed-images', kind='seed',
                        project_id=ctx.project_id, live_ident=MARKER_IMAGES,
                        body={}))
    kinds = dict(neutron.KINDS, **glance.KINDS, **nova.KINDS)
    for name, fields, subnet in NETWORKS:
        net = kinds['network'].create(ctx, dict(fields, name=name), None, 0)
        made = kinds['subnet'].create(ctx, dict(subnet, network_id=net.id),
                                      None, 0)
        if name == 'private':
            # the servers booted on 'private' by name take its addresses
            # from the bottom (api.py's counter): ports take from the top
            made.body['_from_top'] = True
            ctx.save(made, touch=False)
    for name in IMAGES:
        kinds['image'].create(ctx, {
            'name': name, 'disk_format': 'qcow2', 'container_format': 'bare',
            'visibility': 'public'}, None, 0)
    for flavor_id, name, ram, vcpus, disk in FLAVORS:
        kinds['flavor'].create(ctx, {'id': flavor_id, 'name': name,
                                     'ram': ram, 'vcpus': vcpus,
                                     'disk': disk}, None, 0)
