"""How long a lane's batches take while its session is rebuilt beside them (the timing half of
tests/integration/inference/test_resilience.py's rebuild test, which checks only progress).

    .venv/bin/python -m tools.bench.rebuild_stall [--model models/conveyor-416.onnx] [--rebuilds 5]
        [--every-frames 8] [--extra-build-s 1.5]

A worker thread runs batches through a `ServingEngine` that rebuilds its session every
`--every-frames` frames; each build sleeps `--extra-build-s` more in the builder thread, so a
`run()` that waited for a build would stand out. Prints the median and the slowest batch and
exits 1 when the slowest took 8 x the median or more (the bound the test held before it moved here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from daemon.config.seam import EngineConfig, RebuildConfig
from daemon.core.seam import Metrics, StatusEvent
from daemon.inference.seam import EngineFactory, InferenceEngine, ModelInfo, Placement, ServingEngine, load_model_info
from tools.kit.daemon_config import REPO

STALL_FACTOR = 8.0
CPU = EngineConfig(providers=["cpu"], max_batch=2, worker_batch=2, intra_op_threads=1)


@dataclass
class SlowBuilds:
    """Builds real CPU sessions, each `extra_s` slower (in the builder thread)."""

    inner: EngineFactory
    extra_s: float
    built: list[str] = field(default_factory=list)

    def build(self, info: ModelInfo, placement: Placement = "configured", reason: str = "startup") -> InferenceEngine:
        engine: InferenceEngine = self.inner.build(info, "cpu", reason)
        time.sleep(self.extra_s)
        self.built.append(reason)
        return engine


def measure(model: Path, rebuilds: int, every_frames: int, extra_build_s: float) -> dict[str, float]:
    info = load_model_info(model)
    size = info.size
    metrics, events = Metrics(), list[StatusEvent]()
    factory = SlowBuilds(EngineFactory(CPU, metrics), extra_build_s)
    primary = factory.build(info, "configured", "startup")
    cfg = CPU.model_copy(update={"rebuild": RebuildConfig(every_frames=every_frames)})
    engine = ServingEngine(factory, info, cfg, primary, metrics=metrics, on_status=events.append)
    batch = np.random.default_rng(7).random((2, 3, size, size), dtype=np.float32)
    durations: list[float] = []
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            engine.run(batch)
            durations.append(time.perf_counter() - started)

    thread = threading.Thread(target=worker, name="bench-lane-worker")
    thread.start()
    try:
        while sum(e.kind == "session_rebuilt" for e in events) < rebuilds:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(60)
        engine.wait_builds(60)
        engine.close()
    median, slowest = statistics.median(durations), max(durations)
    return {"batches": len(durations), "median_s": median, "max_s": slowest, "max_over_median": slowest / median}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--model", type=Path, default=REPO / "models" / "conveyor-416.onnx")
    p.add_argument("--rebuilds", type=int, default=5)
    p.add_argument("--every-frames", type=int, default=8)
    p.add_argument("--extra-build-s", type=float, default=1.5)
    args = p.parse_args(argv)
    result = measure(args.model, args.rebuilds, args.every_frames, args.extra_build_s)
    print(json.dumps({k: round(v, 4) for k, v in result.items()}))
    ok = result["max_over_median"] < STALL_FACTOR
    print("PASS" if ok else f"FAIL: the slowest batch took {result['max_over_median']:.1f} x the median")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
