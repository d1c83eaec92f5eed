"""The demo's per-camera figures: a sliding window of stream entries and the status board."""

from __future__ import annotations

import io

from tools.demo.view import CameraWindow, StatusBoard


def entry(published_ms: int, latency_ms: int, labels: list[str]) -> dict[str, object]:
    return {
        "published_ms": published_ms,
        "captured_ms": published_ms - latency_ms,
        "n": len(labels),
        "dets": [{"label": label} for label in labels],
        "model_size": 640,
    }


def test_window_keeps_only_the_last_seconds() -> None:
    window = CameraWindow("cam", window_s=5.0)
    for i in range(100):  # 10 entries a second for 10 s, latency 10..109 ms
        window.add(entry(1_000_000 + i * 100, 10 + i, ["bolt"] * (i % 3)))
    summary = window.summary(1_000_000 / 1000 + 10.0, "up")
    assert summary.total == 100
    assert abs(summary.fps - 10.0) < 0.3  # 50 entries in the 5 s window
    assert summary.p50_ms is not None and 80 <= summary.p50_ms <= 90
    assert summary.p99_ms is not None and summary.p99_ms >= 105
    assert summary.with_detections == sum(1 for i in range(100) if i % 3)
    assert summary.top_labels[0][0] == "bolt"
    assert summary.model == "640"


def test_young_window_divides_by_its_age_not_the_window() -> None:
    window = CameraWindow("cam", window_s=5.0)
    for i in range(10):  # 10 entries over the first second
        window.add(entry(2_000_000 + i * 100, 20, []))
    summary = window.summary(2_000_000 / 1000 + 1.0, "up")
    assert abs(summary.fps - 10.0) < 1.5


def test_empty_window_says_so() -> None:
    summary = CameraWindow("cam").summary(0.0, "connecting")
    assert summary.fps == 0 and summary.p50_ms is None
    assert "connecting" in summary.line() and "lat    -" in summary.line()


def test_most_frequent_labels_first() -> None:
    window = CameraWindow("cam")
    window.add(entry(1000, 5, ["nut", "bolt", "bolt", "washer", "bolt", "nut", "pin"]))
    top = window.summary(1.0, "up").top_labels
    assert [label for label, _ in top] == ["bolt", "nut", top[2][0]]
    assert len(top) == 3


def test_board_redraws_in_place_on_a_terminal() -> None:
    out = io.StringIO()
    board = StatusBoard(out, tty=True)
    window = CameraWindow("cam")
    assert board.due(0.0)
    board.draw(0.0, [window.summary(0.0, "up"), window.summary(0.0, "up")])
    assert not board.due(0.1)
    assert board.due(0.6)
    board.draw(0.6, [window.summary(0.6, "up"), window.summary(0.6, "up")])
    text = out.getvalue()
    assert text.count("\x1b[2F") == 1  # the second draw moved up over the two lines of the first
    assert text.count("\x1b[2K") == 4


def test_board_prints_summaries_every_few_seconds_elsewhere() -> None:
    out = io.StringIO()
    board = StatusBoard(out, tty=False, every_s=5.0)
    summaries = [CameraWindow("cam").summary(0.0, "up")]
    assert not board.due(100.0)  # nothing right away: the first block comes after every_s
    assert not board.due(104.0)
    assert board.due(105.0)
    board.draw(105.0, summaries)
    assert not board.due(106.0)
    assert out.getvalue().startswith("demo: cam ") and "\x1b" not in out.getvalue()
