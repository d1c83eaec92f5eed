"""`Soak`: the run itself (setup, the fault schedule, samples, the end), judged and reported by `report`."""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.kit.ports import free_port
from tools.kit.redis_server import RedisServer, find_redis_server
from tools.kit.rtsp import RtspServer
from tools.kit.running import spawn_daemon
from tools.kit.sentinel import SentinelGroup, start_group
from tools.soak.bridge import PlcSide
from tools.soak.checks import check_detections, check_objects
from tools.soak.faults import (
    FAULT_DOWN_S,
    Fault,
    SpoolDisk,
    redis_oom_end,
    redis_oom_start,
    schedule,
)
from tools.soak.flood import FloodProc
from tools.soak.plc_checks import stream_crossings
from tools.soak.procs import kill_proc, render_clips, wait_publishing, write_soak_config
from tools.soak.report import row, write_report
from tools.soak.stats import Sample, by_label, healthz_time, proc_stats, scrape


# -- the run ------------------------------------------------------------------------------------
class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out: Path = args.out
        self.duration_s = args.minutes * 60
        self.cams: dict[str, RtspServer] = {}  # mount -> its own RTSP server
        self.redis: RedisServer | None = None
        self.daemon: subprocess.Popen[bytes] | None = None
        self.health_port = free_port()
        self.samples: list[Sample] = []
        self.faults: list[Fault] = []
        self.t0 = 0.0
        self.daemon_rc: int | None = None
        self.extra: dict[str, float] = {}
        self.flood_counts: list[dict[str, int]] = []
        self.floods: list[FloodProc] = []
        self.spool_disk = SpoolDisk(args.out / "spooldisk")
        self.group: SentinelGroup | None = None  # --sentinel: self.redis is its current master
        self.plc: PlcSide | None = None
        self.plc_result: dict[str, Any] = {}
        self.bridge_down = False  # a bridge_kill is on
        self.failovers = 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    def setup(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        for sub in ("redis", "logs"):
            (self.out / sub).mkdir(exist_ok=True)
        if not self.spool_disk.mount() and "spool_disk_full" in self.args.faults:
            print(f"spool_disk_full left out: {self.spool_disk.why_not}", flush=True)
            self.args.faults = [k for k in self.args.faults if k != "spool_disk_full"]
        print(f"rendering {self.args.cameras} clips ...", flush=True)
        clips = render_clips(self.out, self.args.cameras, self.args.clip_s)
        for i, clip in enumerate(clips):
            cam = RtspServer({f"cam{i}": clip}, log_path=self.out / "logs" / f"rtsp-cam{i}.log")
            self.cams[f"cam{i}"] = cam.restart(timeout_s=20)
        redis_url, redis_keys = self.start_redis()
        config = self.out / "beltsight.toml"
        if self.args.plc:
            self.plc = PlcSide(self.out, config, [(mount, "mid") for mount in self.cams], poll_ms=self.args.poll_ms)
        write_soak_config(
            config,
            redis_url=redis_url,
            health_port=self.health_port,
            spool=self.spool_disk.spool,
            cameras=[(mount, c.url(mount)) for mount, c in self.cams.items()],
            rebuild_every=self.args.rebuild_every,
            redis=redis_keys,
            extra=self.plc.config_toml() if self.plc is not None else "",
        )
        if self.plc is not None:  # serving, and the PLC subscribed, before the first crossing
            self.plc.start()
        self.daemon = spawn_daemon(config, self.out / "logs" / "daemon.log", self.args.nofile)
        wait_publishing(self.daemon, self.health_port)

    def start_redis(self) -> tuple[str, dict[str, Any]]:
        """One redis-server with AOF, or (--sentinel) a Sentinel group; the daemon's `[redis]` url and keys."""
        binary = find_redis_server() or "redis-server"
        if not self.args.sentinel:
            self.redis = RedisServer(binary, self.out / "redis", appendonly=True).start()
            return self.redis.url, {}

        def make_dir(name: str) -> Path:
            path = self.out / "redis" / name
            path.mkdir(parents=True, exist_ok=True)
            return path

        self.group = start_group(binary, make_dir, appendonly=True)
        self.redis = self.group.master
        # min_replicas: an entry is acknowledged once on the replica too, so a failover loses none of them
        keys = {"sentinels": self.group.addresses, "sentinel_master": self.group.name, "min_replicas": 1}
        return "redis://127.0.0.1:1/0", keys

    def run(self) -> None:
        self.setup()
        assert self.daemon is not None
        self.t0 = time.monotonic()
        plan = schedule(
            self.args.faults,
            list(self.cams),
            duration_s=self.duration_s,
            first_fault_s=self.args.first_fault_s,
            fault_every_s=self.args.fault_every_s,
        )
        pending_end: list[tuple[float, Callable[[], object], Fault]] = []
        next_sample = 0.0
        print(f"soak running {self.args.minutes} min, {len(plan)} faults planned, out={self.out}", flush=True)
        while self.now() < self.duration_s:
            if self.daemon.poll() is not None:
                raise RuntimeError(f"daemon died with {self.daemon.returncode} at t={self.now():.0f}s")
            if self.plc is not None and not self.bridge_down:
                self.plc.tick()
            now = self.now()
            while plan and plan[0][0] <= now:
                _, kind, target = plan.pop(0)
                pending_end.append(self.start_fault(kind, target))
            for item in [p for p in pending_end if p[0] <= now]:
                pending_end.remove(item)
                item[1]()
                item[2].end_s = round(self.now(), 1)
                print(f"[{self.now():7.1f}s] fault end   {item[2].kind} {item[2].target}", flush=True)
            if now >= next_sample:
                self.sample(fault_active=bool(pending_end))
                next_sample += self.args.sample_s
            time.sleep(0.2)
        self.finish()

    def start_fault(self, kind: str, target: str) -> tuple[float, Callable[[], object], Fault]:
        """Start fault `kind` on `target`: (when it ends, what ends it (its value unused), the record)."""
        fault = Fault(kind, target, round(self.now(), 1))
        self.faults.append(fault)
        print(f"[{self.now():7.1f}s] fault start {kind} {target}", flush=True)
        end_at = self.now() + FAULT_DOWN_S[kind]
        if kind == "redis_kill":
            self._kill_redis()
            return end_at, self._restart_redis, fault
        if kind == "redis_failover":
            return end_at, self._start_failover(), fault
        if kind == "bridge_kill":
            plc = self.plc
            assert plc is not None
            self.bridge_down = True
            plc.kill_bridge()
            return end_at, self._restart_bridge, fault
        if kind == "redis_oom":
            redis = self.redis
            assert redis is not None
            redis_oom_start(redis)
            return end_at, lambda: redis_oom_end(redis), fault
        if kind == "spool_disk_full":
            print(f"[{self.now():7.1f}s] ballast took {self.spool_disk.fill() / 2**20:.1f} MiB", flush=True)
            self._kill_redis()
            return end_at, self._end_disk_full, fault
        if kind == "http_flood":
            flood = FloodProc(self.health_port, self.args.flood_connections, self.out / "logs" / "flood.log")
            flood.start()
            self.floods.append(flood)
            return end_at, flood.end, fault
        cam = self.cams[target]
        if kind == "camera_kill":
            cam.kill()
            return end_at, lambda: cam.restart(timeout_s=20), fault  # the port may still be held after a kill
        cam.stop()
        return end_at, cam.cont, fault

    def _kill_redis(self) -> None:
        assert self.redis is not None
        self.redis.kill()

    def _restart_redis(self) -> None:
        """Restart the killed server; under Sentinel, once the replica is promoted (the old master comes
        back as its replica)."""
        assert self.redis is not None
        if self.group is None:
            self.redis.restart(timeout_s=15)
            return
        old = self.redis
        self.redis = self.group.wait_promoted(old, timeout_s=60)
        old.restart(timeout_s=15)
        self.group.wait_replicated(timeout_s=60)
        self.failovers += 1
        print(f"[{self.now():7.1f}s] failover: master now :{self.redis.port}, :{old.port} its replica", flush=True)

    def _start_failover(self) -> Callable[[], object]:
        """The 1st, 3rd, ... occurrence: SIGKILL the master; the 2nd, 4th, ...: SENTINEL FAILOVER (the old
        master stays up, demoted)."""
        group = self.group
        assert group is not None and self.redis is not None
        if sum(1 for f in self.faults if f.kind == "redis_failover") % 2 == 0:
            group.sentinels[0].ask("SENTINEL", "FAILOVER", group.name)
            old = self.redis

            def end() -> None:
                self.redis = group.wait_promoted(old, timeout_s=60)
                group.wait_replicated(timeout_s=60)
                self.failovers += 1
                print(
                    f"[{self.now():7.1f}s] failover: master now :{self.redis.port}, :{old.port} its replica", flush=True
                )

            return end
        self._kill_redis()
        return self._restart_redis

    def _restart_bridge(self) -> None:
        assert self.plc is not None
        self.plc.restart_bridge()
        self.bridge_down = False

    def _end_disk_full(self) -> None:
        self._restart_redis()
        self.spool_disk.free()

    def sample(self, *, fault_active: bool) -> None:
        assert self.daemon is not None
        rss, fds, threads = proc_stats(self.daemon.pid)
        healthz_s = healthz_time(self.health_port)
        try:
            values = scrape(self.health_port)
        except OSError:
            values = {}
        s = Sample(
            round(self.now(), 1),
            round(rss["VmRSS"], 1),
            fds,
            threads,
            by_label(values, "beltsight_frames_inferred_total", "camera"),
            by_label(values, "beltsight_entries_published_total", "camera"),
            by_label(values, "beltsight_frames_dropped_total", "reason"),
            fault_active=fault_active,
        )
        s.extra = {
            "rebuilds": by_label(values, "beltsight_session_builds_total", "reason").get("rebuild_frames", 0.0),
            "buffered": sum(values.get("beltsight_sink_buffered_entries", {}).values()),
            "rss_anon_mib": round(rss.get("RssAnon", 0.0), 1),
            "rss_file_mib": round(rss.get("RssFile", 0.0), 1),
            "healthz_ms": -1.0 if healthz_s is None else round(healthz_s * 1000, 1),
            "http_shed": sum(values.get("beltsight_http_connections_closed_total", {}).values()),
            "crossings": sum(values.get("beltsight_crossings_total", {}).values()),
        }
        if self.plc is not None:  # what the PLC has seen so far: events, and the counts on Modbus
            state = self.plc.state()
            s.extra["plc_events"] = float(state.get("opcua_events", 0))
            s.extra["plc_modbus_total"] = float(sum(state.get("modbus", {}).values()))
        if self.samples:
            prev = self.samples[-1]
            dt = max(1e-6, s.t_s - prev.t_s)
            s.fps = {c: round((v - prev.inferred.get(c, 0.0)) / dt, 2) for c, v in s.inferred.items()}
        self.samples.append(s)
        print(row(s, self.faults, self.args.sample_s), flush=True)

    # -- end ----------------------------------------------------------------------------------
    def finish(self) -> None:
        assert self.daemon is not None and self.redis is not None
        if self.redis.proc is None:
            self._restart_redis()
        self.sample(fault_active=False)
        self.flood_counts = [flood.stop() for flood in self.floods]
        self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon_rc = self.daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill_proc(self.daemon)
            self.daemon_rc = None
        if self.plc is not None:
            client = self.redis.client(timeout_s=30)
            try:
                crossings = stream_crossings(client, list(self.cams))
            finally:
                client.close()
            print(f"waiting for the PLC to see the final counts of {len(crossings)} crossings ...", flush=True)
            self.plc_result = self.plc.finish(crossings)
            self.plc_result["redis_failovers"] = self.failovers
        self.report()

    def check_streams(self) -> tuple[dict[str, Any], dict[str, Any]]:
        assert self.redis is not None
        client = self.redis.client(timeout_s=30)
        try:
            dets = {mount: check_detections(client, mount) for mount in self.cams}
            objects = {mount: check_objects(client, mount) for mount in self.cams}
        finally:
            client.close()
        return dets, objects

    def report(self) -> None:
        streams, objects = self.check_streams()
        self.passed = write_report(
            self.args,
            samples=self.samples,
            faults=self.faults,
            streams=streams,
            objects=objects,
            plc_result=self.plc_result,
            daemon_rc=self.daemon_rc,
            flood_counts=self.flood_counts,
        )

    def cleanup(self) -> None:
        for flood in self.floods:
            kill_proc(flood.proc)
        for cam in self.cams.values():
            cam.cont()
            cam.kill()
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.daemon.wait(timeout=30)
            kill_proc(self.daemon)
        if self.plc is not None:
            self.plc.cleanup()
        if self.group is not None:
            self.group.close()
        elif self.redis is not None:
            self.redis.kill()
        self.spool_disk.unmount()
