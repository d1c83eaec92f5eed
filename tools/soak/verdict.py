"""The soak's verdict: the daemon's memory, descriptors and threads over the measured window, its
exit, the streams and objects in Redis, /healthz under load and (with the PLC) what the PLC saw.

`summarize` gives the verdict `soak.json` holds and the run prints; `memory` the RSS figures it judges (the
baseline window's median against the last window's, and the Theil-Sen trend over the whole measured
window); `checks` the pass/fail of each; `plc_checks` the PLC's (tools/soak/plc_checks.py says what
each means); `lost` whether the daemon counted dropped entries, which excuses a gap in the objects'
counts."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from tools.soak.checks import objects_ok
from tools.soak.stats import HEALTHZ_WITHIN_S, Sample, theil_sen


@dataclass(frozen=True, slots=True)
class Memory:
    """RSS over the run: `base` the baseline window's samples, `tail` the last window's; the medians
    (rebuild peaks are transient), the growth between them in %, the trend (MiB per second, and in %
    of the baseline projected over the measured span of `span_s` seconds)."""

    base: list[Sample]
    rss_base: float
    rss_end: float
    growth: float
    slope: float
    span_s: float
    trend: float


def memory(samples: list[Sample], *, duration_s: float, baseline_s: float, sample_s: float) -> Memory:
    """The baseline window starts at `baseline_s` (at 40 % of runs shorter than twice that) and lasts
    a minute (10 % of runs shorter than 10 minutes, at least one sample); the tail is as long."""
    base_t = baseline_s if duration_s >= 2 * baseline_s else 0.4 * duration_s
    window = 60.0 if duration_s >= 600 else max(sample_s, 0.1 * duration_s)
    base = [s for s in samples if base_t <= s.t_s < base_t + window] or samples[:1]
    tail = [s for s in samples if s.t_s >= samples[-1].t_s - window] or samples[-1:]
    rss_base = statistics.median(s.rss_mib for s in base)  # median: rebuild peaks are transient
    rss_end = statistics.median(s.rss_mib for s in tail)
    measured = [s for s in samples if s.t_s >= base[0].t_s]
    slope = theil_sen([s.t_s for s in measured], [s.rss_mib for s in measured])  # MiB per second
    span_s = measured[-1].t_s - measured[0].t_s
    growth = 100 * (rss_end - rss_base) / rss_base
    return Memory(base, rss_base, rss_end, growth, slope, span_s, 100 * slope * span_s / rss_base)


def checks(
    samples: list[Sample],
    mem: Memory,
    *,
    daemon_rc: int | None,
    streams: dict[str, Any],
    objects: dict[str, Any],
    plc_result: dict[str, Any],
) -> dict[str, bool]:
    final = samples[-1]
    return {
        "rss_growth_pct<=2": mem.growth <= 2.0,
        "rss_trend_pct<=2": mem.trend <= 2.0,
        "fds_no_growth": final.fds <= max(s.fds for s in mem.base),
        "threads_no_growth": final.threads <= max(s.threads for s in mem.base),
        "daemon_exit_0": daemon_rc == 0,
        "no_duplicates": all(v["duplicates"] == 0 for v in streams.values()),
        "order_per_camera": all(v["ids_increasing"] and v["captured_non_decreasing"] for v in streams.values()),
        "published_at_least_last_scrape": all(v["entries"] >= final.published.get(c, 0) for c, v in streams.items()),
        "objects_exactly_once": all(objects_ok(v, lost=lost(final)) for v in objects.values()),
        "objects_at_least_crossings_metric": sum(sum(v["last_counts"].values()) for v in objects.values())
        >= final.extra.get("crossings", 0),
        "healthz_within_1s": all(0 <= s.extra.get("healthz_ms", -1) <= 1000 * HEALTHZ_WITHIN_S for s in samples),
        **plc_checks(plc_result),
    }


def summarize(
    samples: list[Sample],
    mem: Memory,
    checked: dict[str, bool],
    *,
    daemon_rc: int | None,
    flood_counts: list[dict[str, int]],
) -> dict[str, Any]:
    final, base = samples[-1], mem.base
    return {
        "baseline_t_s": [base[0].t_s, base[-1].t_s],
        "rss_baseline_mib": round(mem.rss_base, 1),
        "rss_end_mib": round(mem.rss_end, 1),
        "rss_growth_pct": round(mem.growth, 2),
        "rss_growth_point_pct": round(100 * (final.rss_mib - base[0].rss_mib) / base[0].rss_mib, 2),
        "rss_trend_mib_per_h": round(mem.slope * 3600, 2),
        "rss_trend_pct_over_window": round(mem.trend, 2),
        "measured_window_s": round(mem.span_s, 1),
        "rss_max_mib": max(s.rss_mib for s in samples),
        "fds_baseline_max": max(s.fds for s in base),
        "fds_end": final.fds,
        "fds_max": max(s.fds for s in samples),
        "threads_baseline_max": max(s.threads for s in base),
        "threads_end": final.threads,
        "threads_max": max(s.threads for s in samples),
        "daemon_exit_code": daemon_rc,
        "healthz_ms_max": max(s.extra.get("healthz_ms", -1) for s in samples),
        "floods": flood_counts,
        "checks": checked,
        "pass": all(checked.values()),
    }


def plc_checks(plc_result: dict[str, Any]) -> dict[str, bool]:
    """The PLC's verdict (none without `--plc`): tools/soak/plc_checks.py says what each means."""
    if not plc_result:
        return {}
    events, counts = plc_result["opcua_events"], plc_result["counts"]
    return {
        "plc_opcua_no_repeat_or_stray": events["duplicates"] == events["extra"] == events["track_mismatch"] == 0,
        "plc_opcua_every_crossing_while_subscribed": events["crossings"] > 0 and events["missing_subscribed"] == 0,
        "plc_opcua_every_crossing_once": events["crossings"] > 0 and events["missing"] == 0,
        "plc_counts_opcua_agree": bool(counts["opcua_agree"]),
        "plc_counts_modbus_agree": bool(counts["modbus_agree"]),
        "plc_counts_never_backwards": counts["opcua_count_backwards"] == counts["modbus_backwards"] == 0,
        "bridge_exit_0": plc_result["bridge_exit_code"] == 0,
        "bridge_no_crash": plc_result["bridge_crashes"] == 0,
    }


def lost(final: Sample) -> bool:
    """Whether the daemon dropped anything it had accepted (a full spool or buffer), so a gap in the
    objects' counts can be a dropped event rather than a lost one."""
    return any(v > 0 for r, v in final.dropped.items() if r in ("spool_full", "buffer_full", "spool_overflow"))
