"""Headless Chromium for the tests that need a real browser (`Chromium`, found on PATH as `CHROMIUM`):
open a page, evaluate in it, wait for it, and act on it as a person would, with real input events
(`Input.dispatchMouseEvent`, `Input.dispatchTouchEvent`: the browser turns them into pointer events)."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from tools.kit.leash import spawn

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TOUCH_PAUSE_S = 0.5


def above_4(fd: int) -> int:
    """`fd` moved to a descriptor above 4 (close-on-exec, as `os.pipe` makes them; `pass_fds` lifts it in
    the child), the original closed: the child's redirections put its ends on 3 and 4."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 5)
    os.close(fd)
    return high


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
    it reads NUL-terminated JSON on fd 3 and writes on fd 4), so a page can be opened with an
    `Authorization` header on every request (`Network.setExtraHTTPHeaders`), or with the
    credentials in its URL."""

    def __init__(self, tmp_path: Path) -> None:
        assert CHROMIUM is not None
        to_child, self._to = os.pipe()
        self._from, from_child = os.pipe()
        to_child, from_child = above_4(to_child), above_4(from_child)  # placing one cannot overwrite the other

        profile = tmp_path / "chromium-profile"
        profile.mkdir(exist_ok=True)
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--ignore-certificate-errors", f"--user-data-dir={profile}", "--window-size=1100,1400",
                 "--remote-debugging-pipe", "about:blank"]  # fmt: skip
        # the pipe's ends as the child's descriptors 3 and 4, where --remote-debugging-pipe looks: bash's
        # redirections, then exec; not a `preexec_fn`, which runs Python in the forked child
        # (`tools.kit.leash` says why that can hang)
        placed = f'exec "$0" "$@" 3<&{to_child} 4>&{from_child} {to_child}<&- {from_child}>&-'
        self._proc = spawn(
            ["bash", "-c", placed, CHROMIUM, *flags],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(to_child, from_child),
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self._session: str | None = None
        self._lifted = 0.0

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

    def wait_for(self, expression: str, timeout_s: float = 30.0, what: str = "") -> Any:
        """The expression's value once it is truthy (evaluated every 0.1 s); AssertionError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what or expression}"
            time.sleep(0.1)

    def rect(self, selector: str) -> tuple[float, float, float, float]:
        """(left, top, width, height) of the first element matching `selector`, in CSS pixels of the viewport."""
        found = self.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)}); if (!el) return null;"
            " el.scrollIntoView({block: 'nearest'}); const r = el.getBoundingClientRect();"
            " return [r.left, r.top, r.width, r.height]; })()"
        )
        assert found is not None, f"no element matches {selector}"
        left, top, width, height = found
        return float(left), float(top), float(width), float(height)

    def at(self, selector: str, fx: float, fy: float) -> tuple[float, float]:
        """The viewport point at fractions (fx, fy) of the element's box (0.5, 0.5: its middle)."""
        left, top, width, height = self.rect(selector)
        return left + fx * width, top + fy * height

    def mouse(self, kind: str, x: float, y: float, pressed: bool = False) -> None:
        """One mouse event: `kind` "mousePressed", "mouseReleased" or "mouseMoved" (the left button)."""
        down = kind == "mousePressed" or (kind == "mouseMoved" and pressed)
        self.call(
            "Input.dispatchMouseEvent",
            type=kind,
            x=x,
            y=y,
            button="left" if kind != "mouseMoved" or pressed else "none",
            buttons=1 if down else 0,
            clickCount=1 if kind != "mouseMoved" else 0,
        )

    def click(self, x: float, y: float) -> None:
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y)
        self.mouse("mouseReleased", x, y)

    def drag(self, start: tuple[float, float], end: tuple[float, float], steps: int = 8) -> None:
        """Press at `start`, move in `steps` to `end`, release there."""
        self.mouse("mouseMoved", *start)
        self.mouse("mousePressed", *start)
        for i in range(1, steps + 1):
            t = i / steps
            self.mouse("mouseMoved", start[0] + t * (end[0] - start[0]), start[1] + t * (end[1] - start[1]), True)
        self.mouse("mouseReleased", *end)

    def touch(self, kind: str, points: list[tuple[float, float]]) -> None:
        """One touch event: `kind` "touchStart", "touchMove", "touchEnd" (no points) or "touchCancel".
        A finger comes down again only `TOUCH_PAUSE_S` after it was lifted, as a person's does: a
        quicker tap is taken by the browser for the second of a double tap, and clicks nothing."""
        if kind == "touchStart":
            time.sleep(max(0.0, self._lifted + TOUCH_PAUSE_S - time.monotonic()))
        self.call("Input.dispatchTouchEvent", type=kind, touchPoints=[{"x": x, "y": y, "id": 0} for x, y in points])
        if kind in ("touchEnd", "touchCancel"):
            self._lifted = time.monotonic()

    def tap(self, x: float, y: float) -> None:
        self.touch("touchStart", [(x, y)])
        self.touch("touchEnd", [])

    def touch_drag(self, start: tuple[float, float], end: tuple[float, float], steps: int = 8) -> None:
        """A finger down at `start`, moved in `steps` to `end` at a person's pace, held still there and
        lifted: a quick swipe would be a fling to the browser, and a tap during a fling clicks nothing."""
        self.touch("touchStart", [start])
        for i in range(1, steps + 1):
            time.sleep(0.03)
            t = i / steps
            self.touch("touchMove", [(start[0] + t * (end[0] - start[0]), start[1] + t * (end[1] - start[1]))])
        time.sleep(0.15)
        self.touch("touchMove", [end])
        self.touch("touchEnd", [])

    def type_text(self, text: str) -> None:
        """Text typed into the focused element (as an input method would: `input` events follow)."""
        self.call("Input.insertText", text=text)

    def press(self, key: str, code: str = "", shift: bool = False) -> None:
        """A key pressed and released on the focused element (e.g. "ArrowRight")."""
        for kind in ("rawKeyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code or key, modifiers=8 if shift else 0)

    def screenshot(self, selector: str | None = None) -> bytes:
        """The viewport as PNG, or only the box of the element matching `selector`."""
        params: dict[str, Any] = {"format": "png"}
        if selector is not None:
            left, top, width, height = self.rect(selector)
            sx, sy = self.evaluate("[window.scrollX, window.scrollY]")
            params["clip"] = {"x": left + sx, "y": top + sy, "width": width, "height": height, "scale": 1}
            params["captureBeyondViewport"] = True
        return base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])

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
