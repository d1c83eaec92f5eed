"""The soak's plot: RSS, fds, threads and inferred fps per camera over time, with the faults shaded; with the
PLC, a fifth panel: the daemon's crossings against what the PLC saw (OPC UA events, the Modbus counts' sum)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.soak.faults import FAULT_COLORS
from tools.soak.stats import Sample


def plot_soak(path: Path, samples: list[Sample], faults: list[Any], minutes: float) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.patches import Rectangle  # noqa: PLC0415

    t = [s.t_s / 60 for s in samples]
    plc = any("plc_events" in s.extra for s in samples)
    fig, axes = plt.subplots(5 if plc else 4, 1, figsize=(12, 15 if plc else 12), sharex=True)
    series = (
        ("RSS (MiB)", [s.rss_mib for s in samples]),
        ("open fds", [s.fds for s in samples]),
        ("threads", [s.threads for s in samples]),
    )
    for ax, (label, ys) in zip(axes, series, strict=False):
        ax.plot(t, ys, marker=".")
        ax.set_ylabel(label)
    for cam in sorted({c for s in samples for c in s.fps}):
        axes[3].plot(t, [s.fps.get(cam, 0.0) for s in samples], marker=".", label=cam)
    axes[3].set_ylabel("inferred fps")
    axes[3].legend(loc="lower right")
    if plc:
        for key, label in (("crossings", "crossings (daemon)"), ("plc_events", "OPC UA events (PLC)"),
                           ("plc_modbus_total", "Modbus counts (PLC)")):  # fmt: skip
            axes[4].plot(t, [s.extra.get(key, 0.0) for s in samples], marker=".", label=label)
        axes[4].set_ylabel("crossings")
        axes[4].legend(loc="upper left")
    axes[-1].set_xlabel("minutes")
    colors = FAULT_COLORS
    for ax in axes:
        for f in faults:
            ax.axvspan(f.start_s / 60, (f.end_s or f.start_s) / 60, color=colors[f.kind], alpha=0.25, lw=0)
    handles = [Rectangle((0, 0), 1, 1, color=c, alpha=0.4) for c in colors.values()]
    axes[0].legend(handles, list(colors), loc="lower right", fontsize=8)
    axes[0].set_title(f"BeltSight soak, {minutes} min")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
