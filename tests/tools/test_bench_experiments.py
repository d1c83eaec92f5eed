"""tools/bench/experiments.py and the A/B segments: each experiment changes the named threads of this
process (and only those) and undoes it; the on/off pairs are taken on the experiment's flag."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from daemon.core.metrics import Metrics
from tools.bench.budget import overhead
from tools.bench.experiments import EXPERIMENTS, Experiment
from tools.bench.phase import Segments


@contextmanager
def parked(name: str) -> Iterator[int]:
    """A thread called `name`, waiting; yields its kernel thread id."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name=name, daemon=True)
    thread.start()
    try:
        assert thread.native_id is not None
        yield thread.native_id
    finally:
        release.set()
        thread.join(10)


def test_pin_workers_puts_each_worker_on_a_core_and_lets_them_go_again() -> None:
    cores = sorted(os.sched_getaffinity(0))
    with parked("beltsight-infer-640-0_0") as w0, parked("beltsight-infer-640-1_0") as w1, parked("source-c0") as r:
        EXPERIMENTS["pin-workers"].apply(True)
        pinned = [os.sched_getaffinity(w0), os.sched_getaffinity(w1)]
        assert all(len(p) == 1 for p in pinned)
        if len(cores) > 1:
            assert pinned[0] != pinned[1]  # one core each
        assert os.sched_getaffinity(r) == set(cores)  # a reader is not a worker
        EXPERIMENTS["pin-workers"].apply(False)
        assert os.sched_getaffinity(w0) == os.sched_getaffinity(w1) == set(cores)


def test_readers_batch_switches_only_the_readers_policy() -> None:
    with parked("source-cam0") as reader, parked("beltsight-infer-640-0_0") as worker:
        EXPERIMENTS["readers-batch"].apply(True)
        assert os.sched_getscheduler(reader) == os.SCHED_BATCH
        assert os.sched_getscheduler(worker) == os.SCHED_OTHER
        EXPERIMENTS["readers-batch"].apply(False)
        assert os.sched_getscheduler(reader) == os.SCHED_OTHER


@pytest.mark.skipif(os.geteuid() != 0, reason="lowering a nice value again needs root")
def test_readers_nice_raises_and_restores_the_readers_nice_value() -> None:
    with parked("source-cam0") as reader, parked("bench-daemon") as loop:
        EXPERIMENTS["readers-nice"].apply(True)
        assert os.getpriority(os.PRIO_PROCESS, reader) == 5
        assert os.getpriority(os.PRIO_PROCESS, loop) == 0
        EXPERIMENTS["readers-nice"].apply(False)
        assert os.getpriority(os.PRIO_PROCESS, reader) == 0


def test_segments_alternate_the_experiment_and_keep_the_counters_on() -> None:
    metrics = Metrics()
    states: list[bool] = []
    segments = Segments(metrics, 1e-9, Experiment("probe", "records its state", states.append))
    for _ in range(4):
        segments.tick()
    segments.finish()
    assert states == [False, True, False, True, False, False]  # off at start, alternating, off at the end
    assert [s["ab"] for s in segments.done] == [False, True, False, True, False]
    assert all(s["on"] for s in segments.done) and metrics.stage_cpu.switch.on


def test_overhead_pairs_on_the_experiments_flag() -> None:
    def seg(ab: bool, published: int) -> dict[str, object]:
        return {"on": True, "ab": ab, "seconds": 10.0, "published": published, "cpu_s": 10.0}

    got = overhead([seg(False, 100), seg(True, 110), seg(False, 100), seg(True, 90)], "ab")
    assert got["pairs"] == 2 and got["fps_ratios"] == [1.1, 0.9]
    assert overhead([seg(False, 100), seg(True, 110)])["pairs"] == 0  # the counters never went off


def test_switch_1ms_sets_and_restores_the_interpreters_switch_interval() -> None:
    before = sys.getswitchinterval()
    try:
        EXPERIMENTS["switch-1ms"].apply(True)
        assert sys.getswitchinterval() == pytest.approx(0.001)
        EXPERIMENTS["switch-1ms"].apply(False)
        assert sys.getswitchinterval() == pytest.approx(0.005)
    finally:
        sys.setswitchinterval(before)
