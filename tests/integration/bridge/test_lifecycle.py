"""The bridge's lifecycle has the daemon's shape (daemon.bridge.service, daemon.ops.signals, daemon.core.tasks):
SIGTERM stops it in order (the batch in flight acknowledged, its protocols closed) and it exits 0 at
once; a second signal while it stops exits 130; an unexpected exception in any of its tasks stops the
others and ends it non-zero. The process tests run `beltsight bridge` itself (`daemon.bridge.cli.main`)
with a test protocol in the table (tests/support/bridge_child.py) on a real Redis."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from daemon.bridge.cli import load
from daemon.bridge.protocols import PROTOCOLS
from daemon.bridge.service import Bridge
from daemon.bridge.state import Change
from tests.support.bridge_harness import crossing, factory, wait_for
from tests.support.bridge_protocols import Idle
from tests.support.fixtures_redis import RedisServer, RedisServerFactory, free_port
from tests.support.waits import wait_until
from tools.kit import leash

STOPPED_WITHIN_S = 8.0
"""Well under the stop's deadline (`shutdown_grace_s`, 10 s by default): nothing waited it out."""

CONFIG = """
[redis]
url = "redis://127.0.0.1:{redis_port}/0"

[models]
640 = "m640.onnx"

[engine]
providers = ["cpu"]

[bridge]
health_listen = "127.0.0.1:{health_port}"
state_dir = "{state_dir}"
reconnect_max_s = 0.5
resume_grace_s = 0
[bridge.opcua]
listen = ""
[bridge.modbus]
listen = "127.0.0.1:{modbus_port}"
unit_id = 1

[[cameras]]
id = "cam1"
url = "rtsp://127.0.0.1:1/cam1"
[[cameras.lines]]
id = "L1"
start = [0.5, 0.0]
end = [0.5, 1.0]
"""


def write_config(tmp_path: Path, server: RedisServer) -> tuple[Path, int]:
    """The config (Modbus and the health endpoint on free ports, one camera) and its health port."""
    health_port = free_port()
    path = tmp_path / "beltsight.toml"
    path.write_text(
        CONFIG.format(
            redis_port=server.port, health_port=health_port, state_dir=tmp_path / "state", modbus_port=free_port()
        )
    )
    return path, health_port


def report(health_port: int) -> dict[str, Any] | None:
    """The bridge's `/healthz` (None: not answering)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/healthz", timeout=2) as reply:
            return dict(json.loads(reply.read()))
    except (OSError, urllib.error.URLError, ValueError):
        return None


class Child:
    """`python -m tests.support.bridge_child` on a config of its own; its JSON log in a file."""

    def __init__(self, tmp_path: Path, server: RedisServer, mode: str) -> None:
        self.config, self.health_port = write_config(tmp_path, server)
        self.log = tmp_path / "bridge.log"
        argv = [sys.executable, "-m", "tests.support.bridge_child", str(self.config), mode, str(tmp_path)]
        with self.log.open("wb") as out:
            self.proc = leash.spawn(argv, stdout=out, stderr=subprocess.STDOUT)

    def served(self) -> int:
        """The crossings served (-1: not answering yet)."""
        got = report(self.health_port)
        return -1 if got is None else int(got["served"])

    def events(self) -> list[dict[str, Any]]:
        lines = self.log.read_text(errors="replace").splitlines()
        found = []
        for line in lines:
            with contextlib.suppress(ValueError):
                found.append(json.loads(line))
        return [e for e in found if isinstance(e, dict) and "event" in e]

    def names(self) -> list[str]:
        return [str(e["event"]) for e in self.events()]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.stop()


def test_sigterm_drains_closes_the_servers_and_exits_0_at_once(
    redis_server: RedisServerFactory, tmp_path: Path, children: list[Child]
) -> None:
    server = redis_server()
    r = server.client()
    child = Child(tmp_path, server, "ok")
    children.append(child)
    wait_until(lambda: child.served() == 0, 60, "the bridge serving")
    r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 1))
    wait_until(lambda: child.served() == 1, 60, "the crossing served")
    signalled = time.monotonic()
    child.proc.send_signal(signal.SIGTERM)
    assert child.proc.wait(60) == 0, child.log.read_text()
    assert time.monotonic() - signalled < STOPPED_WITHIN_S
    names = child.names()
    assert names.index("stop_requested") < names.index("bridge_stopping"), names  # the daemon's rule and words
    assert next(e for e in child.events() if e["event"] == "stop_requested")["signal"] == "SIGTERM"
    assert (tmp_path / "closed").exists()  # its protocols closed before it exited
    assert r.xpending("beltsight:objects:cam1", "beltsight-bridge")["pending"] == 0  # acknowledged


def test_a_second_signal_while_it_stops_exits_130_at_once(
    redis_server: RedisServerFactory, tmp_path: Path, children: list[Child]
) -> None:
    child = Child(tmp_path, redis_server(), "stall")
    children.append(child)
    wait_until(lambda: child.served() == 0, 60, "the bridge serving")
    child.proc.send_signal(signal.SIGTERM)
    wait_until((tmp_path / "closed").exists, 60, "the stop to reach the stalling protocol")
    time.sleep(0.5)
    assert child.proc.poll() is None  # stuck in its stop
    child.proc.send_signal(signal.SIGINT)
    assert child.proc.wait(30) == 130
    assert "forced_exit" in child.names()


def test_an_unexpected_exception_in_a_task_stops_the_bridge_non_zero(
    redis_server: RedisServerFactory, tmp_path: Path, children: list[Child]
) -> None:
    child = Child(tmp_path, redis_server(), "fail")
    children.append(child)
    wait_until(lambda: child.served() == 0, 60, "the bridge serving")
    (tmp_path / "fail").touch()
    assert child.proc.wait(60) == 1, child.log.read_text()
    failed = [e for e in child.events() if e["event"] == "bridge_task_failed"]
    assert [e["task"] for e in failed] == ["probe-task"]
    assert "ProbeFault" in failed[0]["error"]
    assert "bridge_stopping" in child.names()
    assert (tmp_path / "closed").exists()  # the protocols were closed on the way out
    assert "unhandled_exception" in child.names()


class Faulty(Idle):
    """A test-only protocol whose long-lived task raises once `trip` is set."""

    name = "faulty"

    def __init__(self) -> None:
        self.trip = asyncio.Event()
        self.closed = False

    def tasks(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        return {"faulty-task": self._run}

    async def _run(self) -> None:
        await self.trip.wait()
        raise LookupError("a bug in one task")

    async def close(self) -> None:
        self.closed = True


def test_one_tasks_exception_ends_run_and_stops_every_other_task(
    redis_server: RedisServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(PROTOCOLS, Faulty.name, Faulty)
    server = redis_server()
    path, health_port = write_config(tmp_path, server)
    settings, layout = load(path)

    async def scenario() -> None:
        bridge = Bridge(settings.bridge, layout, factory(server), redis=settings.redis)
        faulty = bridge.protocol(Faulty)
        assert faulty is not None
        running = asyncio.create_task(bridge.run())
        await wait_for(lambda: bridge.reader.stats.connected and bridge.heartbeats >= 1)
        faulty.trip.set()
        with pytest.raises(ExceptionGroup) as raised:
            await asyncio.wait_for(running, 30)
        assert [type(e) for e in raised.value.exceptions] == [LookupError]
        assert faulty.closed
        assert asyncio.all_tasks() == {asyncio.current_task()}  # the reader, heartbeat, Modbus sweep: all ended
        assert await asyncio.to_thread(report, health_port) is None  # the health endpoint closed

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario())
    failed = [e for e in logs if e["event"] == "bridge_task_failed"]
    assert [e["task"] for e in failed] == ["faulty-task"]


class Unruly(Faulty):
    """A test-only protocol whose long-lived task raises when it is cancelled (in the stop window)."""

    name = "unruly"

    def tasks(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        return {"unruly-task": self._run}

    async def _run(self) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise LookupError("a bug in the task's stop") from None


class Reconcile:
    """Stands in for the bridge's ReconcileService: no tasks; `close` noted."""

    store = None
    closed = False

    def tasks(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        return {}

    def report(self) -> dict[str, Any]:
        return {}

    async def close(self) -> None:
        self.closed = True


def test_a_task_failing_in_the_stop_window_still_closes_the_reconciliation(
    redis_server: RedisServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task raising as the stop cancels it cancels the group's body: the reconciliation's close (its
    counts' final flush) and the protocols' still run, outside the group."""
    monkeypatch.setitem(PROTOCOLS, Unruly.name, Unruly)
    server = redis_server()
    path, _health_port = write_config(tmp_path, server)
    settings, layout = load(path)

    async def scenario() -> tuple[bool, bool]:
        bridge = Bridge(settings.bridge, layout, factory(server), redis=settings.redis)
        reconcile = Reconcile()
        bridge.reconcile = reconcile  # type: ignore[assignment]
        unruly = bridge.protocol(Unruly)
        assert unruly is not None
        running = asyncio.create_task(bridge.run())
        await wait_for(lambda: bridge.reader.stats.connected and bridge.heartbeats >= 1)
        bridge.request_stop()
        with pytest.raises(ExceptionGroup) as raised:
            await asyncio.wait_for(running, 30)
        assert [type(e) for e in raised.value.exceptions] == [LookupError]
        return reconcile.closed, unruly.closed

    assert asyncio.run(scenario()) == (True, True)


class BrokenClose(Faulty):
    """A test-only protocol whose close raises."""

    name = "broken-close"

    def tasks(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        return {}

    async def close(self) -> None:
        self.closed = True
        raise OSError("socket already gone")


def test_a_protocol_whose_close_raises_does_not_keep_the_later_ones_open(
    redis_server: RedisServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every close step runs whatever an earlier one did (`close_step_failed`); the first failure is
    raised once all ran."""
    monkeypatch.setitem(PROTOCOLS, BrokenClose.name, BrokenClose)
    monkeypatch.setitem(PROTOCOLS, Faulty.name, Faulty)
    server = redis_server()
    path, health_port = write_config(tmp_path, server)
    settings, layout = load(path)

    async def scenario() -> tuple[bool, bool]:
        bridge = Bridge(settings.bridge, layout, factory(server), redis=settings.redis)
        broken, later = bridge.protocol(BrokenClose), bridge.protocol(Faulty)
        assert broken is not None and later is not None
        running = asyncio.create_task(bridge.run())
        await wait_for(lambda: bridge.reader.stats.connected and bridge.heartbeats >= 1)
        bridge.request_stop()
        with pytest.raises(OSError, match="socket already gone"):
            await asyncio.wait_for(running, 30)
        assert await asyncio.to_thread(report, health_port) is None
        return broken.closed, later.closed

    with structlog.testing.capture_logs() as logs:
        assert asyncio.run(scenario()) == (True, True)
    failed = [(e["step"], e["error"]) for e in logs if e["event"] == "close_step_failed"]
    assert failed == [("protocol broken-close", "OSError: socket already gone")]


class Held(Idle):
    """A test-only protocol whose `serve` waits until `release` is set (a batch kept in flight)."""

    name = "held"

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def serve(self, changes: list[Change]) -> None:
        self.entered.set()
        await self.release.wait()


async def stop_with_a_batch_in_flight(bridge: Bridge, r: Any, *, release_after_s: float | None) -> float:
    """Run `bridge`, keep one crossing's batch in flight, ask it to stop, release the batch after
    `release_after_s` (None: never); the seconds `run()` took to return after the stop was asked."""
    held = bridge.protocol(Held)
    assert held is not None
    running = asyncio.create_task(bridge.run())
    await wait_for(lambda: bridge.reader.stats.connected)
    r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 1))
    await wait_for(held.entered.is_set)
    asked = time.monotonic()
    bridge.request_stop()
    if release_after_s is not None:
        await asyncio.sleep(release_after_s)
        assert not running.done()  # the stop waits for the batch in flight
        held.release.set()
    await asyncio.wait_for(running, 60)
    return time.monotonic() - asked


@pytest.mark.parametrize("grace_s", [30.0, 0.5])
def test_the_stop_serves_and_acknowledges_the_batch_in_flight_within_the_grace(
    redis_server: RedisServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grace_s: float
) -> None:
    """With time enough the batch is served and acknowledged before the reader stops; past the grace
    it is left pending (served again at the next start) and the stop goes on."""
    monkeypatch.setitem(PROTOCOLS, Held.name, Held)
    server = redis_server()
    r = server.client()
    settings, layout = load(write_config(tmp_path, server)[0])
    bridge = Bridge(settings.bridge, layout, factory(server), redis=settings.redis, grace_s=grace_s)
    release_after_s = 1.0 if grace_s > 1.0 else None
    with structlog.testing.capture_logs() as logs:
        took = asyncio.run(stop_with_a_batch_in_flight(bridge, r, release_after_s=release_after_s))
    pending = r.xpending("beltsight:objects:cam1", "beltsight-bridge")["pending"]
    overdue = [e for e in logs if e["event"] == "bridge_drain_overdue"]
    if release_after_s is not None:
        assert (pending, overdue) == (0, [])
    else:
        assert pending == 1 and len(overdue) == 1
        assert took < grace_s + STOPPED_WITHIN_S
