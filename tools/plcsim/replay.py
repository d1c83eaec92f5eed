"""Run a `Reconciler` against a scene in simulated time (no I/O): the unit tests' and the bench's driver.

The camera's crossings reach the reconciler `delivery_s` after they happen (the daemon's latency),
the counter is read every `poll_s` (a reading while the PLC is down is a failed read).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from daemon.bridge.seam import CounterNote, Reconciler, Verdict, Window
from daemon.config.seam import ReconcileConfig
from tools.plcsim.counter import PlcCounter


@dataclass(slots=True)
class Replay:
    verdicts: list[Verdict] = field(default_factory=list)
    notes: list[CounterNote] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)

    def times(self, kind: str) -> list[float]:
        """Seconds into the scene at which verdicts of `kind` were given."""
        return [v.at_ms / 1000 for v in self.verdicts if v.kind == kind]


def replay(
    cfg: ReconcileConfig,
    seen_s: list[float],
    counter: PlcCounter,
    duration_s: float,
    *,
    delivery_s: float = 0.2,
    speed_mm_s: float = 0.0,
) -> Replay:
    """`seen_s`: the crossing times the camera reports; `counter`: the PLC. Returns what the
    reconciler said, its counter notes and every window judged."""
    rec = Reconciler(cfg)
    out = Replay()
    pending = sorted(seen_s)
    i = 0
    steps = int(duration_s / cfg.poll_s)
    for k in range(1, steps + 1):
        now = k * cfg.poll_s
        while i < len(pending) and pending[i] + delivery_s <= now:
            rec.add_crossing(round(pending[i] * 1000), f"{i}", speed_mm_s)
            i += 1
        now_ms = round(now * 1000)
        if counter.is_down(now):
            verdict = rec.reference_failed(now_ms)
        else:
            note, verdict = rec.add_reading(counter.value(now), now_ms)
            if note is not None:
                out.notes.append(note)
        if verdict is not None:
            out.verdicts.append(verdict)
        window, verdict = rec.evaluate(now_ms)
        if window is not None:
            out.windows.append(window)
        if verdict is not None:
            out.verdicts.append(verdict)
    return out


__all__ = ["Replay", "replay"]
