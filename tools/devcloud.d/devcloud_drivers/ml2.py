"""ML2 mechanism driver that binds every port without any agent.

With no L2 agent running, Neutron's own mechanism drivers refuse to bind
ports, Nova then sees vif_type 'binding_failed' and the boot fails.  This
driver binds the first segment offered to it, for every host, as an OVS
VIF, and marks the port ACTIVE, which is all that Nova's fake virt driver
needs.  Nothing is plugged anywhere: no packet ever flows.
"""
from neutron_lib.api.definitions import portbindings
from neutron_lib import constants
from neutron_lib.plugins.ml2 import api


class BindEverythingDriver(api.MechanismDriver):

    def initialize(self):
        # ML2 (the core plugin) initializes its mechanism drivers before
        # any service plugin is made, so the trunk driver is subscribed
        # when the trunk plugin announces itself (AFTER_INIT)
        from devcloud_drivers import trunk
        trunk.register()

    @property
    def connectivity(self):
        return portbindings.CONNECTIVITY_L2

    def bind_port(self, context):
        vnic_type = context.current.get(portbindings.VNIC_TYPE,
                                        portbindings.VNIC_NORMAL)
        if vnic_type != portbindings.VNIC_NORMAL:
            return
        for segment in context.segments_to_bind:
            context.set_binding(
                segment[api.ID],
                portbindings.VIF_TYPE_OVS,
                {portbindings.CAP_PORT_FILTER: True,
                 portbindings.OVS_HYBRID_PLUG: False},
                status=constants.PORT_STATUS_ACTIVE)
            return
