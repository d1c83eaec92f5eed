"""What `python -m tools.bench` reports: the acceptance checks, the table, the diagnostics' lines, the plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tools.bench.baselines import (
    bare_at,
)

DRIFT_WARN = 0.10  # bare model after / before the daemon phase: beyond this the host's speed changed


# -- report -------------------------------------------------------------------------------------
def acceptance(main: dict[str, Any], bare: float, naive: dict[str, Any]) -> list[tuple[str, bool, str]]:
    lat, wait_ms = main["latency_ms"], main["engine"]["max_wait_ms"]
    budget = 2 * (main["inference_ms_mean"] + wait_ms)
    fps = [c["fps"] for c in main["per_camera"].values()]
    books = {
        cam: (  # `behind` frames were skipped, never decoded (daemon.ingest.lag)
            c["decoded_total"],
            c["published_total"] + sum(n for r, n in c["dropped_total"].items() if r != "behind"),
            c["xlen_total"],
        )
        for cam, c in main["per_camera"].items()
    }
    served_all = main["fps_total"] >= 0.95 * main["fps_offered"]  # not saturated: fps is the offered load
    note = f" (or >= 0.95 x offered {main['fps_offered']} fps: {served_all})"
    return [
        (
            "a",
            main["fps_total"] >= 0.8 * bare or served_all,
            f"daemon {main['fps_total']} fps >= 0.8 x bare {bare} img/s at its batch sizes = {0.8 * bare:.1f}" + note,
        ),
        (
            "b",
            main["fps_total"] >= 1.3 * naive["fps_total"] or served_all,
            f"daemon {main['fps_total']} fps >= 1.3 x naive {naive['fps_total']} fps = {1.3 * naive['fps_total']:.1f}"
            + note,
        ),
        (
            "c",
            lat["p99"] <= budget,
            f"latency p99 {lat['p99']} ms <= 2 x (inference {main['inference_ms_mean']} + max_wait {wait_ms}) "
            f"= {budget:.1f} ms",
        ),
        (
            "d",
            lat["last_p99"] <= 1.2 * lat["first_p99"],
            f"p99 last {lat['last_p99']} ms <= 1.2 x first {lat['first_p99']} ms = {1.2 * lat['first_p99']:.1f}",
        ),
        (
            "e",
            main["rss_mb_end"] <= 1.05 * main["rss_mb_start"],
            f"RSS end {main['rss_mb_end']} MB <= 1.05 x RSS at 10 s {main['rss_mb_start']} MB",
        ),
        ("f", min(fps) >= 0.8 * max(fps), f"per-camera fps {fps}: min >= 0.8 x max"),
        (
            "g",
            all(
                d == acc and x >= p
                for (d, acc, x), p in zip(
                    books.values(), [c["published_total"] for c in main["per_camera"].values()], strict=True
                )
            ),
            "decoded == published + dropped per camera: "
            + ", ".join(f"{cam} {d:.0f}=={acc:.0f}" for cam, (d, acc, _x) in books.items()),
        ),
    ]


def print_table(
    main: dict[str, Any],
    naive: dict[str, Any],
    bare: dict[int, float],
    bare_main: float,
    checks: list[tuple[str, bool, str]],
    bare_detail: str = "",
) -> None:
    lat, span = main["latency_ms"], "minute" if main["seconds"] >= 120 else "third"
    print(f"\n== daemon: {main['cameras']} cameras, {main['seconds']} s, engine {main['engine']} ==")
    print(f"{'camera':8} {'fps':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}  dropped in window")
    for cam, c in main["per_camera"].items():
        drops = ", ".join(f"{r}={v:.0f}" for r, v in c["dropped_window"].items() if v) or "none"
        lc = c["latency_ms"]
        print(f"{cam:8} {c['fps']:7.2f} {lc['p50']:8.1f} {lc['p95']:8.1f} {lc['p99']:8.1f}  {drops}")
    print(
        f"{'total':8} {main['fps_total']:7.2f} {lat['p50']:8.1f} {lat['p95']:8.1f} {lat['p99']:8.1f}  "
        f"(max {lat['max']} ms)"
    )
    print(
        f"latency p50/p99 first {span}: {lat['first_p50']}/{lat['first_p99']} ms, last {span}: "
        f"{lat['last_p50']}/{lat['last_p99']} ms; vs expected capture time: {main['latency_vs_expected_capture_ms']}"
    )
    print(
        f"batch sizes (batches): {main['batch_sizes']}; mean inference {main['inference_ms_mean']} ms/batch; "
        f"session.run busy {main['session_run_busy_pct']}% of the window; offered {main['fps_offered']} fps"
    )
    print(
        f"CPU {main['cpu_pct_mean']}% of one core (servers: {main['servers_cpu_pct_mean']}%, other processes: "
        f"{main['others_cpu_pct_mean']}%; by thread: "
        f"{main['thread_cpu_pct']}), "
        f"RSS {main['rss_mb_start']} MB at 10 s -> {main['rss_mb_end']} MB at end"
    )
    if main.get("thread_wait_pct"):
        print(f"runnable but waiting for a core, % of the window by thread: {main['thread_wait_pct']}")
    nl = naive["latency_vs_expected_capture_ms"]
    print(
        f"naive loop: {naive['fps_total']} fps over {naive['seconds']} s, latency vs expected capture p50 "
        f"{nl['p50']} p99 {nl['p99']} ms (first {span} p50 {nl['first_p50']}, last {nl['last_p50']}); "
        f"vs its own decode time p50 {naive['latency_vs_decode_ms']['p50']} ms"
    )
    print(f"bare model img/s by batch size (the higher of two layouts): {bare}{bare_detail}")
    print(
        f"ratios: daemon / bare at used batch sizes = {main['fps_total'] / bare_main:.2f}; daemon / naive = "
        f"{main['fps_total'] / naive['fps_total']:.2f}; naive latency growth (last/first p50) = "
        f"{nl['last_p50'] / nl['first_p50']:.1f}x"
    )
    for key, ok, text in checks:
        print(f"{'PASS' if ok else 'FAIL'} ({key}) {text}")


def plot(
    path: Path, phases: dict[int, dict[str, Any]], main: dict[str, Any], naive: dict[str, Any], bare: dict[int, float]
) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 9))
    for i, (cam, s) in enumerate(main["series"].items()):
        top.plot(s["t"], s["latency_ms"], lw=0.6, color=f"C{i}", label=f"daemon {cam}")
    for i, (cam, s) in enumerate(naive["series"].items()):
        top.plot(s["t"], s["latency_ms"], lw=1.2, ls="--", color=f"C{i}", label=f"naive {cam} (vs expected capture)")
    top.set(
        yscale="log",
        xlabel="seconds since phase start",
        ylabel="latency (ms)",
        title=f"latency per camera, {main['cameras']} cameras",
    )
    top.legend(fontsize=7, ncol=2)
    ks = sorted(phases)
    bottom.plot(ks, [phases[k]["fps_total"] for k in ks], "o-", label="daemon processed fps")
    bottom.plot(
        ks, [bare_at(bare, phases[k]["batch_sizes"]) for k in ks], "s--", label="bare model img/s at used batch"
    )
    bottom.plot(ks, [phases[k]["fps_offered"] for k in ks], "^:", color="grey", label="offered fps")
    bottom.plot([naive["cameras"]], [naive["fps_total"]], "x", ms=10, label="naive loop fps")
    bottom.set(xlabel="cameras", ylabel="frames/s", title="throughput vs number of cameras", xticks=ks)
    bottom.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def beside_line(beside: dict[str, Any] | str, daemon_ratio: float) -> str:
    """The diagnostic: how much of the bare model is left beside decoding alone, and how much of
    that the daemon gets (the rest of its gap to the bare model is its own overhead)."""
    if isinstance(beside, str):
        return f"bare model beside a process decoding the same streams: {beside}"
    ratios = beside["ratios"]
    return (
        f"bare model beside a process decoding the same streams (batch {beside['batch']}, "
        f"{len(ratios)} windows, each against the windows alone around it): {beside['ratio']:.2f} x bare "
        f"(windows {min(ratios):.2f}-{max(ratios):.2f}); decoding: {beside['decoded_fps']} fps, "
        f"{beside['decoder_cpu_pct']}% of one core, {beside['decode_ms_per_frame']} ms/frame; "
        f"the daemon's {daemon_ratio:.2f} x bare is {daemon_ratio / beside['ratio']:.2f} x that"
    )


def workers_line(main: dict[str, Any], bare_cpu: float | None, bare_rate: float) -> str:
    """Where the workers' CPU went: how much of the cores they got, how much of it session.run
    took, and session.run's CPU per image against the bare model's in the same layout. The
    daemon / bare ratio is (session.run CPU per second in the daemon / in the bare run) x (bare
    CPU per image / daemon CPU per image); the first factor is the daemon's share of the cores,
    the second the session's speed in each phase: the host's speed as it drifts between phases
    (minutes apart), and any slow-down inference itself suffers in the daemon."""
    share = main.get("session_run_share_of_workers_cpu")
    daemon_cpu = main["inference_cpu_ms_per_image"]
    line = (
        f"workers: {main['workers_cpu_pct']}% of one core in all, "
        f"{'?' if share is None else f'{100 * share:.1f}'}% of it in session.run, "
        f"{daemon_cpu} ms of session.run CPU per image"
    )
    if bare_cpu and not math.isnan(daemon_cpu):
        session_pct, bare_pct = main["fps_total"] * daemon_cpu / 10, bare_rate * bare_cpu / 10
        line += (
            f" against {bare_cpu} ms bare in the same layout ({daemon_cpu / bare_cpu:.2f} x)\n"
            f"share of the cores: session.run {session_pct:.1f}% of one core in the daemon against "
            f"{bare_pct:.1f}% bare: {session_pct / bare_pct:.2f} x bare at equal session.run speed"
        )
    return line


def crossings_line(phase: dict[str, Any]) -> str:
    c = phase.get("crossings")
    if c is None:
        return "crossings: no counting lines (--no-lines)"
    snaps = f", {c['snapshots']} snapshots written" if c.get("snapshots") is not None else ""
    return f"crossings: {c['count']} in the window, {c['per_s']} per second over all cameras{snaps}"


def experiment_line(e: dict[str, Any]) -> str:
    return (
        f"experiment {e['name']} ({e['summary']}), on / off in alternating segments ({e['pairs']} pairs, "
        f"medians): fps {e['fps_on_over_off']} (pairs {e['fps_ratios']}), process CPU per frame "
        f"{e['cpu_per_frame_on_over_off']} (pairs {e['cpu_per_frame_ratios']})"
    )
