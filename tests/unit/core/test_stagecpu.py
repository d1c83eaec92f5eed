"""The per-stage CPU counters: what start/stop record, the switch, exclusive stages, threads."""

from __future__ import annotations

import threading
import time

from prometheus_client import CollectorRegistry, Counter

from daemon.core.metrics import Metrics
from daemon.core.stagecpu import STAGES, StageCpu


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _value(counter: Counter, stage: str) -> float:
    return counter.labels(stage=stage)._value.get()


def _cpu() -> tuple[StageCpu, Counter]:
    counter = Counter("t_stage_cpu_seconds", "test", ["stage"], registry=CollectorRegistry())
    return StageCpu(counter), counter


def test_stop_records_the_threads_cpu_since_start() -> None:
    cpu, counter = _cpu()
    started = cpu.decode.start()
    _burn(0.02)
    cpu.decode.stop(started)
    assert _value(counter, "decode") >= 0.02
    assert _value(counter, "session_run") == 0.0


def test_sleeping_costs_no_cpu() -> None:
    cpu, counter = _cpu()
    started = cpu.redis.start()
    time.sleep(0.05)
    cpu.redis.stop(started)
    assert _value(counter, "redis") < 0.025


def test_switch_off_records_nothing() -> None:
    cpu, counter = _cpu()
    cpu.switch.on = False
    started = cpu.tracking.start()
    _burn(0.01)
    cpu.tracking.stop(started)
    assert started == 0
    assert _value(counter, "tracking") == 0.0
    cpu.switch.on = True  # a stage started while off stays unrecorded when stopped after the switch
    cpu.tracking.stop(started)
    assert _value(counter, "tracking") == 0.0


def test_exclusive_stop_takes_out_nested_stages_on_the_same_thread() -> None:
    cpu, counter = _cpu()
    outer, mark = cpu.redis.start(), cpu.redis.mark()
    _burn(0.01)
    inner = cpu.tracking.start()
    _burn(0.03)
    cpu.tracking.stop(inner)
    cpu.redis.stop(outer, since_mark=mark)
    redis, tracking = _value(counter, "redis"), _value(counter, "tracking")
    assert tracking >= 0.03
    assert 0.01 <= redis < 0.03  # without the mark it would hold the tracking too (>= 0.04)


def test_other_threads_do_not_count_against_an_exclusive_stage() -> None:
    cpu, counter = _cpu()
    outer, mark = cpu.redis.start(), cpu.redis.mark()

    def other() -> None:
        started = cpu.decode.start()
        _burn(0.02)
        cpu.decode.stop(started)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    _burn(0.01)
    cpu.redis.stop(outer, since_mark=mark)
    assert _value(counter, "redis") >= 0.01
    assert _value(counter, "decode") >= 0.02


def test_every_stage_is_an_attribute_and_a_metric_label() -> None:
    metrics = Metrics()
    for name in STAGES:
        stage = getattr(metrics.stage_cpu, name)
        assert stage.name == name
        stage.stop(stage.start())
    labels = {s.labels["stage"] for m in metrics.registry.collect() for s in m.samples if "stage" in s.labels}
    assert labels == set(STAGES)
