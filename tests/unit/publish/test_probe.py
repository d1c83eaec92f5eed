"""daemon.publish.sink.probe: a try of the held cameras runs in a task of the probe's own `Tracked`
set: an unexpected exception in it is logged (`sink_probe_failed`), not lost, and a later try still
starts; `stop` cancels a try under way (the streams' tops forgotten: writes may have landed unseen),
waits for it and closes the probe's client."""

from __future__ import annotations

import asyncio
from typing import cast

import structlog

from daemon.publish.redis_conn import RedisClient
from daemon.publish.sink.held import HeldStreams
from daemon.publish.sink.probe import HeldProbe


class Due:
    """Held cameras that are always due a try."""

    def cameras_due(self) -> bool:
        return True


class Client:
    def __init__(self) -> None:
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


def test_a_try_that_raises_is_logged_and_stop_ends_the_one_under_way() -> None:
    client = Client()
    tries: list[int] = []
    forgotten: list[int] = []

    async def publish(_client: RedisClient) -> None:
        tries.append(len(tries) + 1)
        if len(tries) == 1:
            raise KeyError("injected")
        await asyncio.sleep(60)  # a master that never answers

    def probes() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if t.get_name() == "held-probe" and not t.done()]

    async def scenario() -> tuple[int, int]:
        wake = asyncio.Event()
        probe = HeldProbe(
            cast(HeldStreams, Due()),
            lambda: cast(RedisClient, client),
            publish,
            forget_tops=lambda: forgotten.append(1),
            wake=wake,
        )
        probe.start()
        await wake.wait()  # the first try ended (it raised)
        await asyncio.sleep(0)
        probe.start()  # the next one starts
        probe.start()  # (one at a time)
        await asyncio.sleep(0)
        under_way = len(probes())
        await asyncio.wait_for(probe.stop(), 5)
        return under_way, len(probes())

    with structlog.testing.capture_logs() as logs:
        assert asyncio.run(scenario()) == (1, 0)
    assert tries == [1, 2] and forgotten == [1] and client.closed
    failed = [(e["task"], e["error"]) for e in logs if e["event"] == "sink_probe_failed"]
    assert failed == [("held-probe", "KeyError: 'injected'")]
