"""Sparkplug B topics and payloads of the served state (pure: no I/O; encoded with pysparkplug).

Node (`spBv1.0/<group>/NBIRTH/<edge>`): `bdSeq` (Int64) and `Node Control/Rebirth` (Boolean, false).
Device per camera (`.../DBIRTH/<edge>/<camera>`): `State` (String: unknown, up, down, stalled) and per
line `<line>/CountIn`, `<line>/CountOut`, `<line>/LastTrack` (UInt64), `<line>/LastLabel` (String),
`<line>/LastCrossedMs` (Int64, Unix ms) and `<line>/<gate>EtaMs` (Int64, Unix ms, 0 = none) for each
of the line's gates. A crossing's DDATA carries its own values (the count of its direction, its track,
label, time and ETAs), each metric stamped with the crossing's time, so no crossing is folded into
a later one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pysparkplug import DataType, DBirth, DData, Metric, NBirth, NCmd, NDeath

from daemon.bridge.layout import ETA_SUFFIX, CameraLayout, LineLayout
from daemon.bridge.state import CameraState, Crossing, LineState, parse_eta

NAMESPACE = "spBv1.0"
BD_SEQ = "bdSeq"
REBIRTH = "Node Control/Rebirth"
SEQ_MODULO = 256
JSON_TOPIC = "beltsight/{camera}/crossed"


def topic(group_id: str, kind: str, edge_node_id: str, camera: str | None = None) -> str:
    """`spBv1.0/<group_id>/<kind>/<edge_node_id>[/<camera>]`."""
    base = f"{NAMESPACE}/{group_id}/{kind}/{edge_node_id}"
    return base if camera is None else f"{base}/{camera}"


def _metric(name: str, datatype: DataType, value: int | str | bool, at_ms: int, historical: bool) -> Metric:
    return Metric(timestamp=at_ms, name=name, datatype=datatype, value=value, is_historical=historical)


def bd_seq_metric(bd_seq: int, now_ms: int) -> Metric:
    return _metric(BD_SEQ, DataType.INT64, bd_seq, now_ms, False)


def node_birth(bd_seq: int, now_ms: int) -> bytes:
    """NBIRTH (always seq 0)."""
    metrics = (bd_seq_metric(bd_seq, now_ms), _metric(REBIRTH, DataType.BOOLEAN, False, now_ms, False))
    return NBirth(timestamp=now_ms, seq=0, metrics=metrics).encode(include_dtypes=True)


def node_death(bd_seq: int, now_ms: int) -> bytes:
    """NDEATH: the will registered with each CONNECT, and what a clean stop publishes."""
    return NDeath(timestamp=now_ms, bd_seq_metric=bd_seq_metric(bd_seq, now_ms)).encode()


def _line_metrics(line: LineLayout, state: LineState, at_ms: int) -> list[Metric]:
    name = line.id
    metrics = [
        _metric(f"{name}/CountIn", DataType.UINT64, state.count_in, at_ms, False),
        _metric(f"{name}/CountOut", DataType.UINT64, state.count_out, at_ms, False),
        _metric(f"{name}/LastTrack", DataType.UINT64, state.last_track, at_ms, False),
        _metric(f"{name}/LastLabel", DataType.STRING, state.last_label, at_ms, False),
        _metric(f"{name}/LastCrossedMs", DataType.INT64, state.last_crossed_ms, at_ms, False),
    ]
    metrics += [
        _metric(f"{name}/{gate}{ETA_SUFFIX}", DataType.INT64, state.eta.get(gate, 0), at_ms, False)
        for gate in line.gates
    ]
    return metrics


def device_birth(
    camera: CameraLayout, state: CameraState, seq: int, now_ms: int, extra: Sequence[Metric] = ()
) -> bytes:
    """DBIRTH of one camera: every metric with its served value (`extra`: the reconciled lines')."""
    metrics = [_metric("State", DataType.STRING, state.status, now_ms, False)]
    for line in camera.lines:
        metrics += _line_metrics(line, state.lines.get(line.id, LineState()), now_ms)
    metrics += extra
    return DBirth(timestamp=now_ms, seq=seq, metrics=tuple(metrics)).encode(include_dtypes=True)


def crossing_data(crossing: Crossing, gates: tuple[str, ...], seq: int, now_ms: int, *, historical: bool) -> bytes:
    """DDATA of one crossing, its metrics stamped with the crossing's time; `historical` marks
    crossings published after a reconnect (they must not overwrite the current values)."""
    at, name = crossing.at_ms, crossing.line
    count = f"{name}/CountIn" if crossing.direction == "in" else f"{name}/CountOut"
    eta = parse_eta(crossing.eta_json)
    metrics = [
        _metric(count, DataType.UINT64, crossing.count, at, historical),
        _metric(f"{name}/LastTrack", DataType.UINT64, crossing.track, at, historical),
        _metric(f"{name}/LastLabel", DataType.STRING, crossing.label, at, historical),
        _metric(f"{name}/LastCrossedMs", DataType.INT64, crossing.at_ms, at, historical),
    ]
    metrics += [
        _metric(f"{name}/{gate}{ETA_SUFFIX}", DataType.INT64, eta.get(gate, 0), at, historical) for gate in gates
    ]
    return DData(timestamp=now_ms, seq=seq, metrics=tuple(metrics)).encode(include_dtypes=True)


def reconcile_metrics(items: Sequence[tuple[str, str, str, int]], now_ms: int) -> list[Metric]:
    """`<line>/Count<Dir>State` (String) and `<line>/Count<Dir>Drift` (Int64) for each reconciled
    (line, direction, state, drift) of a camera (daemon.bridge.reconcile_service)."""
    metrics: list[Metric] = []
    for line, direction, state, drift in items:
        name = f"{line}/Count{direction.capitalize()}"
        metrics.append(_metric(f"{name}State", DataType.STRING, state, now_ms, False))
        metrics.append(_metric(f"{name}Drift", DataType.INT64, drift, now_ms, False))
    return metrics


def now_ms() -> int:
    return int(time.time() * 1000)


def metrics_data(metrics: Sequence[Metric], seq: int, now_ms: int) -> bytes:
    """DDATA of some metrics already in the DBIRTH."""
    return DData(timestamp=now_ms, seq=seq, metrics=tuple(metrics)).encode(include_dtypes=True)


def state_data(status: str, seq: int, now_ms: int) -> bytes:
    """DDATA of a camera's new state."""
    metric = _metric("State", DataType.STRING, status, now_ms, False)
    return DData(timestamp=now_ms, seq=seq, metrics=(metric,)).encode(include_dtypes=True)


def is_rebirth(payload: bytes) -> bool:
    """Whether an NCMD payload asks for a rebirth (`Node Control/Rebirth` = true); a payload that
    does not decode is not one."""
    try:
        cmd = NCmd.decode(payload)
    except Exception:  # protobuf raises DecodeError, ValueError, TypeError, ... on junk
        return False
    return any(m.name == REBIRTH and m.value is True for m in cmd.metrics)


@dataclass(frozen=True, slots=True)
class HostState:
    """A primary host's STATE: `online`, and its `timestamp` (Unix ms; None: the payload has none)."""

    online: bool
    timestamp: int | None


def host_state(payload: bytes) -> HostState | None:
    """A primary host's STATE payload (Sparkplug 3.0: JSON `{"online": true, "timestamp": ms}`;
    2.2's plain `ONLINE`/`OFFLINE` accepted too, without a timestamp); None when it is neither."""
    text = payload.decode("utf-8", "replace").strip()
    if text in ("ONLINE", "OFFLINE"):
        return HostState(text == "ONLINE", None)
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("online"), bool):
        return None
    stamp = value.get("timestamp")
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not 0 <= stamp < 2**63:
        return HostState(value["online"], None)
    return HostState(value["online"], int(stamp))


def crossing_json(crossing: Crossing) -> bytes:
    """The plain JSON form of a crossing (`json_topics`)."""
    body = {
        "id": crossing.entry_id,
        "camera": crossing.camera,
        "line": crossing.line,
        "track": crossing.track,
        "label": crossing.label,
        "cls": crossing.cls,
        "direction": crossing.direction,
        "count": crossing.count,
        "at_ms": crossing.at_ms,
        "eta": parse_eta(crossing.eta_json),
    }
    return json.dumps(body, separators=(",", ":")).encode()
