"""An OPC UA event that fails to fire (asyncua's trigger raising) is logged and skipped, never the end
of the bridge: the Machine Vision mismatch conditions (daemon.bridge.reconcile_mv) and the crossings
held back at start (daemon.bridge.protocol_opcua `bridge-grace`). The conditions' queue is bounded:
the newest verdicts kept, the dropped ones counted."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import structlog

from daemon.bridge import reconcile_mv
from daemon.bridge.protocol_opcua import OpcUaProtocol
from daemon.bridge.reconcile_mv import MismatchCondition
from daemon.bridge.reconcile_service import LineVerdict
from daemon.bridge.state import Crossing


class Generator:
    """An asyncua event generator whose `trigger` raises for the events named in `failing`."""

    def __init__(self, failing: set[str]) -> None:
        self.event = SimpleNamespace(data_types={})
        self.failing = failing
        self.fired: list[str] = []

    async def trigger(self, message: str | None = None) -> None:
        name = str(self.event.ConditionName)
        if name in self.failing:
            raise RuntimeError(f"trigger broke on {name}")
        self.fired.append(name)


def _verdict(line: str, state: str = "count_mismatch") -> LineVerdict:
    return LineVerdict("cam", line, "in", state, 3)  # type: ignore[arg-type]


def _condition(gen: Generator, lines: list[str]) -> MismatchCondition:
    service: Any = SimpleNamespace(reconcilers={f"cam/{line}/in": SimpleNamespace(last=None) for line in lines})
    condition = MismatchCondition(None, None, service)  # type: ignore[arg-type]
    condition._gens["cam"] = gen
    return condition


async def _run_until(condition: MismatchCondition, done: Any) -> None:
    task = asyncio.create_task(condition.run())
    for _ in range(200):
        if done():
            break
        await asyncio.sleep(0.01)
    assert not task.done()  # still running (until the stop): a failure did not end it
    task.cancel()
    await asyncio.wait([task])


def test_a_condition_event_that_fails_is_logged_and_the_next_ones_fire() -> None:
    gen = Generator({"CountMismatch L1/in"})
    condition = _condition(gen, ["L1", "L2"])
    condition._on_verdict(_verdict("L1"))
    condition._on_verdict(_verdict("L2"))
    with structlog.testing.capture_logs() as logs:
        asyncio.run(_run_until(condition, lambda: gen.fired))
    assert gen.fired == ["CountMismatch L2/in"] and condition.fired == 1 and condition.failed == 1
    failed = [e for e in logs if e["event"] == "bridge_mv_condition_failed"]
    assert [(e["line"], e["state"], e["error"]) for e in failed] == [
        ("L1", "count_mismatch", "RuntimeError: trigger broke on CountMismatch L1/in")
    ]


def test_the_verdicts_waiting_are_bounded_keeping_the_newest(monkeypatch: Any) -> None:
    monkeypatch.setattr(reconcile_mv, "VERDICTS_QUEUED_MAX", 2)
    gen = Generator(set())

    async def scenario() -> MismatchCondition:
        condition = _condition(gen, ["L1", "L2", "L3"])
        for line in ("L1", "L2", "L3"):
            condition._on_verdict(_verdict(line))
        await _run_until(condition, lambda: len(gen.fired) == 2)
        return condition

    condition = asyncio.run(scenario())
    assert gen.fired == ["CountMismatch L2/in", "CountMismatch L3/in"] and condition.dropped == 1


def _crossing(count: int) -> Crossing:
    return Crossing("cam", "L1", count, "part", 0, "in", count, 1000 + count, "{}", f"1-{count}")


class Server:
    """The OPC UA server's `fire` raising for the crossing numbered `failing`."""

    def __init__(self, failing: int) -> None:
        self.failing = failing
        self.fired: list[int] = []

    async def await_event_subscriber(self, timeout_s: float) -> None:
        pass

    async def fire(self, crossing: Crossing) -> None:
        if crossing.count == self.failing:
            raise RuntimeError("trigger broke")
        self.fired.append(crossing.count)


def test_a_held_crossing_whose_event_fails_is_logged_and_the_others_fire() -> None:
    protocol = OpcUaProtocol.__new__(OpcUaProtocol)
    server = Server(failing=2)
    protocol.server = server  # type: ignore[assignment]
    protocol._grace_s = 1.0
    protocol._held = [_crossing(n) for n in (1, 2, 3)]
    protocol._holding = asyncio.Event()

    async def scenario() -> bool:
        protocol._holding.set()
        task = asyncio.create_task(protocol._release_held())
        for _ in range(200):
            if protocol._held is None:
                break
            await asyncio.sleep(0.01)
        running = not task.done()
        task.cancel()
        await asyncio.wait([task])
        return running

    with structlog.testing.capture_logs() as logs:
        assert asyncio.run(scenario())  # still running (until the stop): the failure did not end it
    assert server.fired == [1, 3] and protocol._held is None
    failed = [e for e in logs if e["event"] == "bridge_held_event_failed"]
    assert [(e["camera"], e["line"], e["error"]) for e in failed] == [("cam", "L1", "RuntimeError: trigger broke")]
