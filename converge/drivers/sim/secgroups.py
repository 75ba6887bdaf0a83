"""Neutron's security groups and their rules on the sim.

A project's ``default`` group is made on its first need (a port made
without groups, a look for it), as Neutron does: egress anywhere, ingress
from its own members. A new group lets everything out (its two egress
rules). A rule's fields are its identity: Neutron refuses a twin, and a
create with the fields of a rule there is finds it. A group a port uses
is not deleted (409).
"""

import hashlib
import ipaddress

from converge.drivers.sim import rows
from converge.drivers.sim.neutron import COMMON, NeutronKind, boolean, required
from converge.drivers.sim.rows import bad, conflict, missing


# -- security groups --------------------------------------------------------

def default_group(ctx, project):
    """The project's ``default`` security group, made on first need as
    Neutron does (egress anywhere, ingress from its own members)."""
    ident = 'security_group:default:%s' % project
    found = ctx.held('live_ident', ident)
    if found is not None:
        return found
    group = SECURITY_GROUP.new(ctx, dict(SECURITY_GROUP.base({}), **{
        'name': 'default', 'stateful': True, 'shared': False,
        'description': 'Default security group'}), None,
        project_id=project, ident=ident)
    ctx.insert(group)
    for ethertype in ('IPv4', 'IPv6'):
        for direction, remote in (('egress', None), ('ingress', group.id)):
            RULE.add(ctx, group, {'direction': direction,
                                  'ethertype': ethertype,
                                  'remote_group_id': remote}, None)
    return group


class SecurityGroup(NeutronKind):
    name = 'security_group'
    title = 'Security group'
    fields = COMMON + ('stateful',)
    updatable = COMMON + ('stateful',)

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        if body.get('name') == 'default':
            raise conflict('Default security group already exists.')
        stored = dict(self.base(body), stateful=boolean(
            body.get('stateful', True), 'stateful'), shared=False)
        group = ctx.insert(self.new(ctx, stored, key))
        # as Neutron: a new group lets everything out
        for ethertype in ('IPv4', 'IPv6'):
            RULE.add(ctx, group, {'direction': 'egress',
                                  'ethertype': ethertype}, None)
        return group

    def show(self, ctx, obj):
        view = super().show(ctx, obj)
        view.pop('status')
        view['security_group_rules'] = [
            RULE.show(ctx, r) for r in ctx.all(
                'security_group_rule', parent=obj.id, visible_only=False)]
        return view

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        if obj.body['name'] == 'default' and body.get(
                'name', 'default') != 'default':
            raise conflict('Insufficient rights for renaming the default '
                           'security group.')
        if obj.body['name'] != 'default' and body.get('name') == 'default':
            raise conflict('Default security group already exists.')
        self.set_common(obj, body)
        if 'stateful' in body:
            obj.body['stateful'] = boolean(body['stateful'], 'stateful')
        self.revised(obj)
        return ctx.save(obj)

    def delete(self, ctx, obj, latency):
        if obj.live_ident and not ctx.admin:
            raise conflict('Insufficient rights for removing default '
                           'security group.')
        if ctx.all('port', visible_only=False,
                   where=rows.C.body.like('%%"%s"%%' % obj.id)):
            raise conflict('Security Group %s in use.' % obj.id)
        for rule in ctx.all('security_group_rule', parent=obj.id,
                            visible_only=False):
            ctx.remove(rule)
        # rules of other groups that let this one's members in go with it
        for rule in ctx.all('security_group_rule', visible_only=False,
                            where=rows.C.device == obj.id):
            ctx.remove(rule)
        ctx.remove(obj)


PROTOCOL_NUMBERS = {'1': 'icmp', '6': 'tcp', '17': 'udp', '58': 'ipv6-icmp',
                    '132': 'sctp', '33': 'dccp', '136': 'udplite'}
PORTED = ('tcp', 'udp', 'sctp', 'dccp', 'udplite')
ICMP = ('icmp', 'ipv6-icmp', 'icmpv6')


class SecurityGroupRule(NeutronKind):
    """A rule: Neutron refuses a twin (the same fields in one group), so
    its fields are its identity."""

    name = 'security_group_rule'
    title = 'Security group rule'
    fields = ('security_group_id', 'direction', 'ethertype', 'protocol',
              'port_range_min', 'port_range_max', 'remote_ip_prefix',
              'remote_group_id', 'description', 'tags',
              'remote_address_group_id')

    def identity(self, ctx, body):
        try:
            rule = self.normal(body)
        except Exception:
            return None
        if not rule.get('security_group_id'):
            return None
        return _rule_ident(rule)

    @staticmethod
    def normal(body):
        """The rule's fields as Neutron compares them (validated)."""
        direction = body.get('direction')
        if direction is None:
            raise bad("Failed to parse request. Required attribute "
                      "'direction' not specified")
        if direction not in ('ingress', 'egress'):
            raise bad("Invalid input for direction. Reason: '%s' is not in "
                      "['ingress', 'egress']." % direction)
        ethertype = body.get('ethertype') or 'IPv4'
        if ethertype not in ('IPv4', 'IPv6'):
            raise bad("Invalid input for ethertype. Reason: '%s' is not in "
                      "['IPv4', 'IPv6']." % ethertype)
        protocol = body.get('protocol')
        protocol = None if protocol in (None, '', 'any') else \
            str(protocol).lower()
        protocol = PROTOCOL_NUMBERS.get(protocol, protocol)
        low, high = body.get('port_range_min'), body.get('port_range_max')
        low = None if low in (None, '') else int(low)
        high = None if high in (None, '') else int(high)
        if protocol is None and (low is not None or high is not None):
            raise bad('Must also specify protocol if port range is given.')
        if protocol in PORTED:
            if low is not None and high is None:
                high = low
            if high is not None and low is None:
                low = high
            for port in (low, high):
                if port is not None and not 1 <= port <= 65535:
                    raise bad('Invalid value for port %s.' % port)
            if low is not None and low > high:
                raise bad('For TCP/UDP protocols, port_range_min must be <= '
                          'port_range_max')
        elif protocol in ICMP:
            if high is not None and low is None:
                raise bad('ICMP code (port-range-max) %s is provided but '
                          'ICMP type (port-range-min) is missing.' % high)
            for value, what in ((low, 'type'), (high, 'code')):
                if value is not None and not 0 <= value <= 255:
                    raise bad('Invalid value for ICMP %s %s.'
                              % (what, value))
        prefix = body.get('remote_ip_prefix')
        if prefix not in (None, ''):
            net = ipaddress.ip_network(str(prefix), strict=False)
            if 'IPv%d' % net.version != ethertype:
                raise bad('Conflicting value ethertype %s for CIDR %s'
                          % (ethertype, prefix))
            prefix = str(net)
        else:
            prefix = None
        remote_group = body.get('remote_group_id') or None
        if prefix and remote_group:
            raise bad('Only remote_ip_prefix or remote_group_id may be '
                      'provided.')
        return {'security_group_id': body.get('security_group_id'),
                'direction': direction, 'ethertype': ethertype,
                'protocol': protocol, 'port_range_min': low,
                'port_range_max': high, 'remote_ip_prefix': prefix,
                'remote_group_id': remote_group}

    def same(self, obj, body):
        if body.get('description') not in (None, '',
                                           obj.body.get('description')):
            raise conflict('Security group rule already exists. Rule id is '
                           '%s.' % obj.id)
        return True

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        group = ctx.visible('security_group', required(
            body, 'security_group_id', self.name))
        if group is None or not ctx.owns(group):
            raise missing('Security group %s does not exist'
                          % body['security_group_id'])
        return self.add(ctx, group, body, key)

    def add(self, ctx, group, body, key):
        rule = self.normal(dict(body, security_group_id=group.id))
        if rule['remote_group_id'] and rule['remote_group_id'] != group.id \
                and ctx.visible('security_group',
                                rule['remote_group_id']) is None:
            raise missing('Security group %s does not exist'
                          % rule['remote_group_id'])
        stored = dict(rule, description=body.get('description') or '',
                      tags=list(body.get('tags') or []), revision_number=1,
                      remote_address_group_id=None,
                      normalized_cidr=rule['remote_ip_prefix'])
        obj = self.new(ctx, stored, key, project_id=group.project_id,
                       name='', ident=_rule_ident(rule), parent=group.id,
                       device=rule['remote_group_id'])
        return ctx.insert(obj)

    def show(self, ctx, obj):
        view = super().show(ctx, obj)
        view.pop('status')
        return view


def _rule_ident(rule):
    digest = hashlib.sha1(rows.dumps(rule).encode()).hexdigest()
    return 'security_group_rule:%s:%s' % (rule['security_group_id'], digest)


SECURITY_GROUP = SecurityGroup()
RULE = SecurityGroupRule()

KINDS = {k.name: k for k in (SECURITY_GROUP, RULE)}
