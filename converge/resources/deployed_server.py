"""OS::Heat::DeployedServer: a server that exists outside the cloud.

As Heat's: nothing is booted, nothing asked of Nova. The resource stands
for a machine the operator already has (TripleO's pre-provisioned nodes)
so that software deployments can name it (``server: {get_resource:
...}``). Its physical id is its own (derived from the resource), and the
deployments written for it are what `converge deployment export` turns
into an Ansible inventory and playbooks and `converge deployment run`
pushes over SSH (config-download, docs/software.md).

Like a SOFTWARE_CONFIG server, it has one agent credential (made with it,
revoked with it), bound to its own id: an agent installed on the machine
by hand could pull its deployments; the push transport records results
under the same credential's rules. The credential's id is the server's
id, which is how the deployments tell a deployed server (that no cloud
knows) from a Nova server that is gone.
"""

from converge.resources import base
from converge.resources import none
from converge.resources import properties as p
from converge.resources import server

TRANSPORTS = server.TRANSPORTS


class DeployedServer(base.Resource):
    logical = True

    properties_schema = {
        'name': p.Schema(
            p.STRING, 'Name of the server (how `converge deployment '
            'export` finds its address: the simulator\'s host of that '
            'name, else the name itself).', update_allowed=True),
        'metadata': p.Schema(
            p.MAP, 'Arbitrary key/value metadata to store for this server. '
            'Keys ansible_host, ansible_port and ansible_user, when set, '
            'are where `converge deployment export` reaches it.',
            update_allowed=True, default={}),
        'software_config_transport': p.Schema(
            p.STRING, 'How the server should receive the metadata required '
            'for software configuration (a push by `converge deployment '
            'run` needs none of them).', default='POLL_SERVER_CFN',
            allowed_values=TRANSPORTS, update_allowed=True),
        # as a Nova server's (Heat's DeployedServer shares them)
        'deployment_swift_data':
            server.Server.properties_schema['deployment_swift_data'],
    }

    attributes_schema = {
        'name': 'Name of the server.',
        'os_collect_config':
            server.Server.attributes_schema['os_collect_config'],
    }

    def _agents(self):
        return getattr(self.clients, 'agents', None)

    def _register(self):
        agents = self._agents()
        if agents is not None:
            agents.register(self.physical_id, self.stack.id,
                            getattr(self.stack, 'project_id', 'converge'),
                            self.name)
            agents.bind(self.physical_id, self.physical_id)

    def create(self):
        self.physical_id = none.derived_uuid(self.uuid, 'deployed-server')
        self._register()

    def adopt(self, observed):
        self._register()

    def update(self, prior, observed):
        # name, metadata and transports are the stack's record only
        if not self.physical_id:
            self.create()

    def delete(self):
        agents = self._agents()
        if agents is not None and self.physical_id:
            agents.revoke(self.physical_id)

    def server_name(self):
        return self.properties.get('name') or none.physical_resource_name(
            self)

    def get_attributes(self, observed):
        return {'name': self.server_name(), 'os_collect_config': {}}
