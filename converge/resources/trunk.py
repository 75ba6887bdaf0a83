"""OS::Neutron::Trunk, as Heat's (heat/engine/resources/openstack/neutron/
trunk.py): a parent port and its VLAN sub-ports, made through
``clients.cloud`` (kind trunk).

Heat's semantics, kept here:
- the name left out is Heat's physical name; ``port`` and each
  sub-port's ``port`` take a name or an id;
- ``port`` is immutable: a changed parent port fails the update with
  Heat's NotSupported message (Heat neither changes nor replaces it);
- ``sub_ports`` change in place, sub-port by sub-port: the ones no
  longer wanted are removed and the new ones added (in that order, as
  Heat does: a port cannot be two sub-ports at once), so a changed
  segmentation_id is that sub-port removed and added again, and the
  sub-ports that stay are never touched;
- a create or update is complete once the trunk is ACTIVE or DOWN
  (BUILD is waited for; ERROR and DEGRADED fail), Heat's is_built.

Neutron's trunk extension is required: a cloud without it refuses the
type at validate (ResourceTypeUnavailable, engine/stacks.py).
"""

from converge import exception
from converge.resources import cloud_object as co
from converge.resources import neutron
from converge.resources import properties as p

#: Heat's allowed segmentation types (Neutron's trunk drivers: vlan)
SEGMENTATION_TYPES = ('vlan',)


def sub_port_set(sub_ports):
    """A trunk's sub-ports as a set of (port_id, type, id), for
    comparing what Neutron shows with what was asked (the order, and the
    mac_address a port's trunk_details adds, mean nothing)."""
    out = set()
    for sp in sub_ports or []:
        seg_id = sp.get('segmentation_id')
        try:
            seg_id = int(seg_id)
        except (TypeError, ValueError):
            pass
        out.add((sp.get('port_id'), sp.get('segmentation_type'), seg_id))
    return out


class Trunk(neutron.NeutronObject):
    """OS::Neutron::Trunk: a trunk on a parent port, with sub-ports."""

    kind = 'trunk'
    title = 'Trunk'
    #: (Heat's client name, catalog type, Neutron extension)
    required_service = ('neutron', 'network', 'trunk')
    update_fields = ('name', 'description', 'admin_state_up', 'sub_ports')
    drift_fields = update_fields
    # Heat sends no admin_state_up it was not given; one taken out of the
    # template is left as Neutron has it
    cleared = {'description': '', 'admin_state_up': co.KEEP}

    properties_schema = {
        'name': p.Schema(
            p.STRING, 'A string specifying a symbolic name for the trunk, '
            'which is not required to be uniqe.', update_allowed=True),
        'port': p.Schema(
            p.STRING, 'ID or name of a port to be used as a parent port.',
            required=True, immutable=True, constraint='neutron.port'),
        'sub_ports': p.Schema(
            p.LIST, 'List with 0 or more map elements containing subport '
            'details.', update_allowed=True, schema={
                'port': p.Schema(
                    p.STRING, 'ID or name of a port to be used as a '
                    'subport.', required=True, constraint='neutron.port'),
                'segmentation_type': p.Schema(
                    p.STRING, 'Segmentation type to be used on the '
                    'subport.', required=True,
                    allowed_values=SEGMENTATION_TYPES),
                'segmentation_id': p.Schema(
                    p.INTEGER, 'The segmentation ID on which the subport '
                    'network is presented to the instance.', required=True,
                    min=1, max=4094),
            }),
        'description': p.Schema(
            p.STRING, 'Description for the trunk.', update_allowed=True),
        'admin_state_up': p.Schema(
            p.BOOLEAN, 'Enable/disable subport addition, removal and trunk '
            'delete.', update_allowed=True),
    }

    attributes_schema = {
        'port_id': 'ID or name of a port used as a parent port.',
    }

    def make_body(self):
        props = self.properties
        body = {'name': self.physical_name(),
                'port_id': self.resolve('port', props.get('port'), 'port'),
                'sub_ports': [
                    {'port_id': self.resolve('port', sp['port'],
                                             'sub_ports'),
                     'segmentation_type': sp['segmentation_type'],
                     'segmentation_id': sp['segmentation_id']}
                    for sp in props.get('sub_ports') or []]}
        for prop in ('description', 'admin_state_up'):
            if props.get(prop) is not None:
                body[prop] = props[prop]
        return body

    def same(self, field, seen, wanted):
        if field == 'sub_ports':
            return sub_port_set(seen) == sub_port_set(wanted)
        return super().same(field, seen, wanted)

    def check_update(self, prior, obj):
        # Heat's port is immutable: its change is refused, not replaced
        if prior.get('port') != self.properties.get('port'):
            raise exception.ResourceFailure(
                'NotSupported: resources.%s: Update to properties port of '
                '%s (OS::Neutron::Trunk) is not supported.' % (
                    self.name, self.name))

    def needs_replace(self, prior):
        # the one property that is not update_allowed is refused above
        return False

    def _settle(self, obj, action):
        # Heat's is_built: DEGRADED (some sub-ports failed) is an error
        if obj.get('status') == 'DEGRADED':
            self.data.pop('waiting', None)
            raise exception.ResourceFailure(
                '%s went to status DEGRADED during %s' % (self.label(obj),
                                                          action))
        return super()._settle(obj, action)
