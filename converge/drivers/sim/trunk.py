"""Neutron's trunks on the sim (the trunk extension's API, its checks and
refusals as a template sees them).

A trunk sits on a parent port and has VLAN sub-ports, each another port
with a segmentation (type, id) unique on the trunk. A port is the parent
of one trunk at most, a sub-port of one trunk at most, and never both; a
port that is either is not deleted (409), as Neutron's
enforce_port_deletion_rules refuses. A disabled trunk (admin_state_up
false) takes no sub-port change and is not deleted.

The trunk's status follows its parent port's, as the devcloud's trunk
driver does (there is no dataplane to wait for): ACTIVE when the parent
is ACTIVE (bound), DOWN before. The parent port shows Neutron's
``trunk_details`` (the trunk's id and its sub-ports with their MAC
addresses).

The ports carry their part in their own bodies, out of the API's view
(``_trunk``: the trunk a parent port heads, ``_subport_of``: the trunk a
sub-port belongs to), so a port's show and delete look at no other
object unless it is a trunk's.
"""

from converge.drivers.sim.neutron import COMMON, NeutronKind, boolean, \
    port_or_404, required
from converge.drivers.sim.rows import bad, conflict

SEGMENTATION_TYPES = ('vlan',)


def port_in_use(ctx, port):
    """Neutron's refusal of a port's delete while a trunk uses it (None
    when none does)."""
    if port.body.get('_trunk') and ctx.live('trunk', port.body['_trunk']):
        return conflict('Port %s is currently a parent port for trunk %s.'
                        % (port.id, port.body['_trunk']))
    if port.body.get('_subport_of') and ctx.live(
            'trunk', port.body['_subport_of']):
        return conflict('Port %s is currently a subport for trunk %s.'
                        % (port.id, port.body['_subport_of']))
    return None


def trunk_details(ctx, port):
    """A parent port's ``trunk_details``, or None for any other port."""
    trunk = ctx.live('trunk', port.body.get('_trunk'))
    if trunk is None:
        return None
    subs = []
    for sp in trunk.body['sub_ports']:
        sub = ctx.live('port', sp['port_id'])
        subs.append(dict(sp, mac_address=sub.body.get('mac_address')
                         if sub is not None else None))
    return {'trunk_id': trunk.id, 'sub_ports': subs}


def _segmentation(sp):
    if not isinstance(sp, dict):
        raise bad('Invalid input for sub_ports. Reason: %r is not a '
                  'dictionary.' % (sp,))
    unknown = sorted(set(sp) - {'port_id', 'segmentation_type',
                                'segmentation_id'})
    if unknown:
        raise bad('Invalid input for sub_ports. Reason: Unexpected keys '
                  'supplied: %s.' % ', '.join(unknown))
    seg_type = sp.get('segmentation_type')
    if seg_type not in SEGMENTATION_TYPES:
        raise bad('Invalid input for operation: Segmentation type %s is '
                  'not supported.' % seg_type)
    try:
        seg_id = int(sp.get('segmentation_id'))
    except (TypeError, ValueError):
        seg_id = 0
    if not 1 <= seg_id <= 4094:
        raise bad('Invalid input for operation: Segmentation ID %s is out '
                  'of range 1 to 4094.' % sp.get('segmentation_id'))
    return {'port_id': required(sp, 'port_id', 'sub_port'),
            'segmentation_type': seg_type, 'segmentation_id': seg_id}


class Trunk(NeutronKind):
    name = 'trunk'
    title = 'Trunk'
    fields = COMMON + ('port_id', 'admin_state_up', 'sub_ports')
    updatable = COMMON + ('admin_state_up', 'sub_ports')

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        parent = port_or_404(ctx, required(body, 'port_id', self.name))
        if parent.body.get('_trunk') and ctx.live('trunk',
                                                  parent.body['_trunk']):
            raise conflict('Port %s is in use by another trunk.' % parent.id)
        if parent.body.get('_subport_of') and ctx.live(
                'trunk', parent.body['_subport_of']):
            raise conflict('Port %s is currently a subport for trunk %s.' % (
                parent.id, parent.body['_subport_of']))
        stored = dict(self.base(body), **{
            'port_id': parent.id, 'sub_ports': [],
            'admin_state_up': boolean(body.get('admin_state_up', True),
                                      'admin_state_up')})
        obj = self.new(ctx, stored, key, parent=parent.id)
        subs = self._checked(ctx, obj, body.get('sub_ports') or [])
        obj.body['sub_ports'] = subs
        ctx.insert(obj)
        parent.body['_trunk'] = obj.id
        ctx.save(parent)
        self._mark(ctx, obj.id, subs)
        return obj

    def _checked(self, ctx, trunk, adding):
        """The sub-ports `adding` (API dicts) once Neutron's checks pass:
        each port exists, is nobody's sub-port nor any trunk's parent, and
        no (type, id) is taken on the trunk nor given twice."""
        if not isinstance(adding, list):
            raise bad('Invalid input for sub_ports. Reason: %r is not a '
                      'list.' % (adding,))
        subs = [_segmentation(sp) for sp in adding]
        taken = {(s['segmentation_type'], s['segmentation_id'])
                 for s in trunk.body['sub_ports']}
        ports = {s['port_id'] for s in trunk.body['sub_ports']}
        for sp in subs:
            port = port_or_404(ctx, sp['port_id'])
            sp['port_id'] = port.id
            if port.id == trunk.body['port_id'] or (
                    port.body.get('_trunk') and
                    ctx.live('trunk', port.body['_trunk'])):
                raise conflict('Port %s is currently a parent port for '
                               'trunk %s.' % (port.id, port.body.get(
                                   '_trunk') or trunk.id))
            owner = port.body.get('_subport_of')
            if port.id in ports or (owner and ctx.live('trunk', owner)):
                raise conflict('Port %s is currently a subport for trunk '
                               '%s.' % (port.id, owner or trunk.id))
            seg = (sp['segmentation_type'], sp['segmentation_id'])
            if seg in taken:
                raise conflict('segmentation type %s and segmentation id %s '
                               'already in use on trunk %s.' % (
                                   seg[0], seg[1], trunk.id))
            taken.add(seg)
            ports.add(port.id)
        return subs

    @staticmethod
    def _mark(ctx, trunk_id, subs):
        for sp in subs:
            port = ctx.live('port', sp['port_id'])
            if port is not None:
                if trunk_id:
                    port.body['_subport_of'] = trunk_id
                else:
                    port.body.pop('_subport_of', None)
                ctx.save(port)

    def show(self, ctx, obj):
        view = super().show(ctx, obj)
        parent = ctx.live('port', obj.body['port_id'])
        view['status'] = 'ACTIVE' if parent is not None and \
            parent.status == 'ACTIVE' else 'DOWN'
        return view

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        self.set_common(obj, body)
        if 'admin_state_up' in body:
            obj.body['admin_state_up'] = boolean(body['admin_state_up'],
                                                 'admin_state_up')
        if 'sub_ports' in body:
            self._set_sub_ports(ctx, obj, body['sub_ports'] or [])
        self.revised(obj)
        return ctx.save(obj)

    def _set_sub_ports(self, ctx, obj, wanted):
        """The whole list wanted (drivers/cloud.py): those not in it
        removed, then those missing added, as Neutron's remove_subports
        and add_subports calls would."""
        wanted = [_segmentation(sp) for sp in wanted]
        have = obj.body['sub_ports']
        going = [sp for sp in have if sp not in wanted]
        coming = [sp for sp in wanted if sp not in have]
        if not going and not coming:
            return
        if not obj.body['admin_state_up']:
            raise conflict('Trunk %s is currently disabled.' % obj.id)
        self._mark(ctx, None, going)
        obj.body['sub_ports'] = [sp for sp in have if sp in wanted]
        added = self._checked(ctx, obj, coming)
        obj.body['sub_ports'] += added
        self._mark(ctx, obj.id, added)

    def delete(self, ctx, obj, latency):
        if not obj.body['admin_state_up']:
            raise conflict('Trunk %s is currently disabled.' % obj.id)
        self._mark(ctx, None, obj.body['sub_ports'])
        parent = ctx.live('port', obj.body['port_id'])
        if parent is not None and parent.body.get('_trunk') == obj.id:
            parent.body.pop('_trunk')
            ctx.save(parent)
        ctx.remove(obj)


KINDS = {'trunk': Trunk()}
