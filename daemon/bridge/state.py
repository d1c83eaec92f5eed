"""The served state, applied from stream entries (pure: no I/O, no clock).

Per camera: `status` (`unknown` until its first camera_up/camera_down/camera_stalled event). Per
line, about the line's crossings: `count_in`/`count_out` are the entries' own `count` values (the
daemon's running totals, which survive restarts of anything), never a tally kept here; `last_*`,
`cls` and the per-gate ETAs are those of the line's most recent crossing in stream order.

Replays are idempotent, so the reader can re-read any entry (pending entries after a restart, a
Redis restored from an older snapshot) without the PLC seeing anything twice:

- an entry whose stream id is not above the last one applied from its stream changes nothing;
- a crossing whose `count` is not above the served count for its line and direction changes
  nothing (nor fires an event). A daemon whose counts were reset therefore shows nothing until its
  counts pass the served ones again; deleting the bridge's snapshot key and its group starts over.

A malformed entry raises `MalformedEntryError` (the reader counts, logs and acknowledges it); it
changes nothing. `to_snapshot`/`load_snapshot` carry the state across bridge restarts (on a Redis
Cluster in parts, one per stream: `to_snapshot_part`/`load_snapshot_part`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from daemon.bridge.layout import BridgeLayout

Status = Literal["unknown", "up", "down", "stalled"]
STATUS_KINDS: dict[str, Status] = {"camera_up": "up", "camera_down": "down", "camera_stalled": "stalled"}
OBJECT_EVENTS = ("new", "crossed", "end")
SNAPSHOT_VERSION = 1


class MalformedEntryError(ValueError):
    """A stream entry missing a field, or with a field that does not parse; `reason` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


StreamId = tuple[int, int]


def parse_id(entry_id: str) -> StreamId:
    ms, _, seq = entry_id.partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError as exc:
        raise MalformedEntryError(f"entry id {entry_id!r}") from exc


def _id_text(sid: StreamId) -> str:
    return f"{sid[0]}-{sid[1]}"


@dataclass(slots=True)
class LineState:
    count_in: int = 0
    count_out: int = 0
    last_track: int = 0
    last_label: str = ""
    last_cls: int = 0
    last_crossed_ms: int = 0
    last_direction: str = ""
    eta: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class CameraState:
    status: Status = "unknown"
    status_id: StreamId = (0, 0)
    last_id: StreamId = (0, 0)
    lines: dict[str, LineState] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Crossing:
    """One crossing newly served: what the servers push, and the OPC UA event's properties."""

    camera: str
    line: str
    track: int
    label: str
    cls: int
    direction: str
    count: int
    at_ms: int
    eta_json: str
    entry_id: str
    snapshot: str = ""
    """The crossing's snapshot path (relative to `[snapshots] dir`); "" when the entry has none."""
    clip: str = ""
    """The crossing's clip (relative to `[clips] dir`); "" when the entry has none."""
    clip_offset_ms: int = 0
    """Where in `clip` the crossing is."""
    speed_mm_s: float = 0.0
    """The part's belt speed at the crossing (0: not measured, no `mm_per_px`)."""


@dataclass(frozen=True, slots=True)
class StatusChange:
    camera: str
    status: Status


Change = Crossing | StatusChange


def _field(fields: dict[str, str], name: str) -> str:
    value = fields.get(name)
    if value is None or value == "":
        raise MalformedEntryError(f"missing field {name!r}")
    return value


def _int(fields: dict[str, str], name: str, *, minimum: int | None = 0) -> int:
    raw = _field(fields, name)
    try:
        value = int(raw, 10)
    except ValueError as exc:
        raise MalformedEntryError(f"field {name!r} is not an integer: {raw[:40]!r}") from exc
    if minimum is not None and value < minimum:
        raise MalformedEntryError(f"field {name!r} is below {minimum}: {value}")
    return value


def _float(fields: dict[str, str], name: str) -> float:
    raw = _field(fields, name)
    try:
        return float(raw)
    except ValueError as exc:
        raise MalformedEntryError(f"field {name!r} is not a number: {raw[:40]!r}") from exc


def parse_eta(raw: str | None) -> dict[str, int]:
    """The `eta` field: a JSON object gate id -> Unix ms (absent or empty: no gates)."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise MalformedEntryError("field 'eta' is not JSON") from exc
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in value.items()
    ):
        raise MalformedEntryError("field 'eta' must be an object of gate id -> integer ms")
    return value


def _check_common(fields: dict[str, str], camera: str) -> str:
    if fields.get("v") != "1":
        raise MalformedEntryError(f"unsupported version v={fields.get('v', '')[:10]!r}")
    if _field(fields, "camera") != camera:
        raise MalformedEntryError(f"camera {fields['camera'][:64]!r} on the stream of {camera!r}")
    _int(fields, "track")
    _field(fields, "label")
    _int(fields, "cls")
    _float(fields, "score")
    _int(fields, "at_ms")
    event = _field(fields, "event")
    if event not in OBJECT_EVENTS:
        raise MalformedEntryError(f"field 'event' is {event[:20]!r}, not one of {'|'.join(OBJECT_EVENTS)}")
    return event


class BridgeState:
    """Everything served, for the layout's cameras and lines (others are ignored and counted)."""

    def __init__(self, layout: BridgeLayout) -> None:
        self.layout = layout
        self.cameras: dict[str, CameraState] = {
            c.id: CameraState(lines={line.id: LineState() for line in c.lines}) for c in layout.cameras
        }
        self.ignored = 0
        """Well-formed entries that serve nothing: other cameras or lines, replays, other kinds."""

    def line(self, camera: str, line: str) -> LineState:
        return self.cameras[camera].lines[line]

    def apply_object(self, camera: str, entry_id: str, fields: dict[str, str]) -> Crossing | None:
        """Apply one entry of `camera`'s objects stream; the crossing newly served, or None."""
        cam = self.cameras.get(camera)
        sid = parse_id(entry_id)
        event = _check_common(fields, camera)
        crossing = _parse_crossing(fields, camera, entry_id) if event == "crossed" else None
        if event == "end":
            for name in ("first_ms", "last_ms", "frames"):
                _int(fields, name)
        if cam is None or sid <= cam.last_id:
            self.ignored += 1
            return None
        cam.last_id = sid
        if crossing is None:
            return None
        line = cam.lines.get(crossing.line)
        if line is None:
            self.ignored += 1
            return None
        served = line.count_in if crossing.direction == "in" else line.count_out
        if crossing.count <= served:
            self.ignored += 1
            return None
        _serve(line, crossing)
        return crossing

    def apply_event(self, entry_id: str, fields: dict[str, str]) -> StatusChange | None:
        """Apply one entry of the events stream; the status change newly served, or None."""
        sid = parse_id(entry_id)
        kind = _field(fields, "kind")
        status = STATUS_KINDS.get(kind)
        if status is None:
            self.ignored += 1
            return None
        cam = self.cameras.get(_field(fields, "camera"))
        if cam is None or sid <= cam.status_id:
            self.ignored += 1
            return None
        cam.status_id = sid
        if cam.status == status:
            return None
        cam.status = status
        return StatusChange(fields["camera"], status)

    def to_snapshot(self) -> str:
        cameras: dict[str, Any] = {}
        for cid, cam in self.cameras.items():
            cameras[cid] = {
                "status": cam.status,
                "status_id": _id_text(cam.status_id),
                "last_id": _id_text(cam.last_id),
                "lines": {lid: _line_dict(line) for lid, line in cam.lines.items()},
            }
        return json.dumps({"v": SNAPSHOT_VERSION, "cameras": cameras}, separators=(",", ":"), sort_keys=True)

    def to_snapshot_part(self, camera: str | None) -> str:
        """The part of the snapshot one stream's entries determine (a Redis Cluster keeps one per stream,
        in the stream's slot): a camera's objects stream -> its `last_id` and lines; the events stream
        (`camera` None) -> every camera's `status` and `status_id`."""
        if camera is None:
            cameras = {cid: {"status": c.status, "status_id": _id_text(c.status_id)} for cid, c in self.cameras.items()}
            part: dict[str, Any] = {"v": SNAPSHOT_VERSION, "events": cameras}
        else:
            cam = self.cameras[camera]
            lines = {lid: _line_dict(line) for lid, line in cam.lines.items()}
            part = {"v": SNAPSHOT_VERSION, "camera": camera, "last_id": _id_text(cam.last_id), "lines": lines}
        return json.dumps(part, separators=(",", ":"), sort_keys=True)

    def load_snapshot_part(self, text: str) -> None:
        """Restore one `to_snapshot_part`; MalformedEntryError (state unchanged) when it does not parse."""
        try:
            data = json.loads(text)
            if data.get("v") != SNAPSHOT_VERSION:
                raise MalformedEntryError(f"snapshot version {data.get('v')!r}")
            if "events" in data:
                statuses = {cid: _status_from(raw) for cid, raw in data["events"].items() if cid in self.cameras}
                for cid, (status, status_id) in statuses.items():
                    self.cameras[cid].status, self.cameras[cid].status_id = status, status_id
                return
            cam = self.cameras.get(data["camera"])
            if cam is None:
                return
            last_id = parse_id(data["last_id"])
            lines = {lid: LineState(**line) for lid, line in data["lines"].items() if lid in cam.lines}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MalformedEntryError(f"snapshot: {exc}") from exc
        cam.last_id = last_id
        cam.lines.update(lines)

    def load_snapshot(self, text: str) -> None:
        """Restore from `to_snapshot` output; cameras and lines no longer in the layout are dropped.
        A snapshot that does not parse raises `MalformedEntryError` and leaves the state as it was."""
        try:
            data = json.loads(text)
            if data.get("v") != SNAPSHOT_VERSION:
                raise MalformedEntryError(f"snapshot version {data.get('v')!r}")
            restored = {cid: _camera_from(raw) for cid, raw in data["cameras"].items() if cid in self.cameras}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MalformedEntryError(f"snapshot: {exc}") from exc
        for cid, cam in restored.items():
            known = self.cameras[cid].lines
            cam.lines = {lid: cam.lines.get(lid, LineState()) for lid in known}
            self.cameras[cid] = cam


def crossing_from_entry(camera: str, entry_id: str, fields: dict[str, str]) -> Crossing | None:
    """The crossing one entry of `camera`'s objects stream records (None for `new` and `end`), read
    without applying it (Machine Vision's result queries); MalformedEntryError as `apply_object`."""
    parse_id(entry_id)
    event = _check_common(fields, camera)
    return _parse_crossing(fields, camera, entry_id) if event == "crossed" else None


def crossings_from_rows(camera: str, rows: Any) -> list[Crossing]:
    """The well-formed crossings among XRANGE/XREVRANGE rows of `camera`'s objects stream, in their
    order (other entries skipped)."""
    out: list[Crossing] = []
    for entry_id, raw in rows:
        eid = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        fields = {_text(k): _text(v) for k, v in raw.items()}
        try:
            crossing = crossing_from_entry(camera, eid, fields)
        except MalformedEntryError:
            continue
        if crossing is not None:
            out.append(crossing)
    return out


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _parse_crossing(fields: dict[str, str], camera: str, entry_id: str) -> Crossing:
    direction = _field(fields, "direction")
    if direction not in ("in", "out"):
        raise MalformedEntryError(f"field 'direction' is {direction[:10]!r}, not in/out")
    _float(fields, "speed_px_s")
    speed_mm_s = _float(fields, "speed_mm_s") if fields.get("speed_mm_s") else 0.0
    eta_raw = fields.get("eta") or ""
    parse_eta(eta_raw)
    return Crossing(
        camera=camera,
        line=_field(fields, "line"),
        track=_int(fields, "track"),
        label=fields["label"],
        cls=_int(fields, "cls"),
        direction=direction,
        count=_int(fields, "count"),
        at_ms=_int(fields, "at_ms"),
        eta_json=eta_raw,
        entry_id=entry_id,
        snapshot=fields.get("snapshot", ""),
        clip=fields.get("clip", ""),
        clip_offset_ms=_int(fields, "clip_offset_ms") if fields.get("clip_offset_ms") else 0,
        speed_mm_s=speed_mm_s,
    )


def _serve(line: LineState, crossing: Crossing) -> None:
    if crossing.direction == "in":
        line.count_in = crossing.count
    else:
        line.count_out = crossing.count
    line.last_track = crossing.track
    line.last_label = crossing.label
    line.last_cls = crossing.cls
    line.last_crossed_ms = crossing.at_ms
    line.last_direction = crossing.direction
    line.eta = parse_eta(crossing.eta_json)


def _line_dict(line: LineState) -> dict[str, Any]:
    return {
        "count_in": line.count_in,
        "count_out": line.count_out,
        "last_track": line.last_track,
        "last_label": line.last_label,
        "last_cls": line.last_cls,
        "last_crossed_ms": line.last_crossed_ms,
        "last_direction": line.last_direction,
        "eta": line.eta,
    }


def _status_from(raw: dict[str, Any]) -> tuple[Status, StreamId]:
    status = raw["status"]
    if status not in ("unknown", *STATUS_KINDS.values()):
        raise ValueError(f"status {status!r}")
    return status, parse_id(raw["status_id"])


def _camera_from(raw: dict[str, Any]) -> CameraState:
    status, status_id = _status_from(raw)
    lines = {lid: LineState(**line) for lid, line in raw["lines"].items()}
    return CameraState(status, status_id, parse_id(raw["last_id"]), lines)
