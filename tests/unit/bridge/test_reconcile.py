"""The reconciliation's pure logic (daemon.bridge.reconcile) driven by the rig's scenes (tools.plcsim)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from daemon.bridge.reconcile import CounterTracker, Reconciler
from daemon.config.bridge import BridgeConfig
from daemon.config.reconcile import ReconcileConfig
from tools.plcsim.counter import PlcCounter
from tools.plcsim.replay import replay
from tools.plcsim.scene import Belt, Miss, seen_by_camera

LAG_S = 2.0


def _cfg(**over: object) -> ReconcileConfig:
    base: dict[str, object] = {
        "camera": "cam",
        "line": "exit",
        "modbus": "127.0.0.1:5020",
        "poll_s": 0.5,
        "window_s": 15,
        "tolerance": 2,
        "lag_s": LAG_S,
    }
    return ReconcileConfig.model_validate(base | over)


def _eye(parts: list[float], lag_s: float = LAG_S) -> list[float]:
    return [t + lag_s for t in parts]


def test_contract_drift_of_25_percent_is_caught_within_25s_and_cleared_within_35s() -> None:
    parts = Belt(rate_per_s=2.0, seed=3).crossings(0, 400)
    seen = seen_by_camera(parts, [Miss(200, 260, 0.25)])
    out = replay(_cfg(), seen, PlcCounter(_eye(parts)), 400)
    mismatch, agrees = out.times("count_mismatch"), out.times("count_agrees")
    assert len(mismatch) == 1 and len(agrees) == 1, out.verdicts
    assert 200 < mismatch[0] <= 225
    assert 260 < agrees[0] <= 295
    verdict = next(v for v in out.verdicts if v.kind == "count_mismatch")
    assert verdict.window is not None and verdict.window.vision < verdict.window.reference


def test_agreement_for_ten_minutes_of_stop_and_go_gives_no_verdict() -> None:
    belt = Belt(rate_per_s=3.0, run_s=40, stop_s=20, seed=7)
    parts = belt.crossings(0, 600)
    out = replay(_cfg(), parts, PlcCounter(_eye(parts)), 600)
    assert out.verdicts == []
    assert len(out.windows) > 1000
    assert max(abs(w.drift) for w in out.windows) <= 1


def test_double_pulses_on_the_plc_side_are_caught_as_a_mismatch() -> None:
    parts = Belt(rate_per_s=2.0, seed=5).crossings(0, 200)
    doubles = set(range(100, 200, 3))  # a bouncing photo-eye contact: every third part counted twice
    out = replay(_cfg(), parts, PlcCounter(_eye(parts), doubles=doubles), 200)
    assert out.times("count_mismatch")
    assert out.verdicts[0].window is not None and out.verdicts[0].window.vision < out.verdicts[0].window.reference


@pytest.mark.parametrize("words", [1, 2])
def test_a_counter_wrap_is_noted_and_never_a_mismatch(words: int) -> None:
    parts = Belt(rate_per_s=4.0, seed=11).crossings(0, 120)
    bits = 16 * words
    counter = PlcCounter(_eye(parts), bits=bits, start=(1 << bits) - 150)
    out = replay(_cfg(words=words), parts, counter, 120)
    assert [n.kind for n in out.notes] == ["reference_wrapped"]
    assert out.verdicts == []
    assert len(out.windows) > 150


def test_a_plc_reset_is_noted_restarts_the_windows_and_is_never_a_mismatch() -> None:
    parts = Belt(rate_per_s=3.0, seed=2).crossings(0, 200)
    out = replay(_cfg(), parts, PlcCounter(_eye(parts), start=5000, resets=[90.25]), 200)
    assert [n.kind for n in out.notes] == ["reference_reset"]
    assert out.verdicts == []
    straddling = [w for w in out.windows if w.start_ms < 90_250 < w.end_ms]
    assert straddling == []


def test_an_unreachable_plc_is_reference_down_never_a_mismatch() -> None:
    parts = Belt(rate_per_s=2.0, seed=4).crossings(0, 200)
    out = replay(_cfg(), parts, PlcCounter(_eye(parts), down=[(60, 100)]), 200)
    assert [v.kind for v in out.verdicts] == ["reference_down", "reference_up"]
    assert 60 <= out.times("reference_down")[0] <= 60.5


def test_an_alarm_raised_before_the_plc_went_away_stays_until_windows_agree() -> None:
    parts = Belt(rate_per_s=2.0, seed=6).crossings(0, 300)
    seen = seen_by_camera(parts, [Miss(20, 80, 0.5)])
    out = replay(_cfg(), seen, PlcCounter(_eye(parts), down=[(70, 90)]), 300)
    kinds = [v.kind for v in out.verdicts]
    assert kinds == ["count_mismatch", "reference_down", "reference_up", "count_agrees"]


def test_single_odd_windows_do_not_raise_the_alarm() -> None:
    parts = Belt(rate_per_s=2.0, seed=8).crossings(0, 200)
    # 3 parts missed at once: a few windows disagree by 3 for 15 s, then agree; held 20 s it would alarm
    seen = [t for i, t in enumerate(parts) if i not in (100, 101, 102)]
    out = replay(_cfg(mismatch_after_s=20), seen, PlcCounter(_eye(parts)), 200)
    assert any(w.disagrees for w in out.windows)
    assert out.verdicts == []


def test_hysteresis_keeps_a_borderline_drift_from_flapping() -> None:
    parts = Belt(rate_per_s=2.0, seed=9).crossings(0, 600)
    seen = seen_by_camera(parts, [Miss(100, 600, 0.1)])  # ~3 parts per 15 s window: around the limit
    out = replay(_cfg(), seen, PlcCounter(_eye(parts)), 600)
    assert out.times("count_mismatch")
    assert len(out.verdicts) <= 2


def test_tolerance_share_is_taken_when_larger() -> None:
    parts = Belt(rate_per_s=8.0, min_gap_s=0.05, seed=10).crossings(0, 200)
    seen = seen_by_camera(parts, [Miss(50, 200, 0.04)])  # ~5 of 120 parts per window
    strict = replay(_cfg(), seen, PlcCounter(_eye(parts)), 200)
    loose = replay(_cfg(tolerance_share=0.1), seen, PlcCounter(_eye(parts)), 200)
    assert strict.times("count_mismatch") and not loose.verdicts


def test_lag_from_distance_and_the_measured_belt_speed() -> None:
    parts = Belt(rate_per_s=3.0, seed=12).crossings(0, 200)
    lag_s = 1200 / 400  # 1.2 m at 400 mm/s
    cfg = _cfg(lag_s=None, distance_mm=1200)
    good = replay(cfg, parts, PlcCounter(_eye(parts, lag_s)), 200, speed_mm_s=400)
    assert good.verdicts == [] and good.windows[-1].lag_ms == 3000
    unmeasured = replay(cfg, parts, PlcCounter(_eye(parts, 8.0)), 200)  # no speed known: lag 0
    assert unmeasured.windows[-1].lag_ms == 0


def test_counter_tracker_reset_jump_and_plausibility() -> None:
    c = CounterTracker(bits=16, max_rate_per_s=10)
    assert c.update(100, 0) is None
    assert c.update(104, 500) is None and c.total == 4
    jump = c.update(3000, 1000)
    assert jump is not None and jump.kind == "reference_jump" and c.total == 4
    reset = c.update(2, 1500)
    assert reset is not None and reset.kind == "reference_reset" and c.total == 4
    with pytest.raises(ValueError):
        c.update(1 << 16, 2000)


def test_no_window_is_judged_before_the_crossings_have_settled() -> None:
    rec = Reconciler(_cfg(lag_s=0, settle_s=5))
    for k in range(50):
        rec.add_reading(0, k * 500)
    window, _ = rec.evaluate(24_500)
    assert window is not None and window.end_ms == 19_500 and window.start_ms == 4_500


def test_config_contract_keys_and_checks() -> None:
    cfg = BridgeConfig.model_validate(
        {
            "shifts": ["06:00", "14:00", "22:00"],
            "reconcile": [
                {"camera": "c", "line": "l", "modbus": "127.0.0.1:502", "unit": 3, "register": 7, "words": 2},
                {
                    "camera": "c",
                    "line": "l",
                    "direction": "out",
                    "opcua": "opc.tcp://127.0.0.1:4840",
                    "node": "ns=2;i=5",
                },
            ],
        }
    )
    assert cfg.reconcile[0].register_address == 7 and cfg.reconcile[0].bits == 32
    assert cfg.reconcile[1].bits == 32 and cfg.reconcile[1].key == "c/l/out"
    for bad in (
        {"camera": "c", "line": "l"},
        {"camera": "c", "line": "l", "modbus": "x", "opcua": "opc.tcp://h:1", "node": "n"},
        {"camera": "c", "line": "l", "opcua": "opc.tcp://h:1"},
        {"camera": "c", "line": "l", "modbus": "nohostport"},
        {"camera": "c", "line": "l", "modbus": "h:1", "words": 3},
    ):
        with pytest.raises(ValidationError):
            ReconcileConfig.model_validate(bad)
    with pytest.raises(ValidationError):
        BridgeConfig.model_validate({"shifts": ["25:00"]})
    twice = {"camera": "c", "line": "l", "modbus": "h:1"}
    with pytest.raises(ValidationError):
        BridgeConfig.model_validate({"reconcile": [twice, twice]})
