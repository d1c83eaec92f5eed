"""Crossing snapshots: a JPEG of the frame each `crossed` event was found on, written off the hot path.

- `writer`: `SnapshotWriter`. On the event loop, `observe` keeps a reference to each inferred frame
  until its result is published and `attach` gives each of the result's `crossed` events a path and
  queues its job (a bounded queue: a full one drops the snapshot, counted, never the frame or the
  event); one thread encodes, writes and applies retention.
- `image`: the picture from what the pipeline holds (the decoded YUV 4:2:0 frame, no RGB round trip;
  the scaled RGB planes where no decoded frame exists), crop with a margin, the box drawn, JPEG through
  libjpeg-turbo (`simplejpeg`, chosen by `tools/bench/snapshots.py`).
- `retention`: by age and total size, oldest first, from an index built once at start (no directory
  walk per write).
- `paths`: each snapshot's path relative to `[snapshots] dir`, and `resolve`, which maps a requested
  path to a file inside the directory or to nothing (no `..`, no absolute paths, no symlink escapes).

Why here: a snapshot is an output of a published event, written to disk beside the sink's other
output (the spool), and its path goes into the event the sink writes; the tracker does no I/O.
May import: `daemon.core`, `daemon.config`. Entry points: `SnapshotWriter`, `resolve`.
"""

from daemon.publish.snapshots.paths import resolve, snapshot_path
from daemon.publish.snapshots.writer import SnapshotWriter

__all__ = ["SnapshotWriter", "resolve", "snapshot_path"]
