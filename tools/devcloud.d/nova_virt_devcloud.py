# Placed by tools/devcloud as nova/virt/devcloud.py inside its virtualenv:
# Nova loads compute_driver as "nova.virt.<name>".
from devcloud_drivers.nova_virt import DevcloudFakeDriver  # noqa: F401
