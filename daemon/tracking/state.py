"""Where each camera's track ids and line counts stand, kept on local disk between runs.

Redis holds the same facts (the objects stream), but a daemon restarted while Redis is down
cannot read them; the spool holds only what Redis has not taken yet. This small file (next to
the spool: `<spool_dir>/tracking.json`) closes that gap: it is rewritten atomically (temporary
file, fsync, rename, directory fsync) at most once a second while anything changed, and at
shutdown. At startup the daemon resumes from the highest of the three (`merge`), so ids stay
unique and counts continue whichever of them is missing or behind.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from daemon.core.durable import replace_durably
from daemon.core.objects import ObjectsResume

FORMAT = 1
FILE_NAME = "tracking.json"


def merge(*states: Mapping[str, ObjectsResume] | None) -> dict[str, ObjectsResume]:
    """Per camera the highest next id and, per (line, direction), the highest count."""
    out: dict[str, ObjectsResume] = {}
    for state in states:
        for camera, resume in (state or {}).items():
            have = out.get(camera, ObjectsResume())
            counts = dict(have.counts)
            for key, count in resume.counts.items():
                counts[key] = max(counts.get(key, 0), count)
            out[camera] = ObjectsResume(max(have.next_track_id, resume.next_track_id), counts)
    return out


def encode(state: Mapping[str, ObjectsResume]) -> bytes:
    cameras = {
        camera: {
            "next_track_id": r.next_track_id,
            "counts": [[line, direction, n] for (line, direction), n in sorted(r.counts.items())],
        }
        for camera, r in sorted(state.items())
    }
    return json.dumps({"format": FORMAT, "cameras": cameras}, separators=(",", ":")).encode()


def decode(data: bytes) -> dict[str, ObjectsResume]:
    """The state in `data`; ValueError when it is not a state file this version can read."""
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a tracking state of format {FORMAT}")
    out: dict[str, ObjectsResume] = {}
    for camera, entry in doc["cameras"].items():
        counts = {(str(line), str(direction)): int(n) for line, direction, n in entry["counts"]}
        out[str(camera)] = ObjectsResume(int(entry["next_track_id"]), counts)
    return out


def load(directory: Path) -> dict[str, ObjectsResume] | None:
    """The saved state, or None when there is none (or it cannot be read: the caller logs why)."""
    path = directory / FILE_NAME
    try:
        return decode(path.read_bytes())
    except FileNotFoundError:
        return None


def save(directory: Path, state: Mapping[str, ObjectsResume]) -> None:
    """Replace the state file atomically and durably (a power cut leaves the old or the new one)."""
    replace_durably(directory / FILE_NAME, encode(state))


__all__ = ["FILE_NAME", "decode", "encode", "load", "merge", "save"]
