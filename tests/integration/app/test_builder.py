"""The builder only builds: `daemon.pipeline.build` wires every stage without starting a thread or
writing a file (the spool a previous run left, the holds' spools, the evidence directories and a
stale models drop-in are all found as they were); `Daemon` start-up opens them, and a start-up that
fails after the sink has opened its spool stops it again: no spool-writer thread is left running,
no file of the state left open. The close runs every step whatever an earlier one did: a close step
that raises (the health endpoint's, early in the order) is logged once with its name, every later
step still runs (the evidence writers', the sources', the sink's spool writers, the lanes, the
workers, the decoder processes), and `run()` still ends with that failure (the process exits
non-zero)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from pathlib import Path

import pytest
import structlog

from daemon.app import Daemon
from daemon.config.models import ModelConfig
from daemon.config.models_dropin import SwapEntry, write
from daemon.config.settings import Settings, load_settings
from daemon.ops.http import HealthServer
from daemon.pipeline import build
from daemon.publish.spool.store import Spool
from tests.support.daemon_harness import MODELS, write_config
from tests.support.spool_records import record
from tests.support.waits import async_wait_until

NOWHERE = "redis://127.0.0.1:1/0"  # nothing listens there: nothing may try to connect while wiring


def settings_with_state(tmp_path: Path, *, clips: bool = True, **engine: object) -> Settings:
    """A config whose state a previous run left: a spool with entries, a held camera's spool, a
    stale models drop-in entry; snapshots, capture, clips (unless not `clips`) and the review record
    on (`engine`: more `[engine]` keys)."""
    state = tmp_path / "state"
    spool = state / "spool"
    for directory, camera in ((spool, "cam1"), (spool / "held" / b"cam2".hex(), "cam2")):
        left = Spool.open(directory, 1 << 20)
        left.append([record(seq, camera) for seq in range(3)])
        left.close()
    stale = SwapEntry(model=ModelConfig(path=MODELS[416]), replaces=ModelConfig(path=tmp_path / "old-416.onnx"))
    write(tmp_path / "models.toml", {416: stale})
    extra = (
        f'[snapshots]\nenabled = true\ndir = "{state / "snaps"}"\n'
        f'[clips]\nenabled = {str(clips).lower()}\ndir = "{state / "clips"}"\n'
        f'[capture]\ndir = "{state / "capture"}"\n[[capture.strategies]]\ntype = "random"\nprobability = 1.0\n'
        f'[review]\nenabled = true\ndb = "{state / "review.db"}"\n'
    )
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=NOWHERE,
        cameras=[{"id": "cam1", "url": "rtsp://127.0.0.1:1/none"}, {"id": "cam2", "url": "rtsp://127.0.0.1:1/none"}],
        redis={"spool_dir": str(spool)},
        extra=extra,
        **engine,
    )
    return load_settings(config)


def files_under(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under `root`: (size, mtime in ns)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def spool_writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "spool-writer"]


def open_under(root: Path) -> list[str]:
    """The files under `root` this process holds open."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return [path for path in held if path.startswith(str(root))]


def test_build_starts_no_thread_and_writes_no_file(tmp_path: Path) -> None:
    settings = settings_with_state(tmp_path)

    async def scenario() -> None:
        await asyncio.get_running_loop().run_in_executor(None, lambda: None)  # the loop's executor, started
        threads, files = set(threading.enumerate()), files_under(tmp_path)
        pipeline = await build(settings)
        try:
            assert set(threading.enumerate()) - threads == set()
            assert files_under(tmp_path) == files
            assert open_under(tmp_path) == []
        finally:
            pipeline.workers.close()
            await pipeline.sink.close()  # nothing to close unless it was opened

    asyncio.run(scenario())


def test_a_start_up_that_fails_after_the_sink_opened_leaves_no_thread_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spool recovered and its writers started, then a later start step fails (the health
    endpoint cannot start): `run()` raises that failure, and every spool writer has been stopped."""
    settings = settings_with_state(tmp_path)
    opened: list[tuple[int, int]] = []

    async def failing_start(self: object) -> None:
        # by now the sink's spools are open and the tracking resume has read them
        opened.append((len(spool_writers()), len(open_under(tmp_path))))
        raise OSError("injected: the health endpoint cannot bind")

    monkeypatch.setattr("daemon.ops.http.HealthServer.start", failing_start)
    before = set(threading.enumerate())
    daemon = Daemon(settings)
    with pytest.raises(ExceptionGroup) as failed:
        asyncio.run(daemon.run())
    assert failed.group_contains(OSError, match="injected")
    assert opened == [(2, 2)]  # the backlog's spool and the held camera's: writers, segments read
    assert spool_writers() == []
    assert {t for t in threading.enumerate() if t.is_alive()} - before == set()
    assert open_under(tmp_path) == []  # no segment, cursor or directory left open


def test_a_wiring_that_fails_leaves_nothing_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wiring step that fails after the sink was built (the cameras' wiring) raises from `build`,
    with no spool-writer thread left behind and the spools as the previous run left them."""
    settings = settings_with_state(tmp_path)
    files = files_under(tmp_path)

    def failing(*args: object, **kwargs: object) -> None:
        raise ValueError("injected: the cameras cannot be wired")

    monkeypatch.setattr("daemon.pipeline.wiring.wire_cameras", failing)
    with pytest.raises(ValueError, match="injected"):
        asyncio.run(build(settings))
    assert spool_writers() == []
    assert open_under(tmp_path) == []
    assert files_under(tmp_path) == files


READY_S = 60.0  # start-up on a busy machine: the decoder process imports the daemon first


@pytest.mark.parametrize(
    ("decoders", "failure"),
    [(False, OSError), (True, OSError), (False, asyncio.CancelledError)],
    ids=["clips-threads", "decoder-process", "cancelled"],
)
def test_a_close_step_that_fails_leaves_the_later_ones_run_and_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decoders: bool, failure: type[BaseException]
) -> None:
    """Evidence writers (snapshots, capture, clips: threads) and review record on; or, without clips
    (which keep every camera in this process), both cameras read by one decoder process. A step cut
    off (cancelled) is a failure as any other: the rest run, then the cancellation goes on."""
    settings = settings_with_state(tmp_path, clips=not decoders, processes=2 if decoders else 1)
    real_close = HealthServer.close

    async def failing_close(self: HealthServer) -> None:
        await real_close(self)  # its socket closed all the same: only the failure is injected
        raise failure("injected: the health endpoint's close failed")

    monkeypatch.setattr(HealthServer, "close", failing_close)
    before = set(threading.enumerate())
    daemon = Daemon(settings)
    running: list[tuple[int, int]] = []

    async def scenario() -> None:
        run = asyncio.create_task(daemon.run())
        await async_wait_until(
            lambda: daemon.state == "running" and len(multiprocessing.active_children()) >= decoders, READY_S
        )
        running.append((len(spool_writers()), len(multiprocessing.active_children())))
        daemon.request_stop()
        await run

    with structlog.testing.capture_logs() as logs, pytest.raises(failure):
        asyncio.run(scenario())
    assert running == [(2, int(decoders))]  # the backlog's spool and the held camera's writers; the decoder process
    assert spool_writers() == []
    assert {t.name for t in threading.enumerate() if t.is_alive()} - {t.name for t in before} == set()
    assert multiprocessing.active_children() == []
    assert open_under(tmp_path) == []
    failed = [(e["step"], e["error"]) for e in logs if e["event"] == "close_step_failed"]
    assert failed == [("health", f"{failure.__name__}: injected: the health endpoint's close failed")]
