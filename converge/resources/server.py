"""OS::Nova::Server on the simulated cloud (``clients.compute``).

Every server is created with ``idempotency_key=self.idempotency_key`` (the
resource version's uuid) so a create repeated after a crash adopts the
server it made before instead of making a second one.

Updates follow Heat: an image change rebuilds (``image_update_policy``
REBUILD / REBUILD_PRESERVE_EPHEMERAL) or replaces (REPLACE); a flavor
change resizes (``flavor_update_policy`` RESIZE) or replaces (REPLACE); a
user_data change replaces (``user_data_update_policy`` REPLACE, the
default) or is ignored (IGNORE); name and metadata are updated in place.
A change of ``networks`` (a nic ``tag`` aside, which Heat ignores) is made
in place, as Heat makes it: each nic the template asks for that one of
the server's interfaces already is (the same port, or its network,
subnet, fixed IP) keeps it; the interfaces of the old nics that none of
the new ones is are detached (waited for: Nova's detach ends after its
answer) and the ports converge made for them deleted; the new nics are
then attached. Planned from the server's interfaces each time, a retried
step never attaches twice. A nic naming nothing of the cloud (the
simulator's free-form networks), ``allocate_network``, a change of a
nic's ``floating_ip``, ``port_extra_properties`` or ``vif_model``, or no
nics left replaces the server instead.

A replaced server first gives up the ports the template gives it
(``networks: [{port: ...}]``, detached: `prepare_for_replace`) so that its
replacement can boot on them; a rollback that keeps it attaches them
back (`restore_after_replace`), as Heat's server does. Ports converge
made for a server (a nic on a subnet: Nova cannot ask for a subnet) are
deleted with it.

The cloud takes its time, as Nova does: a server is BUILD, REBUILD,
RESIZE or being deleted for a while after the call that asked for it.
`create`, `update` and `delete` never sleep: they start the action and
return ``base.Wait(after=...)``; the engine calls the same step again
later, and the step looks at the server before doing anything, so it
neither boots, rebuilds nor deletes twice. ``self.data['waiting']``
remembers the action under way (for the poll schedule and to tell an
ERROR this step caused, which fails it, from one an earlier try left,
which is discarded or replaced).
"""

import copy
import json
import math
import random
import time
import uuid as uuid_mod

from converge import exception
from converge import transports
from converge import userdata
from converge.drivers import cloud as cloud_mod
from converge.resources import base
from converge.resources import none
from converge.resources import neutron
from converge.resources import properties as p
from converge.transports import server as heat_boot

#: statuses a server settles in; anything else (BUILD, REBUILD, RESIZE,
#: ...) is transitional, and VERIFY_RESIZE waits for confirm_resize
SETTLED = ('ACTIVE', 'SHUTOFF', 'ERROR')
GONE = ('DELETED', 'SOFT_DELETED')

USER_DATA_FORMATS = ('HEAT_CFNTOOLS', 'RAW', 'SOFTWARE_CONFIG')
#: converge's own agent (the default) and Heat's (converge/transports)
TRANSPORTS = transports.CONFIG_TRANSPORTS
IMAGE_POLICIES = ('REBUILD', 'REPLACE', 'REBUILD_PRESERVE_EPHEMERAL')

#: Heat's limit: HOST_NAME_MAX 64 minus '.novalocal'
NAME_LIMIT = 53

_BDM = {
    'device_name': p.Schema(
        p.STRING, 'A device name where the volume will be attached in the '
        'system at /dev/device_name. This value is typically vda.',
        required=True),
    'volume_id': p.Schema(
        p.STRING, 'The ID of the volume to boot from. Only one of '
        'volume_id or snapshot_id should be provided.',
        constraint='cinder.volume'),
    'snapshot_id': p.Schema(
        p.STRING, 'The ID of the snapshot to create a volume from.'),
    'volume_size': p.Schema(
        p.INTEGER, 'The size of the volume, in GB. It is safe to leave '
        'this blank and have the Compute service infer the size.'),
    'delete_on_termination': p.Schema(
        p.BOOLEAN, 'Indicate whether the volume should be deleted when the '
        'server is terminated.'),
}

_BDM_V2 = {
    'device_name': p.Schema(
        p.STRING, 'A device name where the volume will be attached in the '
        'system at /dev/device_name. This value is typically vda.'),
    'volume_id': p.Schema(
        p.STRING, 'The volume_id can be boot or non-boot device to the '
        'server.',
        constraint='cinder.volume'),
    'image_id': p.Schema(
        p.STRING, 'The ID of the image to create a volume from '
        '(deprecated: use image).',
        constraint='glance.image'),
    'image': p.Schema(
        p.STRING, 'The ID or name of the image to create a volume from.',
        constraint='glance.image'),
    'snapshot_id': p.Schema(
        p.STRING, 'The ID of the snapshot to create a volume from.'),
    'swap_size': p.Schema(p.INTEGER, 'The size of the swap, in MB.'),
    'ephemeral_size': p.Schema(
        p.INTEGER, 'The size of the local ephemeral block device, in GB.',
        min=1),
    'ephemeral_format': p.Schema(
        p.STRING, 'The format of the local ephemeral block device.',
        allowed_values=('ext2', 'ext3', 'ext4', 'xfs', 'ntfs')),
    'device_type': p.Schema(
        p.STRING, 'Device type: at the moment we can make distinction only '
        'between disk and cdrom.', allowed_values=('cdrom', 'disk')),
    'disk_bus': p.Schema(
        p.STRING, 'Bus of the device: hypervisor driver chooses a suitable '
        'default if omitted.',
        allowed_values=('ide', 'lame_bus', 'scsi', 'usb', 'virtio')),
    'boot_index': p.Schema(
        p.INTEGER, 'Integer used for ordering the boot disks.'),
    'volume_size': p.Schema(
        p.INTEGER, 'Size of the block device in GB. If it is omitted, '
        'hypervisor driver calculates size.'),
    'delete_on_termination': p.Schema(
        p.BOOLEAN, 'Indicate whether the volume should be deleted when the '
        'server is terminated.'),
}

_NETWORK = {
    'uuid': p.Schema(
        p.STRING, 'ID of network to create a port on (deprecated: use '
        'network).',
        constraint='neutron.network'),
    'network': p.Schema(
        p.STRING, 'Name or ID of network to create a port on.',
        constraint='neutron.network'),
    'allocate_network': p.Schema(
        p.STRING, 'The special string values of network, auto: means either '
        'a network that is already available to the project will be used, '
        'or if one does not exist, will be automatically created for the '
        'project; none: means no networking will be allocated for the '
        'created server. This property can not be used with other network '
        'keys.', allowed_values=('none', 'auto'), update_allowed=True),
    'fixed_ip': p.Schema(
        p.STRING, 'Fixed IP address to specify for the port created on the '
        'requested network.',
        constraint='ip_addr'),
    'port': p.Schema(
        p.STRING, 'ID of an existing port to associate with this server.',
        constraint='neutron.port'),
    'port_extra_properties': p.Schema(
        p.MAP, 'Dict, which has expand properties for port. Used only if '
        'port property is not specified for creating port.'),
    'subnet': p.Schema(
        p.STRING, 'Subnet in which to allocate the IP address for port. '
        'Used for creating port, based on derived properties. If subnet is '
        'specified, network property becomes optional.',
        constraint='neutron.subnet'),
    'floating_ip': p.Schema(
        p.STRING, 'ID of the floating IP to associate.'),
    'tag': p.Schema(
        p.STRING, 'Port tag. Heat ignores any update on this property as '
        'nova does not support it.'),
    'vif_model': p.Schema(
        p.STRING, 'The vif model of the nic (accepted, passed to the '
        'cloud).'),
}


class Server(base.Resource):
    logical = False
    #: addresses with their ports (Heat's) cost the interface list: only
    #: for a template that reads them
    reads_attributes = True
    # created with idempotency_key=self.idempotency_key (see the top)
    adopts_by_key = True
    #: the simulated cloud boots a server on any network or subnet it
    #: names (one of that name of its own; TripleO's ctlplane, say): not
    #: checked there (resources/constraints.py); a real cloud's must exist
    sim_lenient = ('neutron.network', 'neutron.subnet')

    @property
    def computes_locally(self):
        return getattr(self.compute, 'in_process', False)

    @property
    def looks_up_remotely(self):
        return self.clients is not None and not self.computes_locally

    # While the cloud builds, rebuilds, resizes or deletes a server, a step
    # returns base.Wait(after=...) and is called again (see _next_poll);
    # the stack timeout bounds the whole wait.
    #: seconds before the first look after starting an action: short, so
    #: a quick action is seen done soon (a 0.5 s build looked at after 1 s
    #: doubled a chain of them); a long one reports progress by then, and
    #: the next look is estimated from it
    poll_first = 0.25
    #: without a progress estimate, each wait is this factor longer ...
    poll_growth = 1.5
    #: ... up to this many seconds
    poll_max = 5.0
    #: a wait estimated from Nova's progress is at most this long
    poll_estimate_max = 30.0
    #: never look again sooner than this
    poll_min = 0.2
    #: waits are lengthened by up to this fraction, at random (later, not
    #: earlier: a look before the action ends only costs another look)
    poll_jitter = 0.1
    #: while the looks since half way leave the end less sure than this
    #: (seconds; a look at a 30 s build half way through places it within
    #: about half a second) ...
    split_min = 0.15
    #: ... one more look, about this many seconds later (not near the
    #: end, where the last looks of many servers come due), timed so
    #: that Nova's progress then tells which half of that span the end
    #: lies in (see _split_look) ...
    split_after = 1.0
    #: ... at most this many times an action
    split_max = 2

    properties_schema = {
        'name': p.Schema(p.STRING, 'Server name.', update_allowed=True),
        'image': p.Schema(
            p.STRING, 'The ID or name of the image to boot with.',
            update_allowed=True,
            constraint='glance.image'),
        'block_device_mapping': p.Schema(
            p.LIST, 'Block device mappings for this server.', schema=_BDM),
        'block_device_mapping_v2': p.Schema(
            p.LIST, 'Block device mappings v2 for this server.',
            schema=_BDM_V2),
        'flavor': p.Schema(
            p.STRING, 'The ID or name of the flavor to boot onto.',
            required=True, update_allowed=True,
            constraint='nova.flavor'),
        'flavor_update_policy': p.Schema(
            p.STRING, 'Policy on how to apply a flavor update; either by '
            'requesting a server resize or by replacing the entire server.',
            default='RESIZE', allowed_values=('RESIZE', 'REPLACE'),
            update_allowed=True),
        'image_update_policy': p.Schema(
            p.STRING, 'Policy on how to apply an image-id update; either by '
            'requesting a server rebuild or by replacing the entire server.',
            default='REBUILD', allowed_values=IMAGE_POLICIES,
            update_allowed=True),
        'key_name': p.Schema(
            p.STRING, 'Name of keypair to inject into the server.',
            constraint='nova.keypair'),
        'admin_user': p.Schema(
            p.STRING, 'Name of the administrative user to use on the server '
            '(deprecated, ignored).'),
        'availability_zone': p.Schema(
            p.STRING, 'Name of the availability zone for server placement.'),
        'security_groups': p.Schema(
            p.LIST, 'List of security group names or IDs. Cannot be used if '
            'neutron ports are associated with this server; assign '
            'security groups to the ports instead.', default=[]),
        'networks': p.Schema(
            p.LIST, 'An ordered list of nics to be added to this server, '
            'with information about connected networks, fixed ips, port '
            'etc.', schema=_NETWORK, update_allowed=True),
        'scheduler_hints': p.Schema(
            p.MAP, 'Arbitrary key-value pairs specified by the client to '
            'help boot a server.'),
        'metadata': p.Schema(
            p.MAP, 'Arbitrary key/value metadata to store for this server. '
            'Both keys and values must be 255 characters or less. '
            'Non-string values will be serialized to JSON (and the '
            'serialized string must be 255 characters or less).',
            default={}, update_allowed=True),
        'user_data_format': p.Schema(
            p.STRING, 'How the user_data should be formatted for the '
            'server. For HEAT_CFNTOOLS, the user_data is bundled as part of '
            'the heat-cfntools cloud-init boot configuration data. For RAW '
            'the user_data is passed to Nova unmodified. For '
            'SOFTWARE_CONFIG user_data is bundled as part of the software '
            'config data, and metadata is derived from any associated '
            'SoftwareDeployment resources.',
            default='HEAT_CFNTOOLS', allowed_values=USER_DATA_FORMATS),
        'software_config_transport': p.Schema(
            p.STRING, 'How the server should receive the metadata required '
            'for software configuration. CONVERGE_AGENT (the default): '
            'converge-agent pulls from converge-api. POLL_SERVER_CFN, '
            'POLL_TEMP_URL, POLL_SERVER_HEAT: Heat\'s boot config and '
            'os-collect-config section too, for images with Heat\'s '
            'tooling, served by converge-api. ZAQAR_MESSAGE needs Zaqar.',
            default=transports.CONVERGE_AGENT, allowed_values=TRANSPORTS,
            update_allowed=True),
        'user_data_update_policy': p.Schema(
            p.STRING, 'Policy on how to apply a user_data update; either by '
            'ignoring it or by replacing the entire server.',
            default='REPLACE', allowed_values=('REPLACE', 'IGNORE'),
            update_allowed=True),
        'user_data': p.Schema(
            p.STRING, 'User data script to be executed by cloud-init. '
            'Changes cause replacement of the resource by default, but can '
            'be ignored altogether by setting the `user_data_update_policy` '
            'property.', default='', update_allowed=True),
        'reservation_id': p.Schema(
            p.STRING, 'A UUID for the set of servers being requested.'),
        'config_drive': p.Schema(
            p.BOOLEAN, 'If True, enable config drive on the server.'),
        'diskConfig': p.Schema(
            p.STRING, 'Control how the disk is partitioned when the server '
            'is created.', allowed_values=('AUTO', 'MANUAL')),
        'personality': p.Schema(
            p.MAP, 'A map of files to create/overwrite on the server upon '
            'boot. Keys are file names and values are the file contents '
            '(deprecated).', default={}),
        'admin_pass': p.Schema(
            p.STRING, 'The administrator password for the server.',
            update_allowed=True),
        'tags': p.Schema(
            p.LIST, 'Server tags.', schema=p.Schema(p.STRING),
            update_allowed=True),
        'deployment_swift_data': p.Schema(
            p.MAP, 'Swift container and object to use for storing '
            'deployment data for the server resource.',
            default={}, update_allowed=True,
            schema={
                'container': p.Schema(p.STRING, 'Name of the container.',
                                      min_length=1),
                'object': p.Schema(p.STRING, 'Name of the object.',
                                   min_length=1),
            }),
    }

    attributes_schema = {
        'name': 'Name of the server.',
        'addresses': 'A dict of all network addresses with corresponding '
                     'port_id and subnets.',
        'networks': 'A dict of assigned network addresses of the form: '
                    '{"public": [ip1, ip2...], "private": [ip3, ip4]}.',
        'first_address': 'Convenience attribute to fetch the first assigned '
                         'network address, or an empty string if nothing '
                         'has been assigned at this time (deprecated).',
        'instance_name': 'AWS compatible instance name.',
        'accessIPv4': 'The manually assigned alternative public IPv4 '
                      'address of the server.',
        'accessIPv6': 'The manually assigned alternative public IPv6 '
                      'address of the server.',
        'console_urls': "URLs of server's consoles.",
        'tags': 'Tags from the server.',
        'os_collect_config': 'The os-collect-config configuration for the '
                             "server's local agent to be configured to "
                             'connect to Heat to retrieve deployment data.',
    }

    # -- validation -------------------------------------------------------
    @classmethod
    def implied_requires(cls, props, others):
        # Neutron refuses to boot on a network without a subnet: wait
        # for the template's subnets of the networks it is on (and for
        # every subnet when one of them is not known yet, or given only
        # as a port), as Heat's server does
        nets = props.get('networks')
        if not isinstance(nets, list) or not nets:
            return ()
        return neutron.subnets_on(
            [n.get('network') if isinstance(n, dict) else None
             for n in nets], others)

    @classmethod
    def validate_more(cls, values, path):
        def known(v):
            return v is not p.UNKNOWN

        bdm = values.get('block_device_mapping')
        bdm_v2 = values.get('block_device_mapping_v2')
        if bdm and bdm_v2:
            raise exception.InvalidTemplate(
                'Cannot define the following properties at the same time: '
                'block_device_mapping, block_device_mapping_v2',
                path=path + ['block_device_mapping_v2'])
        bootable = values.get('image') is not None
        for i, m in enumerate(bdm if isinstance(bdm, list) else []):
            if not isinstance(m, dict):
                continue
            if m.get('device_name') == 'vda':
                bootable = True
            vol, snap = m.get('volume_id'), m.get('snapshot_id')
            if vol is not None and snap is not None:
                raise exception.InvalidTemplate(
                    'Cannot define the following properties at the same '
                    'time: volume_id, snapshot_id',
                    path=path + ['block_device_mapping', i])
            if vol is None and snap is None:
                raise exception.InvalidTemplate(
                    'Either volume_id or snapshot_id must be specified for '
                    'device mapping %s' % m.get('device_name'),
                    path=path + ['block_device_mapping', i])
        for i, m in enumerate(bdm_v2 if isinstance(bdm_v2, list) else []):
            if not isinstance(m, dict):
                continue
            sources = [k for k in ('volume_id', 'snapshot_id', 'image',
                                   'image_id', 'swap_size')
                       if m.get(k) is not None]
            if 'image' in sources and 'image_id' in sources:
                sources.remove('image_id')
            if len(sources) > 1:
                raise exception.InvalidTemplate(
                    'Cannot define the following properties at the same '
                    'time: %s' % ', '.join(sources),
                    path=path + ['block_device_mapping_v2', i])
            if not sources and not (m.get('ephemeral_size') or
                                    m.get('ephemeral_format')):
                raise exception.InvalidTemplate(
                    'Either volume_id, snapshot_id, image_id, swap_size, '
                    'ephemeral_size or ephemeral_format must be specified.',
                    path=path + ['block_device_mapping_v2', i])
            if any(k in sources for k in ('volume_id', 'snapshot_id',
                                          'image', 'image_id')):
                bootable = True
        if not bootable and known(bdm) and known(bdm_v2):
            raise exception.InvalidTemplate(
                'Neither image nor bootable volume is specified for '
                'instance', path=path + ['image'])
        heat_boot.validate(values, path)
        nets = values.get('networks')
        for i, net in enumerate(nets if isinstance(nets, list) else []):
            if not isinstance(net, dict):
                continue
            given = [k for k, v in net.items() if v is not None]
            if 'network' in given and 'uuid' in given:
                raise exception.InvalidTemplate(
                    'Cannot define the following properties at the same '
                    'time: network, uuid', path=path + ['networks', i])
            if 'allocate_network' in given and len(
                    [k for k in given if k != 'tag']) > 1:
                raise exception.InvalidTemplate(
                    'Can not specify "allocate_network" with other keys of '
                    'networks at the same time.',
                    path=path + ['networks', i])
        return values

    # -- helpers ----------------------------------------------------------
    @property
    def compute(self):
        return self.clients.compute

    def _server_name(self):
        return self.properties.get('name') or \
            none.physical_resource_name(self, NAME_LIMIT)

    def _resource_label(self):
        stack_name = getattr(self.stack, 'name', None) or 'stack'
        return '%s/%s' % (stack_name, self.name)

    @staticmethod
    def _serialize_meta(meta):
        """Nova metadata values are strings; others become JSON."""
        if not meta:
            return {}
        return {str(k): v if isinstance(v, str) else json.dumps(v)
                for k, v in meta.items()}

    @staticmethod
    def _nics(networks):
        """The nics to boot with, or Nova's 'none' / 'auto' when the
        template asks for them (allocate_network)."""
        nics = []
        for net in networks or []:
            if not isinstance(net, dict):
                continue
            nic = {k: v for k, v in net.items() if v is not None}
            if nic.get('allocate_network') in ('none', 'auto'):
                return nic['allocate_network']
            if 'uuid' in nic and 'network' not in nic:
                nic['network'] = nic.pop('uuid')
            nics.append(nic)
        return nics

    @staticmethod
    def _nets_key(networks):
        """networks without the nic tags (Heat ignores tag changes)."""
        return [{k: v for k, v in (n or {}).items()
                 if k != 'tag' and v is not None}
                for n in (networks or [])]

    def _boot_image(self):
        image = self.properties.get('image')
        if image:
            return image
        for m in self.properties.get('block_device_mapping_v2') or []:
            if m.get('boot_index') in (0, None) and \
                    (m.get('image') or m.get('image_id')):
                return m.get('image') or m.get('image_id')
        return None

    def _user_data(self):
        ud = self.properties.get('user_data') or ''
        fmt = self.properties.get('user_data_format')
        if fmt in ('RAW', 'SOFTWARE_CONFIG') and _is_uuid(ud):
            configs = getattr(self.clients, 'configs', None)
            sc = configs.get(ud) if configs is not None else None
            if sc is not None:
                ud = sc.get('config') or ''
        agents = self._agents()
        if agents is not None:
            # the server's one credential, and where its agent pulls from
            endpoint, token = agents.register(
                self.agent_id, self.stack.id,
                getattr(self.stack, 'project_id', 'converge'), self.name)
            ud = userdata.encode(ud, endpoint, self.agent_id, token)
            ud = heat_boot.user_data(self, ud)
        return ud

    @property
    def agent_id(self):
        """The id of this server's agent credential (stable across a
        retried create, new for a replacement)."""
        return none.derived_uuid(self.uuid, 'agent')

    def _agents(self):
        """The agent credentials store when this server runs software
        deployments (user_data_format SOFTWARE_CONFIG), else None."""
        if self.properties.get('user_data_format') != 'SOFTWARE_CONFIG':
            return None
        return getattr(self.clients, 'agents', None)

    def _extra(self):
        props = self.properties
        extra = {}
        for key, arg in (('security_groups', 'security_groups'),
                         ('availability_zone', 'availability_zone'),
                         ('scheduler_hints', 'scheduler_hints'),
                         ('block_device_mapping', 'block_device_mapping'),
                         ('block_device_mapping_v2',
                          'block_device_mapping_v2'),
                         ('reservation_id', 'reservation_id'),
                         ('config_drive', 'config_drive'),
                         ('diskConfig', 'disk_config'),
                         ('personality', 'files'),
                         ('admin_pass', 'admin_pass'),
                         ('tags', 'tags'),
                         ('user_data_format', 'user_data_format')):
            value = props.get(key)
            if value not in (None, [], {}, ''):
                extra[arg] = value
        return extra

    def _ref(self, kind, value):
        """What the cloud's server shows for the image or flavor a
        template names (a real cloud: the image's id, the flavor's name;
        the simulator: the name as given)."""
        look = getattr(self.compute, kind + '_ref', None)
        return look(value) if look is not None and value else value

    def _get(self):
        """The server by physical_id, or None when it is gone."""
        try:
            server = self.compute.get_server(self.physical_id)
        except exception.CloudNotFound:
            return None
        if server is None or server.get('status') in GONE:
            return None
        return server

    def owned(self, shared=False):
        owns = getattr(self.compute, 'owns_server', None)
        if owns is None:   # a driver without it: found is owned
            return self._get() is not None
        return owns(self.physical_id)

    def _by_key(self):
        """The server made with this resource's idempotency key, if any."""
        server = self.compute.find_server_by_key(self.idempotency_key)
        if server is None or server.get('status') in GONE:
            return None
        return server

    # -- waiting without a thread ------------------------------------------
    def _started(self, action, server, since=None):
        """Remember the action under way (asked for at `since`, by
        default now), for the polls and for telling an ERROR it caused
        from one found there (a failed earlier try). The time before the
        call: the cloud started the action after it, so the ends the
        looks estimate are never early."""
        self.data['waiting'] = {
            'action': action, 'server': server['id'], 'polls': 0,
            'since': time.time() if since is None else since}

    def _mine(self, server):
        waiting = self.data.get('waiting') or {}
        return waiting.get('server') == server.get('id')

    def _look(self, server, action):
        """`server` after `action` was started on it (by this step or an
        earlier call of it): a Wait while it is busy, the server once it
        has settled. ERROR fails the step, as Heat does."""
        if server.get('status') == 'VERIFY_RESIZE':
            # Nova waits for the resize to be confirmed (Heat confirms)
            server = self.compute.confirm_resize(server['id'])
        if _busy(server):
            return self._wait(server, action)
        if server.get('status') == 'ERROR':
            self.data.pop('waiting', None)
            raise exception.ResourceFailure(
                'Server %s (%s) went into ERROR status during %s' % (
                    self._server_name(), server.get('id'), action),
                heat_error='ResourceInError')
        return server

    def _wait(self, server, action):
        waiting = self.data.get('waiting') or {}
        if waiting.get('server') != server['id'] or \
                waiting.get('action') != action:
            # found busy (e.g. after a crash): count from now
            waiting = {'action': action, 'server': server['id'],
                       'since': time.time(), 'polls': 0}
        now = time.time()
        # how late this look came (the engine's timer, its queue): the
        # next is likely as late. It was asked for at 'due', or at
        # 'sooner' if the engine took the earlier look offered
        due = waiting.get('due', now)
        if waiting.get('sooner') is not None and \
                now < due - self.poll_min:
            due = waiting['sooner']
        late = min(max(0.0, now - due), self.poll_max)
        progress = server.get('progress')
        after = self._next_poll(now - waiting['since'], waiting['polls'],
                                progress)
        # when the action can end, by every look so far: a look after
        # half way goes no later than the latest (each look places the
        # end within a whole percent of the time elapsed: up to 0.6 s
        # after the end of a 30 s build), or first splits the span
        earliest, latest = _end_bounds(waiting, now, progress)
        expects_end = bool(progress) and progress >= 50
        sooner = None
        if latest is not None and expects_end:
            last = latest - now <= after + 0.001   # the next look is the last
            after = max(self.poll_min, min(after, latest - now))
            if last:
                # offered, not imposed: an engine with many looks due then
                # takes the last one only (base.Wait.sooner)
                sooner = self._split_look(waiting, now, earliest, latest,
                                          late)
        waiting['polls'] += 1
        waiting['due'] = now + after
        if sooner is None:
            waiting.pop('sooner', None)
        else:
            waiting['sooner'] = now + sooner
        self.data['waiting'] = waiting
        task = _task_state(server)
        return base.Wait(after=after, sooner=sooner, probe=not expects_end,
                         reason='server %s is %s%s' % (
                             server['id'], server.get('status'),
                             ' (%s)' % task if task else ''))

    def _split_look(self, waiting, now, earliest, latest, late=0.0):
        """Seconds until a look that halves the span the end lies in,
        before the last look, up to `split_max` times an action, while
        that span is wider than `split_min`; else None. Nova's progress is a whole percent:
        at the moment the action is k % through if it ends at the middle
        of the span, it shows k % or more if it ends in the earlier half,
        less if in the later. So the look goes at the first such moment
        `split_after` from now. (The last look, at the latest end, then
        comes at most half as late: at the end of a ramp of 2,000 30 s
        builds, the last of them were seen up to half a second after
        they ended.) A look that comes late still bounds the end, only
        less evenly (0.1 s late, a 30 s build's look splits the span a
        third of a second wide at 0.13 s past its middle): it is asked for
        as much earlier as this server's last look came `late`."""
        if waiting.get('split', 0) >= self.split_max or earliest is None \
                or latest - earliest <= self.split_min:
            return None
        since = waiting['since']
        span = (earliest + latest) / 2.0 - since
        percent = math.ceil(
            100.0 * (now + self.split_after + late - since) / span)
        at = since + percent * span / 100.0
        if percent >= 100 or at > earliest - self.poll_min:
            return None   # too near the end: the last look goes next
        waiting['split'] = waiting.get('split', 0) + 1
        return at - late - now

    #: on a cloud whose looks cost no call of their own, how late a look
    #: may see an end, as a share of the time already waited
    late_share = 0.02

    def _poll_max(self, elapsed=0.0):
        """The longest wait between two looks without progress: a cloud
        whose looks cost no call of their own (openstack's ServerWatch:
        one list per interval for every server) is looked at about as
        often as it lists while the wait is young, so a quick end is seen
        within that interval; a long wait then backs off to a look per
        `late_share` of its time (a look is still a unit of work: 200
        servers building for 9 minutes, each looked at every second, cost
        the engine 58 s of CPU)."""
        compute = getattr(getattr(self, 'clients', None), 'compute', None)
        cheap = getattr(compute, 'look_interval', None)
        if not cheap:
            return self.poll_max
        return min(self.poll_max, max(cheap, elapsed * self.late_share))

    def _next_poll(self, elapsed, polls, progress):
        """Seconds until the next look at a busy server.

        With Nova's ``progress`` (a whole percentage, rounded down) the
        time left, if the action advances evenly, lies between
        ``elapsed * (99 - p) / (p + 1)`` and ``elapsed * (100 - p) / p``.
        Before half way, look again at four fifths of the least total
        (estimate again then, where a whole percent is a fine measure);
        after, at the most (at most 2 % of the action late, and seldom a
        look too early, which costs one more). Without
        progress (Nova often reports 0), back off from ``poll_first`` by
        ``poll_growth`` up to ``poll_max``. A little jitter keeps many
        servers started together from being polled in step."""
        if progress and 0 < progress < 100 and elapsed > 0:
            # servers started apart are looked at apart already
            if progress < 50:
                # far from the end the estimate is rough: estimate again
                # at four fifths of the way, well before the end. Not at
                # the least time left: many servers started together
                # (a ramp of creates) then had that look and their last
                # one in the same seconds, and the looks queued behind
                # each other (up to 1.4 s late, 2,000 30 s builds)
                left = elapsed * (79 - progress) / (progress + 1)
            else:
                # near it, the most time left: one look, just after the end
                left = elapsed * (100 - progress) / progress
            after = min(self.poll_estimate_max, left)
        else:
            after = min(self._poll_max(elapsed),
                        self.poll_first * self.poll_growth ** polls)
            after *= random.uniform(1, 1 + self.poll_jitter)
        return max(self.poll_min, after)

    # -- steps ------------------------------------------------------------
    def observe(self):
        if self.physical_id:
            return self._get()
        server = self.compute.find_server_by_key(self.idempotency_key)
        if server is None or server.get('status') in GONE:
            return None
        self.physical_id = server['id']
        return server

    def create(self):
        """Boot the server (or adopt the one made with our key) and wait,
        returning base.Wait, until it is ACTIVE. Safe to call again at
        any time: it looks at the cloud first."""
        server = self._get() if self.physical_id else None
        if server is not None and _deleting(server):
            server = None   # going away: boot a new one
        asked = None
        if server is None:
            # the create adopts a server made with our key before (a crash
            # between the call and recording it), so no look-up first
            asked = time.time()
            server = self._boot(fresh=self.fresh)
        if server.get('status') == 'ERROR' and not self._mine(server):
            # a failed earlier try: discard it and boot again
            try:
                self.compute.delete_server(server['id'])
            except exception.CloudNotFound:
                pass
            asked = time.time()
            server = self._boot()
        if not self._mine(server):
            self._started('create', server, since=asked)
        self.physical_id = server['id']
        if self._agents() is not None:
            # its agent now sees this server's deployments
            self._agents().bind(self.agent_id, server['id'])
        server = self._look(server, 'create')
        if isinstance(server, base.Wait):
            return server
        self.data.pop('waiting', None)
        if server.get('status') == 'SHUTOFF':
            self.compute.start_server(server['id'])
            return None
        self.seen = server
        return None

    def adopt(self, observed):
        """The server's agent keeps the credential it booted with (an
        abandon revokes nothing): make sure it exists and is bound to this
        server, so the agent goes on pulling its deployments."""
        agents = self._agents()
        if agents is not None:
            agents.register(self.agent_id, self.stack.id,
                            getattr(self.stack, 'project_id', 'converge'),
                            self.name)
            agents.bind(self.agent_id, self.physical_id)

    def _boot(self, fresh=False):
        return self.compute.create_server(
            self._server_name(), self._boot_image(),
            self.properties.get('flavor'),
            networks=self._nics(self.properties.get('networks')),
            metadata=self._serialize_meta(self.properties.get('metadata')),
            user_data=self._user_data(),
            key_name=self.properties.get('key_name'),
            idempotency_key=self.idempotency_key,
            resource=self._resource_label(), fresh=fresh,
            **self._extra())

    def needs_replace(self, prior):
        props = self.properties

        def policy(key):
            return props.get(key) or prior.get(key)

        for key, schema in self.properties_schema.items():
            before, after = prior.get(key), props.get(key)
            if before == after:
                continue
            if key == 'image':
                if policy('image_update_policy') == 'REPLACE':
                    return True
            elif key == 'flavor':
                if policy('flavor_update_policy') == 'REPLACE':
                    return True
            elif key == 'user_data':
                if policy('user_data_update_policy') == 'REPLACE':
                    return True
            elif key == 'networks':
                if self._nets_key(before) != self._nets_key(after) and \
                        not self._nets_in_place(before, after):
                    return True
            elif not schema.update_allowed:
                return True
        return False

    def update(self, prior, observed):
        """Rebuild, resize, rename, start: one at a time, each waited for
        (base.Wait) before the next. Called again, it looks at the server
        first, so an action under way is waited for, not started twice."""
        props = self.properties
        if self.needs_replace(prior):
            raise exception.UpdateReplace(self.name)
        if not self.physical_id:
            raise exception.UpdateReplace(self.name)
        waiting = self.data.get('waiting')
        if waiting or not observed:
            # called again after a wait (or observing failed): look now
            observed = self._get()
        if observed is None or _deleting(observed):
            raise exception.UpdateReplace(self.name)
        if observed.get('status') == 'ERROR' and not self._mine(observed):
            raise exception.UpdateReplace(self.name)
        action = (waiting or {}).get('action', 'update')
        observed = self._look(observed, action)
        if isinstance(observed, base.Wait):
            return observed
        self._check_ended(action, observed)
        server_id = self.physical_id

        # image: rebuild (or replace, by policy)
        image = self._boot_image()
        if image is not None and \
                observed.get('image') != self._ref('image', image):
            if props.get('image_update_policy') == 'REPLACE':
                raise exception.UpdateReplace(self.name)
            asked = time.time()
            observed = self.compute.rebuild_server(server_id, image)
            self._started('rebuild', observed, since=asked)
            observed = self._look(observed, 'rebuild')
            if isinstance(observed, base.Wait):
                return observed

        # flavor: resize (or replace, by policy)
        flavor = props.get('flavor')
        if flavor is not None and \
                observed.get('flavor') != self._ref('flavor', flavor):
            if props.get('flavor_update_policy') == 'REPLACE':
                raise exception.UpdateReplace(self.name)
            asked = time.time()
            observed = self.compute.resize_server(server_id, flavor)
            self._started('resize', observed, since=asked)
            observed = self._look(observed, 'resize')
            if isinstance(observed, base.Wait):
                return observed
        # networks: interfaces detached and attached (Heat's)
        if self._nets_key(prior.get('networks')) != \
                self._nets_key(props.get('networks')):
            wait = self._update_networks(prior.get('networks'), server_id)
            if wait is not None:
                return wait
        self.data.pop('waiting', None)

        # name and metadata: in place
        name = self._server_name()
        meta = self._serialize_meta(props.get('metadata'))
        changes = {}
        if observed.get('name') != name:
            changes['name'] = name
        if (observed.get('metadata') or {}) != meta:
            changes['metadata'] = meta
        if changes:
            observed = self.compute.update_server(server_id, **changes) \
                or observed

        if props.get('software_config_transport') != \
                prior.get('software_config_transport'):
            heat_boot.updated(self)

        # a stopped server is started again
        if observed.get('status') == 'SHUTOFF':
            self.compute.start_server(server_id)
        return None

    # -- networks in place --------------------------------------------------
    #: nic keys an interface shows (the rest are Heat's port's, which an
    #: attach does not make: a change of them replaces)
    IFACE_KEYS = ('port', 'network', 'subnet', 'fixed_ip')

    @staticmethod
    def _nic_list(networks):
        """The template's nics (uuid read as network), None values
        and the tag left out; None for a string network (allocate)."""
        out = []
        for net in networks or []:
            if not isinstance(net, dict):
                return None
            nic = {k: v for k, v in net.items()
                   if v is not None and k != 'tag'}
            if 'allocate_network' in nic:
                return None
            if 'uuid' in nic:
                nic.setdefault('network', nic.pop('uuid'))
                nic.pop('uuid', None)
            out.append(nic)
        return out

    def _nets_in_place(self, before, after):
        """Whether the change from nics `before` to `after` can be made
        by detaching and attaching interfaces."""
        if not hasattr(self.compute, 'attach_interface'):
            return False
        old, new = self._nic_list(before), self._nic_list(after)
        if old is None or not new:
            return False
        for nic in new:
            if nic not in old and set(nic) - set(self.IFACE_KEYS):
                return False   # floating_ip, port_extra_properties...
        try:
            for nic in old + new:
                self._nic_ids(nic)
        except exception.CloudError:
            return False      # names nothing of the cloud: replaced
        return True

    def _nic_ids(self, nic):
        """The nic as an interface would show it: port, network and
        subnet as ids, the fixed IP as given."""
        cloud = self.clients.cloud
        ids = {}
        for key in ('port', 'network', 'subnet'):
            if nic.get(key):
                ids[key] = cloud.resolve(key, nic[key])
        if nic.get('fixed_ip'):
            ids['fixed_ip'] = nic['fixed_ip']
        return ids

    @staticmethod
    def _iface(port):
        fixed = port.get('fixed_ips') or []
        return {'port': port['id'], 'network': port.get('network_id'),
                'fixed_ip': {f.get('ip_address') for f in fixed},
                'subnet': {f.get('subnet_id') for f in fixed},
                'tags': port.get('tags') or []}

    @staticmethod
    def _best(ifaces, ids):
        """The interface of `ifaces` that nic `ids` is (Heat's best
        match: every key the nic gives agrees; the most keys win)."""
        best, most = None, -1
        for iface in ifaces:
            agree = 0
            for key, value in ids.items():
                have = iface[key]
                if value in have if isinstance(have, set) else \
                        value == have:
                    agree += 1
                else:
                    break
            else:
                if agree > most:
                    best, most = iface, agree
        return best

    def _plan_networks(self, prior_nets, ifaces):
        """(interfaces to detach, nics to attach): each new nic keeps
        the interface it already is; of the rest, those an old nic was
        go (all of them if the server had no nics: Nova's own pick)."""
        pool = list(ifaces)
        attach = []
        for nic in self._nic_list(self.properties.get('networks')) or []:
            match = self._best(pool, self._nic_ids(nic))
            if match is None:
                attach.append(nic)
            else:
                pool.remove(match)
        old = self._nic_list(prior_nets) or []
        if not old:
            return pool, attach
        detach = []
        for nic in old:
            match = self._best(pool, self._nic_ids(nic))
            if match is not None:
                pool.remove(match)
                detach.append(match)
        return detach, attach

    def _made_here(self, iface):
        """Whether converge made the interface's port for this server
        (a nic on a subnet): it goes when it is detached."""
        prefix = cloud_mod.key_tag(self.idempotency_key + '-')
        return any(t.startswith(prefix) for t in iface['tags'])

    def _update_networks(self, prior_nets, server_id):
        """Detach what goes, wait until Nova is done, delete the ports
        converge made for it, attach what comes; a Wait while detaching.
        Planned from the interfaces each time: a nic attached by an
        earlier try is an interface now, and is kept."""
        if any(n.get('subnet') for n in (self._nic_list(prior_nets) or []) +
               (self._nic_list(self.properties.get('networks')) or [])):
            # a port converge made may stay on under a nic that no longer
            # names the subnet: looked for at the delete all the same
            self.data['subnet_nics'] = True
        ifaces = [self._iface(p) for p in self.compute.interfaces(server_id)]
        detach, attach = self._plan_networks(prior_nets, ifaces)
        waiting = self.data.get('waiting') or {}
        if waiting.get('action') != 'detach':
            waiting = {'action': 'detach', 'server': server_id, 'polls': 0,
                       'since': time.time(), 'ports': [], 'made': []}
        for iface in detach:
            if iface['port'] in waiting['ports']:
                continue    # asked already: Nova is at it
            try:
                self.compute.detach_interface(server_id, iface['port'])
            except exception.CloudNotFound:
                pass
            waiting['ports'].append(iface['port'])
            if self._made_here(iface):
                waiting['made'].append(iface['port'])
        if detach:
            self.data['waiting'] = waiting
            waiting['polls'] += 1
            after = min(self.poll_max, self.poll_first *
                        self.poll_growth ** (waiting['polls'] - 1))
            return base.Wait(after=after, reason='detaching port%s %s from '
                             'server %s' % ('s' if len(detach) > 1 else '',
                                            ', '.join(i['port']
                                                      for i in detach),
                                            server_id))
        for port_id in waiting.get('made', []):
            self._delete_port(port_id)
        self.data.pop('waiting', None)
        for nic in attach:
            digest = uuid_mod.uuid5(uuid_mod.NAMESPACE_URL, json.dumps(
                nic, sort_keys=True)).hex[:8]
            self.compute.attach_interface(
                server_id, nic, '%s-a%s' % (self.idempotency_key, digest),
                security_groups=self.properties.get('security_groups'))
        return None

    def _delete_port(self, port_id):
        try:
            self.clients.cloud.delete('port', port_id)
        except exception.CloudNotFound:
            pass

    def _made_ports(self, server_id):
        """The ids of the ports converge made for the server (tagged
        with its key): a nic on a subnet only, so only then looked for."""
        nics = self._nic_list(self.properties.get('networks')) or []
        if not any(n.get('subnet') for n in nics) and \
                not self.data.get('subnet_nics'):
            return []
        try:
            ports = self.compute.interfaces(server_id)
        except exception.CloudNotFound:
            return []
        return [p['id'] for p in ports if self._made_here(self._iface(p))]

    # -- replacement: the template's ports go to the new server ------------
    def _given_ports(self):
        nics = self._nic_list(self.properties.get('networks')) or []
        return [n['port'] for n in nics if n.get('port')]

    def prepare_for_replace(self):
        """Detach the ports the template gives this server, so that its
        replacement boots on them (Heat's); a Wait until Nova has."""
        given = self._given_ports()
        if not given or not self.physical_id or \
                not hasattr(self.compute, 'detach_interface'):
            return False
        server = self._get()
        if server is None or server.get('status') == 'ERROR':
            return False
        ids = {self.clients.cloud.resolve('port', p) for p in given}
        attached = [p['id'] for p in self.compute.interfaces(server['id'])
                    if p['id'] in ids]
        waiting = self.data.get('waiting') or {}
        if not attached:
            return self.data.pop('waiting', None) is not None
        if waiting.get('action') != 'give-ports':
            waiting = {'action': 'give-ports', 'server': server['id'],
                       'ports': [], 'polls': 0, 'since': time.time()}
        for port_id in attached:
            if port_id not in waiting['ports']:
                try:
                    self.compute.detach_interface(server['id'], port_id)
                except exception.CloudNotFound:
                    pass
                waiting['ports'].append(port_id)
        waiting['polls'] += 1
        self.data['waiting'] = waiting
        return base.Wait(
            after=min(self.poll_max, self.poll_first *
                      self.poll_growth ** (waiting['polls'] - 1)),
            reason='detaching port%s %s from server %s for its replacement'
            % ('s' if len(attached) > 1 else '', ', '.join(attached),
               server['id']))

    def restore_after_replace(self):
        """The replacement is gone and this server stays (a rollback
        kept it): the template's ports attached back; a Wait while one is
        still another server's (Nova letting go of it)."""
        given = self._given_ports()
        if not given or not self.physical_id or \
                not hasattr(self.compute, 'attach_interface'):
            return False
        server = self._get()
        if server is None:
            return False
        have = {p['id'] for p in self.compute.interfaces(server['id'])}
        for ref in given:
            port_id = self.clients.cloud.resolve('port', ref)
            if port_id in have:
                continue
            port = self.clients.cloud.get('port', port_id)
            if port is None:
                continue
            if port.get('device_id'):
                return base.Wait(after=self.poll_max / 2, reason=(
                    'port %s is still %s\'s' % (port_id,
                                                 port['device_id'])))
            self.compute.attach_interface(server['id'], {'port': port_id},
                                          self.idempotency_key)
        return True

    def _check_ended(self, action, server):
        """A rebuild or resize that settled without taking effect failed
        (Nova puts the server back as it was when, say, no host can take
        the new flavor): say so, as Heat does, rather than ask again and
        again."""
        flavor, image = self.properties.get('flavor'), self._boot_image()
        if action == 'resize' and flavor is not None and \
                server.get('flavor') != self._ref('flavor', flavor):
            self.data.pop('waiting', None)
            raise exception.ResourceFailure(
                "Resizing to '%s' failed, status '%s'" % (
                    flavor, server.get('status')))
        if action == 'rebuild' and image is not None and \
                server.get('image') != self._ref('image', image):
            self.data.pop('waiting', None)
            raise exception.ResourceFailure(
                "Rebuilding server %s to image '%s' failed, status '%s'" % (
                    server.get('id'), image, server.get('status')))

    def delete(self):
        """Delete the server and wait (base.Wait) until the cloud no longer
        shows it. A server already being deleted is only waited for."""
        if self._agents() is not None:
            self._agents().revoke(self.agent_id)
            heat_boot.revoke(self)
        server = self._get() if self.physical_id else None
        if server is None:
            # also when physical_id is gone: a server booted again under
            # our key whose id was never recorded must not be left behind
            server = self._by_key()
        if server is None:
            self.data.pop('waiting', None)
            return self._gone()
        if not _deleting(server):
            # Nova only unbinds the ports it was given: those converge
            # made go after the server (found now, while bound to it)
            made = self._made_ports(server['id'])
            if made:
                self.data['made_ports'] = made
            asked = time.time()
            try:
                self.compute.delete_server(server['id'])
            except exception.CloudNotFound:
                pass
            self._started('delete', server, since=asked)
            try:
                server = self.compute.get_server(server['id'])
            except exception.CloudNotFound:
                server = None
            if server is None or server.get('status') in GONE:
                self.data.pop('waiting', None)
                return self._gone()
        return self._wait(server, 'delete')

    def _gone(self):
        """The server is gone: the ports converge made for it too."""
        for port_id in self.data.get('made_ports') or []:
            self._delete_port(port_id)
        self.data.pop('made_ports', None)
        return None

    def suspend(self, observed):
        """Stop the server (the simulated cloud has no suspend of its
        own: SHUTOFF stands for SUSPENDED)."""
        if observed and observed.get('status') != 'SHUTOFF':
            self.compute.stop_server(observed['id'])
        return None

    def resume(self, observed):
        if observed and observed.get('status') == 'SHUTOFF':
            self.compute.start_server(observed['id'])
        return None

    # -- snapshots (Heat's handle_snapshot, handle_restore) ---------------
    def snapshot(self, observed, snapshot_id):
        """An image of the server (Nova's createImage), made once per
        snapshot (found again by a key of the resource's and the
        snapshot's) and waited for until Glance has it active and Nova
        no longer uploads it. Heat's ``snapshot_image_id`` names it;
        ``data['snapshot']`` the snapshot it was made for, kept once done
        (a stack deleted mid-snapshot finds every image made so far)."""
        if not self.physical_id:
            return None   # never made: nothing to keep
        cloud = self.clients.cloud
        taken = self.data.get('snapshot') or {}
        if taken.get('of') != snapshot_id:
            image = cloud.create('server_image', {
                'server_id': self.physical_id,
                'name': '%s-%s' % (self._server_name(), snapshot_id[:8])},
                key=base.snapshot_key(self.idempotency_key, snapshot_id))
            taken = {'of': snapshot_id, 'image': image['id'], 'polls': 0}
            self.data['snapshot'] = taken
            self.data['snapshot_image_id'] = image['id']
        image = cloud.get('image', taken['image'])
        status = (image or {}).get('status')
        if status in (None, 'killed', 'deleted', 'pending_delete'):
            raise exception.ResourceFailure(
                'Image %s of server %s is %s' % (
                    taken['image'], self.physical_id, status or 'gone'))
        if status == 'active':
            server = self._get()
            if server is None or not str(
                    _task_state(server) or '').startswith('image_'):
                return None
        taken['polls'] = taken.get('polls', 0) + 1
        return base.Wait(after=min(self.poll_max, self.poll_first *
                                   self.poll_growth ** taken['polls']),
                         reason='image %s of server %s is %s' % (
                             taken['image'], self.physical_id, status))

    @classmethod
    def restore_properties(cls, resource_data):
        image = resource_data.get('snapshot_image_id')
        # rebuilt from its snapshot's image (or replaced, by its
        # image_update_policy)
        return {'image': image} if image else {}

    def delete_snapshot(self, resource_data):
        image = resource_data.get('snapshot_image_id')
        if image:
            try:
                self.clients.cloud.delete('image', image)
            except exception.CloudNotFound:
                pass

    def check(self, observed):
        if observed == {} and self.physical_id:  # observing failed: retry
            observed = self._get()
        if observed is None:
            raise exception.ResourceFailure(
                'Server %s does not exist' % self.name)
        status = observed.get('status')
        if status != 'ACTIVE':
            raise exception.ResourceFailure(
                'Server %s (%s) is %s, not ACTIVE' % (
                    observed.get('name') or self.name,
                    observed.get('id') or self.physical_id, status))

    def drift(self, observed):
        """What differs from what was applied: {field: (observed,
        applied)}. A server gone is the engine's to see (None)."""
        if not observed:  # gone (the engine creates) or not observable
            return {}
        changed = {}
        name = self._server_name()
        if 'name' in observed and observed.get('name') != name:
            changed['name'] = (observed.get('name'), name)
        image = self._boot_image()
        if 'image' in observed and image is not None and \
                observed.get('image') != self._ref('image', image):
            changed['image'] = (observed.get('image'), image)
        flavor = self.properties.get('flavor')
        if 'flavor' in observed and \
                observed.get('flavor') != self._ref('flavor', flavor):
            changed['flavor'] = (observed.get('flavor'), flavor)
        if observed.get('status') in ('SHUTOFF', 'ERROR'):
            changed['status'] = (observed.get('status'), 'ACTIVE')
        return changed

    @classmethod
    def observe_many(cls, plugins):
        """One list call per cloud for all of `plugins` (observers/):
        {id(plugin): observed state, None when gone}."""
        found = {}
        by_cloud = {}
        for plugin in plugins:
            by_cloud.setdefault(id(plugin.compute), []).append(plugin)
        for group in by_cloud.values():
            servers = {s['id']: s for s in group[0].compute.list_servers()}
            for plugin in group:
                server = servers.get(plugin.physical_id)
                if server is not None and server.get('status') in GONE:
                    server = None
                found[id(plugin)] = server
        return found

    # -- attributes -------------------------------------------------------
    def get_attributes(self, observed):
        server = observed or {}
        addresses = copy.deepcopy(server.get('addresses') or {})
        if 'addresses' in self.attributes_read:
            self._with_ports(server.get('id'), addresses)
        networks = {}
        first_v4 = ''
        for net, entries in addresses.items():
            ips = []
            for entry in entries or []:
                addr = entry.get('addr') if isinstance(entry, dict) \
                    else entry
                if addr is None:
                    continue
                ips.append(addr)
                version = entry.get('version', 4) \
                    if isinstance(entry, dict) else 4
                if not first_v4 and str(version) == '4':
                    first_v4 = addr
            networks[net] = ips
        server_id = server.get('id') or self.physical_id
        instance_name = server.get('OS-EXT-SRV-ATTR:instance_name') or \
            server.get('instance_name')
        if not instance_name and server_id:
            instance_name = 'instance-%s' % str(server_id)[:8]
        tags = server.get('tags')
        if tags is None:
            tags = list(self.properties.get('tags') or [])
        return {
            'name': server.get('name') or self._server_name(),
            'addresses': addresses,
            'networks': networks,
            'first_address': first_v4,
            'instance_name': instance_name,
            'accessIPv4': server.get('accessIPv4', ''),
            'accessIPv6': server.get('accessIPv6', ''),
            'console_urls': {},
            'os_collect_config': heat_boot.collect_config(self),
            'tags': tags,
            'show': copy.deepcopy(server) if server else None,
        }

    def _with_ports(self, server_id, addresses):
        """Each address with the id of its port and network (Heat's
        ``port`` and ``network``), matched by MAC address with the
        server's interfaces. An address with no MAC (the simulator's
        free-form networks) has none: no call is made for it."""
        entries = [e for found in addresses.values() for e in found or []
                   if isinstance(e, dict) and e.get(_MAC)]
        if not entries or not server_id:
            return
        try:
            ports = self.compute.interfaces(server_id)
        except exception.CloudError:
            return   # the attribute as Nova shows it
        by_mac = {p.get('mac_address'): p for p in ports}
        for entry in entries:
            port = by_mac.get(entry[_MAC])
            if port is not None:
                entry['port'] = port['id']
                entry['network'] = port.get('network_id')

    def reference_id(self):
        return self.physical_id or self.name


#: where Nova's address entry gives its port's MAC address
_MAC = 'OS-EXT-IPS-MAC:mac_addr'


def _task_state(server):
    return server.get('task_state') or server.get('OS-EXT-STS:task_state')


def _deleting(server):
    return _task_state(server) == 'deleting'


def _busy(server):
    """In a transitional status (BUILD, REBUILD, RESIZE, ...) or with an
    action under way (Nova's task_state)."""
    status = server.get('status')
    return bool(_task_state(server)) or status not in \
        SETTLED + GONE + ('VERIFY_RESIZE',)


def _is_uuid(value):
    try:
        uuid_mod.UUID(str(value))
        return True
    except ValueError:
        return False


def _end_bounds(waiting, now, progress):
    """(earliest, latest) epoch time the action under way can end, from
    Nova's `progress` (a whole percentage, rounded down) now and every
    earlier look's bounds, kept in `waiting`; (None, None) while nothing
    bounds it. If the action does not advance evenly the bounds may
    disagree: then this look's alone."""
    before = (waiting.get('earliest'), waiting.get('latest'))
    if not progress or not 0 < progress < 100:
        return before
    elapsed = now - waiting['since']
    if elapsed <= 0:
        return before
    latest = waiting['since'] + elapsed * 100.0 / progress
    earliest = waiting['since'] + elapsed * 100.0 / (progress + 1)
    lo, hi = before
    if hi is not None and earliest <= hi and (lo is None or lo <= latest):
        earliest, latest = max(earliest, lo or earliest), min(latest, hi)
    waiting['earliest'], waiting['latest'] = earliest, latest
    return earliest, latest
