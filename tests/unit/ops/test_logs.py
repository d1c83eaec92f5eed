"""One pipeline for every log line: structlog events and standard-library records (asyncio, warnings,
uncaught thread exceptions) are one JSON object per line, tracebacks are a field, and no secret survives
in any format, tracebacks included."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from daemon.core.redaction import SECRETS, SecretRegistry
from daemon.ops.logging import configure as logs
from daemon.ops.logging.configure import (
    LIBRARY_BURST,
    LIBRARY_WINDOW_S,
    LibraryFilter,
    capture_uncaught,
    configure_logging,
    reset_logging,
)
from daemon.ops.logging.event import LIBRARY_EVENT

URL_PASSWORD = "cam-pw-7781"
REGISTERED = "reg-secret-5e3c"
SECRET_URL = f"rtsp://viewer:{URL_PASSWORD}@10.0.0.9:554/s1"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now


class TtyStream(io.StringIO):
    """An in-memory stream that says it is a terminal: the console renderer with colours."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    SECRETS.add(REGISTERED)
    hooks = (sys.excepthook, threading.excepthook)
    yield
    reset_logging()
    assert (sys.excepthook, threading.excepthook) == hooks  # pytest's own hooks are back


def _crash() -> None:
    raise RuntimeError(f"could not open {SECRET_URL} with key {REGISTERED}")


def _log_both_ways() -> None:
    """The same failure through structlog and through a standard-library logger."""
    try:
        _crash()
    except RuntimeError:
        structlog.get_logger("beltsight.test").exception("camera_thread_crashed", camera="c1", url=SECRET_URL)
        logging.getLogger("some.library").error("library saw %s", SECRET_URL, exc_info=True)


@pytest.mark.parametrize("stream_cls", [io.StringIO, TtyStream], ids=["plain", "tty"])
def test_console_output_holds_no_secret_and_keeps_the_traceback(stream_cls: type[io.StringIO]) -> None:
    stream = stream_cls()
    configure_logging("console", "info", stream)
    _log_both_ways()
    text = stream.getvalue()
    assert URL_PASSWORD not in text and REGISTERED not in text
    assert text.count("Traceback (most recent call last)") == 2
    assert text.count("in _crash") == 2  # the frame that raised is still named
    assert "rtsp://viewer:***@10.0.0.9:554/s1" in text


def test_json_output_holds_no_secret_and_the_traceback_is_a_field() -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream)
    _log_both_ways()
    text = stream.getvalue()
    assert URL_PASSWORD not in text and REGISTERED not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert [(e["event"], e["logger"]) for e in lines] == [
        ("camera_thread_crashed", "beltsight.test"),
        (LIBRARY_EVENT, "some.library"),
    ]
    assert lines[1]["message"] == "library saw rtsp://viewer:***@10.0.0.9:554/s1"
    for entry in lines:
        (exc,) = entry["exception"]
        assert exc["exc_type"] == "RuntimeError"
        assert "rtsp://viewer:***@10.0.0.9:554/s1" in exc["exc_value"]
        assert [f["name"] for f in exc["frames"]][-1] == "_crash"


def _asyncio_callback_error() -> None:
    """A real asyncio loop logs a failing callback through the `asyncio` logger."""

    async def main() -> None:
        asyncio.get_running_loop().call_soon(_crash)
        await asyncio.sleep(0.01)

    asyncio.run(main())


def test_every_line_is_one_json_object_whatever_wrote_it() -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream)
    capture_uncaught()  # as `beltsight run` does
    structlog.get_logger("beltsight.test").info("camera_up", camera="c1", note="line one\nline two")
    _asyncio_callback_error()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn(f"provider fell back ({REGISTERED})", UserWarning, stacklevel=1)
    worker = threading.Thread(target=_crash, name="cam-c1")
    worker.start()
    worker.join()
    logging.getLogger("redis").info("below the library threshold: not printed")
    text = stream.getvalue()
    assert REGISTERED not in text and URL_PASSWORD not in text
    lines = [json.loads(line) for line in text.splitlines()]
    by_logger = {e["logger"]: e for e in lines}
    assert set(by_logger) == {"beltsight.test", "asyncio", "py.warnings", "beltsight.logs"}
    assert by_logger["beltsight.test"]["note"] == "line one\nline two"
    assert by_logger["asyncio"]["event"] == LIBRARY_EVENT
    assert by_logger["asyncio"]["exception"][0]["exc_type"] == "RuntimeError"
    assert "provider fell back" in by_logger["py.warnings"]["message"]
    uncaught = by_logger["beltsight.logs"]
    assert (uncaught["event"], uncaught["thread"], uncaught["level"]) == ("unhandled_exception", "cam-c1", "critical")
    assert uncaught["exception"][0]["frames"][-1]["name"] == "_crash"


def test_a_noisy_library_is_capped_and_the_gap_is_counted() -> None:
    clock = FakeClock()
    stream = io.StringIO()
    configure_logging("json", "info", stream)
    (handler,) = [h for h in logging.getLogger().handlers if h.get_name() == "beltsight"]
    handler.filters[:] = [LibraryFilter(logging.WARNING, clock=clock)]
    noisy = logging.getLogger("libav.h264")
    for i in range(LIBRARY_BURST + 15):
        noisy.warning("error while decoding MB %d", i)
    clock.now += LIBRARY_WINDOW_S
    noisy.warning("after the window")
    structlog.get_logger("beltsight.test").warning("camera_down", camera="c1")  # never capped
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    library = [e for e in lines if e["event"] == LIBRARY_EVENT]
    assert len(library) == LIBRARY_BURST + 1
    assert library[-1]["message"] == "after the window" and library[-1]["suppressed"] == 15
    assert "suppressed" not in library[0]
    assert lines[-1]["event"] == "camera_down"


def test_a_secret_spanning_json_syntax_never_breaks_or_leaks(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = SecretRegistry()
    registry.add('2, "c')  # absurd, but a registered value may be anything
    monkeypatch.setattr(logs, "SECRETS", registry)
    renderer = logs.RedactedRenderer(structlog.processors.JSONRenderer(), is_json=True)
    event: dict[str, Any] = {"event": "thing", "b": 2, "c": 3}
    line = renderer(None, "info", event)
    assert '2, "c' not in line
    assert json.loads(line) == {"event": "thing", "level": None, "withheld": True}
