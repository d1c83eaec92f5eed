"""One run of the real daemon (``python -m daemon run``) over some cameras, against a real redis-server, and
what it published: per camera the detections stream's entries (seq, captured_ms, dets with their track ids)
and the objects stream's events. ``replay_tracking`` runs the daemon's tracker over published detections
(for a daemon that does not track yet: then the objects are the tracker's, on the daemon's detections)."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from daemon.config.seam import CameraConfig, TrackingConfig
from daemon.core.seam import ObjectEvent, parse_fields
from daemon.tracking.seam import CameraTracker, line_specs, tracker_params
from tools.kit.daemon_config import write_config
from tools.kit.redis_server import RedisServer, find_redis_server
from tools.kit.running import spawn_daemon, stop_process


@dataclass
class Published:
    entries: list[dict[str, Any]] = field(default_factory=list)  # seq, captured_ms, w, h, dets
    objects: list[ObjectEvent] = field(default_factory=list)


def run_daemon(
    out: Path,
    cameras: list[dict[str, Any]],
    want: dict[str, int],
    timeout_s: float,
    tracking: dict[str, Any] | None = None,
    **engine: Any,
) -> dict[str, Published]:
    """Start Redis and the daemon on ``cameras``; stop once each camera ``c`` published ``want[c]`` entries
    (or ``timeout_s`` passed); return what each camera published."""
    out.mkdir(parents=True, exist_ok=True)
    redis_bin = find_redis_server()
    if redis_bin is None:
        raise SystemExit("redis-server not found (apt-get install redis-server)")
    server = RedisServer(redis_bin, None).start()
    try:
        config = write_config(out / "daemon.toml", redis_url=server.url, cameras=cameras, tracking=tracking, **engine)
        client = server.client()
        (out / "daemon.log").unlink(missing_ok=True)
        proc = spawn_daemon(config, out / "daemon.log")
        try:
            deadline = time.monotonic() + timeout_s
            done = False
            while time.monotonic() < deadline and not done and proc.poll() is None:
                done = all(client.xlen(f"beltsight:detections:{c}") >= n for c, n in want.items())
                time.sleep(0.5)
            if not done and proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {proc.returncode}; see {out / 'daemon.log'}")
        finally:
            stop_process(proc)
        return {c: _read(client, c) for c in want}
    finally:
        server.close()


def save_published(path: Path, pubs: dict[str, Published], **meta: Any) -> None:
    """Write what each camera published (and ``meta``) as JSON, for scoring again without a daemon run."""
    cams = {c: {"entries": p.entries, "objects": [dataclasses.asdict(o) for o in p.objects]} for c, p in pubs.items()}
    path.write_text(json.dumps({"meta": meta, "cameras": cams}))


def load_published(path: Path) -> tuple[dict[str, Published], dict[str, Any]]:
    """What :func:`save_published` wrote: (per camera what it published, meta)."""
    doc = json.loads(path.read_text())
    pubs = {}
    for c, p in doc["cameras"].items():
        objects = [
            ObjectEvent(**(o | {"eta": tuple(map(tuple, o["eta"])) if o["eta"] is not None else None}))
            for o in p["objects"]
        ]
        pubs[c] = Published(p["entries"], objects)
    return pubs, doc["meta"]


def _read(client: Any, camera: str) -> Published:
    pub = Published()
    for _, raw in client.xrange(f"beltsight:detections:{camera}"):
        f = _text(raw)
        pub.entries.append(
            {
                "seq": int(f["seq"]),
                "captured_ms": int(f["captured_ms"]),
                "w": int(f["w"]),
                "h": int(f["h"]),
                "dets": json.loads(f["dets"]),
            }
        )
    for _, raw in client.xrange(f"beltsight:objects:{camera}"):
        pub.objects.append(parse_fields(_text(raw)))
    return pub


def _text(fields: dict[Any, Any]) -> dict[str, str]:
    return {
        k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v for k, v in fields.items()
    }


def daemon_tracked(pub: Published) -> bool:
    """Whether the daemon tracked: it published object events or track ids."""
    return bool(pub.objects) or any("track" in d for e in pub.entries for d in e["dets"])


def replay_tracking(pub: Published, camera: dict[str, Any], tracking: dict[str, Any] | None) -> Published:
    """The daemon's tracker (``CameraTracker`` with the config's params and lines) over the published
    detections in capture order: track ids put into the dets, the events as objects."""
    cam = CameraConfig.model_validate(camera)
    tracker = CameraTracker(
        cam.id, line_specs(cam.lines), tracker_params(TrackingConfig(**(tracking or {}))), mm_per_px=cam.mm_per_px
    )
    out = Published()
    for e in sorted(pub.entries, key=lambda e: e["captured_ms"]):
        dets = e["dets"]
        boxes = np.array([d["box"] for d in dets], dtype=np.float64).reshape(-1, 4)
        up = tracker.update(
            e["captured_ms"],
            e["w"],
            e["h"],
            boxes,
            np.array([d["score"] for d in dets]),
            np.array([d["cls"] for d in dets], dtype=np.int64),
            [d["label"] for d in dets],
        )
        tracked = [d | ({"track": t} if t is not None else {}) for d, t in zip(dets, up.track_ids, strict=True)]
        out.entries.append(e | {"dets": tracked})
        out.objects.extend(up.events)
    return out
