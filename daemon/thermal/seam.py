"""The thermal room's public seam: what the lab (`tools/`) may use of `daemon.thermal`.

One `seam` per room (see `daemon.core.seam` and `PUBLIC_SEAMS` in tests/test_architecture.py): the
pure governor (`ThermalGovernor`, its `LEVELS`, `Throttle`), a `Reading`, and the NVML sensor the
GPU thermal check reads.
"""

from daemon.thermal.governor import LEVELS, ThermalGovernor, Throttle
from daemon.thermal.sensors import NvmlSensor
from daemon.thermal.types import Reading

__all__ = ["LEVELS", "NvmlSensor", "Reading", "ThermalGovernor", "Throttle"]
