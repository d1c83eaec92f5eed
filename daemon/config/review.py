"""The `[review]` section: the per-part record (one SQLite row per crossing) and its review page."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from daemon.config.base import Section
from daemon.core.shifts import parse_shifts

DEFAULT_DB = Path("/var/lib/beltsight/review.sqlite3")


class ReviewConfig(Section):
    """Where the crossings are recorded, how long they stay and the plant's shifts
    (`docs/configuration/review.md`)."""

    enabled: bool = False
    """true: every `crossed` entry of this instance's objects streams is recorded (read off the hot
    path, after it was published) and served at `GET /api/crossings`, `GET /api/counts` and the review
    page `/review` on the health endpoint."""
    db: Path = DEFAULT_DB
    """The SQLite file of the record, beside the lines and models drop-ins in the state directory by
    default. Deleted or lost, it is rebuilt from what the objects streams still hold (`[redis] maxlen`)."""
    shifts: list[str] = Field(default_factory=lambda: ["06:00", "14:00", "22:00"])
    """The shifts' local start times, "HH:MM"; a shift runs to the next start, the last past midnight
    (`GET /api/counts?bucket=shift`)."""
    retention_days: float | None = Field(default=None, gt=0)
    """Crossings older than this are removed from the record. Unset: the clips' `retention_days` where
    `[clips]` is on, else the snapshots' `retain_days` (7 days by default), so the record keeps a
    crossing as long as its evidence."""

    @field_validator("shifts")
    @classmethod
    def _check_shifts(cls, v: list[str]) -> list[str]:
        parse_shifts(v)  # ValueError names the bad entry
        return v


__all__ = ["DEFAULT_DB", "ReviewConfig"]
