"""The simulated cloud ("sim").

Servers and every other object (networks, ports, volumes, images, ...)
live in their own database (any SQLAlchemy URL; SQLite by default) so
every process of a deployment sees the same cloud. See
:class:`SimCompute` (servers) and :class:`SimCloud` (the other kinds,
drivers/cloud.py's interface).
"""

from converge.drivers.sim.api import OBJECT_OPS  # noqa: F401
from converge.drivers.sim.api import OPS  # noqa: F401
from converge.drivers.sim.api import SimCompute  # noqa: F401
from converge.drivers.sim.objects import SimCloud  # noqa: F401
from converge.drivers.sim.store import forget  # noqa: F401

__all__ = ['SimCompute', 'SimCloud', 'OPS', 'OBJECT_OPS', 'forget']
