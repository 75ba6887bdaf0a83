"""AWS::EC2::Instance: a server on the compute driver OS::Nova::Server
uses, by OS::Nova::Server's plug-in (ImageId is its image, InstanceType
its flavor, SubnetId or NetworkInterfaces its networks, Tags its
metadata, ...)."""

from converge.resources import properties as p
from converge.resources import server
from converge.resources import translated
from converge.resources.translated import known

_NIC = p.Schema(p.ANY, 'A port id, or {NetworkInterfaceId, DeviceIndex}.')


class Instance(translated.Translated, server.Server):
    """An instance; what Heat's AWS::EC2::Instance does, on the server
    plug-in."""

    target = server.Server

    properties_schema = {
        'ImageId': p.Schema(p.STRING, 'Glance image ID or name.',
                            required=True, constraint='glance.image'),
        'InstanceType': p.Schema(p.STRING, 'Nova instance type (flavor).',
                                 required=True, update_allowed=True,
                                 constraint='nova.flavor'),
        'KeyName': p.Schema(p.STRING, 'Optional Nova keypair name.',
                            constraint='nova.keypair'),
        'AvailabilityZone': p.Schema(
            p.STRING, 'Availability zone to launch the instance in.'),
        'DisableApiTermination': p.Schema(p.STRING, 'Not implemented.'),
        'KernelId': p.Schema(p.STRING, 'Not implemented.'),
        'Monitoring': p.Schema(p.BOOLEAN, 'Not implemented.'),
        'PlacementGroupName': p.Schema(p.STRING, 'Not implemented.'),
        'PrivateIpAddress': p.Schema(
            p.STRING, 'The fixed IP on SubnetId (with SubnetId only).'),
        'RamDiskId': p.Schema(p.STRING, 'Not implemented.'),
        'SecurityGroups': p.Schema(p.LIST, 'Security group names.'),
        'SecurityGroupIds': p.Schema(p.LIST, 'Security group ids.'),
        'NetworkInterfaces': p.Schema(
            p.LIST, 'Ports to attach, in DeviceIndex order.', schema=_NIC,
            update_allowed=True),
        'SourceDestCheck': p.Schema(p.BOOLEAN, 'Not implemented.'),
        'SubnetId': p.Schema(p.STRING, 'Subnet to boot on.'),
        'Tags': translated.KEY_VALUE,
        'NovaSchedulerHints': translated.KEY_VALUE,
        'Tenancy': p.Schema(p.STRING, 'Not implemented.',
                            allowed_values=('dedicated', 'default')),
        'UserData': p.Schema(p.STRING, 'User data to pass to the instance.',
                             default=''),
        'Volumes': p.Schema(p.LIST, 'Volumes to attach.', default=[],
                            schema={
                                'Device': p.Schema(
                                    p.STRING, 'The device, e.g. /dev/vdb.',
                                    required=True),
                                'VolumeId': p.Schema(
                                    p.STRING, 'The volume.',
                                    required=True)}),
        'BlockDeviceMappings': p.Schema(
            p.LIST, 'Block devices to boot with.', schema={
                'DeviceName': p.Schema(p.STRING, 'The device name.',
                                       required=True),
                'Ebs': p.Schema(p.MAP, 'SnapshotId, VolumeSize, '
                                'DeleteOnTermination.'),
                'NoDevice': p.Schema(p.MAP, 'Not implemented.'),
                'VirtualName': p.Schema(p.STRING, 'Not implemented.')}),
    }

    attributes_schema = {
        'AvailabilityZone': 'The availability zone the instance is in.',
        'PrivateDnsName': 'Private DNS name (its first address).',
        'PublicDnsName': 'Public DNS name (its first address).',
        'PrivateIp': 'Private IP address.',
        'PublicIp': 'Public IP address.',
    }

    @classmethod
    def translate(cls, v, path):
        out = {'image': v['ImageId'], 'flavor': v['InstanceType'],
               'user_data': v.get('UserData') or ''}
        for aws, hot in (('KeyName', 'key_name'),
                         ('AvailabilityZone', 'availability_zone')):
            if v.get(aws) is not None:
                out[hot] = v[aws]
        groups = list(v.get('SecurityGroups') or []) + \
            list(v.get('SecurityGroupIds') or [])
        if groups:
            out['security_groups'] = groups
        networks = _networks(v)
        if networks is not None:
            out['networks'] = networks
        for aws, hot in (('Tags', 'metadata'),
                         ('NovaSchedulerHints', 'scheduler_hints')):
            if v.get(aws) is not None:
                out[hot] = translated.key_values(v[aws])
        bdm = _block_devices(v)
        if bdm:
            out['block_device_mapping'] = bdm
        return out

    def get_attributes(self, observed):
        attrs = super().get_attributes(observed)
        address = attrs.get('first_address') or None
        zone = (observed or {}).get('OS-EXT-AZ:availability_zone') or \
            self.properties.get('availability_zone') or 'nova'
        return {'AvailabilityZone': zone, 'PrivateDnsName': address,
                'PublicDnsName': address, 'PrivateIp': address,
                'PublicIp': address, 'show': attrs.get('show')}


def _networks(v):
    nics = v.get('NetworkInterfaces')
    if nics:
        if not known(nics) or not all(known(n) for n in nics):
            return p.UNKNOWN
        ordered = []
        for i, nic in enumerate(nics):
            if isinstance(nic, dict):
                ordered.append((int(nic.get('DeviceIndex') or 0),
                                nic.get('NetworkInterfaceId')))
            else:
                ordered.append((i, nic))
        return [{'port': port} for _, port in sorted(ordered,
                                                     key=lambda x: x[0])]
    if v.get('SubnetId') is not None:
        net = {'subnet': v['SubnetId']}
        if v.get('PrivateIpAddress') is not None:
            net['fixed_ip'] = v['PrivateIpAddress']
        return [net]
    return None


def _device(name):
    return name[len('/dev/'):] if isinstance(name, str) and \
        name.startswith('/dev/') else name


def _block_devices(v):
    out = []
    for vol in v.get('Volumes') or []:
        if isinstance(vol, dict):
            out.append({'device_name': _device(vol.get('Device')),
                        'volume_id': vol.get('VolumeId')})
    for m in v.get('BlockDeviceMappings') or []:
        ebs = m.get('Ebs') if isinstance(m, dict) else None
        if isinstance(ebs, dict):
            item = {'device_name': _device(m.get('DeviceName'))}
            for aws, hot in (('SnapshotId', 'snapshot_id'),
                             ('VolumeSize', 'volume_size'),
                             ('DeleteOnTermination',
                              'delete_on_termination')):
                if ebs.get(aws) is not None:
                    item[hot] = ebs[aws]
            out.append(item)
    return out

