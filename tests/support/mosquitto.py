"""A real Mosquitto broker per test (tools/kit/mosquitto.py) and a Sparkplug host from another stack
(tests/js/sparkplug_host.js: Eclipse Tahu's sparkplug-payload over MQTT.js) to read what the bridge sends.

    def test_x(mosquitto, tmp_path):
        broker = mosquitto()                            # or mosquitto(tls=TlsFiles(...), require_certificate=True)
        with SparkplugHost(broker.url) as host:
            await host.wait(lambda ms: any(m.kind == "NBIRTH" for m in ms))

Every broker is stopped and every host process ended at test end (registered in tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tools.kit.leash import spawn
from tools.kit.mosquitto import Mosquitto, TlsFiles, find_mosquitto

JS_DIR = Path(__file__).resolve().parents[1] / "js"
HOST_JS = JS_DIR / "sparkplug_host.js"
MosquittoFactory = Callable[..., Mosquitto]


@pytest.fixture
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MosquittoFactory]:
    """Factory: `mosquitto(tls=None, require_certificate=False)` -> a started broker on 127.0.0.1."""
    if find_mosquitto() is None:
        pytest.skip("mosquitto not installed (Debian: apt-get install mosquitto)")
    brokers: list[Mosquitto] = []

    def start(*, tls: TlsFiles | None = None, require_certificate: bool = False) -> Mosquitto:
        broker = Mosquitto(tmp_path_factory.mktemp("mosquitto"), tls=tls, require_certificate=require_certificate)
        brokers.append(broker)
        return broker.start()

    yield start
    for broker in brokers:
        broker.close()


@dataclass(frozen=True, slots=True)
class Message:
    topic: str
    payload: dict[str, Any]

    @property
    def kind(self) -> str:
        """NBIRTH, DDATA, STATE, ... (Sparkplug) or the last topic element (`crossed`)."""
        parts = self.topic.split("/")
        if parts[0] != "spBv1.0":
            return parts[-1]
        return "STATE" if parts[1] == "STATE" else parts[2]

    @property
    def device(self) -> str | None:
        parts = self.topic.split("/")
        return parts[4] if parts[0] == "spBv1.0" and len(parts) > 4 else None

    def metrics(self) -> dict[str, Any]:
        """name -> value (the last one of that name)."""
        return {m["name"]: m.get("value") for m in self.payload.get("metrics", [])}


class SparkplugHost:
    """`node tests/js/sparkplug_host.js` as a context manager; `messages` fills as lines arrive."""

    def __init__(
        self,
        url: str,
        *,
        ca: Path | None = None,
        cert: Path | None = None,
        key: Path | None = None,
        primary_host_id: str | None = None,
    ) -> None:
        node = shutil.which("node")
        if node is None or not (JS_DIR / "node_modules" / "sparkplug-payload").exists():
            pytest.skip("node and tests/js/node_modules needed (tools/bootstrap.sh --dev)")
        tls = [str(ca), str(cert), str(key)] if ca is not None and cert is not None and key is not None else []
        self.argv = [node, str(HOST_JS), url, *tls]
        self.env = {**os.environ, **({"PRIMARY_HOST_ID": primary_host_id} if primary_host_id else {})}
        self.messages: list[Message] = []
        self.ready = threading.Event()
        self._lock = threading.Lock()
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> SparkplugHost:
        self.proc = spawn(
            self.argv,
            cwd=JS_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self.env,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self.ready.wait(30):
            self.__exit__()
            raise AssertionError("the Sparkplug host did not subscribe")
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            data = json.loads(line)
            if data.get("ready"):
                self.ready.set()
                continue
            with self._lock:
                self.messages.append(Message(data["topic"], data["payload"]))

    def snapshot(self) -> list[Message]:
        with self._lock:
            return list(self.messages)

    def of(self, kind: str, device: str | None = None) -> list[Message]:
        return [m for m in self.snapshot() if m.kind == kind and (device is None or m.device == device)]

    def rebirth(self, ncmd_topic: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"rebirth": ncmd_topic}) + "\n")
        self.proc.stdin.flush()

    async def wait(self, check: Callable[[list[Message]], bool], within_s: float = 60.0) -> list[Message]:
        """Until `check(messages)` holds; a generous deadline (a loaded machine), never a timing claim."""
        deadline = time.monotonic() + within_s
        while True:
            messages = self.snapshot()
            if check(messages):
                return messages
            if time.monotonic() > deadline:
                kinds = [f"{m.kind}:{m.device}" for m in messages][-20:]
                raise AssertionError(f"timed out waiting; last messages: {kinds}")
            await asyncio.sleep(0.02)

    def __exit__(self, *_: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
