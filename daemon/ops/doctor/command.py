"""`beltsight doctor`: where inference will really run on this machine, and what is missing.

Exit 0 when every configured model loads and its session gets the first configured
provider; 1 otherwise (also with `allow_fallback`: doctor reports what would be used).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

from daemon.config.models import model_overrides, model_paths
from daemon.config.settings import Settings
from daemon.core.memory import read_rss_mb
from daemon.inference.providers import cpu_cores, intra_op_threads, lane_workers, worker_batch
from daemon.ops.doctor.gpu import gpu_findings
from daemon.ops.doctor.report import doctor_report
from daemon.thermal.monitor import thermal_report


def _peak_rss() -> str:
    peak = read_rss_mb(peak=True)
    return "?" if peak is None else f"{peak:.0f}"


def run_doctor(settings: Settings, *, out: TextIO = sys.stdout, as_json: bool = False) -> int:
    rss_before = _peak_rss()
    report = doctor_report(settings.engine, model_paths(settings.models), model_overrides(settings.models))
    got = next((m.providers for m in report.models if m.providers), ())
    gpu = gpu_findings(settings.engine, model_paths(settings.models), got)
    ok = report.ok and gpu.ok
    thermal, thermal_lines = thermal_report(settings.thermal, settings.engine)
    if as_json:
        data = report.as_dict() | {"thermal": thermal, "gpu": gpu.data}
        data["ok"] = ok
        print(json.dumps(data, default=str, indent=2), file=out)
        return 0 if ok else 1
    for line in report.lines()[:-1]:
        print(line, file=out)
    print(f"host memory (peak RSS): {rss_before} MiB before sessions, {_peak_rss()} MiB after", file=out)
    workers, threads = lane_workers(settings.engine), intra_op_threads(settings.engine)
    per_batch = worker_batch(settings.engine) or "its share of the cameras"
    print(
        f"cpu cores: {os.cpu_count()} ({cpu_cores()} usable); per model size {workers} worker session(s), "
        f"{threads or 'ORT default'} intra-op thread(s) each, batches of {per_batch} frame(s) up to "
        f"max_batch {settings.engine.max_batch}",
        file=out,
    )
    for line in thermal_lines:
        print(line, file=out)
    for line in gpu.lines:
        print(line, file=out)
    if report.ok and not gpu.ok:
        print("result: NOT OK: the GPU pipeline that [engine] device asks for cannot run here", file=out)
    else:
        print(report.lines()[-1], file=out)
    return 0 if ok else 1
