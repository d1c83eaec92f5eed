"""Runtime experiments for `python -m tools.bench --ab NAME`: a change to where and how the
daemon's threads run, switched on and off in alternating segments of one daemon phase, so its
effect is a ratio measured in the same run (published fps and process CPU per published frame,
each "on" segment against the "off" segment beside it, medians over the pairs).

Each experiment acts on the running daemon's threads from outside (by their kernel thread ids),
so neither side of the comparison needs a different build of the daemon:

- `pin-workers`: each inference worker thread on a core of its own (worker i on core i mod
  cores); off: every worker may run on every core (the kernel's choice).
- `readers-batch`: the camera reader threads under SCHED_BATCH (their wake-ups do not preempt a
  running worker); off: SCHED_OTHER.
- `readers-nice`: the camera reader threads at nice 5 (they yield more of a contended core to
  the workers); off: nice 0. Lowering a nice value again needs root or CAP_SYS_NICE.
- `loop-nice`: the same for the event loop's thread.
- `decoders-nice`: every thread of the decoder processes (`engine.processes`) at nice 5: under
  overload the daemon's own process (batching, inference, tracking, publishing) gets a contended
  core first, and the decoders the rest; off: nice 0.
- `switch-1ms`: the interpreter's switch interval at 1 ms (`sys.setswitchinterval`); off: 5 ms,
  Python's default. A thread that wants the lock back asks the holder to drop it after this long,
  so it bounds each wait of a convoy behind the threads that hold the lock.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

WORKERS_PREFIX = "beltsight-infer"
READERS_PREFIX = "source-"
LOOP_THREAD = "bench-daemon"


def _tids(match: Callable[[str], bool]) -> list[int]:
    return [t.native_id for t in threading.enumerate() if t.native_id is not None and match(t.name)]


def _pin_workers(on: bool) -> None:
    cores = sorted(os.sched_getaffinity(0))
    for i, tid in enumerate(sorted(_tids(lambda n: n.startswith(WORKERS_PREFIX)))):
        os.sched_setaffinity(tid, {cores[i % len(cores)]} if on else set(cores))


def _policy(prefix: str, on: bool) -> None:
    policy = os.SCHED_BATCH if on else os.SCHED_OTHER
    for tid in _tids(lambda n: n.startswith(prefix)):
        os.sched_setscheduler(tid, policy, os.sched_param(0))


def _nice(match: Callable[[str], bool], on: bool) -> None:
    for tid in _tids(match):
        os.setpriority(os.PRIO_PROCESS, tid, 5 if on else 0)


def _decoders_nice(on: bool) -> None:
    """Nice is per thread on Linux: every thread of every decoder process (this process's multiprocessing
    children: the daemon runs in the bench's process)."""
    for child in multiprocessing.active_children():
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        except (FileNotFoundError, ProcessLookupError):  # a decoder that just exited
            continue
        for tid in tids:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, 5 if on else 0)
            except ProcessLookupError:
                continue


@dataclass(frozen=True)
class Experiment:
    name: str
    summary: str
    apply: Callable[[bool], None]
    """Switch it on (True) or off (False) in the running daemon; idempotent."""


EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment("pin-workers", "each inference worker on a core of its own", _pin_workers),
        Experiment("readers-batch", "camera readers under SCHED_BATCH", lambda on: _policy(READERS_PREFIX, on)),
        Experiment(
            "readers-nice", "camera readers at nice 5", lambda on: _nice(lambda n: n.startswith(READERS_PREFIX), on)
        ),
        Experiment("loop-nice", "the event loop's thread at nice 5", lambda on: _nice(lambda n: n == LOOP_THREAD, on)),
        Experiment("decoders-nice", "every thread of the decoder processes at nice 5", _decoders_nice),
        Experiment(
            "switch-1ms",
            "the interpreter's switch interval at 1 ms instead of 5",
            lambda on: sys.setswitchinterval(0.001 if on else 0.005),
        ),
    )
}
