"""`[review]`: its keys, its shifts checked by the one shifts rule, and the retention it falls back on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from daemon.config.review import DEFAULT_DB, ReviewConfig
from daemon.config.settings import Settings
from daemon.ops.review.api import parse_time
from daemon.ops.review.consumer import retention_days

MODELS = {640: "models/conveyor-640.onnx"}


def test_defaults_and_keys() -> None:
    cfg = ReviewConfig()
    assert (cfg.enabled, cfg.db, cfg.shifts, cfg.retention_days) == (
        False,
        DEFAULT_DB,
        ["06:00", "14:00", "22:00"],
        None,
    )
    with pytest.raises(ValidationError, match="25:00"):
        ReviewConfig(shifts=["06:00", "25:00"])
    with pytest.raises(ValidationError, match="same time twice"):
        ReviewConfig(shifts=["06:00", "06:00"])
    with pytest.raises(ValidationError, match="extra"):
        ReviewConfig.model_validate({"enabled": True, "dbfile": "x"})


def test_retention_follows_the_evidence() -> None:
    base = Settings(models=MODELS)
    assert retention_days(base) == base.snapshots.retain_days == 7.0
    snaps = base.model_copy(update={"snapshots": base.snapshots.model_copy(update={"retain_days": 3.0})})
    assert retention_days(snaps) == 3.0
    clips = SimpleNamespace(enabled=True, retention_days=14)
    with_clips = snaps.model_copy(update={"clips": clips})  # a build with [clips] (#56's clips part)
    assert retention_days(with_clips) == 14.0
    own = with_clips.model_copy(update={"review": ReviewConfig(retention_days=30)})
    assert retention_days(own) == 30.0


def test_times_in_ms_or_iso_8601() -> None:
    assert parse_time("since", "1765000000000") == 1_765_000_000_000
    assert parse_time("since", "2025-12-06T05:46:40Z") == 1_765_000_000_000
    assert parse_time("since", "2025-12-06T06:46:40 01:00") == 1_765_000_000_000  # "+" decoded as a space
    with pytest.raises(ValueError, match="since"):
        parse_time("since", "yesterday")
