"""A track's record and what one tracker update reports: ``Track`` (one object's life, its class vote),
``Observation`` (a detection seen on a track), ``Step`` (one update's outcome)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

Box = tuple[float, float, float, float]


@dataclass(slots=True, eq=False)
class Track:
    """One object's life. Times ``*_ms`` are capture time (Unix ms); ``*_mono_ms`` the monotonic clock."""

    uid: int
    first_ms: int
    first_mono_ms: int
    last_ms: int
    last_mono_ms: int
    box: Box
    hits: int = 1
    strong_hits: int = 1  # observations by detections that may start a track (a camera's published ones)
    track_id: int | None = None
    lost: bool = False
    misses: int = 0
    best_score: float = 0.0
    vx: float = 0.0
    vy: float = 0.0
    votes: dict[int, float] = field(default_factory=dict)
    labels: dict[int, str] = field(default_factory=dict)

    def observe(self, cls: int, label: str, score: float) -> None:
        self.votes[cls] = self.votes.get(cls, 0.0) + score
        self.labels[cls] = label
        self.best_score = max(self.best_score, score)

    @property
    def cls(self) -> int:
        """The class with the largest summed score over the track's life (ties: the lower index)."""
        return min(self.votes, key=lambda c: (-self.votes[c], c))

    @property
    def label(self) -> str:
        return self.labels[self.cls]


class Observation(NamedTuple):
    """Detection ``det`` observed ``track``; ``prev_box``/``prev_ms`` its previous observation (None: new)."""

    track: Track
    det: int
    prev_box: Box | None
    prev_ms: int


@dataclass(frozen=True, slots=True)
class Step:
    """What one update did: per-detection track, observations, confirmations, confirmed ends, drops."""

    det_tracks: tuple[Track | None, ...]
    observations: tuple[Observation, ...]
    confirmed: tuple[Track, ...]
    ended: tuple[Track, ...]
    dropped: tuple[Track, ...]
