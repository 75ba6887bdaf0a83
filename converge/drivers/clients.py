"""What plug-ins reach through ``self.clients``."""

from converge.db import api
from converge.drivers import software
from converge.drivers import waitconditions


class ConfigStore:
    """Software configs in the engine database (immutable rows)."""

    def __init__(self, db):
        self._db = db

    def create(self, id, name, group, config, options=None, inputs=None,
               outputs=None):
        body = {'config': config, 'options': options or {},
                'inputs': inputs or [], 'outputs': outputs or []}
        with self._db.write() as s:
            api.software_config_create(s, id, name, group, body)

    def get(self, id):
        with self._db.read() as s:
            row = api.software_config_get(s, id)
            if row is None:
                return None
            return dict(id=row.id, name=row.name, group=row.group,
                        **row.config)

    def delete(self, id):
        with self._db.write() as s:
            api.software_config_delete(s, id)


class Clients:
    def __init__(self, sim_url, db):
        self._sim_url = sim_url
        self._db = db
        self._compute = None
        self.configs = ConfigStore(db)
        self.deployments = software.DeploymentStore(db)
        self.agents = software.AgentStore(db)
        #: OS::Heat::WaitConditionHandle registrations and signals
        self.waitconditions = waitconditions.WaitConditionStore(db)

    @property
    def compute(self):
        if self._compute is None:
            from converge.drivers import limits
            from converge.drivers import sim
            compute = sim.SimCompute(self._sim_url)
            if limits.LimitedCompute.limited():
                # [compute] limits, counted across the deployment
                compute = limits.LimitedCompute(compute, self._db)
            self._compute = compute
        return self._compute
