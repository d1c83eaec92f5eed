"""Files written off the hot path from published frames: what the crossing snapshots
(`daemon.publish.snapshots`) and the frame capture (`daemon.publish.capture`) share.

- `jpeg`: a frame as JPEG from what the pipeline holds (the decoded YUV 4:2:0 frame through
  libjpeg-turbo's YUV entry point, `simplejpeg`; the scaled RGB planes where no decoded frame exists),
  whole or cropped to a box with the box drawn.
- `pending`: `PendingFrames`, each inferred frame kept until its result is published.
- `worker`: `FileWorker`, a bounded queue and the one thread that handles it (a full queue refuses a
  job without waiting); `write_atomic` (files appear whole); `failure_reason` (`disk_full`, `write_error`).
- `retention`: `Retention`, by age and total size, the oldest first, from an index built once at start.

May import: `daemon.core`. Entry points: the four modules above.
"""
