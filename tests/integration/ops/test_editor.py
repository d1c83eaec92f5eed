"""The line editor of the live view, used as a person would: headless Chromium on the real daemon
(a replayed belt, Redis), real mouse and touch input (DevTools `Input.dispatch*Event`, which the
browser turns into pointer events), the real lines API behind Apply and Revert.

`BELTSIGHT_DOCS_IMG=docs/img` keeps the screenshots for the documentation (docs/operations/commissioning.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.support.chromium import CHROMIUM, Chromium
from tests.support.daemon_harness import InProcessDaemon, http_get, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip
from tests.support.objects import objects
from tests.support.waits import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"),
]

CARD = 'section[data-camera="replay"]'
IMAGE = CARD + " svg.overlay"
RUNNING = {"id": "count", "start": [0.5, 0.05], "end": [0.5, 0.95], "direction": [1.0, 0.0], "gates": []}


def start(tmp_path: Path, redis: RedisServer, clip_factory: Callable[..., Clip], lines: list[Any]) -> InProcessDaemon:
    """A replayed belt (parts move left to right) with `lines`, its drop-ins under tmp_path."""
    clip = clip_factory(640, 480, fps=10, seconds=4.0, seed=21, synthetic=True)
    camera = {"id": "replay", "url": str(clip.path), "realtime": True, "loop": True, "lines": lines}
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[camera],
        health={"snapshot_min_interval_s": 0.3},
        tracking={"lines_dir": str(tmp_path / "lines")},
    )
    return InProcessDaemon(config)


def port_of(d: InProcessDaemon) -> int:
    wait_until(lambda: d.daemon.health is not None and d.daemon.state == "running", 60, "the daemon to be ready", d)
    assert d.daemon.health is not None
    return d.daemon.health.port


def running(d: InProcessDaemon) -> dict[str, Any]:
    reply = http_get(port_of(d), "/api/cameras/replay/lines")
    assert reply.status == 200, reply.body
    return dict(reply.json())


def near(a: list[float], b: tuple[float, float], tolerance: float = 0.01) -> bool:
    return abs(a[0] - b[0]) <= tolerance and abs(a[1] - b[1]) <= tolerance


def keep_screenshot(browser: Chromium, name: str, tmp_path: Path) -> None:
    """The camera's card as PNG: always under tmp_path, and into the docs when asked."""
    png = browser.screenshot(CARD)
    assert png.startswith(b"\x89PNG")
    (tmp_path / name).write_bytes(png)
    if docs := os.environ.get("BELTSIGHT_DOCS_IMG"):  # small for the repository: 720 px wide, 128 colours
        image = Image.open(BytesIO(png)).convert("RGB")
        image = image.resize((720, round(image.height * 720 / image.width)), Image.Resampling.LANCZOS)
        image.quantize(128).save(Path(docs) / name, optimize=True)


@contextmanager
def editor(tmp_path: Path, d: InProcessDaemon) -> Iterator[Chromium]:
    """The page at `/` with the camera's snapshot shown and its editor open on what runs."""
    browser = Chromium(tmp_path)
    try:
        browser.open(f"http://127.0.0.1:{port_of(d)}/")
        browser.wait_for(f"!!document.querySelector('{CARD}[data-loaded=\"1\"]')", 60, "the camera's snapshot")
        browser.click(*browser.at(CARD + " button.edit-lines", 0.5, 0.5))
        browser.wait_for(f"document.querySelector('{CARD}').dataset.editor === 'clean'", 30, "the lines that run")
        yield browser
    finally:
        browser.close()


def draft(browser: Chromium) -> dict[str, Any]:
    return dict(json.loads(browser.evaluate("JSON.stringify(cards.get('replay').editor.draft)")))


def dataset(browser: Chromium, key: str) -> str:
    return str(browser.evaluate(f"document.querySelector('{CARD}').dataset.{key}"))


def press_button(browser: Chromium, selector: str, touch: bool = False) -> None:
    x, y = browser.at(CARD + " " + selector, 0.5, 0.5)
    if touch:
        browser.tap(x, y)
    else:
        browser.click(x, y)


def type_into(browser: Chromium, selector: str, text: str) -> None:
    browser.click(*browser.at(CARD + " " + selector, 0.5, 0.5))
    browser.evaluate(f"document.querySelector('{CARD} {selector}').select()")
    browser.type_text(text)


def test_a_line_drawn_with_two_clicks_counts_parts_once_applied(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    """No lines run; on the page: Add line, click its two ends across the belt, calibrate on a
    segment of 320 px typed as 240 mm, add a gate 400 mm on, Apply. The daemon runs exactly that,
    the objects stream gets crossings of the new line, and the page shows its counts."""
    redis = redis_server()
    with start(tmp_path, redis, clip_factory, []) as d, editor(tmp_path, d) as browser:
        assert running(d) == {"mm_per_px": None, "lines": []}
        press_button(browser, "button[data-tool=line]")
        browser.click(*browser.at(IMAGE, 0.55, 0.03))
        browser.click(*browser.at(IMAGE, 0.55, 0.97))
        press_button(browser, "button[data-tool=measure]")
        browser.click(*browser.at(IMAGE, 0.1, 0.5))
        browser.click(*browser.at(IMAGE, 0.6, 0.5))
        type_into(browser, "input[name=known_mm]", "240")
        press_button(browser, "button[data-act=add-gate]")
        type_into(browser, "input[name=distance_mm]", "400")
        drawn = draft(browser)
        assert drawn["mm_per_px"] == pytest.approx(0.75, rel=0.02)
        (line,) = drawn["lines"]
        assert line["id"] == "line1" and line["gates"] == [{"id": "gate1", "distance_mm": 400}]
        assert near(line["start"], (0.55, 0.03)) and near(line["end"], (0.55, 0.97))
        assert line["direction"][0] > 0.99 and abs(line["direction"][1]) < 0.05  # across the line, "in" to the right
        assert dataset(browser, "dirty") == "1" and running(d)["lines"] == []  # nothing runs before Apply
        keep_screenshot(browser, "editor-draft.png", tmp_path)

        press_button(browser, "button[data-act=apply]")
        browser.wait_for(f"document.querySelector('{CARD}').dataset.editor === 'applied'", 30, "Apply")
        assert running(d) == drawn and dataset(browser, "dirty") == "0"

        def crossed() -> list[Any]:
            return [e for _id, e in objects(redis, "replay") if e.event == "crossed" and e.line == "line1"]

        wait_until(lambda: any(e.direction == "in" for e in crossed()), 120, "a part counted in on the new line", d)
        first_in = next(e for e in crossed() if e.direction == "in")
        assert first_in.eta is not None and first_in.eta[0][0] == "gate1"
        shown = browser.wait_for(
            f"(() => {{ const el = document.querySelector('{CARD} .line-counts[data-line=\"line1\"]');"
            " const m = el && el.textContent.match(/^in (\\d+) out (\\d+)$/);"
            " return m && Number(m[1]) >= 1 ? [Number(m[1]), Number(m[2])] : null; })()",
            30,
            "the page to show the new line's count",
        )
        wait_until(lambda: len([e for e in crossed() if e.direction == "in"]) >= shown[0], 30, "the shown count", d)
        keep_screenshot(browser, "editor-counting.png", tmp_path)


def test_an_end_dragged_by_touch_is_only_a_draft_until_applied_and_revert_brings_back_what_runs(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    """A finger drags the end of the running line: the draft moves with it, the daemon does not;
    Revert (tapped) puts back what runs; a gate with a bad distance is refused with the daemon's
    problem beside that field and nothing changed; dragged again and Apply (tapped) runs it."""
    redis = redis_server()
    with start(tmp_path, redis, clip_factory, [RUNNING]) as d, editor(tmp_path, d) as browser:
        before = running(d)
        assert before["lines"][0]["end"] == RUNNING["end"]
        browser.touch_drag(browser.at(IMAGE, 0.5, 0.95), browser.at(IMAGE, 0.7, 0.85))
        moved = draft(browser)["lines"][0]
        assert near(moved["end"], (0.7, 0.85)) and near(moved["start"], (0.5, 0.05), 1e-6)
        assert moved["direction"][0] > 0.9  # still across the line, to the right
        assert dataset(browser, "dirty") == "1" and running(d) == before

        press_button(browser, "button[data-act=revert]", touch=True)
        browser.wait_for(f"document.querySelector('{CARD}').dataset.dirty === '0'", 30, "Revert")
        assert draft(browser) == before

        press_button(browser, "button[data-act=add-gate]", touch=True)
        type_into(browser, "input[name=distance_mm]", "-5")
        press_button(browser, "button[data-act=apply]", touch=True)
        browser.wait_for(f"document.querySelector('{CARD}').dataset.editor === 'invalid'", 30, "the refusal")
        beside = browser.evaluate(f"document.querySelector('{CARD} [data-problem=\"lines.0.gates.0\"]').textContent")
        assert "distance_mm" in beside or "greater than 0" in beside, beside
        assert browser.evaluate(
            f"document.querySelector('{CARD} input[name=distance_mm]').classList.contains('invalid')"
        )
        keep_screenshot(browser, "editor-problem.png", tmp_path)
        assert running(d) == before

        press_button(browser, "button[data-act=revert]", touch=True)
        browser.wait_for(f"document.querySelector('{CARD}').dataset.editor === 'clean'", 30, "Revert")
        browser.touch_drag(browser.at(IMAGE, 0.5, 0.95), browser.at(IMAGE, 0.7, 0.85))
        press_button(browser, "button[data-act=flip]", touch=True)
        press_button(browser, "button[data-act=apply]", touch=True)
        browser.wait_for(f"document.querySelector('{CARD}').dataset.editor === 'applied'", 30, "Apply")
        after = running(d)["lines"][0]
        assert near(after["end"], (0.7, 0.85)) and after["id"] == "count" and after["direction"][0] < -0.9


def test_the_second_of_two_editors_is_told_someone_else_changed_the_camera_and_gets_what_runs(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    """Two people open the editor on the same running line. The first drags its end and applies; the
    second, who read the lines before that, drags the other end and applies: the daemon answers 412
    (the editor's If-Match is stale), keeps the first one's lines, and the second page says that
    someone else changed the camera, with the lines that run now loaded. Applying from there works."""
    redis = redis_server()
    (first_dir := tmp_path / "first").mkdir()
    (second_dir := tmp_path / "second").mkdir()
    with (
        start(tmp_path, redis, clip_factory, [RUNNING]) as d,
        editor(first_dir, d) as first,
        editor(second_dir, d) as second,
    ):
        before = running(d)
        first.touch_drag(first.at(IMAGE, 0.5, 0.95), first.at(IMAGE, 0.7, 0.85))
        press_button(first, "button[data-act=apply]")
        first.wait_for(f"document.querySelector('{CARD}').dataset.editor === 'applied'", 30, "the first Apply")
        theirs = running(d)
        assert theirs != before and near(theirs["lines"][0]["end"], (0.7, 0.85))

        second.touch_drag(second.at(IMAGE, 0.5, 0.05), second.at(IMAGE, 0.3, 0.15))
        mine = draft(second)
        assert near(mine["lines"][0]["start"], (0.3, 0.15)) and mine["lines"][0]["end"] == RUNNING["end"]
        press_button(second, "button[data-act=apply]")
        second.wait_for(f"document.querySelector('{CARD}').dataset.editor === 'conflict'", 30, "the refusal")
        assert running(d) == theirs  # the second write changed nothing
        assert draft(second) == theirs and dataset(second, "dirty") == "0"  # what runs now, loaded
        message = second.evaluate(f"document.querySelector('{CARD} .editor-status').textContent")
        assert "someone else changed" in message, message
        keep_screenshot(second, "editor-conflict.png", tmp_path)

        second.touch_drag(second.at(IMAGE, 0.5, 0.05), second.at(IMAGE, 0.3, 0.15))
        press_button(second, "button[data-act=apply]")
        second.wait_for(f"document.querySelector('{CARD}').dataset.editor === 'applied'", 30, "Apply on what runs")
        now = running(d)["lines"][0]
        assert near(now["start"], (0.3, 0.15)) and near(now["end"], (0.7, 0.85))
