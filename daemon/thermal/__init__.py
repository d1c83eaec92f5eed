"""The thermal room: sensors (NVML, Linux thermal zones), the pure governor, the monitor loop.

May import: `daemon.core`, `daemon.config`. Entry points: `ThermalGovernor` (pure: readings in,
the admitted share out), `Reading`, `Throttle`, and `daemon.thermal.monitor.ThermalMonitor`, the
loop a running daemon starts.
"""

from daemon.thermal.governor import ThermalGovernor, Throttle
from daemon.thermal.types import Reading

__all__ = ["Reading", "ThermalGovernor", "Throttle"]
