"""systemd's side of the daemon, from outside the process: sd_notify through a real NOTIFY_SOCKET
the test owns (READY, WATCHDOG, STOPPING; no WATCHDOG while inference hangs), the second signal's
exit 130, and the SIGTERM drain checked on data (what was inferred is in Redis or in the spool,
nothing left unflushed, within the grace period).

The daemon runs as `tests/support/daemon_child.py`: the CLI's `_serve` with its signal
handlers, real ONNX Runtime engines that block while a flag file exists, and a JSON report of
its final metrics written on a normal exit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from daemon.publish.spool import Spool
from tests.support.clips import small_clip
from tests.support.daemon_harness import REPO, http_get, write_config
from tests.support.fixtures_redis import RedisServer, free_port
from tests.support.fixtures_rtsp import Clip
from tests.support.metrics import metric
from tests.support.streams import stream
from tests.support.waits import wait_until
from tools.kit import leash

pytestmark = pytest.mark.slow

GRACE_S = 5.0  # write_config's shutdown_grace_s
STUCK_AFTER_S = 30.0  # Daemon._watchdog: an engine busy this long on one batch stops the pings


@dataclass
class NotifySocket:
    """An AF_UNIX datagram socket standing in for systemd's: every message, with its arrival time."""

    path: Path
    messages: list[tuple[float, str]] = field(default_factory=list)
    _sock: socket.socket = field(init=False)
    _thread: threading.Thread = field(init=False)
    _closed: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(self.path))
        self._sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._receive, name="notify-socket", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._closed.is_set():
            try:
                data = self._sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            self.messages.append((time.monotonic(), data.decode()))

    def times(self, line: str) -> list[float]:
        return [t for t, m in list(self.messages) if line in m.splitlines()]

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        self._sock.close()


@pytest.fixture
def notify_socket() -> Iterator[NotifySocket]:
    directory = Path(tempfile.mkdtemp(prefix="bs-notify-"))  # AF_UNIX paths must stay short
    sock = NotifySocket(directory / "notify")
    yield sock
    sock.close()
    with contextlib.suppress(OSError):
        (directory / "notify").unlink()
        directory.rmdir()


@dataclass
class Child:
    proc: subprocess.Popen[bytes]
    report: Path
    hang: Path
    log: Path
    port: int

    def result(self) -> dict[str, Any]:
        return dict(json.loads(self.report.read_text()))

    def health(self) -> dict[str, Any]:
        return dict(http_get(self.port, "/healthz", timeout_s=2).json())


def spawn(tmp_path: Path, config: Path, port: int, notify: NotifySocket | None, watchdog_usec: int | None) -> Child:
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")}
    if notify is not None:
        env["NOTIFY_SOCKET"] = str(notify.path)
    if watchdog_usec is not None:
        env["WATCHDOG_USEC"] = str(watchdog_usec)
    report, hang, log = tmp_path / "report.json", tmp_path / "hang", tmp_path / "daemon.log"
    with log.open("wb") as out:
        proc = leash.spawn(
            [sys.executable, "-m", "tests.support.daemon_child", str(config), str(report), str(hang)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return Child(proc, report, hang, log, port)


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.hang.unlink(missing_ok=True)
        if child.proc.poll() is None:
            child.proc.kill()
            child.proc.wait(30)


def replay_config(
    tmp_path: Path, redis: RedisServer, clip: Clip, *, realtime: bool, spool: bool = False
) -> tuple[Path, int]:
    port = free_port()
    camera = {"id": "replay", "url": str(clip.path), "realtime": realtime, "loop": realtime}
    config = write_config(
        tmp_path / "beltsight.toml", redis_url=redis.url, cameras=[camera], health={"listen": f"127.0.0.1:{port}"}
    )
    if spool:
        text = config.read_text().replace(
            "[redis]\n", f"[redis]\nspool_dir = {json.dumps(str(tmp_path / 'spool'))}\n", 1
        )
        config.write_text(text)
    return config, port


def lane_busy_s(child: Child) -> float:
    with contextlib.suppress(OSError, ValueError):
        return max((m["busy_s"] for m in child.health()["models"].values()), default=0.0)
    return 0.0


def test_ready_watchdog_and_stopping_reach_the_notify_socket_and_pings_stop_while_inference_hangs(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    clip_factory: Callable[..., Clip],
    notify_socket: NotifySocket,
    children: list[Child],
) -> None:
    redis = redis_server()
    config, port = replay_config(tmp_path, redis, small_clip(clip_factory, seed=41), realtime=True)
    child = spawn(tmp_path, config, port, notify_socket, watchdog_usec=1_000_000)  # a ping every 0.5 s
    children.append(child)
    wait_until(lambda: bool(notify_socket.times("READY=1")), 120, "READY=1")
    ready_at = notify_socket.times("READY=1")[0]
    ready = next(m for t, m in notify_socket.messages if "READY=1" in m.splitlines())
    assert any(line.startswith("STATUS=") and "1 cameras" in line for line in ready.splitlines()), ready
    wait_until(lambda: len(stream(redis, "replay")) >= 5, 60, "entries in Redis")
    wait_until(lambda: len([t for t in notify_socket.times("WATCHDOG=1") if t > ready_at]) >= 3, 60, "watchdog pings")

    child.hang.touch()  # the next batch blocks in the engine, as a wedged device would
    wait_until(lambda: lane_busy_s(child) > 0.5, 60, "a batch to hang")
    hung_at = time.monotonic()
    # the watchdog's checks, counted in what it logs: each one either pings or logs engine_stuck
    wait_until(lambda: logged(child, "engine_stuck") >= 2, STUCK_AFTER_S + 120, "the engine logged as stuck")
    stuck_seen_at = time.monotonic()
    # a ping sent before the first engine_stuck may reach the socket's reader after the log line was
    # read (two channels): count pings only from one more check on, so a late datagram has a whole
    # check interval to arrive
    wait_until(lambda: logged(child, "engine_stuck") >= 3, 120, "one more check of the stuck engine")
    pings = len(notify_socket.times("WATCHDOG=1"))
    checks = logged(child, "engine_stuck")
    wait_until(lambda: logged(child, "engine_stuck") >= checks + 4, 120, "4 more checks of the stuck engine")
    late = notify_socket.times("WATCHDOG=1")[pings:]
    assert late == [], f"{len(late)} WATCHDOG=1 while the engine had been stuck for over {STUCK_AFTER_S} s"
    # pinged on while the engine was busy on that batch, before it counted as stuck
    assert any(hung_at < t < stuck_seen_at for t in notify_socket.times("WATCHDOG=1"))
    assert child.health()["models"]  # the endpoint still answers while inference hangs

    released = time.monotonic()
    child.hang.unlink()
    wait_until(lambda: any(t > released for t in notify_socket.times("WATCHDOG=1")), 60, "pings to resume")
    child.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: bool(notify_socket.times("STOPPING=1")), 60, "STOPPING=1")
    assert child.proc.wait(GRACE_S + 60) == 0


def logged(child: Child, event: str) -> int:
    """Lines of the child's JSON log with this event."""
    count = 0
    for line in child.log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            count += json.loads(line).get("event") == event
    return count


def test_a_second_signal_during_the_drain_exits_130_at_once(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    clip_factory: Callable[..., Clip],
    notify_socket: NotifySocket,
    children: list[Child],
) -> None:
    redis = redis_server()
    config, port = replay_config(tmp_path, redis, small_clip(clip_factory, seed=42), realtime=True)
    child = spawn(tmp_path, config, port, notify_socket, watchdog_usec=None)
    children.append(child)
    wait_until(lambda: len(stream(redis, "replay")) >= 3, 120, "entries in Redis")
    child.hang.touch()
    wait_until(lambda: lane_busy_s(child) > 0.2, 60, "a batch to hang")
    child.proc.send_signal(signal.SIGTERM)  # the drain now waits for the hung batch (up to the grace period)
    wait_until(lambda: bool(notify_socket.times("STOPPING=1")), 60, "STOPPING=1")
    assert child.proc.poll() is None
    child.proc.send_signal(signal.SIGINT)
    assert child.proc.wait(60) == 130  # forced (the grace period's end would exit otherwise)
    assert not child.report.exists()  # forced: no orderly end


def test_sigterm_publishes_everything_inferred_within_the_grace_period(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip], children: list[Child]
) -> None:
    redis = redis_server()
    clip = small_clip(clip_factory, seconds=20.0, seed=43)  # 200 frames, every one processed (realtime off)
    config, port = replay_config(tmp_path, redis, clip, realtime=False)
    child = spawn(tmp_path, config, port, None, None)
    children.append(child)
    wait_until(lambda: len(stream(redis, "replay")) >= 10, 120, "entries in Redis")
    child.proc.send_signal(signal.SIGTERM)
    assert child.proc.wait(GRACE_S + 60) == 0
    report = child.result()
    inferred = metric(report, "beltsight_frames_inferred_total", camera="replay")
    entries = stream(redis, "replay")
    assert report["unflushed"] == [0]
    assert 10 <= inferred < clip.frames, "SIGTERM came after the replay's end: nothing was left to drain"
    assert len(entries) == inferred == metric(report, "beltsight_entries_published_total", camera="replay")
    assert [int(f["seq"]) for _id, f in entries] == list(range(len(entries)))  # in order, none lost, none twice
    assert metric(report, "beltsight_frames_dropped_total", camera="replay") == 0
    # within the grace period: the daemon bounds its own drain by it, and nothing was left unflushed
    # or dropped at its end (asserted above), so the drain ended before the deadline did
    assert logged(child, "shutdown_complete") == 1


def test_sigterm_during_a_redis_outage_spools_everything_inferred(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip], children: list[Child]
) -> None:
    redis = redis_server(appendonly=True)
    clip = small_clip(clip_factory, seconds=20.0, seed=44)
    config, port = replay_config(tmp_path, redis, clip, realtime=False, spool=True)
    child = spawn(tmp_path, config, port, None, None)
    children.append(child)
    wait_until(lambda: len(stream(redis, "replay")) >= 5, 120, "entries in Redis")
    redis.kill()
    wait_until(lambda: child.health()["redis"]["buffered"] >= 5, 60, "entries buffered during the outage")
    child.proc.send_signal(signal.SIGTERM)
    assert child.proc.wait(GRACE_S + 60) == 0
    report = child.result()
    inferred = metric(report, "beltsight_frames_inferred_total", camera="replay")
    published = metric(report, "beltsight_entries_published_total", camera="replay")
    assert metric(report, "beltsight_frames_dropped_total", camera="replay") == 0
    spool = Spool.open(tmp_path / "spool", 1 << 30)
    try:
        spooled = [r.result.seq for r in spool.read(1_000_000) if r.result.camera_id == "replay"]
    finally:
        spool.close()
    redis.restart()  # AOF: what Redis acknowledged before the outage
    in_redis = [int(f["seq"]) for _id, f in stream(redis, "replay")]
    assert spooled and len(in_redis) == published
    assert in_redis + spooled == list(range(int(inferred)))  # every inferred frame once, in Redis or on disk
