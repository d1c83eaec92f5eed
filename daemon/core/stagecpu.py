"""Thread CPU time per pipeline stage, for the per-frame budget (`beltsight_stage_cpu_seconds_total`).

A stage is timed where it runs, in the thread that runs it, with two explicit calls and no
allocation::

    started = cpu.decode.start()
    frames = packet.decode()
    cpu.decode.stop(started)

`start()` reads `time.thread_time_ns()` (0 while the switch is off); `stop(started)` adds the CPU
the thread used since then to the stage's counter child (resolved once, at construction). The
cost is two clock reads and one counter increment per stage and frame (the bench measures it:
on against off in the same run). The switch lets the bench alternate the two in one daemon;
a daemon leaves it on.

`stop(..., exclusive=True)` takes out what other stages recorded on the same thread meanwhile:
for a stage that awaits (the Redis round trip), during which the event loop runs other stages
(tracking, batching); whatever un-timed work the loop ran in that time stays in it.
"""

from __future__ import annotations

import threading
import time
from typing import Final

from prometheus_client import Counter

STAGES: Final = (
    "demux",
    "decode",
    "handoff",
    "batching",
    "letterbox",
    "session_run",
    "postprocess",
    "tracking",
    "encode",
    "redis",
    "snapshot",
    "capture",
    "clip",
)
"""Every stage, in the order a frame meets them (`demux`: reading a stream's packets, its socket and
RTP depacketisation; `decode`: decoding them); `snapshot` is recorded on the snapshot writer's
thread (daemon.publish.snapshots), `capture` on the
frame capture's (daemon.publish.capture), `clip` on the clip writer's (daemon.publish.clips)."""


class _Attributed(threading.local):
    ns: int = 0
    """CPU recorded by any stage on this thread so far (for exclusive stages)."""


class Switch:
    """On by default; `on = False` makes every `start()` return 0 and every `stop()` a no-op."""

    __slots__ = ("on",)

    def __init__(self, on: bool = True) -> None:
        self.on = on


class Stage:
    """One stage's counter: `started = stage.start()` ... `stage.stop(started)`."""

    __slots__ = ("_inc", "_switch", "name")

    def __init__(self, name: str, counter: Counter, switch: Switch) -> None:
        self.name = name
        self._inc = counter.labels(stage=name).inc
        self._switch = switch

    def start(self) -> int:
        """This thread's CPU clock in ns (0 while off); pass it to `stop`."""
        return time.thread_time_ns() if self._switch.on else 0

    def mark(self) -> int:
        """What the thread's stages have recorded so far: for `stop(..., since_mark=...)`."""
        return _ATTRIBUTED.ns

    def stop(self, started: int, since_mark: int | None = None) -> None:
        """Record the thread's CPU since `started`; with `since_mark` (from `mark()` at the start)
        less what other stages recorded on this thread since then."""
        if not started:
            return
        spent = time.thread_time_ns() - started
        if since_mark is not None:
            spent = max(0, spent - (_ATTRIBUTED.ns - since_mark))
        _ATTRIBUTED.ns += spent
        self._inc(spent * 1e-9)


_ATTRIBUTED: Final = _Attributed()


class StageCpu:
    """One `Stage` per name in `STAGES`, as attributes (`cpu.decode`, `cpu.session_run`, ...)."""

    __slots__ = ("switch", *STAGES)

    def __init__(self, counter: Counter) -> None:
        self.switch = Switch()
        for name in STAGES:
            setattr(self, name, Stage(name, counter, self.switch))

    demux: Stage
    decode: Stage
    handoff: Stage
    batching: Stage
    letterbox: Stage
    session_run: Stage
    postprocess: Stage
    tracking: Stage
    encode: Stage
    redis: Stage
    snapshot: Stage
    capture: Stage
    clip: Stage
