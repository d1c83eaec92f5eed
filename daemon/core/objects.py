"""``ObjectEvent``: what the tracker publishes, and its Redis Streams field contract (version 1).

Every value is a string. All events: ``v`` (``1``), ``camera``, ``track`` (decimal id), ``label``, ``cls``,
``score`` (best score), ``event`` (``new`` | ``crossed`` | ``end``), ``at_ms`` (Unix ms, capture clock: first
seen, the interpolated crossing, last seen). ``crossed`` adds ``line``, ``direction`` (``in`` | ``out``),
``count`` (running total for the line and direction), ``speed_px_s`` (signed, along the line's direction),
``speed_mm_s`` (only when calibrated) and ``eta`` (compact JSON object gate id -> Unix ms; only when the
line has gates and a speed was usable) and ``snapshot`` (only with ``[snapshots]`` on and the JPEG queued:
its path relative to the snapshot directory, served at ``GET /snapshots/<path>``), ``clip`` and ``clip_offset_ms``
(only with ``[clips]`` on and the clip opened: its path relative to the clips directory, served at
``GET /clips/<path>`` and complete at most ``post_s`` + 5 s after the crossing, and the crossing's time in it,
ms from its first frame). ``end`` adds ``first_ms``,
``last_ms`` and ``frames``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

EventKind = Literal["new", "crossed", "end"]
CONTRACT_VERSION = "1"
COMMON_FIELDS = ("v", "camera", "track", "label", "cls", "score", "event", "at_ms")
CROSSED_REQUIRED = ("line", "direction", "count", "speed_px_s")
CROSSED_OPTIONAL = ("speed_mm_s", "eta", "snapshot", "clip", "clip_offset_ms")
END_FIELDS = ("first_ms", "last_ms", "frames")
_INT = re.compile(r"-?[0-9]+")


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    """One track event; fields that do not belong to its kind are None (see the module for the contract)."""

    camera: str
    track: int
    label: str
    cls: int
    score: float
    event: EventKind
    at_ms: int
    line: str | None = None
    direction: Literal["in", "out"] | None = None
    count: int | None = None
    speed_px_s: float | None = None
    speed_mm_s: float | None = None
    eta: tuple[tuple[str, int], ...] | None = None
    first_ms: int | None = None
    last_ms: int | None = None
    frames: int | None = None
    snapshot: str | None = None
    """`crossed` only: the snapshot's path relative to `[snapshots] dir` (daemon.publish.snapshots)."""
    clip: str | None = None
    """`crossed` only: the clip's path relative to `[clips] dir` (daemon.publish.clips), with `clip_offset_ms`."""
    clip_offset_ms: int | None = None
    """`crossed` only, with `clip`: where in the clip the crossing is, ms from its first frame."""

    def __post_init__(self) -> None:
        _check(self)

    def to_fields(self) -> dict[str, str]:
        """The Redis stream entry: exactly the fields of this event's kind, every value a string."""
        out = {
            "v": CONTRACT_VERSION,
            "camera": self.camera,
            "track": str(self.track),
            "label": self.label,
            "cls": str(self.cls),
            "score": repr(self.score),
            "event": self.event,
            "at_ms": str(self.at_ms),
        }
        if self.event == "crossed":
            out |= {
                "line": str(self.line),
                "direction": str(self.direction),
                "count": str(self.count),
                "speed_px_s": repr(self.speed_px_s),
            }
            if self.speed_mm_s is not None:
                out["speed_mm_s"] = repr(self.speed_mm_s)
            if self.eta is not None:
                out["eta"] = json.dumps(dict(self.eta), separators=(",", ":"))
            if self.snapshot is not None:
                out["snapshot"] = self.snapshot
            if self.clip is not None:
                out["clip"] = self.clip
                out["clip_offset_ms"] = str(self.clip_offset_ms)
        elif self.event == "end":
            out |= {"first_ms": str(self.first_ms), "last_ms": str(self.last_ms), "frames": str(self.frames)}
        return out


@dataclass(frozen=True, slots=True)
class ObjectsResume:
    """Where a camera's track ids and line counts continue after a restart: read back from its
    objects stream (the newest `new` entry's track + 1; each (line, direction)'s newest `count`)."""

    next_track_id: int = 1
    counts: Mapping[tuple[str, str], int] = field(default_factory=dict)


def _check(e: ObjectEvent) -> None:
    """Kind-dependent consistency; raises ValueError naming the field."""
    if not e.camera:
        raise ValueError("camera: empty")
    if e.event not in ("new", "crossed", "end"):
        raise ValueError(f"event: unknown kind {e.event!r}")
    if e.cls < 0:
        raise ValueError("cls: negative")
    if not (math.isfinite(e.score) and 0.0 <= e.score <= 1.0):
        raise ValueError("score: must be in 0..1")
    crossed = {"line": e.line, "direction": e.direction, "count": e.count, "speed_px_s": e.speed_px_s}
    extra = {
        "speed_mm_s": e.speed_mm_s,
        "eta": e.eta,
        "snapshot": e.snapshot,
        "clip": e.clip,
        "clip_offset_ms": e.clip_offset_ms,
    }
    end = {"first_ms": e.first_ms, "last_ms": e.last_ms, "frames": e.frames}
    for name, value in (crossed | extra | end).items():
        belongs = (name in crossed and e.event == "crossed") or (name in end and e.event == "end")
        if value is None and belongs:
            raise ValueError(f"{name}: required for {e.event!r}")
        if value is not None and not belongs and not (name in extra and e.event == "crossed"):
            raise ValueError(f"{name}: not allowed for {e.event!r}")
    if (e.clip is None) != (e.clip_offset_ms is None):
        raise ValueError("clip_offset_ms: goes with clip")
    if e.clip_offset_ms is not None and e.clip_offset_ms < 0:
        raise ValueError("clip_offset_ms: negative")
    if e.event == "crossed":
        if e.direction not in ("in", "out"):
            raise ValueError(f"direction: 'in' or 'out', got {e.direction!r}")
        if e.count is not None and e.count < 1:
            raise ValueError("count: must be >= 1 after a crossing")
        for name in ("speed_px_s", "speed_mm_s"):
            value = getattr(e, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name}: not finite")
    if e.event == "end" and e.first_ms is not None and e.last_ms is not None:
        if e.first_ms > e.last_ms:
            raise ValueError("first_ms: after last_ms")
        if e.frames is not None and e.frames < 1:
            raise ValueError("frames: must be >= 1")


def _int(fields: dict[str, str], name: str, minimum: int | None = None) -> int:
    text = _get(fields, name)
    if not _INT.fullmatch(text):
        raise ValueError(f"{name}: not a decimal integer: {text!r}")
    value = int(text)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    return value


def _float(fields: dict[str, str], name: str) -> float:
    text = _get(fields, name)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}: not a number: {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name}: not finite: {text!r}")
    return value


def _get(fields: dict[str, str], name: str) -> str:
    if name not in fields:
        raise ValueError(f"{name}: missing")
    value = fields[name]
    if not isinstance(value, str):
        raise ValueError(f"{name}: not a string")
    return value


def _eta(text: str) -> tuple[tuple[str, int], ...]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"eta: not JSON: {text!r}") from None
    if not isinstance(obj, dict):
        raise ValueError("eta: not a JSON object")
    out = []
    for gate, ms in obj.items():
        if not gate or isinstance(ms, bool) or not isinstance(ms, int):
            raise ValueError(f"eta: gate {gate!r} needs an integer Unix ms")
        out.append((gate, ms))
    return tuple(out)


def parse_fields(fields: dict[str, str]) -> ObjectEvent:
    """Validate a stream entry and build its event; raises ValueError naming the offending field."""
    if _get(fields, "v") != CONTRACT_VERSION:
        raise ValueError(f"v: unsupported contract version {fields['v']!r}")
    kind = _get(fields, "event")
    allowed = set(COMMON_FIELDS)
    if kind == "crossed":
        allowed |= set(CROSSED_REQUIRED) | set(CROSSED_OPTIONAL)
    elif kind == "end":
        allowed |= set(END_FIELDS)
    elif kind != "new":
        raise ValueError(f"event: unknown kind {kind!r}")
    for name in fields:
        if name not in allowed:
            raise ValueError(f"{name}: not allowed for {kind!r}")
    camera, label = _get(fields, "camera"), _get(fields, "label")
    track, cls = _int(fields, "track", 0), _int(fields, "cls", 0)
    score, at_ms = _float(fields, "score"), _int(fields, "at_ms")
    if kind == "new":
        return ObjectEvent(camera, track, label, cls, score, "new", at_ms)
    if kind == "end":
        return ObjectEvent(
            camera,
            track,
            label,
            cls,
            score,
            "end",
            at_ms,
            first_ms=_int(fields, "first_ms"),
            last_ms=_int(fields, "last_ms"),
            frames=_int(fields, "frames", 1),
        )
    text = _get(fields, "direction")
    if text not in {"in", "out"}:
        raise ValueError(f"direction: 'in' or 'out', got {text!r}")
    direction: Literal["in", "out"] = "in" if text == "in" else "out"
    return ObjectEvent(
        camera,
        track,
        label,
        cls,
        score,
        "crossed",
        at_ms,
        line=_get(fields, "line"),
        direction=direction,
        count=_int(fields, "count", 1),
        speed_px_s=_float(fields, "speed_px_s"),
        speed_mm_s=_float(fields, "speed_mm_s") if "speed_mm_s" in fields else None,
        eta=_eta(fields["eta"]) if "eta" in fields else None,
        snapshot=_get(fields, "snapshot") if "snapshot" in fields else None,
        clip=_get(fields, "clip") if "clip" in fields else None,
        clip_offset_ms=_int(fields, "clip_offset_ms", 0) if "clip_offset_ms" in fields else None,
    )
