"""Crossing clips: a packet ring's memory per camera, and the clips' CPU against inference.

    .venv/bin/python -m tools.bench.clips [--mbit 4] [--keep-s 10] [--seconds 20] [--crossings-per-s 2] [--fps 25]

1. Memory: it writes a 1280x720 H.264 stream at about `--mbit` Mbit/s with the kit's writer (noise, capped by
   `maxrate` as an IP camera's encoder is; a keyframe a second), feeds every packet through the reader's tap
   (`daemon.ingest.packet_tap.PacketTap`) into a `PacketRing` keeping `--keep-s` seconds, and reports what
   the ring holds (payload and its `nbytes`, which counts its bookkeeping) and what Python allocated for it
   (`tracemalloc`, the template stream's holder included).
2. CPU: the same stream replayed as a live camera for `--seconds` of stream time (faster than real time):
   the tap in the feeding thread, `ClipRecorder.attach` with a crossing every 1/`--crossings-per-s` s (the
   event loop's share), and the writer's thread muxing the clips (its thread CPU, from
   `pthread_getcpuclockid`). Their sum per second of stream, over the inference CPU of `--infer-fps` frames
   of the 640 demo model (`session.run`, batch 1, ONNX Runtime on the CPU) in a second, is the ratio the
   goal is stated in. The machine is shared: compare within one run.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import av
import numpy as np
from av.video.stream import VideoStream

from daemon.config.seam import ClipsConfig
from daemon.core.seam import FrameResult, Metrics, ObjectEvent, PacketRing
from daemon.ingest.seam import PacketTap
from daemon.publish.seam import ClipRecorder
from tools.bench.snapshots import inference_ms
from tools.kit.synth.video import h264_writer

WIDTH, HEIGHT = 1280, 720


def make_stream(path: Path, *, mbit: float, fps: int, seconds: float) -> None:
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, size=(HEIGHT + 64, WIDTH + 64, 3), dtype=np.uint8)
    with h264_writer(path, WIDTH, HEIGHT, fps, crf=18, preset="ultrafast", maxrate=f"{mbit}M") as write:
        for i in range(round(seconds * fps)):
            dx, dy = (i * 3) % 64, (i * 2) % 64
            write(noise[dy : dy + HEIGHT, dx : dx + WIDTH])


def packets_of(path: Path) -> tuple[av.container.InputContainer, VideoStream, list[av.Packet[VideoStream]]]:
    container = av.open(str(path))
    stream = container.streams.video[0]
    return container, stream, [p for p in container.demux(stream) if p.size]


def ring_memory(path: Path, keep_s: float) -> dict[str, float]:
    container, stream, packets = packets_of(path)
    assert stream.time_base is not None
    tb_ms = float(stream.time_base * 1000)
    seconds = (max(p.pts or 0 for p in packets) - min(p.pts or 0 for p in packets)) * tb_ms / 1000
    mbit = sum(p.size for p in packets) * 8 / seconds / 1e6
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    ring = PacketRing("bench", keep_ms=round(keep_s * 1000), max_bytes=2**30)
    tap = PacketTap(ring)
    tap.start(stream)
    for packet in packets:
        tap.add(packet, round((packet.pts or 0) * tb_ms))
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    allocated = sum(s.size_diff for s in after.compare_to(before, "filename"))
    _info, held = ring.since(-1)
    span_s = (held[-1].wall_ms - held[0].wall_ms) / 1000
    container.close()
    return {
        "mbit_s": mbit,
        "held_s": span_s,
        "payload_mib": sum(len(p.data) for p in held) / 2**20,
        "nbytes_mib": ring.nbytes / 2**20,
        "allocated_mib": allocated / 2**20,
    }


def thread_cpu_s(thread: threading.Thread) -> float:
    assert thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def clips_cpu(path: Path, *, seconds: float, per_s: float, workdir: Path) -> dict[str, float]:
    container, stream, packets = packets_of(path)
    ring = PacketRing("bench", keep_ms=8000, max_bytes=2**30)
    cfg = ClipsConfig(enabled=True, dir=workdir / "clips")
    metrics = Metrics()
    recorder = ClipRecorder(cfg, {"bench": ring}, metrics)
    tap = PacketTap(ring)
    recorder.start()
    writer = next(t for t in threading.enumerate() if t.name == "beltsight-clips")
    writer_before = thread_cpu_s(writer)
    anchor_ms = int(time.time() * 1000) + 1000  # stamps ahead of now: no clip closes for lack of packets
    tap_s = attach_s = 0.0
    next_crossing_ms, track = anchor_ms + 6000, 0
    fed_ms = 0.0
    tap.start(stream)
    for packet in packets:
        fed_ms += 1000 / float(stream.average_rate or 25)
        wall = anchor_ms + round(fed_ms)
        if fed_ms > seconds * 1000:
            break
        t0 = time.thread_time()
        tap.add(packet, wall)
        t1 = time.thread_time()
        tap_s += t1 - t0
        if wall >= next_crossing_ms:
            track += 1
            event = ObjectEvent("bench", track, "part", 0, 0.9, "crossed", wall, "L1", "in", track, 100.0)
            recorder.attach(FrameResult("bench", 0, wall, 0.0, WIDTH, HEIGHT, 640, "m", (), objects=(event,)))
            attach_s += time.thread_time() - t1
            next_crossing_ms += round(1000 / per_s)
        time.sleep(0.002)  # lets the writer keep up, as a live camera's pace does
    time.sleep(1.0)
    writer_s = thread_cpu_s(writer) - writer_before
    recorder.stop()
    container.close()
    written = sum(1 for _ in (workdir / "clips").rglob("*.mp4"))
    return {
        "tap_ms_per_s": tap_s / seconds * 1000,
        "attach_ms_per_s": attach_s / seconds * 1000,
        "writer_ms_per_s": writer_s / seconds * 1000,
        "crossings": track,
        "clips": written,
        "dropped": sum(
            metrics.registry.get_sample_value("beltsight_clips_dropped_total", {"reason": r}) or 0.0
            for r in ("queue_full", "no_packets", "late", "disk_full", "write_error")
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mbit", type=float, default=4.0)
    parser.add_argument("--keep-s", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--crossings-per-s", type=float, default=2.0)
    parser.add_argument("--fps", type=int, default=25)
    parser.add_argument("--infer-fps", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-clips-") as tmp:
        work = Path(tmp)
        stream = work / "cam.mp4"
        make_stream(stream, mbit=args.mbit, fps=args.fps, seconds=max(args.keep_s + 4, args.seconds + 1))
        mem = ring_memory(stream, args.keep_s)
        print(
            f"ring at {mem['mbit_s']:.2f} Mbit/s, keep {args.keep_s:g} s: holds {mem['held_s']:.1f} s,"
            f" payload {mem['payload_mib']:.2f} MiB, nbytes {mem['nbytes_mib']:.2f} MiB,"
            f" Python allocated {mem['allocated_mib']:.2f} MiB"
        )
        cpu = clips_cpu(stream, seconds=args.seconds, per_s=args.crossings_per_s, workdir=work)
        infer = inference_ms(3)
        total = cpu["tap_ms_per_s"] + cpu["attach_ms_per_s"] + cpu["writer_ms_per_s"]
        budget = infer * args.infer_fps
        print(
            f"clips CPU per second of stream ({cpu['crossings']:.0f} crossings, {cpu['clips']:.0f} clips,"
            f" {cpu['dropped']:.0f} dropped):"
            f" tap {cpu['tap_ms_per_s']:.2f} ms, attach {cpu['attach_ms_per_s']:.2f} ms,"
            f" writer {cpu['writer_ms_per_s']:.2f} ms, total {total:.2f} ms"
        )
        print(
            f"inference (640 demo model, batch 1): {infer:.1f} ms/frame, {budget:.0f} ms per second at"
            f" {args.infer_fps:g} fps; clips = {100 * total / budget:.2f} % of it"
        )


if __name__ == "__main__":
    main()
