"""What the software plug-ins reach through ``self.clients``: the
deployments servers' agents pull, and the agents' credentials.

These live in the engine's database (the agents reach them through
converge-api, never directly).
"""

import threading
import time

from converge import conf as conf_mod
from converge.db import software as db_software
from converge.drivers import tokens
from converge.transports import urls


class Changes:
    """Tells the long polls of this process that a deployment changed
    (here), so they answer at once; a change made by another process is
    seen at their next look."""

    def __init__(self):
        self._cond = threading.Condition()
        self._gen = 0

    def mark(self):
        with self._cond:
            return self._gen

    def notify(self):
        with self._cond:
            self._gen += 1
            self._cond.notify_all()

    def wait(self, mark, timeout):
        """True when a change came within `timeout`."""
        with self._cond:
            return self._cond.wait_for(lambda: self._gen != mark, timeout)


CHANGES = Changes()


def _row(row):
    return None if row is None else dict(row._mapping)


class DeploymentStore:
    #: the reason a NO_SIGNAL deployment is written with (its agent is
    #: still sent its config, to run it once)
    NO_SIGNAL_REASON = db_software.NO_SIGNAL_REASON

    def __init__(self, db):
        self._db = db

    def get(self, deployment_id):
        with self._db.connect() as conn:
            return _row(db_software.deployment_get(conn, deployment_id))

    def put(self, **values):
        """Insert or replace a deployment (id, stack_id, project_id,
        resource_name, server_id, name, config, action, run, status,
        status_reason, input_values, output_values)."""
        with self._db.begin() as conn:
            db_software.deployment_put(conn, values)
        CHANGES.notify()

    @staticmethod
    def still_running(runs):
        """A `base.Wait` guard: whether each deployment of `runs` ({id:
        run}) is still running that run, read in the transaction that
        records the wait (its rows locked: a signal for one of them is
        committed before, and seen here, or after, and finds the wait)."""
        def still(conn):
            return db_software.deployments_running(conn, runs)
        return still

    def signal_url(self, deployment_id, run, server_id):
        """The signed URL heat-config-notify or cfn-signal sends run
        `run`'s result to (transports/urls.py), valid as long as the
        server's credential's URLs (made when it was)."""
        from converge.transports import metadata
        with self._db.connect() as conn:
            agent = metadata.agent_for_server(conn, server_id) \
                if server_id else None
        since = agent.created_at if agent is not None else time.time()
        return urls.signal_url(self._db, deployment_id, run, since)

    def heat_signal_inputs(self, server_id):
        """HEAT_SIGNAL's Keystone inputs for a deployment on `server_id`,
        when that server has a Keystone user; else None."""
        from converge.transports import keystone_users
        from converge.transports import metadata
        with self._db.connect() as conn:
            agent = metadata.agent_for_server(conn, server_id)
        user_id = agent is not None and keystone_users.user_of(
            self._db, agent.agent_id)
        if not user_id:
            return None
        return keystone_users.signal_inputs(self._db, agent.agent_id,
                                            user_id, agent.project_id)

    def delete(self, deployment_id):
        with self._db.begin() as conn:
            db_software.deployment_delete(conn, deployment_id)
        CHANGES.notify()

    def for_server(self, server_id):
        with self._db.connect() as conn:
            return [_row(r) for r in
                    db_software.deployments_for_server(conn, server_id)]


class AgentStore:
    """One credential per server (not a user per deployment)."""

    def __init__(self, db):
        self._db = db

    def register(self, agent_id, stack_id, project_id, resource_name):
        """The credential for a server about to boot: (endpoint, token)."""
        with self._db.begin() as conn:
            db_software.agent_register(conn, agent_id, stack_id, project_id,
                                       resource_name)
        return conf_mod.api_endpoint(), tokens.token_for(self._db, agent_id)

    def collect_config(self, agent_id, transport, stack_name,
                       resource_name):
        """The os-collect-config section of a server of `transport`
        (transports/metadata.py), for its credential `agent_id`."""
        from converge.transports import metadata
        with self._db.connect() as conn:
            row = db_software.agent_get(conn, agent_id)
        if row is None:
            return {}
        return metadata.collect_config(self._db, transport, agent_id,
                                       row.created_at, stack_name,
                                       resource_name, row.stack_id,
                                       row.project_id)

    def server_user(self, agent_id, project_id):
        """A POLL_SERVER_HEAT server's Keystone user, made (once) where a
        Keystone is configured: its id, or None
        (transports/keystone_users.py)."""
        from converge.transports import keystone_users
        if not keystone_users.configured():
            return None
        user_id = keystone_users.ensure(self._db, agent_id, project_id)
        keystone_users.remember(self._db, agent_id, user_id)
        return user_id

    def server_user_revoke(self, agent_id):
        from converge.transports import keystone_users
        user_id = keystone_users.user_of(self._db, agent_id)
        if user_id is None:
            return
        if keystone_users.configured():
            keystone_users.revoke(user_id)
        keystone_users.forget(self._db, agent_id, user_id)

    def bind(self, agent_id, server_id):
        with self._db.begin() as conn:
            db_software.agent_bind(conn, agent_id, server_id)
        CHANGES.notify()

    def deployed_server(self, server_id):
        """Whether `server_id` names a live OS::Heat::DeployedServer."""
        with self._db.connect() as conn:
            return db_software.deployed_server(conn, server_id)

    def revoke(self, agent_id):
        with self._db.begin() as conn:
            db_software.agent_revoke(conn, agent_id)
        CHANGES.notify()
