"""The tracking room's public seam: what the lab (`tools/`) may use of `daemon.tracking`.

One `seam` per room (see `daemon.core.seam` and `PUBLIC_SEAMS` in tests/test_architecture.py): the
tracker and its specs (`CameraTracker`, `LineSpec`, `GateSpec`), and the stage with the helpers that
turn the config into specs (`TrackingStage`, `line_specs`, `tracker_params`).
"""

from daemon.tracking.camera import CameraTracker
from daemon.tracking.specs import GateSpec, LineSpec
from daemon.tracking.stage import TrackingStage, line_specs, tracker_params

__all__ = ["CameraTracker", "GateSpec", "LineSpec", "TrackingStage", "line_specs", "tracker_params"]
