"""The publish room's public seam: what the lab (`tools/`) may use of `daemon.publish`.

One `seam` per room (see `daemon.core.seam` and `PUBLIC_SEAMS` in tests/test_architecture.py): the
sink (`RedisSink`), the entry format (`encode_entry`, `decode_entry`) and `beltsight tail`'s
`format_entry`, and the file writers the benches measure (`FrameCapture` with its writer's `Job`,
`ClipRecorder`, the JPEG `render` / `picture_of`).
"""

from daemon.publish.capture import FrameCapture
from daemon.publish.capture.writer import Job
from daemon.publish.clips import ClipRecorder
from daemon.publish.files.jpeg import picture_of, render
from daemon.publish.schema import decode_entry, encode_entry
from daemon.publish.sink import RedisSink
from daemon.publish.tail import format_entry

__all__ = [
    "ClipRecorder",
    "FrameCapture",
    "Job",
    "RedisSink",
    "decode_entry",
    "encode_entry",
    "format_entry",
    "picture_of",
    "render",
]
