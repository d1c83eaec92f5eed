"""The reconciled counts kept on disk (daemon.bridge.reconcile_counts): buckets, restarts, the report."""

from __future__ import annotations

import csv
import dataclasses
import io
from datetime import UTC, datetime
from pathlib import Path

from daemon.bridge.reconcile import Window
from daemon.bridge.reconcile_counts import CountsStore, evidence_label
from daemon.bridge.report_page import render
from daemon.bridge.state import Crossing
from daemon.core.shifts import parse_shifts

SHIFTS = parse_shifts(["06:00", "14:00", "22:00"])


def _ms(hh: int, mm: int, day: int = 7) -> int:
    return int(datetime(2026, 12, day, hh, mm, tzinfo=UTC).timestamp() * 1000)


def test_counts_per_hour_and_shift_side_by_side_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "reconcile.sqlite"
    store = CountsStore(path, SHIFTS, UTC)
    store.add("c/l/in", _ms(13, 50), vision=3)
    store.add("c/l/in", _ms(13, 55), reference=4)
    store.add("c/l/in", _ms(14, 5), vision=2, reference=2)
    store.flush()
    store.add("c/l/in", _ms(14, 10), vision=1)  # added but not flushed: lost with the process
    store.close()

    again = CountsStore(path, SHIFTS, UTC)
    again.add("c/l/in", _ms(14, 20), vision=5, reference=5)
    again.flush()
    hours = {r["start_ms"]: (r["vision"], r["reference"]) for r in again.rows("1h")}
    assert hours == {_ms(13, 0): (3, 4), _ms(14, 0): (7, 7)}
    shifts = {r["start_ms"]: (r["vision"], r["reference"]) for r in again.rows("shift")}
    assert shifts == {_ms(6, 0): (3, 4), _ms(14, 0): (7, 7)}
    assert again.last_shift("c/l/in", _ms(15, 0)) == {"start_ms": _ms(6, 0), "vision": 3, "reference": 4}
    assert again.last_shift("other", _ms(15, 0)) is None


def test_night_shift_wraps_past_midnight(tmp_path: Path) -> None:
    store = CountsStore(tmp_path / "r.sqlite", SHIFTS, UTC)
    store.add("k", _ms(23, 0, day=7), vision=1)
    store.add("k", _ms(2, 0, day=8), vision=1)
    store.flush()
    assert [(r["start_ms"], r["vision"]) for r in store.rows("shift")] == [(_ms(22, 0, day=7), 2)]


def test_without_shifts_only_hours_are_kept(tmp_path: Path) -> None:
    store = CountsStore(tmp_path / "r.sqlite")
    store.add("k", _ms(9, 0), vision=1)
    store.flush()
    assert store.buckets == ("1h",)
    assert store.rows("shift") == [] and len(store.rows("1h")) == 1
    assert store.last_shift("k", _ms(12, 0)) is None


def test_the_report_lists_disagreeing_windows_with_their_crossings(tmp_path: Path) -> None:
    store = CountsStore(tmp_path / "r.sqlite", SHIFTS, UTC)
    w = Window(_ms(7, 0), _ms(7, 0) + 15_000, 1000, 8, 12, 2.0, True, ("1-0 snaps/a.jpg", "2-0"))
    store.add_window("c/l/in", w)
    store.add_window("c/l/in", Window(_ms(15, 0), _ms(15, 0) + 15_000, 0, 1, 9, 2.0, True, ("3-0",)))
    store.flush()
    rows = list(csv.DictReader(io.StringIO(store.report_csv(_ms(6, 0), _ms(14, 0)))))
    assert len(rows) == 1
    assert (rows[0]["vision"], rows[0]["reference"], rows[0]["drift"]) == ("8", "12", "-4")
    assert rows[0]["crossings"] == "1-0 snapshot=snaps/a.jpg;2-0"  # a label from before clips, read back


def test_a_crossings_clip_and_snapshot_reach_the_report_and_its_page(tmp_path: Path) -> None:
    """Evidence kept per crossing (JSON), labels from before clips read back; the page escapes what it
    shows and links snapshots and clips on the daemon's endpoint, the clip opened at the crossing."""
    crossing = Crossing("cam1", "L1", 7, "bolt", 0, "in", 3, _ms(7, 0), "", "1-0", snapshot="cam1/a.jpg")
    with_clip = dataclasses.replace(crossing, entry_id="2-0", clip="cam1/<x>.mp4", clip_offset_ms=4200)
    labels = (evidence_label(crossing), evidence_label(with_clip), "3-0 old/snap.jpg")
    store = CountsStore(tmp_path / "r.sqlite", SHIFTS, UTC)
    store.add_window("cam1/L1/in", Window(_ms(7, 0), _ms(7, 0) + 15_000, 0, 1, 9, 2.0, True, labels))
    store.flush()
    rows = list(csv.DictReader(io.StringIO(store.report_csv(_ms(6, 0), _ms(14, 0)))))
    assert rows[0]["crossings"] == (
        "1-0 snapshot=cam1/a.jpg;2-0 snapshot=cam1/a.jpg clip=cam1/<x>.mp4#t=4.2;3-0 snapshot=old/snap.jpg"
    )
    windows = store.disagreeing(_ms(6, 0), _ms(14, 0))
    page = render(
        windows, _ms(6, 0), _ms(14, 0), before=_ms(22, 0, day=6), after=_ms(22, 0), evidence_url="https://box:9108"
    )
    assert 'href="https://box:9108/snapshots/cam1/a.jpg"' in page
    assert 'href="https://box:9108/clips/cam1/%3Cx%3E.mp4#t=4.2"' in page
    assert "<x>" not in page and page.count("<tr>") == 2
    bare = render(windows, _ms(6, 0), _ms(14, 0), before=0, after=0)
    assert "https://" not in bare and "clips <code>cam1/&lt;x&gt;.mp4</code>" in bare
