"""Thermal throttling in the running daemon: a real RTSP camera, real Redis, the real sysfs reader on
a thermal-zone tree in tmp_path whose temperature the test raises and lowers."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.waits import wait_until

CAMERA = "belt"


def write_zone(root: Path, celsius: float) -> None:
    zone = root / "thermal_zone0"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "type").write_text("gpu-thermal\n")
    (zone / "trip_point_0_type").write_text("passive\n")
    (zone / "trip_point_0_temp").write_text("95000\n")
    tmp = zone / "temp.new"
    tmp.write_text(f"{round(celsius * 1000)}\n")
    tmp.replace(zone / "temp")  # as the kernel does: a reader never sees half a number


def get(d: InProcessDaemon, path: str) -> str:
    port = d.daemon.health.port if d.daemon.health else 0
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return str(response.read().decode())


def health(d: InProcessDaemon) -> dict[str, Any]:
    port = d.daemon.health.port if d.daemon.health else 0
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:  # 503 while degraded still carries the report
        return dict(json.loads(exc.read()))


def published(redis: RedisServer) -> int:
    client = redis.client()
    try:
        return int(client.xlen(f"beltsight:detections:{CAMERA}"))
    finally:
        client.close()


def rate(redis: RedisServer, seconds: float) -> float:
    """Entries per second reaching Redis over the next `seconds`."""
    before, start = published(redis), time.monotonic()
    time.sleep(seconds)
    return (published(redis) - before) / (time.monotonic() - start)


def busy_fraction(d: InProcessDaemon, seconds: float) -> tuple[float, float]:
    """(entries per second reaching Redis, share of the time the lane's session ran) over the next
    `seconds`. The duty cycle bounds the second whatever else the machine does; the first also
    depends on how much of the time the session was busy at full speed."""
    before = d.counter("beltsight_entries_published_total", camera=CAMERA)
    busy_before, start = d.counter("beltsight_inference_seconds_sum", model="640"), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - start
    published_n = d.counter("beltsight_entries_published_total", camera=CAMERA) - before
    busy = d.counter("beltsight_inference_seconds_sum", model="640") - busy_before
    return published_n / elapsed, busy / elapsed


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def throttle_events(redis: RedisServer) -> list[tuple[str, str]]:
    client = redis.client()
    try:
        raw = client.xrange("beltsight:events")
    finally:
        client.close()
    out = []
    for _id, fields in raw:
        f = {_text(k): _text(v) for k, v in fields.items()}
        if f["kind"] == "throttle_changed":
            detail = json.loads(f["detail"])
            out.append((detail["from"], detail["to"]))
    return out


def test_heat_slows_inference_pauses_it_at_critical_and_cooling_restores_it(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    clip = clip_factory(640, 480, fps=15, seconds=4, seed=5, synthetic=False)
    rtsp = rtsp_server({"belt": clip.path})
    redis = redis_server()
    zones = tmp_path / "thermal"
    write_zone(zones, 40.0)
    thermal = (
        f'[thermal]\nsysfs_root = "{zones}"\nlimit_c = 60.0\ncritical_c = 75.0\nresume_c = 55.0\n'
        "interval_s = 0.2\nmin_pause_s = 1.0\nmin_share = 0.1\ntrend_window_s = 2.0\n"
    )
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": CAMERA, "url": rtsp.url("belt")}],
        extra=thermal,
        workers=1,
    )
    with InProcessDaemon(config) as d:
        wait_until(lambda: published(redis) >= 15, 60, "detections flowing", d)
        assert health(d)["thermal"]["level"] == "normal"
        cool_rate = rate(redis, 4.0)

        write_zone(zones, 70.0)  # over the 60 C limit, under the 75 C critical
        wait_until(lambda: health(d)["thermal"]["share"] <= 0.15, 20, "the governor to cut the share", d)
        hot_rate, hot_busy = busy_fraction(d, 4.0)
        report = health(d)["thermal"]
        assert report["level"] == "regulating"
        # the session runs at most its share of the time (a loaded machine slows the camera's decode
        # too, so at full speed the session may already idle part of the time: the rate falls less)
        assert hot_busy <= report["share"] + 0.05, (hot_busy, report["share"])
        assert hot_rate <= 0.8 * cool_rate, (hot_rate, cool_rate)
        assert hot_rate > 0  # slowed, not stopped

        reconnects = d.counter("beltsight_camera_reconnects_total", camera=CAMERA)
        write_zone(zones, 80.0)  # critical
        wait_until(lambda: health(d)["thermal"]["level"] == "paused", 10, "the pause", d)
        metrics_text = get(d, "/metrics")
        dropped = d.counter("beltsight_frames_dropped_total", camera=CAMERA, reason="thermal")
        wait_until(
            lambda: d.counter("beltsight_frames_dropped_total", camera=CAMERA, reason="thermal") > dropped + 5,
            10,
            "frames dropped as thermal",
            d,
        )
        report = health(d)
        time.sleep(1.0)  # a batch that was in the engine when the pause came may still publish
        settled = published(redis)
        time.sleep(1.5)
        assert published(redis) == settled  # nothing inferred while paused
        assert report["cameras"][CAMERA]["state"] == "up" and report["status"] == "degraded"
        assert report["thermal"]["sensors"]["gpu-thermal"]["celsius"] == 80.0
        assert d.counter("beltsight_camera_reconnects_total", camera=CAMERA) == reconnects  # stayed connected
        assert "beltsight_throttle_level 2.0" in metrics_text
        assert 'beltsight_temperature_celsius{sensor="gpu-thermal"} 80.0' in metrics_text

        write_zone(zones, 40.0)
        wait_until(lambda: health(d)["thermal"]["share"] == 1.0, 30, "full speed again", d)
        back = [rate(redis, 3.0)]  # other processes share these cores: allow a few windows
        while back[-1] < 0.6 * cool_rate and len(back) < 6:
            back.append(rate(redis, 3.0))
        assert back[-1] >= 0.6 * cool_rate, (back, cool_rate)
        wait_until(lambda: health(d)["thermal"]["level"] == "normal", 20, "the normal level", d)
        assert d.counter("beltsight_throttle_seconds_total", level="paused") >= 1.0
        assert d.counter("beltsight_throttle_level") == 0.0

    assert throttle_events(redis) == [
        ("normal", "regulating"),
        ("regulating", "paused"),
        ("paused", "regulating"),
        ("regulating", "normal"),
    ]
