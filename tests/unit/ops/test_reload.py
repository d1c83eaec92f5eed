"""What a reload applies live and what it names as needing a restart (`daemon.ops.reload`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from daemon.config.settings import Settings, load_settings
from daemon.ops.reload import restart_needed, rules_settings
from tools.kit.daemon_config import write_config

LINE = {"id": "count", "start": [0.5, 0.0], "end": [0.5, 1.0]}


def settings(tmp_path: Path, cameras: list[dict[str, Any]], **keys: Any) -> Settings:
    path = write_config(
        tmp_path / "beltsight.toml",
        redis_url="redis://127.0.0.1:1",
        cameras=cameras,
        tracking={"lines_dir": str(tmp_path / "lines"), **keys.pop("tracking", {})},
        **keys,
    )
    return load_settings(path)


def test_live_keys_need_no_restart_and_the_rest_is_named(tmp_path: Path) -> None:
    cam = {"id": "a", "url": "rtsp://127.0.0.1:1/a", "lines": [LINE]}
    started = settings(tmp_path, [cam])
    live = settings(
        tmp_path,
        [{**cam, "lines": [], "mm_per_px": 0.5, "conf_threshold": 0.7}],
        conf_threshold=0.3,
        tracking={"lost_s": 2.0, "anchor": "bottom_center"},
    )
    assert restart_needed(started, live) == []
    other = settings(
        tmp_path,
        [{**cam, "url": "rtsp://127.0.0.1:2/a"}, {"id": "b", "url": "rtsp://127.0.0.1:1/b"}],
        max_batch=2,
        tracking={"enabled": False},
    )
    # cameras added, removed or changed are applied live (daemon.ops.cameras): never named
    assert restart_needed(started, other) == ["engine.max_batch", "tracking.enabled"]
    assert restart_needed(other, started) == ["engine.max_batch", "tracking.enabled"]


def test_the_lanes_rules_take_the_new_thresholds_for_the_cameras_that_run(tmp_path: Path) -> None:
    cam = {"id": "a", "url": "rtsp://127.0.0.1:1/a", "classes": ["part"]}
    started = settings(tmp_path, [cam])
    new = settings(
        tmp_path,
        [{"id": "a", "url": "rtsp://127.0.0.1:1/a", "conf_threshold": 0.9}, {"id": "b", "url": "rtsp://127.0.0.1:1/b"}],
        conf_threshold=0.4,
        tracking={"low_score": 0.2},
    )
    rules = rules_settings(started, new)
    assert [c.id for c in rules.cameras] == ["a"]  # the set that runs (the reloader's, once it applied new's)
    assert rules.cameras[0].conf_threshold == 0.9 and rules.cameras[0].classes == ["part"]
    assert rules.engine.conf_threshold == 0.4 and rules.tracking.low_score == 0.2


def test_a_reload_applies_users_thresholds_level_and_lines_to_the_running_parts(tmp_path: Path) -> None:
    import asyncio  # noqa: PLC0415
    import logging  # noqa: PLC0415

    import bcrypt  # noqa: PLC0415

    from daemon.core.frames import StatusEvent  # noqa: PLC0415
    from daemon.core.metrics import Metrics  # noqa: PLC0415
    from daemon.ops.http import HealthServer  # noqa: PLC0415
    from daemon.ops.lines import LinesControl  # noqa: PLC0415
    from daemon.ops.liveview import LiveView  # noqa: PLC0415
    from daemon.ops.reload import Reloader  # noqa: PLC0415
    from daemon.tracking.stage import TrackingStage  # noqa: PLC0415

    cam = {"id": "a", "url": "rtsp://127.0.0.1:1/a", "lines": [LINE]}
    started = settings(tmp_path, [cam])
    metrics = Metrics()
    tracking = TrackingStage(started.cameras, started.tracking, metrics)
    events: list[StatusEvent] = []

    async def scenario() -> tuple[list[str], list[Settings], HealthServer, LinesControl]:
        lines = LinesControl(started.cameras, tmp_path / "lines", tracking, LiveView(metrics, 0.5), events.append)
        server = HealthServer("127.0.0.1", 0, metrics.registry, lambda: {"ok": True})
        rules: list[Settings] = []
        reloader = Reloader(started, tracking=tracking, lines=lines, health=server, set_rules=rules.append)
        hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
        moved = {**LINE, "start": [0.2, 0.0], "end": [0.2, 1.0]}
        new = settings(
            tmp_path,
            [{**cam, "lines": [moved], "conf_threshold": 0.6}],
            health={"basic_auth_users": {"ann": hashed}, "allowed_hosts": ["box.example"]},
            tracking={"lost_s": 3.0},
        )
        new = new.model_copy(update={"logging": new.logging.model_copy(update={"level": "debug"})})
        return reloader.apply(new), rules, server, lines

    level, log_config = logging.getLogger().level, structlog.get_config()
    try:
        changed, rules, server, lines = asyncio.run(scenario())
        assert logging.getLogger().level == logging.DEBUG
    finally:
        logging.getLogger().setLevel(level)
        structlog.configure(**log_config)
    assert changed == [
        "cameras.a.lines",
        "tracking",
        "logging.level",
        "health.basic_auth_users",
        "health.allowed_hosts",
        "cameras.a.conf_threshold",
    ]
    assert server.authenticated
    assert server.browser_policy.host_allowed("box.example:9108")
    assert rules[0].cameras[0].conf_threshold == 0.6 and rules[0].tracking.lost_s == 3.0
    assert tracking.lines_of("a")[0].start == (0.2, 0.0)
    assert lines.current("a").lines[0].start == (0.2, 0.0)
    assert [(e.kind, e.camera_id) for e in events] == [("lines_changed", "a")]
