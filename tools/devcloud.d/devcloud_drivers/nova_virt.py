"""Nova fake virt driver that survives a restart of nova-compute.

Nova's FakeDriver names its node after a random UUID chosen per process, so
a restarted nova-compute finds a compute node it does not own and refuses to
run.  FakeDriverWithoutFakeNodes takes the node name from ``[DEFAULT] host``
and its UUID from ``$state_path/compute_id`` (written on first start), which
is stable.  On top of that this driver re-adopts, at start-up, the servers
that the database places on this host: FakeDriver keeps its servers only in
memory, and without this a server built before a restart could no longer be
stopped, rebooted or have volumes attached.

A snapshot (Nova's createImage) uploads a stand-in disk to the image, as a
real driver uploads the server's: FakeDriver uploads nothing, which leaves
the image queued forever, and whoever waits for it (Heat's stack snapshot,
converge's) waits for it to be active.

Nova loads ``compute_driver`` as ``nova.virt.<value>``, so tools/devcloud
places a one-line module ``nova/virt/devcloud.py`` re-exporting this class.
"""
import io
import time

from oslo_log import log as logging

from nova.compute import power_state
from nova import context as nova_context
from nova import objects
from nova.virt import fake

LOG = logging.getLogger(__name__)


class DevcloudFakeDriver(fake.FakeDriverWithoutFakeNodes):

    def init_host(self, host):
        super().init_host(host)
        try:
            self._adopt_instances(host)
        except Exception:  # never keep the service from starting
            LOG.exception('devcloud: could not re-adopt instances of %s',
                          host)

    def _adopt_instances(self, host):
        ctxt = nova_context.get_admin_context()
        instances = objects.InstanceList.get_by_host(
            ctxt, host, expected_attrs=['flavor'])
        adopted = 0
        for instance in instances:
            if instance.uuid in self.instances or instance.deleted:
                continue
            state = (power_state.RUNNING
                     if instance.power_state == power_state.RUNNING
                     else power_state.SHUTDOWN)
            self.instances[instance.uuid] = fake.FakeInstance(
                instance.name, state, instance.uuid)
            flavor = instance.flavor
            self.resources.claim(vcpus=flavor.vcpus, mem=flavor.memory_mb,
                                 disk=flavor.root_gb)
            adopted += 1
        if adopted:
            LOG.info('devcloud: re-adopted %d instance(s) on %s',
                     adopted, host)

    def get_host_uptime(self):
        # asked for by GET /os-hypervisors/detail (microversion >= 2.88
        # leaves it out, older ones call the compute over RPC)
        return ' %s up 1 day,  0 users,  load average: 0.00, 0.00, 0.00' % (
            time.strftime('%H:%M:%S'))

    def snapshot(self, context, instance, image_id, update_task_state):
        super().snapshot(context, instance, image_id, update_task_state)
        from nova.image import glance
        # 1 KiB of raw disk, as the devcloud's cirros image (Glance takes
        # data only once an image has its formats, which a driver sets)
        glance.API().update(
            context, image_id,
            {'disk_format': 'raw', 'container_format': 'bare'},
            data=io.BytesIO(b'\0' * 1024))
