"""The crossing clips' contract (issue #56), checked on a written MP4 with PyAV: what the independent check reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import av


@dataclass(frozen=True, slots=True)
class ClipFacts:
    codec: str
    tag: str
    width: int
    height: int
    first_is_key: bool
    first_s: float
    """The first decoded frame's time."""
    last_end_s: float
    """The last frame's time plus one frame."""
    frames: int


def clip_facts(path: Path) -> ClipFacts:
    """Decode every frame of the clip's (only) video stream."""
    with av.open(str(path)) as container:
        assert len(container.streams) == 1, "a clip holds the video only (audio dropped)"
        stream = container.streams.video[0]
        frames = list(container.decode(stream))
        assert frames, f"{path}: no frame decodes"
        rate = stream.average_rate or stream.guessed_rate
        frame_s = 1 / float(rate) if rate else 0.0
        times = [f.time for f in frames if f.time is not None]
        return ClipFacts(
            stream.codec_context.name,
            stream.codec_tag,
            stream.codec_context.width,
            stream.codec_context.height,
            frames[0].key_frame,
            min(times),
            max(times) + frame_s,
            len(frames),
        )


def check_contract(facts: ClipFacts, *, offset_ms: int, pre_s: float, post_s: float, keyframe_interval_ms: int) -> None:
    """First frame a keyframe; `clip_offset_ms` at least `pre_s` minus one keyframe interval; the file runs
    at least `post_s` - 200 ms past it."""
    assert facts.first_is_key, "the clip's first video frame is not a keyframe"
    assert offset_ms >= pre_s * 1000 - keyframe_interval_ms, (offset_ms, pre_s)
    assert facts.last_end_s * 1000 >= offset_ms + post_s * 1000 - 200, (facts, offset_ms, post_s)
