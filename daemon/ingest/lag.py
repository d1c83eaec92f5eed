"""How far a live camera's decoding runs behind its stream, and when to skip to the live edge.

A reader that cannot decode as fast as its camera sends (a CPU past its knee: more cameras than
it decodes) falls behind: the stream's packets wait in the socket and the camera's RTSP server,
each frame is decoded later than the one before, and since a frame is stamped when it is decoded
(`captured_ms`), nothing downstream sees it. Measured with 32 cameras on two cores, detections
went out 2.7-3.2 s (p50) and up to 6.4 s (p99) after their frames were sent, while the daemon's
own freshness read 150-170 ms. On a line that is a reject signal for a part long gone.

`StreamLag` watches each demuxed packet's presentation time against the monotonic clock. The
stream's offset (clock - pts) is smallest when the reader keeps up; its running minimum is the
baseline, allowed to creep up by `CREEP` (1 ms per second: far more than any camera clock's drift
against ours, far less than the growth of a real backlog), and the lag is the offset over it.
Policy:
- A lag over `BOUND_S` that has not fallen by `RECOVERY` of the time since it was first over, for
  `SUSTAIN_S`, starts a skip: packets are demuxed (cheap) but not decoded. A decoder that is
  catching up by itself (a burst after a network stall, a reader the scheduler held back for a
  moment) is never made to skip: its lag falls faster than that.
- The skip ends at the first keyframe that is within `BOUND_S / 2` of the baseline, or that came
  at the stream's own pace since the previous keyframe (the live edge: what is left is not a
  backlog, e.g. a camera clock that jumped; the baseline is taken again there). Decoding resumes
  cleanly at a keyframe, so no frame is decoded from missing references.
- Skipped frames are never decoded, so they count as dropped (`behind`), not as decoded.
Live network cameras only: file replays pace themselves (`daemon.ingest.reader`), and a packet
without a presentation time is decoded (or skipped, while a skip runs) without being measured.
"""

from __future__ import annotations

from dataclasses import dataclass

BOUND_S = 1.0
"""Lag beyond which a camera is behind (twice `engine.max_age_ms`' default, the age past which a frame is
not inferred)."""
SUSTAIN_S = 1.0
"""How long the lag must stay over `BOUND_S`, not falling, before a skip starts."""
RECOVERY = 0.1
"""A lag that falls by at least this share of the time it is watched (0.1 s per s) is catching up."""
CREEP = 0.001
"""Seconds the baseline may rise per second of the clock (1000 ppm)."""
LIVE_PACE = 0.5
"""A keyframe reached in at least this share of the stream time since the previous one came at the
stream's own pace: the skip is at the live edge."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one packet: `decode` it or not; `started` / `ended` a skip with this packet."""

    decode: bool
    started: bool = False
    ended: bool = False


_DECODE = Verdict(True)
_SKIP = Verdict(False)


class StreamLag:
    """One connection's lag watch (a reconnect starts a new one); not thread-safe."""

    def __init__(self) -> None:
        self._base: float | None = None
        self._seen: float | None = None
        self._over: tuple[float, float] | None = None
        """(time, lag) the lag was first seen over the bound (or last seen falling from there)."""
        self._key: tuple[float, float] | None = None
        self.lag_s = 0.0
        """The newest measured lag (seconds)."""
        self.skipping = False
        self.skipped = 0
        """Packets skipped by the current (or last) skip."""

    def packet(self, pts_s: float | None, keyframe: bool, now: float) -> Verdict:
        """The verdict for one demuxed packet presented at `pts_s` (stream seconds), seen at `now`."""
        if pts_s is None:
            return _SKIP if self.skipping and not keyframe else _DECODE
        offset = now - pts_s
        if self._base is None or self._seen is None:
            self._base = offset
        else:
            self._base = min(self._base + CREEP * max(0.0, now - self._seen), offset)
        self._seen = now
        self.lag_s = offset - self._base
        if self.skipping:
            return self._while_skipping(pts_s, keyframe, now, offset)
        if self.lag_s <= BOUND_S:
            self._over = None
            return _DECODE
        if self._over is None:
            self._over = (now, self.lag_s)
        since, lag_then = self._over
        if now - since < SUSTAIN_S:
            return _DECODE
        if self.lag_s <= lag_then - RECOVERY * (now - since):  # catching up by itself: watch from here
            self._over = (now, self.lag_s)
            return _DECODE
        self.skipping, self.skipped, self._key = True, 1, None
        return Verdict(False, started=True)

    def _while_skipping(self, pts_s: float, keyframe: bool, now: float, offset: float) -> Verdict:
        if not keyframe:
            self.skipped += 1
            return _SKIP
        previous, self._key = self._key, (now, pts_s)
        live = previous is not None and (pts_s <= previous[1] or now - previous[0] >= LIVE_PACE * (pts_s - previous[1]))
        if self.lag_s > BOUND_S / 2 and not live:
            self.skipped += 1
            return _SKIP
        if live:
            self._base = offset
            self.lag_s = 0.0
        self.skipping, self._over = False, None
        return Verdict(True, ended=True)


__all__ = ["BOUND_S", "RECOVERY", "SUSTAIN_S", "StreamLag", "Verdict"]
