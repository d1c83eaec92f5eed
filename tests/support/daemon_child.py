"""The real daemon as a child process, with the CLI's signal handling and a fault hook, for tests.

    python -m tests.support.daemon_child CONFIG REPORT_JSON HANG_FILE

Runs what `beltsight run` runs (`daemon.__main__._serve`: SIGTERM/SIGINT handlers, the second
signal's exit 130; logging configured from the config; sd_notify from $NOTIFY_SOCKET and
$WATCHDOG_USEC) with one difference: every engine is a real ONNX Runtime engine behind
`HangingEngine`, whose batches block while HANG_FILE exists (inference made to hang, as a
wedged GPU would). On a normal exit it writes REPORT_JSON: the final value of every metric
sample and what the shutdown's `sink.drain` left unflushed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from daemon.__main__ import _serve
from daemon.app import Daemon
from daemon.config.settings import load_settings
from daemon.core.metrics import Metrics
from daemon.inference.engine import EngineFactory
from daemon.inference.model_file import ModelInfo
from daemon.inference.protocols import HostArray, InferenceEngine
from daemon.inference.providers import Placement
from daemon.ops.logging import configure_logging
from daemon.publish.sink import RedisSink
from tests.support.faults import DelegatingEngine

HANG_LIMIT_S = 300.0


class HangingEngine(DelegatingEngine):
    """A real engine whose `run` blocks while `flag` exists (at most HANG_LIMIT_S)."""

    def __init__(self, inner: InferenceEngine, flag: Path) -> None:
        super().__init__(inner)
        self.flag = flag

    def run(self, batch: HostArray) -> HostArray:
        deadline = time.monotonic() + HANG_LIMIT_S
        while self.flag.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.inner.run(batch)


class HangingFactory:
    """An `EngineBuilder`: real engines, each behind a `HangingEngine` sharing one flag file."""

    def __init__(self, inner: EngineFactory, flag: Path) -> None:
        self.inner, self.flag = inner, flag

    def build(self, info: ModelInfo, placement: Placement = "configured", reason: str = "startup") -> InferenceEngine:
        return HangingEngine(self.inner.build(info, placement, reason), self.flag)


def samples(metrics: Metrics) -> list[dict[str, Any]]:
    return [
        {"name": s.name, "labels": s.labels, "value": s.value}
        for family in metrics.registry.collect()
        for s in family.samples
    ]


def main(argv: list[str]) -> int:
    config, report, flag = Path(argv[0]), Path(argv[1]), Path(argv[2])
    settings = load_settings(config)
    configure_logging(settings.logging.format, settings.logging.level)
    metrics = Metrics()
    daemon = Daemon(
        settings, metrics=metrics, engine_factory=HangingFactory(EngineFactory(settings.engine, metrics), flag)
    )
    unflushed: list[int] = []
    drain = RedisSink.drain

    async def recorded_drain(sink: RedisSink, timeout_s: float) -> int:
        left = await drain(sink, timeout_s)
        unflushed.append(left)
        return left

    RedisSink.drain = recorded_drain  # type: ignore[method-assign,assignment]  # records what the shutdown left (one sink here)
    asyncio.run(_serve(daemon))
    result = {"samples": samples(metrics), "unflushed": unflushed}
    report.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
