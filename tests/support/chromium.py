"""Headless Chromium for the tests that need a real browser (`Chromium`, found on PATH as `CHROMIUM`)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tools.kit.leash import spawn

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
    it reads NUL-terminated JSON on fd 3 and writes on fd 4), so a page can be opened with an
    `Authorization` header on every request (`Network.setExtraHTTPHeaders`), or with the
    credentials in its URL."""

    def __init__(self, tmp_path: Path) -> None:
        assert CHROMIUM is not None
        to_child, self._to = os.pipe()
        self._from, from_child = os.pipe()

        def as_fds_3_and_4() -> None:
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        profile = tmp_path / "chromium-profile"
        profile.mkdir(exist_ok=True)
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--ignore-certificate-errors", f"--user-data-dir={profile}", "--window-size=1100,1400",
                 "--remote-debugging-pipe", "about:blank"]  # fmt: skip
        self._proc = spawn(
            [CHROMIUM, *flags],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec=as_fds_3_and_4,  # dup2 only; the child execs at once
            pass_fds=(3, 4),
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self._session: str | None = None

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self._session is not None and not method.startswith("Target."):
            message["sessionId"] = self._session
        os.write(self._to, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._from, 1 << 20)
                assert chunk, "chromium closed its DevTools pipe"
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next_id:
                assert "error" not in reply, reply
                return dict(reply["result"])

    def open(self, url: str, headers: dict[str, str] | None = None) -> None:
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Network.enable")
        if headers:
            self.call("Network.setExtraHTTPHeaders", headers=headers)
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])

    def close(self) -> None:
        with contextlib.suppress(OSError, AssertionError):
            self.call("Browser.close")
        os.close(self._to)
        os.close(self._from)
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(30)
