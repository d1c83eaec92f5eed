"""ReconcileService.close (daemon.bridge.reconcile_service): a counter's connection that fails to close
is logged, the other counters are closed and the counts flushed all the same."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog
from prometheus_client import CollectorRegistry

from daemon.bridge.reconcile_counts import CountsStore
from daemon.bridge.reconcile_service import ReconcileService


class Reader:
    def __init__(self, fails: bool) -> None:
        self.fails = fails
        self.closed = False

    async def read(self) -> int:
        return 0

    async def close(self) -> None:
        self.closed = True
        if self.fails:
            raise RuntimeError("socket gone wrong")


class Store(CountsStore):
    flushed = 0

    def flush(self) -> None:
        self.flushed += 1


def test_close_logs_a_failing_reader_closes_the_others_and_flushes(tmp_path: Path) -> None:
    readers = {"a": Reader(fails=True), "b": Reader(fails=False)}
    store = Store(tmp_path / "reconcile.sqlite")
    service = ReconcileService(
        [],
        dict(readers),
        store,
        CollectorRegistry(),
        lambda: None,
        events_stream="s",
        events_maxlen=10,  # type: ignore[arg-type, return-value]
    )
    with structlog.testing.capture_logs() as logs:
        asyncio.run(service.close())
    assert readers["a"].closed and readers["b"].closed and store.flushed == 1
    failed = [e for e in logs if e["event"] == "reference_close_failed"]
    assert [(e["key"], e["error"]) for e in failed] == [("a", "RuntimeError: socket gone wrong")]
