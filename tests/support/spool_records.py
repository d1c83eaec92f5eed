"""Spool records for tests: frame `seq` of a camera with its entry ID, the same size whatever `seq`.

The spool's crash test imports this module in a child process, so it imports nothing of pytest."""

from __future__ import annotations

import time

from daemon.core.frames import Detection, FrameResult
from daemon.publish.schema import EntryId
from daemon.publish.spool.record import SpoolRecord

BASE_MS = 1_700_000_000_000
BOLT = Detection(cls=1, label="bolt", score=0.912345, box=(1.5, 2.0, 3.25, 4.0))


def record(seq: int, camera: str = "cam1", n_dets: int = 1) -> SpoolRecord:
    """Frame `seq` captured at BASE_MS + seq ms, with `n_dets` bolts, entry ID `<BASE_MS + seq>-0`."""
    result = FrameResult(
        camera_id=camera,
        seq=seq,
        captured_ms=BASE_MS + seq,
        captured_mono=time.monotonic(),
        width=1280,
        height=720,
        model_size=640,
        model_name="conveyor-640@1.0.0",
        detections=(BOLT,) * n_dets,
    )
    return SpoolRecord(result, EntryId(BASE_MS + seq, 0))
