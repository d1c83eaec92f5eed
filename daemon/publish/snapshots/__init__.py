"""Crossing snapshots: a JPEG of the frame each `crossed` event was found on, written off the hot path.

- `writer`: `SnapshotWriter`. On the event loop, `observe` keeps a reference to each inferred frame
  until its result is published and `attach` gives each of the result's `crossed` events a path and
  queues its job (a bounded queue: a full one drops the snapshot, counted, never the frame or the
  event); one thread encodes, writes and applies retention.
- The picture (crop with a margin, the box drawn, JPEG through libjpeg-turbo, chosen by
  `tools/bench/snapshots.py`), the bounded queue and its thread, and retention by age and total size
  are `daemon.publish.files`', shared with the frame capture.
- `paths`: each snapshot's path relative to `[snapshots] dir`, and `resolve`, which maps a requested
  path to a file inside the directory or to nothing (no `..`, no absolute paths, no symlink escapes).

Why here: a snapshot is an output of a published event, written to disk beside the sink's other
output (the spool), and its path goes into the event the sink writes; the tracker does no I/O.
May import: `daemon.core`, `daemon.config`, `daemon.publish.files`. Entry points: `SnapshotWriter`, `resolve`.
"""

from daemon.publish.snapshots.paths import resolve, snapshot_path
from daemon.publish.snapshots.writer import SnapshotWriter

__all__ = ["SnapshotWriter", "resolve", "snapshot_path"]
