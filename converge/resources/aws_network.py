"""AWS::EC2::SecurityGroup, AWS::EC2::Volume and AWS::EC2::VolumeAttachment
on the OpenStack plug-ins that do the same (OS::Neutron::SecurityGroup,
OS::Cinder::Volume and VolumeAttachment)."""

from converge.resources import properties as p
from converge.resources import security_group
from converge.resources import translated
from converge.resources import volume
from converge.resources.translated import known

_RULE = {
    'CidrIp': p.Schema(p.STRING, 'The remote IP prefix (CIDR).'),
    'FromPort': p.Schema(p.STRING, 'The first port (-1: any).'),
    'ToPort': p.Schema(p.STRING, 'The last port (-1: any).'),
    'IpProtocol': p.Schema(p.STRING, 'tcp, udp, icmp ... (-1: any).'),
    'SourceSecurityGroupId': p.Schema(p.STRING, 'The remote group.'),
    'SourceSecurityGroupName': p.Schema(p.STRING, 'The remote group.'),
    'SourceSecurityGroupOwnerId': p.Schema(p.STRING, 'Not implemented.'),
    'DestinationSecurityGroupId': p.Schema(p.STRING, 'The remote group.'),
}


def _port(value):
    if not known(value):
        return value
    return None if str(value) == '-1' else int(value)


def _rule(rule, direction):
    out = {'direction': direction}
    proto = rule.get('IpProtocol')
    if known(proto) and str(proto) != '-1':
        out['protocol'] = str(proto).lower()
    for aws, hot in (('FromPort', 'port_range_min'),
                     ('ToPort', 'port_range_max')):
        port = _port(rule.get(aws))
        if port is not None:
            out[hot] = port
    group = next((rule[k] for k in ('SourceSecurityGroupId',
                                    'SourceSecurityGroupName',
                                    'DestinationSecurityGroupId')
                  if rule.get(k) is not None), None)
    if group is not None:
        out['remote_mode'] = 'remote_group_id'
        out['remote_group_id'] = group
    elif rule.get('CidrIp') is not None:
        out['remote_ip_prefix'] = rule['CidrIp']
    return out


class SecurityGroup(translated.Translated, security_group.SecurityGroup):
    """Its rules from SecurityGroupIngress and SecurityGroupEgress."""

    target = security_group.SecurityGroup

    properties_schema = {
        'GroupDescription': p.Schema(p.STRING, 'Description of the '
                                     'security group.', required=True),
        'VpcId': p.Schema(p.STRING, 'Not implemented.'),
        'SecurityGroupIngress': p.Schema(p.LIST, 'Incoming rules.',
                                         schema=_RULE, update_allowed=True),
        'SecurityGroupEgress': p.Schema(p.LIST, 'Outgoing rules.',
                                        schema=_RULE, update_allowed=True),
    }
    attributes_schema = {}

    @classmethod
    def translate(cls, v, path):
        rules = [_rule(r, 'ingress') for r in
                 v.get('SecurityGroupIngress') or [] if isinstance(r, dict)]
        rules += [_rule(r, 'egress') for r in
                  v.get('SecurityGroupEgress') or [] if isinstance(r, dict)]
        return {'description': v['GroupDescription'], 'rules': rules}

    def get_attributes(self, observed):
        return {}


class Volume(translated.Translated, volume.Volume):
    target = volume.Volume

    properties_schema = {
        'AvailabilityZone': p.Schema(p.STRING, 'The availability zone to '
                                     'create the volume in.',
                                     required=True),
        'Size': p.Schema(p.INTEGER, 'The size of the volume in GB.',
                         min=1),
        'SnapshotId': p.Schema(p.STRING, 'The snapshot to make it from.'),
        'Tags': translated.KEY_VALUE,
    }
    attributes_schema = {}

    @classmethod
    def translate(cls, v, path):
        out = {'availability_zone': v['AvailabilityZone']}
        for aws, hot in (('Size', 'size'), ('SnapshotId', 'snapshot_id')):
            if v.get(aws) is not None:
                out[hot] = v[aws]
        if v.get('Tags') is not None:
            out['metadata'] = translated.key_values(v['Tags'])
        return out

    def get_attributes(self, observed):
        return {}


class VolumeAttachment(translated.Translated, volume.VolumeAttachment):
    target = volume.VolumeAttachment

    properties_schema = {
        'InstanceId': p.Schema(p.STRING, 'The instance to attach to.',
                               required=True, update_allowed=True),
        'VolumeId': p.Schema(p.STRING, 'The volume to attach.',
                             required=True, update_allowed=True),
        'Device': p.Schema(p.STRING, 'Where it shows, e.g. /dev/vdb.',
                           required=True, update_allowed=True,
                           pattern=r'/dev/vd[b-z]'),
    }

    @classmethod
    def translate(cls, v, path):
        return {'instance_uuid': v['InstanceId'], 'volume_id': v['VolumeId'],
                'mountpoint': v['Device']}
