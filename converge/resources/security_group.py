"""OS::Neutron::SecurityGroup and OS::Neutron::SecurityGroupRule, as Heat's
(heat/engine/resources/openstack/neutron/security_group.py,
security_group_rule.py), made through ``clients.cloud``.

A group's ``rules`` are its own: on create and on every update the rules
the group has are made to be the rules the template lists (stale ones
deleted, missing ones made), plus Neutron's default egress rules when
the template lists no egress rule of its own, as Heat does. Each rule is
made with a key derived from the group's and the rule's fields, and the
cloud finds a rule again by its fields, so a step repeated after a crash
makes none twice. A rule changed or deleted behind converge's back is
drift, put back by the next update. Unlike Heat's, the update leaves
alone the rules other resources made in the group (an
OS::Neutron::SecurityGroupRule's, known by its key): only the group's
own rules and those made by no one through converge (Neutron's defaults,
one added by hand) are the group's to remove.
"""

import ipaddress
import json

from converge import exception
from converge.drivers import cloud as cloud_mod
from converge.resources import cloud_object as co
from converge.resources import constraints
from converge.resources import neutron
from converge.resources import none
from converge.resources import properties as p

_PROTOCOL_NAMES = (
    'ah', 'dccp', 'egp', 'esp', 'gre', 'icmp', 'icmpv6', 'igmp',
    'ipv6-encap', 'ipv6-frag', 'ipv6-icmp', 'ipv6-nonxt', 'ipv6-opts',
    'ipv6-route', 'ospf', 'pgm', 'rsvp', 'sctp', 'tcp', 'udp', 'udplite',
    'vrrp')
#: Heat's: the names, and the numbers 0-255 (a number in a template is a
#: string here, the property being one)
PROTOCOLS = tuple(str(n) for n in range(256)) + _PROTOCOL_NAMES
PROTOCOL_TEXT = ('The protocol that is matched by the security group rule. '
                 'Allowed values are ' + ', '.join(_PROTOCOL_NAMES) +
                 ' and integer representations [0-255].')

#: how a rule made through converge shows it (its key, as a tag)
KEY_TAG = cloud_mod.KEY_NAME + '='

#: what makes two rules the same rule (Heat's comparison)
RULE_FIELDS = ('direction', 'ethertype', 'protocol', 'port_range_min',
               'port_range_max', 'remote_group_id', 'remote_ip_prefix')

DEFAULT_EGRESS = ({'direction': 'egress', 'ethertype': 'IPv4'},
                  {'direction': 'egress', 'ethertype': 'IPv6'})

_RULE = {
    'direction': p.Schema(
        p.STRING, 'The direction in which the security group rule is '
        'applied. For a compute instance, an ingress security group rule '
        'matches traffic that is incoming (ingress) for that instance. An '
        'egress rule is applied to traffic leaving the instance.',
        default='ingress', allowed_values=('ingress', 'egress')),
    'ethertype': p.Schema(p.STRING, 'Ethertype of the traffic.',
                          default='IPv4', allowed_values=('IPv4', 'IPv6')),
    'port_range_min': p.Schema(
        p.INTEGER, 'The minimum port number in the range that is matched by '
        'the security group rule. If the protocol is TCP or UDP, this value '
        'must be less than or equal to the value of the port_range_max '
        'attribute. If the protocol is ICMP, this value must be an ICMP '
        'type.', min=0, max=65535),
    'port_range_max': p.Schema(
        p.INTEGER, 'The maximum port number in the range that is matched by '
        'the security group rule. The port_range_min attribute constrains '
        'the port_range_max attribute. If the protocol is ICMP, this value '
        'must be an ICMP type.', min=0, max=65535),
    'protocol': p.Schema(
        p.STRING, PROTOCOL_TEXT + ' If not specified, all protocols will be '
        'matched.', allowed_values=PROTOCOLS),
    'remote_mode': p.Schema(
        p.STRING, 'Whether to specify a remote group or a remote IP '
        'prefix.', default='remote_ip_prefix',
        allowed_values=('remote_ip_prefix', 'remote_group_id')),
    'remote_group_id': p.Schema(
        p.STRING, 'The remote group ID to be associated with this security '
        'group rule. If no value is specified then this rule will use this '
        'security group for the remote_group_id. The remote mode parameter '
        'must be set to "remote_group_id".',
        constraint='neutron.security_group'),
    'remote_ip_prefix': p.Schema(
        p.STRING, 'The remote IP prefix (CIDR) to be associated with this '
        'security group rule.', constraint='net_cidr'),
    'description': p.Schema(
        p.STRING, 'Description of the security group rule.'),
}


#: protocols named by number, as Neutron compares them
_PROTOCOL_BY_NUMBER = {'1': 'icmp', '6': 'tcp', '17': 'udp',
                       '58': 'ipv6-icmp', '132': 'sctp', '33': 'dccp',
                       '136': 'udplite', 'icmpv6': 'ipv6-icmp'}
#: protocols with ports: one end of a range given is both
_PORTED = ('tcp', 'udp', 'sctp', 'dccp', 'udplite')


def rule_key(rule):
    """The fields that make a rule itself, comparable as Neutron compares
    them (Heat compares them as strings): a protocol by its name, a port
    range with one end given as that one port, a prefix meaning anywhere
    as no prefix."""
    values = {}
    for field in RULE_FIELDS:
        value = rule.get(field)
        values[field] = None if value in (None, '') else str(value)
    values['ethertype'] = values['ethertype'] or 'IPv4'
    protocol = values['protocol']
    if protocol is not None:
        protocol = protocol.lower()
        protocol = None if protocol == 'any' else \
            _PROTOCOL_BY_NUMBER.get(protocol, protocol)
    values['protocol'] = protocol
    if protocol in _PORTED:
        low, high = values['port_range_min'], values['port_range_max']
        values['port_range_min'], values['port_range_max'] = \
            low or high, high or low
    prefix = values['remote_ip_prefix']
    if prefix is not None:
        try:
            prefix = str(ipaddress.ip_network(prefix, strict=False))
        except ValueError:
            pass
        if prefix in ('0.0.0.0/0', '::/0'):
            prefix = None
    values['remote_ip_prefix'] = prefix
    return tuple(values[f] for f in RULE_FIELDS)


def _check_ports(values, path):
    low, high = values.get('port_range_min'), values.get('port_range_max')
    if isinstance(low, int) and isinstance(high, int) and high < low and \
            values.get('protocol') not in ('icmp', 'icmpv6', 'ipv6-icmp'):
        raise exception.InvalidTemplate(
            'The minimum port number must be less than or equal to the '
            'maximum port number.', path=list(path) + ['port_range_min'])


class SecurityGroup(neutron.NeutronObject):
    """OS::Neutron::SecurityGroup: a group and the rules it lists."""

    kind = 'security_group'
    title = 'Security group'
    update_fields = ('name', 'description', 'stateful')
    drift_fields = ('name', 'description', 'stateful')
    cleared = {'description': ''}

    properties_schema = {
        'name': p.Schema(
            p.STRING, 'A string specifying a symbolic name for the security '
            'group, which is not required to be unique.',
            update_allowed=True),
        'description': p.Schema(p.STRING, 'Description of the security '
                                'group.', update_allowed=True),
        'rules': p.Schema(p.LIST, 'List of security group rules.',
                          default=[], schema=_RULE, update_allowed=True),
        'stateful': p.Schema(
            p.BOOLEAN, 'Whether to create this security group as stateful '
            'or stateless.', update_allowed=True),
    }
    attributes_schema = {}

    @classmethod
    def validate_neutron(cls, values, path):
        if values.get('name') == 'default':
            raise exception.InvalidTemplate(
                'Security groups cannot be assigned the name "default".',
                path=list(path) + ['name'])
        rules = values.get('rules')
        for i, rule in enumerate(rules if isinstance(rules, list) else []):
            if isinstance(rule, dict):
                _check_ports(rule, list(path) + ['rules', i])
        return values

    def make_body(self):
        props = self.properties
        body = {'name': self.physical_name()}
        if props.get('description') is not None:
            body['description'] = props['description']
        if props.get('stateful') is not None:
            body['stateful'] = props['stateful']
        return body

    # -- rules ------------------------------------------------------------
    def _rule_body(self, rule, group_id):
        """A template rule as Neutron takes it (Heat's _format_rule)."""
        body = {'security_group_id': group_id}
        for field in ('direction', 'ethertype', 'protocol', 'port_range_min',
                      'port_range_max', 'description'):
            if rule.get(field) is not None:
                body[field] = rule[field]
        if rule.get('remote_mode') == 'remote_group_id':
            # no group named: the rule refers to its own group
            body['remote_group_id'] = self.resolve(
                'security_group', rule.get('remote_group_id'),
                'rules.remote_group_id') or group_id
        elif rule.get('remote_ip_prefix') is not None:
            body['remote_ip_prefix'] = rule['remote_ip_prefix']
        return body

    def _wanted_rules(self, group_id):
        rules = list(self.properties.get('rules') or [])
        if not any(r.get('direction') == 'egress' for r in rules):
            rules += [dict(r) for r in DEFAULT_EGRESS]
        return [self._rule_body(r, group_id) for r in rules]

    def _rules(self, group):
        """The rules of the group that are the group's to manage: those it
        made, and those no one made through converge (Neutron's default
        egress rules, a rule added by hand); not those of another
        resource (an OS::Neutron::SecurityGroupRule in the group)."""
        if group.get('security_group_rules') is not None:
            rules = list(group['security_group_rules'])
        else:
            rules = self.cloud.list('security_group_rule',
                                    security_group_id=group['id'])
        return [r for r in rules if self._manages(r)]

    def _manages(self, rule):
        keys = [t for t in rule.get('tags') or []
                if str(t).startswith(KEY_TAG)]
        return not keys or keys == [cloud_mod.key_tag(
            self._rule_key_id(rule_key(rule)))]

    def after_settled(self, obj, prior=None):
        """Make the group's rules those the template lists: delete the
        stale, make the missing (the group's default egress rules are
        stale once the template lists egress rules of its own)."""
        wanted = {rule_key(r): r for r in self._wanted_rules(obj['id'])}
        have = self._rules(obj)
        changed = False
        for rule in have:
            if rule_key(rule) not in wanted:
                try:
                    self.cloud.delete('security_group_rule', rule['id'])
                except exception.CloudNotFound:
                    pass
                changed = True
        present = {rule_key(r) for r in have}
        for key, body in wanted.items():
            if key not in present:
                self.cloud.create('security_group_rule', body,
                                  key=self._rule_key_id(key))
                changed = True
        if changed:
            return self._current()
        return None

    def _rule_key_id(self, key):
        """The idempotency key of one of the group's rules: the group's
        key and the rule's fields (the same rule, the same key)."""
        return none.derived_uuid(self.idempotency_key,
                                 'rule:' + json.dumps(key))

    def drift(self, observed):
        out = super().drift(observed)
        if observed and 'applied' in self.data and \
                observed.get('security_group_rules') is not None:
            have = sorted(rule_key(r) for r in
                          observed['security_group_rules']
                          if self._manages(r))
            try:
                want = sorted(rule_key(r) for r in
                              self._wanted_rules(observed['id']))
            except exception.ResourceFailure:
                want = None   # a remote group is gone: the update says
            if want is not None and have != want:
                out['rules'] = (_show(have), _show(want))
        return out


def _show(keys):
    return [dict((f, v) for f, v in zip(RULE_FIELDS, key) if v is not None)
            for key in keys]


class SecurityGroupRule(neutron.NeutronObject):
    """OS::Neutron::SecurityGroupRule: one rule of a group. A rule has no
    update: any change replaces it."""

    kind = 'security_group_rule'
    title = 'Security group rule'
    natural_identity = True

    properties_schema = {
        'security_group': p.Schema(
            p.STRING, 'Security group name or ID to add rule.',
            required=True, constraint='neutron.security_group'),
        'description': p.Schema(
            p.STRING, 'Description of the security group rule.'),
        'direction': _RULE['direction'],
        'ethertype': _RULE['ethertype'],
        'port_range_min': _RULE['port_range_min'],
        'port_range_max': p.Schema(
            p.INTEGER, 'The maximum port number in the range that is matched '
            'by the security group rule. The port_range_min attribute '
            'constrains the port_range_max attribute. If the protocol is '
            'ICMP, this value must be an ICMP code.', min=0, max=65535),
        'protocol': p.Schema(p.STRING, PROTOCOL_TEXT, default='tcp',
                             allowed_values=PROTOCOLS),
        'remote_group': p.Schema(
            p.STRING, 'The remote group name or ID to be associated with '
            'this security group rule.',
            constraint='neutron.security_group'),
        'remote_ip_prefix': _RULE['remote_ip_prefix'],
    }
    attributes_schema = {}

    @classmethod
    def validate_more(cls, values, path):
        constraints.check_local(cls, values, path)
        if values.get('remote_group') is not None and \
                values.get('remote_ip_prefix') is not None:
            raise co.conflict(list(path) + ['remote_group'], 'remote_group',
                              'remote_ip_prefix')
        _check_ports(values, path)
        return values

    def make_body(self):
        props = self.properties
        body = {'security_group_id': self.resolve(
            'security_group', props.get('security_group'),
            'security_group')}
        for field in ('description', 'direction', 'ethertype', 'protocol',
                      'port_range_min', 'port_range_max',
                      'remote_ip_prefix'):
            if props.get(field) is not None:
                body[field] = props[field]
        if props.get('remote_group'):
            body['remote_group_id'] = self.resolve(
                'security_group', props['remote_group'], 'remote_group')
        return body

    def identity_conflict(self, obj, body):
        # Neutron refuses a second rule with the same fields: one found so
        # that differs otherwise is another's (Heat's create would fail)
        if (obj.get('description') or '') != (body.get('description') or ''):
            return ('Security group rule already exists. Rule id is %s.' %
                    obj.get('id'))
        return None

    def attributes(self, obj):
        return {}
