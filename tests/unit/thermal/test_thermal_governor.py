"""The governor against a simulated thermal plant in discrete time (tools/thermal/plant.py).

One set of default gains for the whole family: time constants 20..300 s, sensor lags of a few
seconds, plants that heat 30..55 C from idle to full load, ambient steps of +15 C. Each run
starts cold at full speed, settles, takes the ambient step, settles, and gets the ambient back.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

import pytest

from daemon.config.thermal import ThermalConfig
from daemon.thermal import Reading, ThermalGovernor, Throttle
from daemon.thermal.governor import limits_for, lsq_slope
from tools.thermal.plant import PlantParams, SleepSwitch, Trace, simulate, steps

LIMIT = 80.0


@dataclass(frozen=True)
class Scenario:
    params: PlantParams
    ambient_c: float
    step_c: float = 15.0

    @property
    def phase_s(self) -> float:
        return max(10 * self.params.tau_s, 600.0)

    def run(self, governor: ThermalGovernor, interval_s: float = 1.0) -> Trace:
        a, ph = self.ambient_c, self.phase_s
        ambient = steps(a, (ph, a + self.step_c), (2 * ph, a))
        return simulate(governor.update, self.params, ambient, 3 * ph, interval_s=interval_s)


def steady(trace: Trace, start_s: float, end_s: float) -> tuple[float, float, float]:
    """(hottest true temperature, mean share, share peak-to-peak) over the second half of a phase."""
    idx = trace.window(start_s + (end_s - start_s) / 2, end_s)
    shares = [trace.share[i] for i in idx]
    return max(trace.temp_c[i] for i in idx), statistics.mean(shares), max(shares) - min(shares)


FAMILY = [
    PlantParams(tau_s=20, idle_rise_c=10, full_rise_c=50, lag_s=3, slowdown_c=LIMIT + 8),
    PlantParams(tau_s=20, idle_rise_c=15, full_rise_c=70, lag_s=2, slowdown_c=LIMIT + 8),
    PlantParams(tau_s=45, idle_rise_c=5, full_rise_c=40, lag_s=4, slowdown_c=LIMIT + 8),
    PlantParams(tau_s=110, idle_rise_c=20, full_rise_c=60, lag_s=3, slowdown_c=LIMIT + 8),
    PlantParams(tau_s=300, idle_rise_c=10, full_rise_c=50, lag_s=5, slowdown_c=LIMIT + 8),
    PlantParams(tau_s=300, idle_rise_c=15, full_rise_c=70, lag_s=2, slowdown_c=LIMIT + 8),
]


@pytest.mark.parametrize("params", FAMILY, ids=lambda p: f"tau{p.tau_s:.0f}-lag{p.lag_s:.0f}-rise{p.full_rise_c:.0f}")
@pytest.mark.parametrize("ambient_c", [20.0, 30.0])
def test_holds_the_limit_at_the_sustainable_share_across_the_family(params: PlantParams, ambient_c: float) -> None:
    scenario = Scenario(params, ambient_c)
    trace = scenario.run(ThermalGovernor(ThermalConfig(limit_c=LIMIT)))
    ph = scenario.phase_s
    for start, ambient in ((0.0, ambient_c), (ph, ambient_c + 15), (2 * ph, ambient_c)):
        hottest, mean_share, swing = steady(trace, start, start + ph)
        best = params.sustainable_share(ambient, LIMIT)
        assert hottest <= LIMIT + 1.5, (start, hottest)
        assert mean_share >= 0.95 * best, (start, mean_share, best)
        assert swing <= 0.1, (start, swing)
    assert trace.slowdown_s == 0.0  # the hardware never had to slow itself down
    assert "paused" not in trace.level


RECOVERY = [FAMILY[0], FAMILY[3], FAMILY[5], PlantParams(tau_s=150, idle_rise_c=12, full_rise_c=55, lag_s=3)]


@pytest.mark.parametrize("params", RECOVERY, ids=lambda p: f"tau{p.tau_s:.0f}")
def test_returns_to_the_sustainable_share_within_two_time_constants_once_the_ambient_falls(
    params: PlantParams,
) -> None:
    scenario = Scenario(params, 25.0)
    trace = scenario.run(ThermalGovernor(ThermalConfig(limit_c=LIMIT)))
    fall = 2 * scenario.phase_s
    best = params.sustainable_share(25.0, LIMIT)
    hot = steady(trace, scenario.phase_s, fall)[1]
    assert hot < 0.8 * best  # the hot phase really held it back
    back = next(trace.t_s[i] - fall for i in trace.window(fall, 3 * fall) if trace.share[i] >= 0.95 * best)
    assert back <= 2 * params.tau_s


def test_full_speed_where_the_plant_never_reaches_the_limit() -> None:
    params = PlantParams(tau_s=60, idle_rise_c=10, full_rise_c=40, lag_s=3)
    trace = simulate(ThermalGovernor(ThermalConfig(limit_c=LIMIT)).update, params, steps(25.0), 900)
    assert set(trace.share) == {1.0} and set(trace.level) == {"normal"}


def test_interval_other_than_one_second_needs_no_retuning() -> None:
    params = PlantParams(tau_s=90, idle_rise_c=10, full_rise_c=50, lag_s=3, slowdown_c=LIMIT + 8)
    for interval_s in (0.5, 2.0):
        scenario = Scenario(params, 25.0)
        trace = scenario.run(ThermalGovernor(ThermalConfig(limit_c=LIMIT)), interval_s=interval_s)
        hottest, mean_share, swing = steady(trace, scenario.phase_s, 2 * scenario.phase_s)
        assert hottest <= LIMIT + 1.5 and swing <= 0.1
        assert mean_share >= 0.95 * params.sustainable_share(40.0, LIMIT)


def test_the_seeds_sleep_switch_swings_and_trips_the_hardware_on_the_same_plant() -> None:
    """The contrast the criteria are written against: the seeds' bang-bang switch."""
    params = PlantParams(tau_s=60, idle_rise_c=10, full_rise_c=60, lag_s=3, slowdown_c=LIMIT + 8)
    trace = simulate(SleepSwitch(LIMIT), params, steps(30.0), 1800)
    _, _, swing = steady(trace, 600, 1800)
    assert swing >= 0.7
    governed = simulate(ThermalGovernor(ThermalConfig(limit_c=LIMIT)).update, params, steps(30.0), 1800)
    assert steady(governed, 600, 1800)[2] <= 0.1


# -- pause and resume ------------------------------------------------------------------------


@pytest.mark.parametrize("tau_s", [20.0, 120.0, 300.0])
def test_pauses_when_even_the_minimum_share_overheats_and_resumes_once_without_oscillating(tau_s: float) -> None:
    # idle alone holds the device above the resume temperature while the cabinet is at 72 C
    params = PlantParams(tau_s=tau_s, idle_rise_c=10, full_rise_c=50, lag_s=3, slowdown_c=LIMIT + 8)
    hot_from, hot_until = 10 * tau_s, 25 * tau_s
    ambient = steps(25.0, (hot_from, 72.0), (hot_until, 25.0))
    config = ThermalConfig(limit_c=LIMIT, critical_c=LIMIT + 4, resume_c=LIMIT - 5)
    trace = simulate(ThermalGovernor(config).update, params, ambient, 40 * tau_s)
    stretches = trace.pauses()
    assert len(stretches) == 1, stretches
    start, end = stretches[0]
    assert hot_from < start < hot_until < end  # paused while hot, resumed after the cabinet cooled
    after = trace.window(end, trace.t_s[-1] + 1)
    assert "paused" not in [trace.level[i] for i in after]
    assert trace.share[-1] >= 0.95 * params.sustainable_share(25.0, LIMIT)
    assert trace.slowdown_s == 0.0


def test_a_plant_that_idles_cool_but_overheats_at_the_minimum_share_does_not_flap() -> None:
    # idle cools it below the resume temperature, the minimum share heats it past critical: after
    # one early resume the governor waits longer and for more cooling, until the cabinet cools
    params = PlantParams(tau_s=40, idle_rise_c=10, full_rise_c=50, lag_s=3, slowdown_c=LIMIT + 8)
    config = ThermalConfig(limit_c=LIMIT, critical_c=LIMIT + 4, resume_c=LIMIT - 5, min_share=0.3, min_pause_s=20)
    trace = simulate(ThermalGovernor(config).update, params, steps(25.0, (400, 62.0), (2400, 25.0)), 3600)
    stretches = trace.pauses()
    assert 1 <= len(stretches) <= 3, stretches
    assert all(end - start >= config.min_pause_s for start, end in stretches)
    assert all(b[1] - b[0] >= a[1] - a[0] for a, b in itertools.pairwise(stretches))  # never shorter
    assert stretches[-1][1] > 2400  # the last pause ended only once the cabinet cooled
    after = trace.window(stretches[-1][1], 3600)
    assert "paused" not in [trace.level[i] for i in after]
    assert trace.share[-1] >= 0.95 * params.sustainable_share(25.0, LIMIT)
    assert trace.slowdown_s == 0.0


def test_pause_holds_for_the_minimum_dwell_even_when_cool_at_once() -> None:
    config = ThermalConfig(limit_c=70, critical_c=80, resume_c=65, min_pause_s=30)
    gov = ThermalGovernor(config)
    assert gov.update(0.0, [Reading("gpu0", 60.0)]).level == "normal"
    assert gov.update(1.0, [Reading("gpu0", 81.0)]).level == "paused"
    for t in range(2, 31):
        throttle = gov.update(float(t), [Reading("gpu0", 40.0)])
        assert (throttle.level, throttle.share) == ("paused", 0.0), t
    resumed = gov.update(31.0, [Reading("gpu0", 40.0)])
    assert resumed.level == "regulating" and resumed.share == pytest.approx(config.min_share)


# -- readings --------------------------------------------------------------------------------


def test_a_hardware_slowdown_counts_as_too_hot_whatever_the_temperature() -> None:
    gov = ThermalGovernor(ThermalConfig(limit_c=80))
    shares = [gov.update(float(t), [Reading("gpu0", 60.0, hw_slowdown=True)]).share for t in range(30)]
    assert shares[-1] < 0.8 and shares == sorted(shares, reverse=True)
    assert gov.throttle.level == "regulating" and "slowdown" in gov.throttle.reason


def test_offline_readings_are_no_temperature_and_no_reading_holds_the_share() -> None:
    gov = ThermalGovernor(ThermalConfig(limit_c=70))
    for t in range(40):
        gov.update(float(t), [Reading("gpu0", 73.0)])
    held = gov.throttle.share
    assert held < 1.0
    for t in range(40, 60):
        throttle = gov.update(float(t), [Reading("gpu0", float("nan")), Reading("cpu-thermal", -256.0)])
        assert throttle.share == held and throttle.level == "regulating"


def test_the_hottest_sensor_is_the_one_nearest_its_own_limit_and_ignored_zones_never_count() -> None:
    config = ThermalConfig(ignore=["PMIC-Die"])
    gov = ThermalGovernor(config)
    readings = [
        Reading("gpu-thermal", 70.0, slowdown_c=73.0),  # limit 68: 2 C over
        Reading("cpu-thermal", 75.0, slowdown_c=95.0),  # limit 90: far under
        Reading("PMIC-Die", 100.0),  # a constant on older L4T, no temperature of a device
    ]
    throttle = gov.update(0.0, readings)
    assert throttle.sensor == "gpu-thermal"
    assert throttle.level != "paused"


def test_limits_come_from_config_or_from_the_hardware_threshold() -> None:
    derived = limits_for(ThermalConfig(), 90.0)
    assert (derived.limit_c, derived.critical_c, derived.resume_c) == (85.0, 89.0, 80.0)
    fallback = limits_for(ThermalConfig(fallback_limit_c=75.0), None)
    assert (fallback.limit_c, fallback.critical_c) == (75.0, 80.0)
    explicit = limits_for(ThermalConfig(limit_c=70.0, critical_c=88.0, resume_c=60.0), 90.0)
    assert (explicit.limit_c, explicit.critical_c, explicit.resume_c) == (70.0, 88.0, 60.0)
    with pytest.raises(ValueError, match="critical_c"):
        ThermalConfig(limit_c=80.0, critical_c=75.0)


def test_least_squares_slope() -> None:
    assert lsq_slope([(0.0, 1.0), (1.0, 3.0), (2.0, 5.0), (3.0, 7.0)]) == pytest.approx(2.0)
    assert lsq_slope([(0.0, 1.0), (1.0, 2.0)]) == 0.0


def test_update_is_pure_apart_from_its_own_state() -> None:
    """Same readings at shifted times give the same decisions: no clock is read."""
    temps = [50.0 + (t * 0.7) % 35 for t in range(200)]

    def run(offset: float) -> list[Throttle]:
        gov = ThermalGovernor(ThermalConfig(limit_c=70))
        return [gov.update(offset + t, [Reading("gpu0", round(c))]) for t, c in enumerate(temps)]

    assert run(0.0) == run(1e6)


# -- the regions a sweep found weak (tools/thermal/sweep.py) ---------------------------------


@pytest.mark.parametrize(
    "params",
    [
        PlantParams(tau_s=40, idle_rise_c=10, full_rise_c=50, lag_s=0, slowdown_c=LIMIT + 8),
        PlantParams(tau_s=60, idle_rise_c=5, full_rise_c=30, lag_s=4, slowdown_c=LIMIT + 8),
        PlantParams(tau_s=300, idle_rise_c=10, full_rise_c=50, lag_s=6, slowdown_c=LIMIT + 8),
        PlantParams(tau_s=60, idle_rise_c=10, full_rise_c=50, lag_s=3, slowdown_c=LIMIT + 8, quantum_c=0.1),
    ],
    ids=lambda p: f"tau{p.tau_s:.0f}-lag{p.lag_s:.0f}-rise{p.full_rise_c:.0f}-q{p.quantum_c:g}",
)
def test_a_small_sustainable_share_is_held_to_within_five_percent_despite_whole_degree_steps(
    params: PlantParams,
) -> None:
    # the hot phase sustains only 0.15: one sensor step is worth 0.025-0.04 of share there, so a
    # governor that stops half a degree short of the limit loses more than 5 % of the throughput
    hot = LIMIT - params.idle_rise_c - 0.15 * (params.full_rise_c - params.idle_rise_c)
    scenario = Scenario(params, hot - 15.0)
    trace = scenario.run(ThermalGovernor(ThermalConfig(limit_c=LIMIT)))
    hottest, mean_share, swing = steady(trace, scenario.phase_s, 2 * scenario.phase_s)
    assert params.sustainable_share(hot, LIMIT) == pytest.approx(0.15)
    assert mean_share >= 0.95 * 0.15, mean_share
    assert hottest <= LIMIT + 1.5 and swing <= 0.1
    assert trace.slowdown_s == 0.0


@pytest.mark.parametrize(("tau_s", "lag_s"), [(20.0, 4.0), (20.0, 6.0), (25.0, 5.0)])
def test_a_fast_plant_with_a_long_sensor_lag_takes_the_ambient_step_without_the_hardware_slowdown(
    tau_s: float, lag_s: float
) -> None:
    # the sensor shows a +15 C step only lag_s late, when the die has already risen by 3-4 C: the
    # governor must still cut before the hardware's slowdown (8 C over the limit) and, should the
    # sensor touch the pause temperature, resume once and settle at the sustainable share again
    params = PlantParams(tau_s=tau_s, idle_rise_c=10, full_rise_c=50, lag_s=lag_s, slowdown_c=LIMIT + 8)
    scenario = Scenario(params, 25.0)
    trace = scenario.run(ThermalGovernor(ThermalConfig(limit_c=LIMIT)))
    assert trace.slowdown_s == 0.0
    assert max(trace.temp_c) < LIMIT + 6.0
    assert len(trace.pauses()) <= 1
    hottest, mean_share, swing = steady(trace, scenario.phase_s, 2 * scenario.phase_s)
    assert hottest <= LIMIT + 1.5 and swing <= 0.1
    assert mean_share >= 0.95 * params.sustainable_share(40.0, LIMIT)


def test_a_transient_pause_resumes_where_the_device_idles_above_resume_c_but_can_run() -> None:
    # a 20 s plant, 6 s of sensor lag: the +15 C step touches the pause (physics: the die rises
    # 4-5 C before the sensor can show it). Idle then sits at 76 C, above resume_c (75 C), yet the
    # minimum share is sustainable: the governor resumes once idle has settled and holds 0.15
    params = PlantParams(tau_s=20, idle_rise_c=5, full_rise_c=30, lag_s=6, slowdown_c=LIMIT + 8)
    hot = LIMIT - 5 - 0.15 * 25
    scenario = Scenario(params, hot - 15.0)
    trace = scenario.run(ThermalGovernor(ThermalConfig(limit_c=LIMIT)))
    assert params.steady_c(hot, 0.0) > ThermalConfig(limit_c=LIMIT).limit_c - 5  # idles above resume_c
    assert len(trace.pauses()) <= 1
    hottest, mean_share, swing = steady(trace, scenario.phase_s, 2 * scenario.phase_s)
    assert mean_share >= 0.95 * 0.15 and swing <= 0.1 and hottest <= LIMIT + 1.5
    assert trace.slowdown_s == 0.0


def test_a_slow_plant_that_overheats_at_the_minimum_share_waits_longer_instead_of_cycling() -> None:
    # tau 300 s: heating back to critical at the minimum share takes longer than eight minimum
    # pauses, so "soon after a resume" must scale with how long the device took to cool
    tau = 300.0
    params = PlantParams(tau_s=tau, idle_rise_c=10, full_rise_c=50, lag_s=3, slowdown_c=LIMIT + 8)
    config = ThermalConfig(limit_c=LIMIT, critical_c=LIMIT + 4, resume_c=LIMIT - 5, min_share=0.3, min_pause_s=20)
    ambient = steps(25.0, (10 * tau, 64.0), (25 * tau, 25.0))
    trace = simulate(ThermalGovernor(config).update, params, ambient, 40 * tau)
    stretches = trace.pauses()
    assert 1 <= len(stretches) <= 3, stretches
    assert all(b[1] - b[0] >= a[1] - a[0] for a, b in itertools.pairwise(stretches))
    assert stretches[-1][1] > 25 * tau
    assert "paused" not in [trace.level[i] for i in trace.window(stretches[-1][1], 40 * tau)]
    assert trace.share[-1] >= 0.95 * params.sustainable_share(25.0, LIMIT) and trace.slowdown_s == 0.0


def test_a_fast_steep_plant_behind_a_long_lag_settles_instead_of_swinging() -> None:
    # tau 20 s, 6 s of lag, 55 C from idle to full load: the default gains overreach and the share
    # would swing by ~0.6 every half minute; the governor sees the swings and lowers its gains
    params = PlantParams(tau_s=20, idle_rise_c=15, full_rise_c=70, lag_s=6, slowdown_c=LIMIT + 8)
    hot = LIMIT - 15 - 0.3 * 55
    scenario = Scenario(params, hot - 15.0)
    trace = scenario.run(ThermalGovernor(ThermalConfig(limit_c=LIMIT)))
    for start, ambient in ((0.0, hot - 15), (scenario.phase_s, hot), (2 * scenario.phase_s, hot - 15)):
        hottest, mean_share, swing = steady(trace, start, start + scenario.phase_s)
        assert swing <= 0.1, (start, swing)
        assert hottest <= LIMIT + 1.5 and mean_share >= 0.95 * params.sustainable_share(ambient, LIMIT)
    assert trace.slowdown_s == 0.0


def test_a_step_far_over_the_limit_holds_the_cut_when_it_leaves_the_trend_window() -> None:
    """A jump from 40 C to 10 C over the limit makes a huge forecast (the step's slope); the cut it
    causes is swallowed by the min_share clamp. When the step leaves the trend window the forecast
    falls back to the reading, still 10 C over: the share must stay cut, not jump to full speed."""
    cfg = ThermalConfig(limit_c=60.0, critical_c=75.0, resume_c=55.0, interval_s=0.2, min_share=0.1, trend_window_s=2.0)
    governor = ThermalGovernor(cfg)
    t = 0.0
    for _ in range(30):
        governor.update(t, [Reading("gpu-thermal", 40.0)])
        t += 0.2
    shares = []
    for _ in range(60):
        shares.append(governor.update(t, [Reading("gpu-thermal", 70.0)]).share)
        t += 0.2
    assert max(shares[3:]) <= cfg.min_share + 1e-9, shares
