"""What Heat's transports hand out for a stack's servers, for the
masking of credentials (engine/secrecy.py): a caller the policy does not
let see credentials reads ``******`` in their place, as it does an agent
token. All of it is derived again, nothing is stored: the metadata and
signal URLs' signatures, the CFN secret key, the Keystone password."""

import sqlalchemy as sa

from converge.db import software as db_software
from converge.transports import cfn_keys
from converge.transports import keystone_users
from converge.transports import urls


def of_servers(db, session, agents):
    """The credentials of `agents` (rows with agent_id, server_id,
    created_at): for each, its key pair's secret, its Keystone password
    and its URLs' signatures (every run of a deployment on its server)."""
    found = []
    servers = [a.server_id for a in agents if a.server_id]
    runs = {}
    if servers:
        table = db_software.DEPLOYMENTS
        for dep, run, server in session.execute(sa.select(
                table.c.id, table.c.run, table.c.server_id).where(
                table.c.server_id.in_(servers))):
            runs.setdefault(server, []).append((dep, run))
    for a in agents:
        found.append(cfn_keys.secret_key(db, a.agent_id))
        found.append(keystone_users.password(db, a.agent_id))
        found.extend(urls.signatures(db, a.agent_id, a.created_at,
                                     runs.get(a.server_id, ())))
    return found
