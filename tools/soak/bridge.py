"""The PLC side of the soak: `beltsight bridge` as a subprocess and the PLC (`tools.soak.plc`) reading it.

`PlcSide.config_toml()` is the `[bridge]` the soak appends to the daemon's config (OPC UA with
security none and Modbus on free loopback ports, state under the run's directory, the same
`[redis]` as the daemon: a single server or the Sentinel group). `start()` starts the bridge
(`python -m daemon bridge -c <config>`) and then the PLC process; `kill_bridge()` SIGKILLs the
bridge (the `bridge_kill` fault) and `restart_bridge()` starts it again on the same ports.
At the end, `finish(crossings)` waits (up to `CATCH_UP_S`) for both protocols to show the objects
streams' last counts, stops the PLC and the bridge (SIGTERM: the bridge must exit 0), and
`plc_checks` judges what the PLC saw.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tools.kit.daemon_config import REPO
from tools.kit.ports import free_port
from tools.soak.plc_checks import (
    Key,
    check_counts,
    check_opcua_events,
    expected_counts,
    read_jsonl,
    unsubscribed_windows,
)
from tools.soak.procs import kill_proc

CATCH_UP_S = 120.0
EX_CONFIG = 78
START_TIMEOUT_S = 60.0


class PlcSide:
    def __init__(self, out: Path, config: Path, blocks: list[tuple[str, str]], *, poll_ms: float = 100.0) -> None:
        self.out = out
        self.config = config
        self.blocks = blocks
        self.poll_ms = poll_ms
        self.opcua_port = free_port()
        self.modbus_port = free_port()
        self.health_port = free_port()
        self.plc_dir = out / "plc"
        self.bridge: subprocess.Popen[bytes] | None = None
        self.plc: subprocess.Popen[bytes] | None = None
        self.kills: list[tuple[float, float]] = []  # (killed, restarted), Unix seconds
        self._killed_at = 0.0
        self.bridge_rc: int | None = None
        self.bridge_starts = 0
        self.crashes = 0
        self.ready = False

    def config_toml(self) -> str:
        return (
            "[bridge]\n"
            f'health_listen = "127.0.0.1:{self.health_port}"\n'
            f'state_dir = "{self.out / "bridge-state"}"\n'
            "reconnect_max_s = 1.0\n"
            "[bridge.opcua]\n"
            f'listen = "127.0.0.1:{self.opcua_port}"\n'
            'security = "none"\n'
            "[bridge.modbus]\n"
            f'listen = "127.0.0.1:{self.modbus_port}"\n'
            "unit_id = 1\n"
        )

    # -- processes --------------------------------------------------------------------------------
    def start(self) -> None:
        """The bridge, then the PLC, and wait for the PLC's first OPC UA session (so it sees the first crossing)."""
        self.plc_dir.mkdir(parents=True, exist_ok=True)
        self.start_bridge()
        log = (self.out / "logs" / "plc.log").open("ab")
        self.plc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tools.soak.plc",
                "--opcua",
                f"127.0.0.1:{self.opcua_port}",
                "--modbus",
                f"127.0.0.1:{self.modbus_port}",
                "--blocks",
                ",".join(f"{c}/{line}" for c, line in self.blocks),
                "--poll-ms",
                str(self.poll_ms),
                "--out",
                str(self.plc_dir),
            ],
            cwd=REPO,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any(s.get("up") for s in read_jsonl(self.plc_dir / "opcua-sessions.jsonl")):
            if time.monotonic() > deadline or self.plc.poll() is not None:
                raise RuntimeError("the PLC got no OPC UA session; see logs/plc.log")
            time.sleep(0.2)

    def spawn_bridge(self) -> None:
        log = (self.out / "logs" / "bridge.log").open("ab")
        self.bridge = subprocess.Popen(
            [sys.executable, "-m", "daemon", "bridge", "-c", str(self.config)],
            cwd=REPO,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        self.bridge_starts += 1
        self.ready = False

    def start_bridge(self) -> None:
        """Start the bridge and wait until it serves."""
        self.spawn_bridge()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.tick():
            if time.monotonic() > deadline:
                raise RuntimeError("the bridge did not come up; see logs/bridge.log")
            time.sleep(0.2)

    def tick(self) -> bool:
        """Called often by the soak: whether the bridge serves now. A (re)started bridge that exits before
        it serves (a killed one's port still held) is started again; one that exits later is a crash,
        counted in `crashes` and restarted."""
        if self.bridge is not None and self.bridge.poll() is not None:
            if self.bridge.returncode == EX_CONFIG:
                raise RuntimeError("the bridge refused its config (exit 78); see logs/bridge.log")
            if self.ready:
                self.crashes += 1
                print(f"the bridge exited on its own ({self.bridge.returncode}): restarting it", flush=True)
            self.spawn_bridge()
            return False
        if not self.ready and self.healthy():
            self.ready = True
        return self.ready

    def healthy(self) -> bool:
        """Its /healthz answers (200, or 503 while Redis is away): it starts after OPC UA and Modbus."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=2) as reply:
                reply.read()
        except urllib.error.HTTPError as exc:
            exc.close()
        except OSError:
            return False
        return True

    def alive(self) -> bool:
        return self.bridge is not None and self.bridge.poll() is None

    def kill_bridge(self) -> None:
        """SIGKILL (the `bridge_kill` fault); `restart_bridge` starts it again without waiting (`tick` watches)."""
        self._killed_at = time.time()
        kill_proc(self.bridge)
        self.ready = False

    def restart_bridge(self) -> None:
        self.spawn_bridge()
        self.kills.append((self._killed_at, time.time()))

    # -- the end --------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads((self.plc_dir / "plc-state.json").read_text())
        except (OSError, ValueError):
            return {}
        return data

    def finish(self, crossings: dict[Key, dict[str, Any]]) -> dict[str, Any]:
        """Wait for the PLC to see the final counts, stop the PLC and the bridge, judge."""
        expected = expected_counts(crossings, self.blocks)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.tick() and time.monotonic() < deadline:
            time.sleep(0.2)
        started = time.monotonic()
        while time.monotonic() - started < CATCH_UP_S:
            counts = check_counts(expected, self.state())
            if counts["opcua_agree"] and counts["modbus_agree"]:
                break
            time.sleep(1.0)
        catch_up_s = time.monotonic() - started
        time.sleep(2.0)  # events of the last entries still in flight on the subscription
        if self.plc is not None:
            self.plc.send_signal(signal.SIGTERM)
            try:
                self.plc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill_proc(self.plc)
        if self.bridge is not None:
            self.bridge.send_signal(signal.SIGTERM)
            try:
                self.bridge_rc = self.bridge.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill_proc(self.bridge)
        sessions = read_jsonl(self.plc_dir / "opcua-sessions.jsonl")
        windows = unsubscribed_windows(sessions, self.kills)
        events = check_opcua_events(crossings, read_jsonl(self.plc_dir / "opcua-events.jsonl"), windows)
        counts = check_counts(expected, self.state())
        return {
            "opcua_events": events,
            "counts": counts,
            "bridge_kills": len(self.kills),
            "bridge_starts": self.bridge_starts,
            "bridge_crashes": self.crashes,
            "modbus_backwards_first": self.state().get("backwards_first", []),
            "unsubscribed_windows_s": [round(b - a, 1) for a, b in windows],
            "catch_up_s": round(catch_up_s, 1),
            "bridge_exit_code": self.bridge_rc,
        }

    def cleanup(self) -> None:
        kill_proc(self.plc)
        kill_proc(self.bridge)
