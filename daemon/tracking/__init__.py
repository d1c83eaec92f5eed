"""Tracking: per-camera tracks from post-processed detections, line crossings, belt speed, gate arrival times.

The room turns each camera's detections (after NMS, in camera pixels, stamped with the frame's capture time
in Unix ms) into tracks with stable ids and publishes ``ObjectEvent``s (``new``, ``crossed``, ``end``) whose
Redis field contract is ``ObjectEvent.to_fields`` / ``parse_fields``. Everything runs on capture time, so
dropped frames and irregular gaps cost accuracy, never correctness.

Imports allowed here: the standard library, numpy and scipy; nothing else from ``daemon`` (later, the
``daemon.core`` types may be allowed). No I/O, no asyncio, no clocks: the caller supplies every time.

Entry points, re-exported here: ``CameraTracker`` (one per camera; ``update`` per frame, ``finish`` at
shutdown), the specs ``LineSpec``, ``GateSpec``, ``TrackerParams``, and ``ObjectEvent``. Nothing else is
re-exported: ``update``'s result type is ``daemon.tracking.camera.TrackUpdate``, and a consumer validates an
entry with ``daemon.tracking.events.parse_fields``.
"""

from daemon.tracking.camera import CameraTracker
from daemon.tracking.events import ObjectEvent
from daemon.tracking.specs import GateSpec, LineSpec, TrackerParams

__all__ = ["CameraTracker", "GateSpec", "LineSpec", "ObjectEvent", "TrackerParams"]
