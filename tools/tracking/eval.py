"""Tracking accuracy of the real daemon on rendered conveyor clips with part ids: counts, crossing times, IDF1, HOTA.

    python -m tools.tracking.eval [--quick | --other] [--model 416] [--modes file,drop,rtsp] [--cache DIR] [--out JSON]
                                  [--rescore]

1. Clips (``tools.kit.synth``, 640x480, 15 fps, 15 s, deterministic by seed, cached in ``--cache``, rendered two
   at a time): belt speeds 0.1, 0.2 and 0.35 frame widths/s x densities 0.1 and 0.25, plus a stop-and-go clip
   (the belt stands 2 s and 1.5 s, 0.3 s ramps; parts keep their place). ``--quick``: two 8-10 s clips (0.2 w/s
   sparse, stop-and-go), modes file+drop. ``--other``: four other 10 s clips (``OTHER``: 0.15-0.45 w/s,
   densities 0.18-0.3, one with a 1.5 s stop), modes file+drop, report ``tracking-eval-other.json``.
   ``rtsp`` mode uses the 0.2 w/s sparse and the stop-and-go clip.
2. A vertical counting line at x = 0.5 (``direction`` +x); GT crossings: when each part's box centre passes
   it, from the belt travel in the GT (``tools.kit.synth.crossings.gt_crossings``).
3. The daemon (``python -m daemon run``, a real redis-server, config by ``tools.kit.daemon_config``, one
   daemon per mode with every clip as a camera, ``[tracking]`` defaults) in three modes:
   * ``file``: file sources, ``realtime = false``: every frame is processed (the reader waits).
   * ``drop``: two thirds of the frames gone: each clip DECIMATED beforehand (frames 0, 3, 6, ... re-encoded
     at 5 fps), every frame of that processed (``realtime = false``). The daemon drops nothing itself here:
     the same frames every run, spaced evenly in capture time.
   * ``rtsp``: the clips served at 15 fps by ``tools.kit.rtsp.RtspServer``, the daemon reading live; it
     processes what it keeps up with and drops the rest itself (the processed fraction is reported). Only
     the first pass over the clip (seq < frames) of the first connection is scored.
4. Read back: the objects stream (``crossed`` on the line) and the detections stream (``dets`` with
   ``track``). An event's ``at_ms`` (capture clock) is mapped to clip time through the published frames'
   (captured_ms, frame index) pairs, piecewise linearly, as the tracker interpolates. While the daemon does
   not track yet (no objects, no track ids), the daemon's ``CameraTracker`` is run over its published
   detections instead (``"tracker": "replay"`` in the report).
5. Scores per clip and pooled per mode: count error (counted - GT) / GT, missed/extra (one-to-one within 1 s,
   a track's crossing paired with its own GT part's crossing first: ``match_crossings``; ``undet``: the missed
   parts that no published detection, tracked or not, found before their crossing: the detector's misses,
   which no tracker could count), parts counted twice
   (crossings whose tracks map to the same GT part), median and p90 |crossing time error| (ms and in
   processed-frame intervals), IDF1 and HOTA (``trackeval``) of the detections' track ids against the GT part
   ids on the processed frames. Parts in view but never ``MIN_VISIBLE`` (40 %) visible (cut by the frame's
   edge, covered by other parts) are the GT's ``ignore`` boxes, as MOTChallenge treats them: a crossing counted
   on one of them is neither required nor extra (column ``ign``), and tracked boxes on them are left out of IDF1
   and HOTA. Crossings in the last 0.5 s of a clip are not scored (a crossing registers once the part is clear
   of the line), and a part whose GT crossing and counted crossing fall either side of that limit counts on
   neither side (``in_window``). Goals are printed against the pooled figures. What each mode's daemon
   published is kept in ``<cache>/run-<mode>/published.json``; ``--rescore`` scores that again without a daemon run.
6. Diagnosis rows ``file@clip`` / ``drop@clip``: the same run's published detections tracked again by the
   daemon's ``CameraTracker`` with each frame stamped at its clip time instead of its decode time (with
   ``realtime = false`` and several cameras, the daemon stamps a camera's frames ~N x the clip's interval
   apart, and the tracker's time-based limits then act on that clock).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tools.kit.rtsp import RtspServer
from tools.kit.run_output import WHERE, reports_dir
from tools.tracking.clips import Scenario, decimate, load_gt, render
from tools.tracking.daemon_run import (
    Published,
    daemon_tracked,
    load_published,
    replay_tracking,
    run_daemon,
    save_published,
)
from tools.tracking.metrics import Frames
from tools.tracking.scoring import GOALS, LINE, abs_stats, goal_check, pooled, score_clip

DROP_STEP = 3

FULL = [
    *(
        Scenario(f"v{speed:g}-d{dens:g}", speed, dens, 15.0, 300 + 10 * i + j)
        for i, speed in enumerate((0.1, 0.2, 0.35))
        for j, dens in enumerate((0.1, 0.25))
    ),
    Scenario("stopgo", 0.2, 0.15, 15.0, 390, stops=((3.0, 2.0), (8.0, 1.5))),
]
QUICK = [Scenario("v0.2-d0.1", 0.2, 0.1, 8.0, 310), Scenario("stopgo", 0.2, 0.12, 10.0, 390, stops=((3.0, 2.0),))]
OTHER = [
    Scenario("n0.15-d0.2", 0.15, 0.2, 10.0, 501),
    Scenario("n0.3-d0.3", 0.3, 0.3, 10.0, 502),
    Scenario("n0.25-stop", 0.25, 0.18, 10.0, 503, stops=((4.0, 1.5),)),
    Scenario("n0.45-d0.2", 0.45, 0.2, 10.0, 504),
]
"""Clips of other seeds, speeds and densities (one with a stop): a check of rules found on ``FULL``."""


def camera(name: str, url: str, model: int, realtime: bool) -> dict[str, Any]:
    return {"id": name.replace(".", "_"), "url": url, "realtime": realtime, "model": model, "lines": [LINE]}


def render_all(scenarios: list[Scenario], cache: Path) -> dict[str, tuple[Path, Path]]:
    with ProcessPoolExecutor(2) as pool:
        paths = list(pool.map(render, scenarios, [cache] * len(scenarios)))
    return {sc.name: p for sc, p in zip(scenarios, paths, strict=True)}


def run_mode(mode: str, scenarios: list[Scenario], args: argparse.Namespace) -> dict[str, Any]:
    clips = render_all(scenarios, args.cache)
    gts = {name: load_gt(gt) for name, (_, gt) in clips.items()}
    step = DROP_STEP if mode == "drop" else 1
    cams = [camera(n, str(mp4), args.model, realtime=mode == "rtsp") for n, (mp4, _) in clips.items()]
    ids = {c["id"]: n for c, n in zip(cams, clips, strict=True)}
    saved = args.cache / f"run-{mode}" / "published.json"
    if args.rescore:
        if not saved.exists():
            raise SystemExit(f"--rescore: {saved} does not exist; run mode {mode} once without --rescore")
        pubs, meta = load_published(saved)
        if sorted(pubs) != sorted(ids) or meta.get("model") != args.model:
            raise SystemExit(
                f"{saved} holds cameras {sorted(pubs)} of model {meta.get('model')}, not "
                f"{sorted(ids)} of model {args.model}: run without --rescore"
            )
        wall = float(meta["wall_s"])
    else:
        started = time.monotonic()
        pubs = publish(
            mode,
            cams,
            {c: gts[n]["frames"] for c, n in ids.items()},
            max(sc.seconds for sc in scenarios),
            saved.parent,
            args,
        )
        wall = time.monotonic() - started
        save_published(saved, pubs, model=args.model, wall_s=wall)
    result: dict[str, Any] = {"clips": {}, "wall_s": wall}
    all_frames: list[Frames] = []
    for cam_cfg in cams:
        name, pub = ids[cam_cfg["id"]], pubs[cam_cfg["id"]]
        tracker = "daemon" if daemon_tracked(pub) else "replay"
        if tracker == "replay":
            pub = replay_tracking(pub, cam_cfg, None)
        figures, frames = score_clip(pub, gts[name], lambda seq: seq * step)
        errors = figures["time_errors_s"]
        figures |= abs_stats(errors, figures["interval_ms"]) | {"tracker": tracker}
        result["clips"][name] = figures
        all_frames.append(frames)
    result["pooled"] = pooled(result["clips"], all_frames)
    result["tracker"] = sorted({c["tracker"] for c in result["clips"].values()})
    if mode != "rtsp":
        result["clip_clock"] = clip_clock(cams, ids, pubs, gts, step)
    return result


def publish(
    mode: str,
    cams: list[dict[str, Any]],
    frames: dict[str, int],
    seconds: float,
    out_dir: Path,
    args: argparse.Namespace,
) -> dict[str, Published]:
    """Run the daemon over the clips ``cams`` (file urls, ``frames`` each, the longest ``seconds`` long) in
    ``mode``; what each camera published."""
    if mode == "drop":
        cams = [c | {"url": str(decimate(Path(c["url"]), DROP_STEP))} for c in cams]
        frames = {c: -(-n // DROP_STEP) for c, n in frames.items()}
    if mode != "rtsp":
        return run_daemon(out_dir, cams, frames, 120 + sum(frames.values()) * args.s_per_frame)
    rtsp = RtspServer({c["id"]: Path(c["url"]) for c in cams}, log_path=args.cache / "rtsp.log").start()
    try:
        live = [c | {"url": rtsp.url(c["id"])} for c in cams]
        # it loops: stop after the clip's length once running
        return run_daemon(out_dir, live, {c["id"]: 10**9 for c in cams}, 30 + seconds)
    finally:
        rtsp.close()


def clip_clock(
    cams: list[dict[str, Any]],
    ids: dict[str, str],
    pubs: dict[str, Published],
    gts: dict[str, dict[str, Any]],
    step: int,
) -> dict[str, Any]:
    """Diagnosis: the daemon's own detections, tracked again by its tracker with each frame stamped at its
    clip time (as a camera stamps it) instead of when the daemon decoded it (``realtime = false``)."""
    out: dict[str, Any] = {"clips": {}, "wall_s": 0.0, "tracker": ["replay on clip time"]}
    all_frames: list[Frames] = []
    for cam_cfg in cams:
        name, pub = ids[cam_cfg["id"]], pubs[cam_cfg["id"]]
        base = pub.entries[0]["captured_ms"] if pub.entries else 0
        fps = gts[name]["fps"]
        stamped = Published(
            [
                e
                | {
                    "captured_ms": base + round(1000 * e["seq"] * step / fps),
                    "dets": [{k: v for k, v in d.items() if k != "track"} for d in e["dets"]],
                }
                for e in pub.entries
            ]
        )
        figures, frames = score_clip(replay_tracking(stamped, cam_cfg, None), gts[name], lambda q: q * step)
        out["clips"][name] = figures | abs_stats(figures["time_errors_s"], figures["interval_ms"])
        all_frames.append(frames)
    out["pooled"] = pooled(out["clips"], all_frames)
    return out


def table(report: dict[str, Any]) -> str:
    head = (
        f"{'mode':9} {'clip':11} {'gt':>4} {'cnt':>4} {'err%':>6} {'miss':>4} {'undet':>5} {'xtra':>4} "
        f"{'dbl':>3} {'ign':>3} {'med ms':>6} {'p90 ms':>6} {'med/iv':>6} {'IDF1':>5} {'HOTA':>5} {'proc':>5}"
    )
    rows = [head, "-" * len(head)]
    for mode, res in report["modes"].items():
        for name, c in [*res["clips"].items(), ("POOLED", res["pooled"])]:
            rows.append(
                f"{mode:9} {name:11} {c['gt']:4d} {c['counted']:4d} {100 * c['count_error']:6.1f} {c['missed']:4d} "
                f"{c['undetected']:5d} {c['extra']:4d} {c['double']:3d} {c['ignored']:3d} {c['median_dt_ms']:6.0f} "
                f"{c['p90_dt_ms']:6.0f} "
                f"{c['median_dt_intervals']:6.2f} {c['IDF1']:5.3f} {c['HOTA']:5.3f} {c['processed']:5.2f}"
            )
        goals = res["goals"]
        rows.append(
            f"{mode:9} goals: "
            + ", ".join(f"{k} {'ok' if v else 'MISSED'}" for k, v in goals.items())
            + f"  (tracker: {'/'.join(res['tracker'])}, {res['wall_s']:.0f} s)"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two clips, modes file and drop (~2 min)")
    ap.add_argument("--other", action="store_true", help="the four other clips (OTHER), modes file and drop")
    ap.add_argument("--model", type=int, default=416, choices=(416, 640, 800))
    ap.add_argument("--modes", help="comma-separated of file, drop, rtsp (default: all; --quick: file,drop)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "beltsight-tracking-eval")
    ap.add_argument(
        "--out",
        type=Path,
        help=f"JSON report (default: tracking-eval.json under {WHERE}; --quick: <cache>/tracking-eval-quick.json)",
    )
    ap.add_argument(
        "--rescore",
        action="store_true",
        help="score again what the last run of each mode published (<cache>/run-<mode>/published.json),"
        " without running the daemon: for a change to the scoring",
    )
    ap.add_argument("--s-per-frame", type=float, default=1.0, help="timeout allowance per frame processed")
    args = ap.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    scenarios = QUICK if args.quick else OTHER if args.other else FULL
    modes = (args.modes or ("file,drop" if args.quick or args.other else "file,drop,rtsp")).split(",")
    out = args.out or (
        args.cache / "tracking-eval-quick.json"
        if args.quick
        else reports_dir() / f"tracking-eval{'-other' if args.other else ''}.json"
    )
    report: dict[str, Any] = {
        "model": args.model,
        "size": "640x480",
        "fps": 15,
        "line": LINE,
        "goals": GOALS,
        "scenarios": [vars(sc) for sc in scenarios],
        "modes": {},
    }
    for mode in modes:
        rtsp_scenarios = [sc for sc in scenarios if sc.name in ("v0.2-d0.1", "stopgo")]
        res = run_mode(mode, rtsp_scenarios if mode == "rtsp" else scenarios, args)
        res["goals"] = goal_check(mode, res["pooled"])
        diag = res.pop("clip_clock", None)
        report["modes"][mode] = res
        if diag is not None:
            diag["goals"] = goal_check(mode, diag["pooled"])
            report["modes"][f"{mode}@clip"] = diag
        print(f"{mode}: done in {res['wall_s']:.0f} s", flush=True)
    text = table(report)
    print(text)
    for res in report["modes"].values():
        for c in [*res["clips"].values(), res["pooled"]]:
            c.pop("time_errors_s", None)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=float) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
