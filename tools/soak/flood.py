"""The http_flood fault of `python -m tools.soak`: hostile HTTP clients on the health endpoint.

`Flood` runs them on its own event loop in a thread (also used by tests/integration/ops/test_http_flood.py);
`FloodProc` runs one in a child process, whose descriptors are its own:

    python -m tools.soak.flood PORT CONNECTIONS
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tools.kit.daemon_config import REPO
from tools.soak.procs import kill_proc

FLOOD_KINDS = ("slow", "slow", "idle", "slow", "idle", "oversized", "garbage")


@dataclass
class Flood:
    """`connections` hostile HTTP clients on their own event loop in a thread, each reconnecting
    0.3-1 s after the server closed it: slow senders (a request line, then a header line every
    3 s, never the end), idle connections, 64 KiB request lines, and binary garbage."""

    port: int
    connections: int
    opened: int = 0
    closed_by_server: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="http-flood", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    async def _main(self) -> None:
        kinds = itertools.cycle(FLOOD_KINDS)
        clients = [asyncio.create_task(self._client(next(kinds), i)) for i in range(self.connections)]
        await asyncio.to_thread(self._stop.wait)
        for task in clients:
            task.cancel()
        await asyncio.gather(*clients, return_exceptions=True)

    async def _client(self, kind: str, index: int) -> None:
        rng = random.Random(index)
        await asyncio.sleep(rng.uniform(0, 1.0))
        while not self._stop.is_set():
            writer = None
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 5)
                self.opened += 1
                await self._behave(kind, rng, reader, writer)
                self.closed_by_server += 1
            except (OSError, TimeoutError):
                pass
            finally:
                if writer is not None:
                    writer.close()
            await asyncio.sleep(rng.uniform(0.3, 1.0))

    @staticmethod
    async def _behave(
        kind: str, rng: random.Random, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Misbehave until the server closes the connection (read returns EOF)."""
        if kind == "slow":
            writer.write(b"GET /healthz HTTP/1.1\r\n")
            while not reader.at_eof():
                writer.write(f"X-Slow-{rng.randrange(10**6)}: {'a' * 20}\r\n".encode())
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader.read(4096), 3.0)
            return
        if kind == "oversized":
            writer.write(b"GET /" + b"a" * 65536 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        elif kind == "garbage":
            writer.write(bytes(rng.randrange(256) for _ in range(2048)))
        with contextlib.suppress(OSError):
            await writer.drain()
        while await reader.read(65536):
            pass


class FloodProc:
    """A `Flood` in a child process (its descriptors are its own): `end` asks it to stop without
    waiting, `stop` waits for it and returns its counts."""

    def __init__(self, port: int, connections: int, log_path: Path) -> None:
        self.port, self.connections, self.log_path = port, connections, log_path
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "tools.soak.flood", str(self.port), str(self.connections)]
        with self.log_path.open("ab") as err:
            self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True)

    def end(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> dict[str, int]:
        if self.proc is None:
            return {}
        self.end()
        try:
            out, _ = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            kill_proc(self.proc)
            return {}
        finally:
            self.proc = None
        with contextlib.suppress(ValueError):
            return dict(json.loads(out.strip().splitlines()[-1]))
        return {}


def flood_main(port: int, connections: int) -> None:
    """Flood until SIGTERM, then print the counts as one JSON line."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard)
        )
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda _s, _f: done.set())
    flood = Flood(port, connections)
    flood.start()
    while not done.wait(0.5):
        pass
    print(json.dumps({"opened": flood.opened, "closed_by_server": flood.closed_by_server}), flush=True)
    os._exit(0)  # at once: the kernel closes the flood's connections (cancelling 1500 clients took seconds)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        flood_main(int(sys.argv[1]), int(sys.argv[2]))
    else:
        sys.exit(f"usage: python -m tools.soak.flood PORT CONNECTIONS (got {sys.argv[1:]})")
