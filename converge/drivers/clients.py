"""What plug-ins reach through ``self.clients``.

One `Clients` per engine process holds the engine's own stores (configs,
deployments, agents, wait conditions, scaling signals, facts). A plug-in
gets the view of it for its stack (`for_stack`): the same stores, and
the cloud the stack lives in: the simulated cloud (the embedded
default) or a real OpenStack named in clouds.yaml (drivers/openstack.py),
acting in the stack's project. Both implement drivers/cloud.py.
"""

import copy
import functools
import threading

import sqlalchemy as sa

from converge.db import api
from converge.db import models
from converge.drivers import access_keys
from converge.drivers import facts
from converge.drivers import scaling
from converge.drivers import software
from converge.drivers import waitconditions


_CONFIGS = models.SoftwareConfig.__table__
_CONFIG_GET = sa.select(_CONFIGS.c.id, _CONFIGS.c.name, _CONFIGS.c.group,
                        _CONFIGS.c.config).where(
    _CONFIGS.c.id == sa.bindparam('id'))
#: configs kept in memory per process: a thousand servers' deployments
#: read the same few configs thousands of times
CACHED_CONFIGS = 4096


class ConfigStore:
    """Software configs in the engine database (immutable rows: one read
    from the database is good until the config is deleted, and a config
    id is never reused)."""

    def __init__(self, db):
        self._db = db
        self._read = functools.lru_cache(CACHED_CONFIGS)(self._load)

    def create(self, id, name, group, config, options=None, inputs=None,
               outputs=None, project_id=None):
        body = {'config': config, 'options': options or {},
                'inputs': inputs or [], 'outputs': outputs or []}
        with self._db.write() as s:
            api.software_config_create(s, id, name, group, body,
                                       project_id)

    def _load(self, id):
        with self._db.connect() as conn:
            row = conn.execute(_CONFIG_GET, {'id': id}).first()
        if row is None:
            raise KeyError(id)   # not cached: it may be created later
        return dict(id=row.id, name=row.name, group=row.group,
                    **(row.config or {}))

    def get(self, id):
        try:
            # a copy: the caller may change what it gets
            return copy.deepcopy(self._read(id))
        except KeyError:
            return None

    def project_of(self, id):
        """The project a config was made by (None: none, or no config)."""
        with self._db.connect() as conn:
            return conn.execute(sa.select(_CONFIGS.c.project_id).where(
                _CONFIGS.c.id == id)).scalar()

    def delete(self, id):
        with self._db.write() as s:
            api.software_config_delete(s, id)
        self._read.cache_clear()


class Clients:
    def __init__(self, sim_url, db):
        self._sim_url = sim_url
        self._db = db
        self._compute = None
        #: a context manager factory: the engine's way to let go of its
        #: gate while a driver waits (set by the engine; drivers that run
        #: in this process wait inside it)
        self.waiting = None
        self.configs = ConfigStore(db)
        self.deployments = software.DeploymentStore(db)
        self.agents = software.AgentStore(db)
        #: OS::Heat::WaitConditionHandle registrations and signals
        self.waitconditions = waitconditions.WaitConditionStore(db)
        #: AWS::IAM::AccessKey secrets (derived, not stored)
        self.access_keys = access_keys.AccessKeyStore(db)
        #: OS::Heat::ScalingPolicy signals and the capacities they ask for
        self.scaling = scaling.ScalingStore(db)
        #: OS::Converge::FactStore: what the servers' agents published
        self.facts = facts.FactStore(db)
        #: (cloud name, project) -> StackClients: one per stack's cloud
        #: and project, made once (a real cloud's connection and token
        #: are kept in it)
        self._views = {}
        self._views_lock = threading.Lock()
        self._sim_clouds = {}

    @property
    def compute(self):
        if self._compute is None:
            from converge.drivers import limits
            from converge.drivers import sim
            compute = sim.SimCompute(self._sim_url, waiting=self.waiting)
            if limits.LimitedCompute.limited():
                # [compute] limits, counted across the deployment
                compute = limits.LimitedCompute(compute, self._db)
            self._compute = compute
        return self._compute

    @property
    def cloud(self):
        """The simulated cloud as the configured project sees it (the
        engine's own tools: bench, sim commands); plug-ins get their
        stack's through `for_stack`."""
        from converge import conf as conf_mod
        return self.sim_cloud(conf_mod.CONF.project_id)

    def sim_cloud(self, project_id):
        found = self._sim_clouds.get(project_id)
        if found is None:
            from converge.drivers.sim import objects
            found = objects.SimCloud(self._sim_url, project_id,
                                     compute=self.compute)
            self._sim_clouds[project_id] = found
        return found

    def for_stack(self, cloud, project_id):
        """What a plug-in of a stack in `cloud` (a clouds.yaml name, or
        None for the simulated cloud) and `project_id` reaches."""
        key = (cloud or None, project_id)
        view = self._views.get(key)
        if view is None:
            with self._views_lock:
                view = self._views.get(key)
                if view is None:
                    view = self._views[key] = StackClients(
                        self, cloud or None, project_id)
        return view


class StackClients:
    """The engine's stores (through the engine-wide Clients) and the
    cloud of one stack: ``compute`` (servers) and ``cloud`` (every other
    kind, drivers/cloud.py)."""

    def __init__(self, base, cloud, project_id):
        self._base = base
        self.cloud_name = cloud
        self.project_id = project_id
        self._real = None
        self._sim_compute = None

    def __getattr__(self, name):
        # the engine's stores and settings (configs, agents, waiting, ...)
        return getattr(self._base, name)

    def _openstack(self):
        if self._real is None:
            from converge.drivers import openstack
            self._real = openstack.connect(self.cloud_name, self.project_id)
        return self._real

    @property
    def compute(self):
        if self.cloud_name is None:
            # the stack's project's view: its servers are that project's,
            # another's are not found (as on a real cloud)
            base = self._base.compute
            mine = self._sim_compute
            if mine is None or mine[0] is not base:
                mine = self._sim_compute = (
                    base, base.for_project(self.project_id)
                    if self.project_id and hasattr(base, 'for_project')
                    else base)
            return mine[1]
        real = self._openstack()
        if real.limited is None:
            from converge.drivers import limits
            # [compute] limits hold on a real cloud too
            real.limited = limits.LimitedCompute(real.compute, self._base._db) \
                if limits.LimitedCompute.limited() else real.compute
        return real.limited

    @property
    def cloud(self):
        if self.cloud_name is None:
            return self._base.sim_cloud(self.project_id)
        return self._openstack()
