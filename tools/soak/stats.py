"""What `python -m tools.soak` samples and how it judges the trend (and `healthz_time`, a timed GET /healthz).

`Sample` is one reading; `proc_stats` reads the daemon's RSS, fds and threads from /proc,
`scrape` its Prometheus /metrics and `by_label` sums a metric per label; `theil_sen` is the
outlier-proof slope the RSS trend is judged by.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


# -- sampling -----------------------------------------------------------------------------------
@dataclass
class Sample:
    t_s: float
    rss_mib: float
    fds: int
    threads: int
    inferred: dict[str, float]
    published: dict[str, float]
    dropped: dict[str, float]  # reason -> count, all cameras
    fps: dict[str, float] = field(default_factory=dict)
    fault_active: bool = False
    extra: dict[str, float] = field(default_factory=dict)  # rebuilds, sink buffered


def proc_stats(pid: int) -> tuple[dict[str, float], int, int]:
    """VmRSS and its parts (RssAnon: heaps; RssFile: mapped files, libraries) in MiB, fds, threads."""
    rss = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            rss[key] = int(value.split()[0]) / 1024
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    threads = len(os.listdir(f"/proc/{pid}/task"))
    return rss, fds, threads


def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            values.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return values


def by_label(values: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for labels, v in values.get(name, {}).items():
        key = dict(labels).get(label, "")
        out[key] = out.get(key, 0.0) + v
    return out


# -- trend --------------------------------------------------------------------------------------
def theil_sen(t: list[float], y: list[float]) -> float:
    """Median of the slopes between every pair of points: a trend that outliers do not tilt."""
    tt, yy = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    i, j = np.triu_indices(len(tt), k=1)
    dt = tt[j] - tt[i]
    keep = dt > 0
    return float(np.median((yy[j] - yy[i])[keep] / dt[keep])) if keep.any() else 0.0


HEALTHZ_WITHIN_S = 1.0


def healthz_time(port: int) -> float | None:
    """Seconds a plain GET /healthz took (None: no answer within HEALTHZ_WITHIN_S x 5)."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5 * HEALTHZ_WITHIN_S) as reply:
            reply.read()
    except urllib.error.HTTPError as exc:  # 503 while not running is still an answer
        exc.close()
    except OSError:
        return None
    return time.monotonic() - started
