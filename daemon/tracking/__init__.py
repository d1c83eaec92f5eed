"""Tracking: per-camera tracks from post-processed detections, line crossings, belt speed, gate arrival times.

The room turns each camera's detections (after NMS, in camera pixels, stamped with the frame's capture time
in Unix ms) into tracks with stable ids and publishes ``ObjectEvent``s (``new``, ``crossed``, ``end``) whose
Redis field contract is ``ObjectEvent.to_fields`` / ``parse_fields``. Everything runs on capture time, so
dropped frames and irregular gaps cost accuracy, never correctness.

Imports allowed here: the standard library, numpy and scipy, and ``daemon.core`` (the ``ObjectEvent``
type the sink writes); the stage (``daemon.tracking.stage``) also reads ``daemon.config``. ``specs`` is the one
place for the tracking rules: lines, gates, parameters, the algorithms' constants and the Kalman noise; it takes
the ``[tracking]`` knobs' defaults and checks, and the line and gate rules, from their one source,
``daemon.config.tracking`` (what the lines API checks a body with). The tracker does
no I/O and reads no clock: the caller supplies every time. ``daemon.tracking.state`` and ``persist`` keep
where ids and counts stand in a small file next to the spool. Nothing here imports another stage's room.

The tracker, by idea: ``bytetrack`` (a track's life: predict, correct, miss, birth, confirm, expire) over
``track`` (the record and what an update reports), ``matching`` (the four association stages) with
``association`` (IoU and gated assignment) and ``belt_shift`` (stage 4), and ``kalman`` (the motion model).

Lines and knobs change on a running stage between two frames (``TrackingStage.apply_lines``,
``set_params``; ``CameraTracker.set_lines``): tracks, ids and kept lines' counts stay.

Entry points: ``daemon.tracking.stage.TrackingStage`` (what the builder, ``daemon.pipeline``, wires between the
lanes and the sink; ``daemon.tracking.persist.resume_stage`` resumes it at the daemon's start-up),
and, re-exported here, ``CameraTracker`` (one per camera; ``update`` per frame, ``finish`` at shutdown) with
its specs ``LineSpec``, ``GateSpec``, ``TrackerParams``. Events are ``daemon.core.objects.ObjectEvent`` (a
consumer validates an entry with ``daemon.core.objects.parse_fields``).
"""

from daemon.tracking.camera import CameraTracker
from daemon.tracking.specs import GateSpec, LineSpec, TrackerParams

__all__ = ["CameraTracker", "GateSpec", "LineSpec", "TrackerParams"]
