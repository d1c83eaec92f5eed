from __future__ import annotations

import pytest

from daemon.core.backoff import Backoff
from tests.support.clock import FakeClock


def test_ceiling_doubles_up_to_the_cap() -> None:
    backoff = Backoff(base_s=0.5, cap_s=4.0, rand=lambda: 1.0)
    delays = [backoff.failed() for _ in range(7)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert backoff.failures == 7


def test_full_jitter_stays_within_zero_and_ceiling() -> None:
    values = iter([0.0, 0.25, 0.999999, 0.5] * 50)
    backoff = Backoff(base_s=1.0, cap_s=8.0, rand=lambda: next(values))
    for n in range(200):
        ceiling = min(8.0, 1.0 * 2**n)
        delay = backoff.failed()
        assert 0.0 <= delay < ceiling
    # zero is a legal full-jitter delay: the first value drawn was 0.0
    assert Backoff(rand=lambda: 0.0).failed() == 0.0


def test_real_random_is_within_bounds() -> None:
    backoff = Backoff(base_s=0.5, cap_s=30.0)
    for _ in range(100):
        assert 0.0 <= backoff.failed() <= 30.0


def test_failures_reset_after_a_healthy_period() -> None:
    clock = FakeClock()
    backoff = Backoff(base_s=1.0, cap_s=60.0, healthy_reset_s=30.0, rand=lambda: 1.0, clock=clock)
    for _ in range(4):
        backoff.failed()
    assert backoff.ceiling_s() == 16.0
    backoff.succeeded()
    clock.now += 30.0
    assert backoff.failed() == 1.0  # healthy long enough: starts over
    assert backoff.failures == 1


def test_short_healthy_period_keeps_backing_off() -> None:
    clock = FakeClock()
    backoff = Backoff(base_s=1.0, cap_s=60.0, healthy_reset_s=30.0, rand=lambda: 1.0, clock=clock)
    for _ in range(3):
        backoff.failed()
    backoff.succeeded()
    clock.now += 5.0  # a flapping camera: up for 5 s, then down again
    assert backoff.failed() == 8.0
    backoff.succeeded()
    clock.now += 29.9
    assert backoff.failed() == 16.0


def test_succeeded_twice_keeps_the_first_instant() -> None:
    clock = FakeClock()
    backoff = Backoff(base_s=1.0, cap_s=60.0, healthy_reset_s=30.0, rand=lambda: 1.0, clock=clock)
    backoff.failed()
    backoff.failed()
    backoff.succeeded()
    clock.now += 20.0
    backoff.succeeded()
    clock.now += 10.0
    assert backoff.failed() == 1.0


def test_reset_and_huge_failure_counts() -> None:
    backoff = Backoff(base_s=0.5, cap_s=30.0, rand=lambda: 1.0)
    for _ in range(5000):
        backoff.failed()
    assert backoff.failed() == 30.0
    backoff.reset()
    assert backoff.failures == 0
    assert backoff.failed() == 0.5


@pytest.mark.parametrize(("base", "cap", "reset"), [(0.0, 1.0, 1.0), (2.0, 1.0, 1.0), (0.5, 1.0, -1.0)])
def test_rejects_bad_parameters(base: float, cap: float, reset: float) -> None:
    with pytest.raises(ValueError, match="base_s"):
        Backoff(base_s=base, cap_s=cap, healthy_reset_s=reset)


def test_a_camera_source_caps_its_reconnect_wait_at_reconnect_max_s() -> None:
    from daemon.config.cameras import CameraConfig  # noqa: PLC0415
    from daemon.core.metrics import Metrics  # noqa: PLC0415
    from daemon.ingest.sources import CameraSource  # noqa: PLC0415

    camera = CameraConfig(id="cam", url="rtsp://127.0.0.1:1/x", reconnect_max_s=4.0)
    source = CameraSource(camera, consumer=None, route=None, on_status=None, metrics=Metrics())  # type: ignore[arg-type]
    waits = [source._backoff.failed() for _ in range(20)]
    assert max(waits) <= 4.0 and source._backoff.ceiling_s() == 4.0
