"""Tracking: per-camera tracks from post-processed detections, line crossings, belt speed, gate arrival times.

The room turns each camera's detections (after NMS, in camera pixels, stamped with the frame's capture time
in Unix ms) into tracks with stable ids and publishes ``ObjectEvent``s (``new``, ``crossed``, ``end``) whose
Redis field contract is ``ObjectEvent.to_fields`` / ``parse_fields``. Everything runs on capture time, so
dropped frames and irregular gaps cost accuracy, never correctness.

Imports allowed here: the standard library, numpy and scipy; nothing else from ``daemon`` (later, the
``daemon.core`` types may be allowed). No I/O, no asyncio, no clocks: the caller supplies every time.

Entry points: ``CameraTracker`` (one per camera; ``update`` per frame, ``finish`` at shutdown) and its
``TrackUpdate``; the specs ``LineSpec``, ``GateSpec``, ``TrackerParams``; ``ObjectEvent`` and ``parse_fields``.
"""

from daemon.tracking.camera import CameraTracker, TrackUpdate
from daemon.tracking.events import ObjectEvent, parse_fields
from daemon.tracking.specs import GateSpec, LineSpec, TrackerParams

__all__ = ["CameraTracker", "GateSpec", "LineSpec", "ObjectEvent", "TrackUpdate", "TrackerParams", "parse_fields"]
