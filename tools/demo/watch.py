"""What the demo shows and checks while it runs: the detection and objects streams of every camera read from
the start as a consumer does (`Streams`), one status line per camera (`watch`), and the checks that make the
demo its own test: detections from every camera within `FIRST_DETECTIONS_S` of READY
(`check_every_camera`), a counted part on every camera that detects within `FIRST_CROSSING_S`
(`check_crossings`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import cast

import redis as redis_py

from daemon.core.seam import parse_fields
from daemon.publish.seam import decode_entry, format_entry
from tools.demo.clips import CAMERAS
from tools.demo.parts import CameraParts, crossing_line
from tools.demo.procs import Children, DemoFailed, fetch_health, say
from tools.demo.view import CameraWindow, StatusBoard, Summary

FIRST_DETECTIONS_S = 30.0
FIRST_CROSSING_S = 60.0
LINES = ("count",)
"""The counting line of every demo camera (configs/demo.toml)."""


class Streams:
    """The detection and objects streams of every camera, read from the start as a consumer does."""

    def __init__(self, client: redis_py.Redis, verbose: bool) -> None:
        self.client = client
        self.verbose = verbose
        self.ids = {f"beltsight:detections:{cam}": "0-0" for cam in CAMERAS}
        self.ids |= {f"beltsight:objects:{cam}": "0-0" for cam in CAMERAS}
        self.windows = {cam: CameraWindow(cam) for cam in CAMERAS}
        self.parts = {cam: CameraParts(cam, LINES) for cam in CAMERAS}

    def read(self) -> bool:
        """One XREAD (up to 200 ms); whether a line was printed (--verbose)."""
        printed = False
        # the client decodes responses: stream names, IDs and fields are str
        reply = self.client.xread(self.ids, count=200, block=200) or []  # type: ignore[arg-type]
        for stream, entries in cast("list[tuple[str, list[tuple[str, dict[str, str]]]]]", reply):
            for entry_id, fields in entries:
                self.ids[stream] = entry_id
                if stream.startswith("beltsight:objects:"):
                    event = parse_fields(fields)
                    self.parts[event.camera].add(event)
                    if self.verbose and event.event == "crossed":
                        say(crossing_line(event))
                        printed = True
                    continue
                entry = decode_entry(fields)
                self.windows[entry["camera"]].add(entry)
                if self.verbose:
                    print(format_entry(entry_id, entry), flush=True)
                    printed = True
        return printed

    def summaries(self, now_s: float, states: dict[str, str]) -> list[Summary]:
        return [w.summary(now_s, states.get(cam, "?"), self.parts[cam].text(now_s)) for cam, w in self.windows.items()]


def watch(args: argparse.Namespace, children: Children) -> None:
    """Read the streams and show them until --seconds (or Ctrl-C); raise DemoFailed on failure."""
    client = redis_py.Redis(port=args.redis_port, decode_responses=True)
    streams = Streams(client, args.verbose)
    board = StatusBoard(tty=False) if args.verbose else StatusBoard()  # --verbose: the block every 5 s
    ready_at = time.monotonic()
    end_at = ready_at + args.seconds if args.seconds else None
    checked_detections = checked_crossings = False
    states: dict[str, str] = {}
    next_health = 0.0
    try:
        while end_at is None or time.monotonic() < end_at:
            children.check_running()
            if streams.read():
                board.forget()
            now = time.monotonic()
            if now >= next_health:
                report = fetch_health(args.health_port) or {}
                states = {cam: str(c.get("state", "?")) for cam, c in report.get("cameras", {}).items()}
                next_health = now + 1.0
            if not checked_detections and now - ready_at >= FIRST_DETECTIONS_S:
                check_every_camera(streams.windows, states, children.daemon_log)
                checked_detections = True
            if not checked_crossings and now - ready_at >= FIRST_CROSSING_S:
                streams.read()  # what the last moment published
                check_crossings(streams.windows, streams.parts, children.daemon_log)
                checked_crossings = True
            wall = time.time()
            if board.due(wall):
                board.draw(wall, streams.summaries(wall, states))
    finally:
        client.close()
    if not checked_detections:
        check_every_camera(streams.windows, states, children.daemon_log)
    wall = time.time()
    if not board.tty:  # the last block, as the run ends (a terminal shows it already)
        board.draw(wall, streams.summaries(wall, states))
    totals = ", ".join(
        f"{cam} {w.total} frames ({w.with_detections} with detections), {streams.parts[cam].crossings} crossings"
        for cam, w in streams.windows.items()
    )
    if checked_crossings:
        say(f"OK: every camera published detections and counted parts: {totals}")
    else:
        say(f"OK: every camera published detections: {totals} (crossings are checked {FIRST_CROSSING_S:.0f} s in)")


def check_every_camera(windows: dict[str, CameraWindow], states: dict[str, str], log: Path) -> None:
    missing = [cam for cam, w in windows.items() if w.with_detections == 0]
    if missing:
        detail = ", ".join(
            f"{cam} (state {states.get(cam, 'unknown')}, {windows[cam].total} entries)" for cam in missing
        )
        raise DemoFailed(f"no detections published within {FIRST_DETECTIONS_S:.0f} s of READY by: {detail}; see {log}")


def check_crossings(windows: dict[str, CameraWindow], parts: dict[str, CameraParts], log: Path) -> None:
    """Every camera that published detections has counted a part on its line."""
    uncounted = [cam for cam, w in windows.items() if w.with_detections and not parts[cam].crossings]
    if uncounted:
        detail = ", ".join(
            f"{cam} ({windows[cam].with_detections} frames with detections, 0 crossings)" for cam in uncounted
        )
        raise DemoFailed(
            f"no part counted within {FIRST_CROSSING_S:.0f} s of READY by: {detail}; see {log} and "
            f"the live view's lines"
        )
