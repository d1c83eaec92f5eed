"""Crossing clips: an MP4 around each `crossed` event, remuxed from the camera's own packets (never decoded
or encoded), written off the hot path.

- `recorder`: `ClipRecorder`, on the event loop. `attach` gives each selected `crossed` event its clip: a
  crossing inside a clip still open extends it (up to `max_s`), any other opens one from the keyframe at or
  before `pre_s` before it (found in the camera's `daemon.core.packets.PacketRing`); the event names the
  clip (`clip`, `clip_offset_ms`) before it is published, and the file follows.
- `open_clip`: `OpenClip`, the one object the loop and the writer's thread share per clip (its end, moved
  by extensions, and whether the thread closed it), and the clip's path.
- `writer`: `ClipWriter`, the thread: muxes each clip's packets into a fragmented MP4 (`.part` beside it,
  renamed when complete; a crash leaves a playable file, renamed at the next start), H.264 as `avc1`, H.265
  as `hvc1`, timestamps from 0; retention by age and total size (`daemon.publish.files.retention`); the
  bounded queue and its thread are `daemon.publish.files.worker`'s.

Why here: a clip is an output of a published event, beside the snapshots, and its path goes into the
event the sink writes. May import: `daemon.core`, `daemon.config`, `daemon.publish.files`.
Entry points: `ClipRecorder`, `resolve`.
"""

from daemon.publish.clips.open_clip import SUFFIX, resolve
from daemon.publish.clips.recorder import ClipRecorder

__all__ = ["SUFFIX", "ClipRecorder", "resolve"]
