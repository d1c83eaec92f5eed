"""`python -m tests.support.bridge_child CONFIG MODE DIR`: `beltsight bridge` as it runs in production
(`daemon.bridge.cli.main`: its config load, signal rule and exit status) with one test protocol added
to the table (`Probe`), the way a new protocol is added. Its `close` touches DIR/closed (the bridge
closed its protocols before it exited); MODE says what else it does:

- `ok`: nothing more;
- `stall`: its `close` never returns (a stop that cannot end: only a second signal gets out);
- `fail`: its long-lived task raises `ProbeFault` once DIR/fail exists (an unexpected exception).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, ClassVar

from daemon.bridge.cli import main as bridge_main
from daemon.bridge.protocols import PROTOCOLS
from tests.support.bridge_protocols import Idle

MODES = ("ok", "stall", "fail")


class ProbeFault(RuntimeError):
    """What the probe's task raises in `fail` mode."""


class Probe(Idle):
    """A protocol that serves nothing and does what `mode` says (class attributes: set by `main`)."""

    name = "probe"
    mode: ClassVar[str] = "ok"
    files: ClassVar[Path] = Path()

    def tasks(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        return {"probe-task": self._run}

    async def _run(self) -> None:
        while True:
            if self.mode == "fail" and (self.files / "fail").exists():
                raise ProbeFault("the probe's task failed")
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        (self.files / "closed").touch()
        if self.mode == "stall":
            await asyncio.Event().wait()


def main(argv: list[str]) -> int:
    config, mode, files = Path(argv[0]), argv[1], Path(argv[2])
    assert mode in MODES, mode
    Probe.mode, Probe.files = mode, files
    PROTOCOLS[Probe.name] = Probe
    return bridge_main(config)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
