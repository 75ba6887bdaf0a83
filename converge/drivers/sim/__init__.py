"""The simulated compute cloud ("sim").

Servers live in their own database (any SQLAlchemy URL; SQLite by
default) so every process of a deployment sees the same cloud. See
:class:`SimCompute`.
"""

from converge.drivers.sim.api import OPS  # noqa: F401
from converge.drivers.sim.api import SimCompute  # noqa: F401
from converge.drivers.sim.store import forget  # noqa: F401

__all__ = ['SimCompute', 'OPS', 'forget']
