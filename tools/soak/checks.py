"""The end checks of `python -m tools.soak` on what reached Redis: the detections and the objects streams.

Detections (per camera): no duplicate (camera, seq, captured_ms), entry IDs increasing, captured_ms
non-decreasing, the ID's millisecond part equal to captured_ms.

Objects (per camera, the tracker's events): entry IDs increasing; no track announced `new` twice, or
ended twice, or counted twice on the same line in the same direction; and the running `count` of
every (line, direction) runs K, K+1, ..., N in stream order (K > 1 only where MAXLEN trimmed the
head): a gap is a crossing that was counted and never delivered (allowed only when the daemon
counted drops: a full spool or buffer), a repeat one delivered twice (never allowed).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Any

import redis

from tools.kit.streams import read_stream


def _ids(raw: list[tuple[str, dict[str, str]]]) -> list[tuple[int, ...]]:
    return [tuple(int(p) for p in eid.split("-")) for eid, _f in raw]


def check_detections(client: redis.Redis, camera: str) -> dict[str, Any]:
    raw = read_stream(client, f"beltsight:detections:{camera}")
    keys = [(f["camera"], int(f["seq"]), int(f["captured_ms"])) for _id, f in raw]
    ids = _ids(raw)
    captured = [k[2] for k in keys]
    return {
        "entries": len(raw),
        "duplicates": len(keys) - len(set(keys)),
        "ids_increasing": all(a < b for a, b in itertools.pairwise(ids)),
        "captured_non_decreasing": all(a <= b for a, b in itertools.pairwise(captured)),
        "id_ms_matches_captured": sum(1 for i, c in zip(ids, captured, strict=True) if i[0] != c),
    }


def check_objects(client: redis.Redis, camera: str) -> dict[str, Any]:
    raw = read_stream(client, f"beltsight:objects:{camera}")
    kinds: Counter[str] = Counter(f["event"] for _id, f in raw)
    new = Counter(f["track"] for _id, f in raw if f["event"] == "new")
    end = Counter(f["track"] for _id, f in raw if f["event"] == "end")
    crossed = [f for _id, f in raw if f["event"] == "crossed"]
    per_track = Counter((f["track"], f["line"], f["direction"]) for f in crossed)
    counts: dict[str, list[int]] = defaultdict(list)
    for f in crossed:
        counts[f"{f['line']}/{f['direction']}"].append(int(f["count"]))
    return {
        "entries": len(raw),
        "events": dict(kinds),
        "ids_increasing": all(a < b for a, b in itertools.pairwise(_ids(raw))),
        "new_twice": sum(1 for n in new.values() if n > 1),
        "end_twice": sum(1 for n in end.values() if n > 1),
        "crossed_twice": sum(1 for n in per_track.values() if n > 1),
        "counts": {k: len(v) for k, v in counts.items()},
        "count_repeats": sum(1 for v in counts.values() for a, b in itertools.pairwise(v) if b <= a),
        # after the first retained count: the stream's MAXLEN trims its oldest entries
        "count_gaps": sum((b - a - 1 for v in counts.values() for a, b in itertools.pairwise(v) if b > a + 1), 0),
        "last_counts": {k: v[-1] for k, v in counts.items()},
    }


def objects_ok(result: dict[str, Any], *, lost: bool) -> bool:
    """No repeat ever; a gap only where the daemon counted entries it had to drop (`lost`)."""
    return bool(
        result["ids_increasing"]
        and result["count_repeats"] == 0
        and (result["count_gaps"] == 0 or lost)
        and not (result["new_twice"] or result["end_twice"] or result["crossed_twice"])
        and result["events"].get("crossed", 0) > 0
    )
