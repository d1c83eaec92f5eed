"""The demo's part counting: what it reads from the objects stream, the words it prints, its check,
and the calibration of configs/demo.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import redis as redis_py

from daemon.config.settings import load_settings
from daemon.core.objects import ObjectEvent, parse_fields
from tests.support.fixtures_redis import RedisServerFactory
from tools.demo.clips import CAMERAS
from tools.demo.parts import CameraParts, crossing_line
from tools.demo.procs import DemoFailed
from tools.demo.run import CONFIG
from tools.demo.scale import BELT_VIEW_MM, mm_per_px
from tools.demo.view import CameraWindow
from tools.demo.watch import LINES, Streams, check_crossings

REPO = Path(__file__).resolve().parents[2]
COUNTS = re.compile(r" in (\d+) out (\d+)")  # the contract's words


def crossed(count: int, direction: str = "in", *, at_ms: int = 1_700_000_010_000, speed: float = 150.0) -> ObjectEvent:
    fields = {
        "v": "1",
        "camera": "cam",
        "track": str(count),
        "label": "washer",
        "cls": "2",
        "score": "0.9",
        "event": "crossed",
        "at_ms": str(at_ms),
        "line": "count",
        "direction": direction,
        "count": str(count),
        "speed_px_s": "200.0",
        "speed_mm_s": repr(speed),
    }
    if direction == "in":
        fields["eta"] = f'{{"reject1":{at_ms + 2800}}}'
    return parse_fields(fields)  # as the demo gets it from Redis


def test_counts_are_the_newest_running_count_per_direction() -> None:
    parts = CameraParts("cam", LINES)
    assert COUNTS.search(parts.text(1_700_000_010.0)).groups() == ("0", "0")  # type: ignore[union-attr]
    for n in (41, 42):  # a stream kept across a daemon restart starts at its totals
        parts.add(crossed(n))
    parts.add(crossed(3, "out"))
    parts.add(
        parse_fields(
            {
                "v": "1",
                "camera": "cam",
                "track": "7",
                "label": "bolt",
                "cls": "0",
                "score": "0.8",
                "event": "new",
                "at_ms": "1700000010000",
            }
        )
    )
    text = parts.text(1_700_000_010.0)
    assert text.startswith("count in 42 out 3  belt  150 mm/s  last washer")
    assert COUNTS.findall(text) == [("42", "3")]
    assert parts.crossings == 3


def test_last_crossing_says_its_gate_arrival_time() -> None:
    parts = CameraParts("cam", LINES)
    parts.add(crossed(1, speed=100.0))
    parts.add(crossed(2, speed=300.0))
    parts.add(crossed(3, speed=200.0))
    assert parts.text(1_700_000_010.0) == "count in 3 out 0  belt  200 mm/s  last washer -> reject1 in 2.8 s"
    assert crossing_line(crossed(3)) == "cam  #3 washer crossed count in (count 3)  150 mm/s  -> reject1 in 2.8 s"


def test_belt_speed_forgets_old_crossings() -> None:
    parts = CameraParts("cam", LINES, window_s=15.0)
    parts.add(crossed(1, at_ms=1_700_000_000_000))
    assert parts.belt_mm_s(1_700_000_014.0) == 150.0
    assert parts.belt_mm_s(1_700_000_016.0) is None
    assert "belt    - mm/s" in parts.text(1_700_000_016.0)


def test_the_line_holds_the_counts_right_after_the_frame_rate() -> None:
    window = CameraWindow("line1-sorter")
    line = window.summary(0.0, "up", "count in 42 out 0  belt  212 mm/s").line()
    assert re.match(r"line1-sorter\s+up\s+0\.0 fps  count in 42 out 0  belt  212 mm/s  lat", line), line


def windows(**with_detections: int) -> dict[str, CameraWindow]:
    out = {}
    for cam, n in with_detections.items():
        out[cam] = CameraWindow(cam)
        out[cam].with_detections = n
    return out


def test_the_check_names_a_camera_that_saw_parts_but_counted_none() -> None:
    parts = {cam: CameraParts(cam, LINES) for cam in ("cam1", "cam2", "cam3")}
    parts["cam1"].add(crossed(1))
    with pytest.raises(DemoFailed, match=r"by: cam2 \(12 frames with detections, 0 crossings\); see") as failed:
        check_crossings(windows(cam1=30, cam2=12, cam3=0), parts, Path("daemon.log"))
    assert "cam1" not in str(failed.value) and "cam3" not in str(failed.value)  # cam3 fails the detections check
    parts["cam2"].add(crossed(1))
    check_crossings(windows(cam1=30, cam2=12, cam3=0), parts, Path("daemon.log"))


def test_demo_config_calibrates_each_camera_from_the_scene_scale() -> None:
    settings = load_settings(CONFIG)
    assert settings.tracking.enabled
    assert [c.id for c in settings.cameras] == list(CAMERAS)
    for camera in settings.cameras:
        w, h, _fps, _seed = CAMERAS[camera.id]
        assert camera.mm_per_px == pytest.approx(mm_per_px(w, h))
        assert camera.mm_per_px * max(w, h) == pytest.approx(BELT_VIEW_MM)
        assert [line.id for line in camera.lines] == list(LINES)
        line = camera.lines[0]
        assert line.direction[0] > 0 and line.start[0] == line.end[0]  # across the belt, "in" along it
        assert [g.id for g in line.gates] == ["reject1"] and line.gates[0].distance_mm > 0
    bridge = tomllib.loads(CONFIG.read_text())["bridge"]
    assert bridge["opcua"]["security"] == "none"
    assert all(b["listen"].startswith("127.0.0.1:") for b in (bridge["opcua"], bridge["modbus"]))


def test_streams_read_counts_and_print_each_crossing_with_verbose(
    redis_server: RedisServerFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = redis_server()
    r = server.client()
    event = crossed(7)
    r.xadd("beltsight:objects:line1-sorter", {**event.to_fields(), "camera": "line1-sorter"})
    r.xadd("beltsight:detections:line1-sorter", {
        "v": "1", "camera": "line1-sorter", "seq": "1", "captured_ms": "1700000010000", "published_ms": "1700000010040",
        "w": "640", "h": "480", "model": "640:m@1", "n": "0", "dets": "[]",
    })  # fmt: skip
    streams = Streams(redis_py.Redis(port=server.port, decode_responses=True), verbose=True)
    try:
        assert streams.read()
    finally:
        streams.client.close()
    out = capsys.readouterr().out
    assert "demo: line1-sorter  #7 washer crossed count in (count 7)  150 mm/s  -> reject1 in 2.8 s" in out
    assert streams.windows["line1-sorter"].total == 1
    summaries = {s.camera: s.line() for s in streams.summaries(1_700_000_010.0, {"line1-sorter": "up"})}
    assert COUNTS.findall(summaries["line1-sorter"]) == [("7", "0")]
    assert COUNTS.findall(summaries["line1-infeed"]) == [("0", "0")]
