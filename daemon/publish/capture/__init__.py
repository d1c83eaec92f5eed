"""Frame capture: the frames the model is unsure of, written off the hot path as a YOLO dataset for
relabelling and training (`docs/models/improving.md`).

- `strategies`: which frames (`close_to_threshold`, `weak_track`, `random`: one function each in
  `STRATEGIES`), each with a chance and per-camera limits per minute and per hour (`Sampler`).
- `dataset`: the layout (`images/<camera>/<ms>.jpg`, `labels/<camera>/<ms>.txt`, `data.yaml`).
- `writer`: `FrameCapture`. On the event loop it keeps each inferred frame until its result is
  published and queues the chosen ones (a bounded queue: a full one drops the capture, counted, never
  the frame); one thread encodes, writes and keeps the directory under `[capture] max_mb`.

Why here: like the snapshots, a capture is an output of a published frame written to disk; it reuses
their JPEG, queue thread and retention (`daemon.publish.files`). May import: `daemon.core`,
`daemon.config`, `daemon.publish.files`. Entry point: `FrameCapture`.
"""

from daemon.publish.capture.writer import FrameCapture

__all__ = ["FrameCapture"]
