"""What plug-ins reach through ``self.clients``."""

import copy
import functools

import sqlalchemy as sa

from converge.db import api
from converge.db import models
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
        #: OS::Heat::ScalingPolicy signals and the capacities they ask for
        self.scaling = scaling.ScalingStore(db)
        #: OS::Converge::FactStore: what the servers' agents published
        self.facts = facts.FactStore(db)

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
