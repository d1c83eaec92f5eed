"""Where the daemon's threads wait for the interpreter lock: py-spy's native stacks, summed by thread role.

    .venv/bin/python -m tools.bench.gil PID [--seconds 12] [--rate 50] [--raw FILE]

Records every thread of process PID (`py-spy record --idle --native --threads --format raw`) and
sorts each sample into one of three states by its innermost native frames:
- **idle**: blocked in a Python lock or queue (`PyThread_acquire_lock_timed`), `epoll_wait`, a
  sleep, a read: waiting for work;
- **waiting for the GIL**: in `pthread_cond_timedwait` outside such a lock wait, which is CPython
  3.11's `take_gil` (a static function, so the frame above it is the caller that released the lock
  for a C call and now wants it back: a decoder, a NumPy loop, a socket send);
- **running**: anything else (Python, or C code with or without the lock).
Per thread role (camera readers, inference workers, event loop; `tools.bench.budget.thread_role`)
it prints the share of samples in each state and the callers of the longest GIL waits. A role that
waits for the lock more than it runs is held back by the lock, not by the cores. `python -m
tools.bench --null-model --gil` runs it inside each daemon phase (which costs CPU: the phase's
figures are then not comparable with a phase without it).
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.bench.budget import thread_role

IDLE_FRAMES = ("PyThread_acquire_lock_timed", "epoll_wait", "clock_nanosleep", "read (libc", "poll (libc")
GIL_WAIT = "pthread_cond_timedwait"


def py_spy() -> str:
    return shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))


def record(pid: int, seconds: float, rate: int = 50, raw: Path | None = None) -> dict[str, Any]:
    """py-spy on `pid` for `seconds`: the summary of `summarise` (the raw samples kept in `raw`)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = raw or Path(tmp) / "gil.txt"
        cmd = [py_spy(), "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", str(rate)]
        cmd += ["--format", "raw", "--threads", "--idle", "--native", "--output", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=False)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"py-spy failed ({done.returncode}): {done.stderr[-300:]}")
        return summarise(out.read_text())


def _thread_name(frames: list[str]) -> str:
    """py-spy's thread frame, `thread (0x1a2b): name`, as the thread's name."""
    return re.sub(r"^thread \(\w+\):?\s*", "", frames[0]).strip()


def state(frames: list[str]) -> tuple[str, str | None]:
    """(idle | gil | running, the caller that waits for the lock when waiting) for one stack."""
    inner = frames[-8:]
    waits = [i for i, f in enumerate(inner) if GIL_WAIT in f]
    if waits:
        callers = [f for f in inner[: waits[-1]] if "(libc" not in f and "(libpthread" not in f]
        caller = re.sub(r" \(.*", "", callers[-1]) if callers else None
        if caller != "PyThread_acquire_lock_timed":  # that one is a Python lock's wait: idle
            return "gil", caller
    if any(marker in f for f in inner for marker in IDLE_FRAMES):
        return "idle", None
    return "running", None


def summarise(raw: str) -> dict[str, Any]:
    """Per thread role: % of its samples idle, waiting for the GIL, running; the top callers waiting."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    callers: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = stack.split(";")
        name = _thread_name(frames)
        role = "main thread" if name == "MainThread" else thread_role(re.sub(r"(_\d+|cam\d+)$", "*", name))
        what, caller = state(frames)
        counts[role][what] += int(n)
        if caller is not None:
            callers[role][caller] += int(n)
    out: dict[str, Any] = {}
    for role, c in sorted(counts.items()):
        total = sum(c.values())
        if c["idle"] == total:
            continue  # threads that only wait for work (the executor's spares, the rig's helpers)
        out[role] = {
            "samples": total,
            **{k: round(100 * c[k] / total, 1) for k in ("idle", "gil", "running")},
            "gil_after": {k: round(100 * v / total, 1) for k, v in callers[role].most_common(5)},
        }
    return out


def lines(summary: dict[str, Any]) -> list[str]:
    out = ["share of each thread role's samples (py-spy, native stacks): idle / waiting for the GIL / running"]
    for role, s in summary.items():
        if "note" in s:
            out.append(f"  {role}: {s['note']}")
            continue
        after = ", ".join(f"{k} {v}%" for k, v in s["gil_after"].items())
        out.append(f"  {role:<22} {s['idle']:>5}% {s['gil']:>5}% {s['running']:>5}%   GIL waits after: {after}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("pid", type=int)
    p.add_argument("--seconds", type=float, default=12)
    p.add_argument("--rate", type=int, default=50)
    p.add_argument("--raw", type=Path, help="keep py-spy's raw samples here")
    args = p.parse_args()
    print("\n".join(lines(record(args.pid, args.seconds, args.rate, args.raw))))


if __name__ == "__main__":
    main()
