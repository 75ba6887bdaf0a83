"""Trunk driver for the bind-everything ML2 driver (ml2.py).

Neutron's trunk service plugin refuses to start unless a trunk driver
that is loaded says so (TrunkPlugin.check_driver_compatibility) and the
loaded drivers share a segmentation type. Its in-tree drivers load only
with the openvswitch or ovn mechanism driver; the devcloud's is
`devcloud`. This driver is loaded whenever `devcloud` is one of ML2's
mechanism drivers, takes the VIF type that driver binds (ovs), VLAN
segmentation, and bound parent ports (nothing is plugged anywhere, so a
trunk may be made after a server boots on its parent).

It is agentless (no RPC): the trunk plugin stores trunks and sub-ports
itself. With no dataplane to wait for, a trunk's status follows its
parent port's, as ML2/OVN's does: ACTIVE once the parent is ACTIVE
(bound), DOWN before.
"""
from neutron_lib.api.definitions import portbindings
from neutron_lib.callbacks import events
from neutron_lib.callbacks import registry
from neutron_lib.callbacks import resources
from neutron_lib import constants
from neutron_lib.plugins import directory
from neutron_lib.services.trunk import constants as trunk_consts
from oslo_config import cfg

from neutron.objects import trunk as trunk_objects
from neutron.services.trunk.drivers import base

NAME = 'devcloud'

DRIVER = None


class DevcloudTrunkDriver(base.DriverBase):

    @property
    def is_loaded(self):
        try:
            return NAME in cfg.CONF.ml2.mechanism_drivers
        except cfg.NoSuchOptError:
            return False

    @registry.receives(resources.TRUNK_PLUGIN, [events.AFTER_INIT])
    def register(self, resource, event, trigger, payload=None):
        super().register(resource, event, trigger, payload=payload)
        for what in (resources.TRUNK, resources.SUBPORTS):
            registry.subscribe(self._follow_parent, what,
                               events.AFTER_CREATE)
        registry.subscribe(self._follow_parent, resources.SUBPORTS,
                           events.AFTER_DELETE)
        registry.subscribe(self._parent_updated, resources.PORT,
                           events.AFTER_UPDATE)

    def _set_status(self, context, trunk_id, port_status):
        trunk = trunk_objects.Trunk.get_object(context, id=trunk_id)
        if trunk is None:
            return
        status = (trunk_consts.TRUNK_ACTIVE_STATUS
                  if port_status == constants.PORT_STATUS_ACTIVE
                  else trunk_consts.TRUNK_DOWN_STATUS)
        if trunk.status != status:
            trunk.update(status=status)

    def _follow_parent(self, resource, event, trigger, payload=None):
        trunk = payload.states[0]
        parent = directory.get_plugin().get_port(payload.context,
                                                 trunk.port_id)
        self._set_status(payload.context, trunk.id, parent.get('status'))

    def _parent_updated(self, resource, event, trigger, payload=None):
        port = payload.latest_state
        details = port.get('trunk_details')
        if not details:
            return
        if payload.states[0].get('status') != port.get('status'):
            self._set_status(payload.context, details['trunk_id'],
                             port.get('status'))


def register():
    """Make the driver (once); it registers itself with the trunk plugin
    when that plugin is loaded (AFTER_INIT), and is inert without it."""
    global DRIVER
    if DRIVER is None:
        DRIVER = DevcloudTrunkDriver(
            NAME, (portbindings.VIF_TYPE_OVS,),
            (trunk_consts.SEGMENTATION_TYPE_VLAN,),
            agent_type=None, can_trunk_bound_port=True)
    return DRIVER
