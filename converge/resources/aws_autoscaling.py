"""AWS::AutoScaling::LaunchConfiguration, AutoScalingGroup and
ScalingPolicy, and OS::Heat::InstanceGroup, on OS::Heat's
AutoScalingGroup and ScalingPolicy (autoscaling.py).

A group's members are AWS::EC2::Instance resources made from the launch
configuration its LaunchConfigurationName names (Ref): its properties
and its Metadata (what cfn-init on the member reads), as Heat makes
them. The definition hands the group that configuration's definition
(``definition_properties``), so the group reads no other resource.
"""

import re

from converge import exception
from converge.resources import autoscaling
from converge.resources import base
from converge.resources import group
from converge.resources import none
from converge.resources import properties as p
from converge.resources import translated
from converge.resources.translated import known

LAUNCH_CONFIGURATION = 'AWS::AutoScaling::LaunchConfiguration'
MEMBER_TYPE = 'AWS::EC2::Instance'

#: a launch configuration's properties a member instance takes
_MEMBER_PROPERTIES = ('ImageId', 'InstanceType', 'KeyName', 'UserData',
                      'SecurityGroups', 'KernelId', 'RamDiskId',
                      'BlockDeviceMappings', 'NovaSchedulerHints')


class LaunchConfiguration(base.Resource):
    """What a group's members are made of; makes nothing itself."""

    logical = True

    properties_schema = {
        'ImageId': p.Schema(p.STRING, 'Glance image ID or name.',
                            constraint='glance.image'),
        'InstanceType': p.Schema(p.STRING, 'Nova instance type (flavor).',
                                 constraint='nova.flavor'),
        'KeyName': p.Schema(p.STRING, 'Optional Nova keypair name.',
                            constraint='nova.keypair'),
        'UserData': p.Schema(p.STRING, 'User data for the instances.'),
        'SecurityGroups': p.Schema(p.LIST, 'Security group names.'),
        'KernelId': p.Schema(p.STRING, 'Not implemented.'),
        'RamDiskId': p.Schema(p.STRING, 'Not implemented.'),
        'BlockDeviceMappings': p.Schema(p.LIST, 'Block devices to boot '
                                        'with.'),
        'NovaSchedulerHints': translated.KEY_VALUE,
        'InstanceId': p.Schema(p.STRING, 'Not supported: name ImageId and '
                               'InstanceType.'),
        'AssociatePublicIpAddress': p.Schema(p.BOOLEAN, 'Not implemented.'),
    }

    def create(self):
        self.physical_id = none.physical_resource_name(self)

    def reference_id(self):
        return self.physical_id or self.name


def _member(source, path, extra=None):
    """The member definition (HOT's resource keys) from the launch
    configuration `source` the definition handed over."""
    if source is p.UNKNOWN:
        return p.UNKNOWN
    if not isinstance(source, dict) or \
            source.get('type') != LAUNCH_CONFIGURATION:
        raise exception.InvalidTemplate(
            'LaunchConfigurationName must be a Ref to an %s of this '
            'template' % LAUNCH_CONFIGURATION,
            path=path + ['LaunchConfigurationName'])
    lc = source['properties']
    for key in ('ImageId', 'InstanceType'):
        if lc.get(key) is None:
            raise exception.InvalidTemplate(
                'The launch configuration %s has no %s: its members could '
                'not boot' % (source['name'], key),
                path=path + ['LaunchConfigurationName'])
    props = {k: lc[k] for k in _MEMBER_PROPERTIES if lc.get(k) is not None}
    props.update(extra or {})
    member = {'type': MEMBER_TYPE, 'properties': props}
    if source.get('metadata'):
        member['metadata'] = source['metadata']
    return member


def _seconds(value):
    """PauseTime: ISO 8601 (PT1M30S, Heat's form) or seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    m = re.match(r'^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?$', str(value or ''))
    if not m or not any(m.groups()):
        raise exception.InvalidTemplate(
            'PauseTime must be an ISO 8601 duration such as PT1M30S, not '
            '%r' % (value,))
    h, mi, s = (int(x or 0) for x in m.groups())
    return h * 3600 + mi * 60 + s


_ROLLING = p.Schema(p.MAP, 'How a change of the launch configuration '
                    'goes through the members.', schema={
                        'MinInstancesInService': p.Schema(p.INTEGER,
                                                          min=0),
                        'MaxBatchSize': p.Schema(p.INTEGER, min=1),
                        'PauseTime': p.Schema(p.STRING)})


#: what both groups take
_GROUP_PROPERTIES = {
        'AvailabilityZones': p.Schema(p.LIST, 'Not implemented (one '
                                      'zone).', required=True),
        'LaunchConfigurationName': p.Schema(
            p.ANY, 'Ref to the AWS::AutoScaling::LaunchConfiguration the '
            'members are made from.', required=True, update_allowed=True),
        'LoadBalancerNames': p.Schema(p.LIST, 'Not supported (no '
                                      'AWS::ElasticLoadBalancing).'),
        'Tags': translated.KEY_VALUE,
}


class _Group(translated.Translated, autoscaling.AutoScalingGroup):
    """What both AWS-style groups share: members from a launch
    configuration, InstanceList, a rolling update in UpdatePolicy."""

    target = autoscaling.AutoScalingGroup
    definition_properties = ('LaunchConfigurationName',)
    # Heat replaces the group when AvailabilityZones (or another
    # property it cannot update) changes
    keeps_fixed = True
    #: the UpdatePolicy key holding the rolling update
    rolling_key = None

    attributes_schema = {
        'InstanceList': 'A comma-delimited list of the members\' IP '
                        'addresses.',
    }

    @classmethod
    def has_attribute(cls, name):
        return name in cls.attributes_schema

    @classmethod
    def _member_of(cls, v, path):
        # always, as Heat's groups give them (an empty list too): a
        # member's provider template may declare Tags with no default
        extra = {'Tags': v.get('Tags') or []}
        subnets = v.get('VPCZoneIdentifier')
        if isinstance(subnets, list) and subnets:
            extra['SubnetId'] = subnets[0]
        return _member(v.get('LaunchConfigurationName'), path, extra)

    @classmethod
    def validate_update_policy(cls, values, path=()):
        if not isinstance(values, dict):
            return values
        path = list(path)
        known_keys = (cls.rolling_key,)
        for key in values:
            if key not in known_keys:
                raise exception.InvalidTemplate(
                    'Unknown update policy %s; valid: %s' % (
                        key, ', '.join(known_keys)), path=path + [key])
        out = p.validate({cls.rolling_key: _ROLLING}, values, path=path)
        pause = (out.get(cls.rolling_key) or {}).get('PauseTime')
        if known(pause):
            try:
                _seconds(pause)
            except exception.InvalidTemplate as e:
                raise exception.InvalidTemplate(
                    e.reason, path=path + [cls.rolling_key, 'PauseTime'])
        return out

    def rolling_policy(self):
        policy = (self.update_policy or {}).get(self.rolling_key)
        if not policy:
            return super().rolling_policy()
        # Heat's way: extra members keep the minimum in service, and as
        # many of the oldest go at the end (autoscaling.py)
        mapped = {'min_in_service': policy.get('MinInstancesInService'),
                  'max_batch_size': policy.get('MaxBatchSize'),
                  'pause_time': _seconds(policy.get('PauseTime') or 0),
                  'surge': True}
        return p.validate(group._ROLLING, {
            k: v for k, v in mapped.items() if v is not None})

    def attributes_from(self, outputs, observed):
        values = super().attributes_from(outputs, observed)
        ips = values.get('outputs_list', {}).get('PublicIp') or []
        values['InstanceList'] = ','.join(str(ip) for ip in ips if ip)
        return values


class AutoScalingGroup(_Group):
    """AWS::AutoScaling::AutoScalingGroup: MinSize..MaxSize members."""

    rolling_key = 'AutoScalingRollingUpdate'

    properties_schema = dict(_GROUP_PROPERTIES, **{
        'InstanceId': p.Schema(p.STRING, 'Not supported: name a '
                               'LaunchConfigurationName.'),
        'MaxSize': p.Schema(p.INTEGER, 'The most members.', required=True,
                            min=0, update_allowed=True),
        'MinSize': p.Schema(p.INTEGER, 'The fewest members.', required=True,
                            min=0, update_allowed=True),
        'Cooldown': p.Schema(p.INTEGER, 'Seconds after a scaling during '
                             'which signals are ignored.',
                             update_allowed=True),
        'DesiredCapacity': p.Schema(p.INTEGER, 'The size when created and '
                                    'when the properties change.',
                                    update_allowed=True),
        'HealthCheckGracePeriod': p.Schema(p.INTEGER, 'Not implemented.'),
        'HealthCheckType': p.Schema(p.STRING, 'Not implemented.',
                                    allowed_values=['EC2', 'ELB']),
        'VPCZoneIdentifier': p.Schema(p.LIST, 'Subnets: the members boot '
                                      'on the first.'),
    })

    @classmethod
    def translate(cls, v, path):
        out = {'resource': cls._member_of(v, path),
               'max_size': v['MaxSize'], 'min_size': v['MinSize']}
        for aws, hot in (('Cooldown', 'cooldown'),
                         ('DesiredCapacity', 'desired_capacity')):
            if v.get(aws) is not None:
                out[hot] = v[aws]
        return out


class InstanceGroup(_Group):
    """OS::Heat::InstanceGroup: Size members (resized by an update)."""

    rolling_key = 'RollingUpdate'

    properties_schema = dict(_GROUP_PROPERTIES, **{
        'Size': p.Schema(p.INTEGER, 'The number of instances.',
                         required=True, min=0, update_allowed=True),
    })

    @classmethod
    def translate(cls, v, path):
        size = v['Size']
        return {'resource': cls._member_of(v, path), 'max_size': size,
                'min_size': size, 'desired_capacity': size}


ADJUSTMENTS = {'ChangeInCapacity': autoscaling.CHANGE_IN_CAPACITY,
               'ExactCapacity': autoscaling.EXACT_CAPACITY,
               'PercentChangeInCapacity':
                   autoscaling.PERCENT_CHANGE_IN_CAPACITY}


class ScalingPolicy(translated.Translated, autoscaling.ScalingPolicy):
    """AWS::AutoScaling::ScalingPolicy: its reference is the URL a POST
    to scales the group (an alarm's action)."""

    target = autoscaling.ScalingPolicy

    properties_schema = {
        'AutoScalingGroupName': p.Schema(
            p.STRING, 'The group to scale (Ref of it).', required=True),
        'AdjustmentType': p.Schema(
            p.STRING, 'ChangeInCapacity, ExactCapacity or '
            'PercentChangeInCapacity.', required=True,
            allowed_values=list(ADJUSTMENTS), update_allowed=True),
        'ScalingAdjustment': p.Schema(p.NUMBER, 'The size of the '
                                      'adjustment.', required=True,
                                      update_allowed=True),
        'Cooldown': p.Schema(p.NUMBER, 'Seconds after a scaling during '
                             'which signals are ignored.',
                             update_allowed=True),
        'MinAdjustmentStep': p.Schema(p.INTEGER, 'The fewest members a '
                                      'PercentChangeInCapacity moves.',
                                      min=0, update_allowed=True),
    }
    attributes_schema = {
        'AlarmUrl': 'A signed URL: a POST to it signals the policy.',
    }

    @classmethod
    def translate(cls, v, path):
        out = {'auto_scaling_group_id': v['AutoScalingGroupName'],
               'adjustment_type': ADJUSTMENTS.get(v['AdjustmentType'],
                                                  v['AdjustmentType']),
               'scaling_adjustment': v['ScalingAdjustment']}
        for aws, hot in (('Cooldown', 'cooldown'),
                         ('MinAdjustmentStep', 'min_adjustment_step')):
            if v.get(aws) is not None:
                out[hot] = v[aws]
        return out

    @classmethod
    def credentials(cls, attributes):
        return super().credentials(
            {'alarm_url': attributes.get('AlarmUrl')})

    def get_attributes(self, observed):
        return {'AlarmUrl': super().get_attributes(observed)['alarm_url']}

    def reference_id(self):
        if not self.physical_id or self.clients is None:
            return self.name
        return self.get_attributes(None)['AlarmUrl']
