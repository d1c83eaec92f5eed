"""Secrets never reach logs: URL passwords and registered secrets are scrubbed from every value."""

from __future__ import annotations

import io
import json

import structlog

from daemon.core.redaction import SECRETS, redact_text, redact_url
from daemon.ops.logging import configure_logging, reset_logging


def test_redact_url_keeps_user_host_and_port() -> None:
    assert redact_url("rtsp://admin:p%40ss@10.0.0.21:554/s1") == "rtsp://admin:***@10.0.0.21:554/s1"
    assert redact_url("redis://:pw@[::1]:6379/0") == "redis://:***@[::1]:6379/0"
    assert redact_url("rtsp://10.0.0.21/s1") == "rtsp://10.0.0.21/s1"


def test_redact_text_finds_urls_inside_messages() -> None:
    msg = "Error opening 'rtsp://u:hunter22@cam/x': Connection refused; also redis://:pw2@h:1/0"
    out = redact_text(msg)
    assert "hunter22" not in out and "pw2" not in out
    assert "rtsp://u:***@cam/x" in out


def test_json_logs_scrub_urls_registered_secrets_and_tracebacks() -> None:
    SECRETS.add("file-secret-4242")
    stream = io.StringIO()
    configure_logging("json", "info", stream)
    log = structlog.get_logger("test")
    log.info("camera_connecting", url="rtsp://viewer:cam-pass-1@10.0.0.9/s", note="pw is file-secret-4242")
    try:
        raise RuntimeError("could not open rtsp://viewer:cam-pass-1@10.0.0.9/s (file-secret-4242)")
    except RuntimeError:
        log.exception("camera_thread_crashed", camera="c1")
    reset_logging()
    text = stream.getvalue()
    assert "cam-pass-1" not in text
    assert "file-secret-4242" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["event"] for line in lines] == ["camera_connecting", "camera_thread_crashed"]
    assert lines[0]["url"] == "rtsp://viewer:***@10.0.0.9/s"
