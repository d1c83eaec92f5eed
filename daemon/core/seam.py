"""The core room's public seam: what the lab (`tools/`) may use of `daemon.core`, in one place.

`tools/` imports the daemon only through the modules listed in `PUBLIC_SEAMS`
(tests/test_architecture.py; import-linter's contract in pyproject.toml): one `seam` per room plus
`daemon.app`. A seam only re-exports; the daemon itself never imports it, so a room's package stays
as light as its `__init__` and the lab's reach into the daemon is this list, not the room's insides.

Here: the values that cross stages (`Frame`, `FrameResult`, `Detection`, `Letterbox`, `StatusEvent`,
`ObjectEvent` with `parse_fields`), `Metrics`, the clock, the array module (`get_xp`, `to_host`,
`cupy_status`, `DeviceChoice`: the device stand-in's), `nvml` and `yuv` (as modules: the GPU check
calls several of their functions), and the enumerations the docs are generated from
(`DROP_REASONS`, `STATUS_KINDS`, `STAGES`).
"""

from daemon.core import nvml, yuv
from daemon.core.clock import SYSTEM_CLOCK, time_ms
from daemon.core.drop_reasons import DROP_REASONS, reasons
from daemon.core.frames import (
    LETTERBOX_PAD_VALUE,
    Detection,
    Frame,
    FrameResult,
    Letterbox,
    RGBPlanes,
    StatusEvent,
    nearest_model_size,
)
from daemon.core.memory import tune_malloc
from daemon.core.metrics import Metrics
from daemon.core.model_spec import ModelOverrides
from daemon.core.netaddr import parse_host_port
from daemon.core.objects import ObjectEvent, parse_fields
from daemon.core.packets import PacketRing
from daemon.core.shifts import parse_shifts
from daemon.core.stagecpu import STAGES
from daemon.core.status_kinds import STATUS_KINDS, kinds
from daemon.core.tasks import stop_task
from daemon.core.xp import DeviceChoice, cupy_status, get_xp, to_host

__all__ = [
    "DROP_REASONS",
    "LETTERBOX_PAD_VALUE",
    "STAGES",
    "STATUS_KINDS",
    "SYSTEM_CLOCK",
    "Detection",
    "DeviceChoice",
    "Frame",
    "FrameResult",
    "Letterbox",
    "Metrics",
    "ModelOverrides",
    "ObjectEvent",
    "PacketRing",
    "RGBPlanes",
    "StatusEvent",
    "cupy_status",
    "get_xp",
    "kinds",
    "nearest_model_size",
    "nvml",
    "parse_fields",
    "parse_host_port",
    "parse_shifts",
    "reasons",
    "stop_task",
    "time_ms",
    "to_host",
    "tune_malloc",
    "yuv",
]
