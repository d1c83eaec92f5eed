"""The soak's PLC checks: what the OPC UA subscriber and the Modbus poller of `tools.soak.plc` saw, against
the objects streams in Redis.

- `check_opcua_events`: every `crossed` entry of every camera's objects stream, keyed by (camera,
  line, direction, count) (the daemon's running count is unique per line and direction), must have
  reached the subscriber as exactly one `CrossingEventType` event with the same track id:
  `missing` (no event), `duplicates` (two or more), `track_mismatch`, and `extra` (an event for
  no entry; events for entries MAXLEN trimmed off the stream's head are not counted as extra).
  Each missing crossing is also attributed: `missing_unsubscribed` when its entry was written while
  the subscriber had no session (from `SERVE_GRACE_S` before a bridge kill, whose entries may still
  be unserved or in flight on the subscription when it dies, to the subscriber's first session after
  the restart: the restarted bridge serves its backlog before any client can subscribe, and an
  OPC UA event fired to no subscription is gone, unless the PLC reads it back from the bridge's
  event history, as `tools.soak.plc` does after each (re)subscription: its events are then in
  the same file, marked `"history": true`, and count like the others), the rest `missing_subscribed`.
- `check_counts`: the final CountIn/CountOut of every line, read over OPC UA and over Modbus,
  equal the last `count` of that line and direction in its objects stream (0 when none), and
  neither protocol ever saw a count go backwards.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from tools.kit.streams import read_stream

Key = tuple[str, str, str, int]  # camera, line, direction, count
SERVE_GRACE_S = 2.0


def stream_crossings(client: redis.Redis, cameras: list[str]) -> dict[Key, dict[str, Any]]:
    """Every `crossed` entry of the cameras' objects streams: key -> {entry_id, track, ms}."""
    out: dict[Key, dict[str, Any]] = {}
    for camera in cameras:
        for entry_id, f in read_stream(client, f"beltsight:objects:{camera}"):
            if f.get("event") == "crossed":
                key = (camera, f["line"], f["direction"], int(f["count"]))
                out[key] = {"entry_id": entry_id, "track": int(f["track"]), "ms": int(entry_id.split("-")[0])}
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            rows.append(json.loads(line))
    return rows


def unsubscribed_windows(sessions: list[dict[str, Any]], kills: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Unix-second windows whose entries the subscriber could not get: from `SERVE_GRACE_S` before each
    bridge kill (its wall-clock time) to the first session that came up after the bridge's restart."""
    ups = sorted(s["t"] for s in sessions if s.get("up"))
    windows = []
    for killed, restarted in kills:
        after = [t for t in ups if t >= restarted]
        windows.append((killed - SERVE_GRACE_S, after[0] if after else float("inf")))
    return windows


def check_opcua_events(
    crossings: dict[Key, dict[str, Any]],
    events: list[dict[str, Any]],
    windows: list[tuple[float, float]],
) -> dict[str, Any]:
    got: Counter[Key] = Counter()
    tracks: dict[Key, set[int]] = {}
    for e in events:
        key = (e["camera"], e["line"], e["direction"], int(e["count"]))
        got[key] += 1
        tracks.setdefault(key, set()).add(int(e["track"]))
    first: dict[tuple[str, str, str], int] = {}
    for camera, line, direction, count in crossings:
        k = (camera, line, direction)
        first[k] = min(first.get(k, count), count)
    missing = [k for k in crossings if got[k] == 0]
    unsubscribed = [k for k in missing if any(a <= crossings[k]["ms"] / 1000 <= b for a, b in windows)]
    extra = [k for k in got if k not in crossings and k[3] >= first.get(k[:3], 1 << 62)]
    return {
        "crossings": len(crossings),
        "events": len(events),
        "delivered_once": sum(1 for k in crossings if got[k] == 1),
        "missing": len(missing),
        "missing_unsubscribed": len(unsubscribed),
        "missing_subscribed": len(missing) - len(unsubscribed),
        "duplicates": sum(1 for k in crossings if got[k] > 1),
        "extra": len(extra),
        "track_mismatch": sum(1 for k, v in crossings.items() if got[k] and tracks[k] != {v["track"]}),
        "missing_first": [list(k) for k in sorted(missing)[:10]],
    }


def expected_counts(crossings: dict[Key, dict[str, Any]], blocks: list[tuple[str, str]]) -> dict[str, int]:
    """The last count of every (camera, line, direction) as `camera/line/CountIn|CountOut` (0: none)."""
    out = {f"{cam}/{line}/{name}": 0 for cam, line in blocks for name in ("CountIn", "CountOut")}
    for camera, line, direction, count in crossings:
        key = f"{camera}/{line}/{'CountIn' if direction == 'in' else 'CountOut'}"
        out[key] = max(out.get(key, 0), count)
    return out


def check_counts(expected: dict[str, int], state: dict[str, Any]) -> dict[str, Any]:
    opcua, modbus = state.get("opcua", {}), state.get("modbus", {})
    return {
        "expected": expected,
        "opcua": {k: opcua.get(k) for k in expected},
        "modbus": {k: modbus.get(k) for k in expected},
        "opcua_agree": all(opcua.get(k) == v for k, v in expected.items()),
        "modbus_agree": all(modbus.get(k) == v % 2**32 for k, v in expected.items()),
        "opcua_count_backwards": state.get("opcua_count_backwards", 0),
        "modbus_backwards": state.get("modbus_backwards", 0),
        "modbus_polls": state.get("modbus_polls", 0),
        "modbus_failed": state.get("modbus_failed", 0),
        "opcua_sessions": state.get("opcua_sessions", 0),
    }
