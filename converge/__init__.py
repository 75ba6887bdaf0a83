"""converge: a convergence engine for OpenStack Heat Orchestration Templates.

Native threads, no eventlet: oslo.service's threading backend must be chosen
before anything loads a backend (oslo.service's default is eventlet), so it
is chosen here, first, as the default its first use loads. eventlet is
still installed (a hard dependency of oslo.service) and libraries import it
just to look; its deprecation notice says nothing about converge, so it is
silenced.
"""

import os
import warnings

# eventlet, imported only to be looked at, would load dnspython for its
# green DNS: about a second of every command's start. Nothing here is green.
os.environ.setdefault('EVENTLET_NO_GREENDNS', 'yes')

warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
warnings.filterwarnings('ignore', message='eventletutils module is deprecated')

from oslo_service import backend as _backend  # noqa: E402

# chosen now, loaded when first used (a worker's service, a looping call):
# loading it is 0.12 s of every CLI command's start, and most never use it
_backend.register_backend_default_hook(
    lambda: _backend.BackendType.THREADING)
