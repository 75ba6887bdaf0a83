"""Cinder volume driver that stores nothing.

Volumes, snapshots and clones exist only as Cinder database rows; every
data-path call succeeds without doing anything.  Connections are handed out
as driver_volume_type 'local' pointing at /dev/null, which Nova's fake virt
driver records without opening.
"""
from oslo_log import log as logging

from cinder.volume import driver

LOG = logging.getLogger(__name__)

_CAPACITY_GB = 1024 * 1024


class NullVolumeDriver(driver.VolumeDriver):
    VERSION = '1.0'
    # Not a vendor driver: nothing to run a third-party CI for.
    CI_WIKI_NAME = 'devcloud'

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._stats = {}

    def do_setup(self, context):
        pass

    def check_for_setup_error(self):
        pass

    def _update_volume_stats(self):
        backend = (self.configuration.safe_get('volume_backend_name')
                   or 'devnull')
        self._stats = {
            'volume_backend_name': backend,
            'vendor_name': 'devcloud',
            'driver_version': self.VERSION,
            'storage_protocol': 'local',
            'total_capacity_gb': _CAPACITY_GB,
            'free_capacity_gb': _CAPACITY_GB,
            'reserved_percentage': 0,
            'thin_provisioning_support': True,
            'thick_provisioning_support': True,
            'max_over_subscription_ratio': 20.0,
            'multiattach': True,
            'online_extend_support': True,
            'QoS_support': False,
        }

    def get_volume_stats(self, refresh=False):
        if refresh or not self._stats:
            self._update_volume_stats()
        return self._stats

    # volumes
    def create_volume(self, volume):
        return {}

    def create_volume_from_snapshot(self, volume, snapshot):
        return {}

    def create_cloned_volume(self, volume, src_vref):
        return {}

    def delete_volume(self, volume):
        pass

    def extend_volume(self, volume, new_size):
        pass

    def local_path(self, volume):
        return '/dev/null'

    # images: nothing to copy into or out of
    def copy_image_to_volume(self, context, volume, image_service, image_id,
                             disable_sparse=False):
        pass

    def copy_image_to_encrypted_volume(self, context, volume, image_service,
                                       image_id):
        pass

    def copy_volume_to_image(self, context, volume, image_service,
                             image_meta):
        pass

    def clone_image(self, context, volume, image_location, image_meta,
                    image_service):
        return None, False

    # snapshots
    def create_snapshot(self, snapshot):
        pass

    def delete_snapshot(self, snapshot):
        pass

    def revert_to_snapshot(self, context, volume, snapshot):
        pass

    # exports and connections
    def ensure_export(self, context, volume):
        pass

    def create_export(self, context, volume, connector):
        return None

    def remove_export(self, context, volume):
        pass

    def create_export_snapshot(self, context, snapshot, connector):
        return None

    def remove_export_snapshot(self, context, snapshot):
        pass

    def validate_connector(self, connector):
        pass

    def initialize_connection(self, volume, connector, **kwargs):
        return {'driver_volume_type': 'local',
                'data': {'device_path': '/dev/null',
                         'volume_id': volume.id,
                         'access_mode': 'rw'}}

    def terminate_connection(self, volume, connector, **kwargs):
        pass

    def retype(self, context, volume, new_type, diff, host):
        return True, None

    def accept_transfer(self, context, volume, new_user, new_project):
        pass

    def get_pool(self, volume):
        return self._stats.get('volume_backend_name', 'devnull')
