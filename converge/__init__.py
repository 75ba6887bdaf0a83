"""converge: a convergence engine for OpenStack Heat Orchestration Templates.

Native threads, no eventlet: oslo.service's threading backend must be chosen
before anything imports oslo_messaging (importing it selects eventlet as a
side effect), so it is chosen here, first. eventlet is still installed (a
hard dependency of oslo.service) and libraries import it just to look; its
deprecation notice says nothing about converge, so it is silenced.
"""

import os
import warnings

# eventlet, imported only to be looked at, would load dnspython for its
# green DNS: about a second of every command's start. Nothing here is green.
os.environ.setdefault('EVENTLET_NO_GREENDNS', 'yes')

warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
warnings.filterwarnings('ignore', message='eventletutils module is deprecated')

from oslo_service import backend as _backend  # noqa: E402

try:
    _backend.init_backend(_backend.BackendType.THREADING)
except _backend.exceptions.BackendAlreadySelected:  # pragma: no cover
    pass
