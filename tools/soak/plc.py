"""The soak's PLC: an OPC UA subscriber and a Modbus poller on the bridge, in a process of their own.

    python -m tools.soak.plc --opcua 127.0.0.1:4840 --modbus 127.0.0.1:5020 --blocks cam0/mid,cam1/mid --out DIR

- OPC UA (asyncua, security none, anonymous): one subscription at a 50 ms publishing interval to
  the bridge's `CrossingEventType` events (source `Objects/BeltSight`, queue 10,000) and to every
  line's `CountIn`/`CountOut`. Every event is appended to `DIR/opcua-events.jsonl` as it arrives
  (camera, line, track, direction, the count from the event's message `cam/line dir #N`,
  CrossedMs, when it arrived, which session got it). The session is watched by reading the
  heartbeat once a second; a lost session (a killed bridge) is reconnected every 0.5 s and
  resubscribed, each (re)connect appended to `DIR/opcua-sessions.jsonl`. After each (re)subscription
  it reads the event history of `Objects/BeltSight` (HistoryRead, the last `--history-s`, the
  bridge's `[bridge] event_history_s`) and appends each event it has not had yet, marked
  `"history": true`: the crossings served while it had no subscription (a killed bridge, the
  resubscription) reach it too. An event is one crossing, keyed by (camera, line, direction, count):
  one read from the history is skipped when it came already, and one that comes live after the
  history gave it is skipped too; two live events for one crossing are both written (a bridge bug).
- Modbus (pymodbus): every `--poll-ms` (100) one read of each (camera, line) block's CountIn and
  CountOut (holding registers 0-3 of block n at `16 n`, uint32 high word first); reconnects likewise.
  It counts polls, failed polls, and counts that went backwards (never allowed).

Both write their latest counts, with those tallies, to `DIR/plc-state.json` (rewritten atomically
every second and at SIGTERM, which ends it). The soak's end checks (`tools.soak.plc_checks`) read
these files; nothing here judges.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from asyncua.client.client import Client
from pymodbus.client import AsyncModbusTcpClient

from tools.kit.plc_clients import beltsight_ns, block_counts, event_type, node, opcua_url, read_block

MESSAGE = re.compile(r"^(?P<camera>\S+)/(?P<line>\S+) (?P<direction>in|out) #(?P<count>\d+)$")
BLOCK_SIZE = 16


def _text(value: Any) -> str:
    return str(getattr(value, "Text", value) or "")


class Plc:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out: Path = args.out
        self.blocks = [(b.split("/", 1)[0], b.split("/", 1)[1]) for b in args.blocks.split(",")]
        self.events = (self.out / "opcua-events.jsonl").open("a", buffering=1)
        self.sessions = (self.out / "opcua-sessions.jsonl").open("a", buffering=1)
        self.session = 0
        self.seen: set[tuple[str, str, str, int]] = set()
        self.from_history: set[tuple[str, str, str, int]] = set()
        self.opcua_counts: dict[str, int] = {}
        self.modbus_counts: dict[str, int] = {}
        self.tallies = {
            "opcua_sessions": 0,
            "opcua_events": 0,
            "opcua_unparsed": 0,
            "opcua_history_events": 0,
            "opcua_history_reads": 0,
            "modbus_polls": 0,
            "modbus_failed": 0,
            "modbus_backwards": 0,
            "opcua_count_backwards": 0,
        }
        self.backwards: list[dict[str, Any]] = []  # the first 20 counts seen going back, on either protocol
        self.stop = asyncio.Event()

    # -- OPC UA ---------------------------------------------------------------------------------
    def event_notification(self, event: Any) -> None:
        self.record(event, history=False)

    def record(self, event: Any, *, history: bool) -> None:
        """Append one event to `opcua-events.jsonl` unless the history and the subscription both gave it."""
        message = _text(getattr(event, "Message", ""))
        match = MESSAGE.match(message)
        record: dict[str, Any] = {
            "t": round(time.time(), 3),
            "session": self.session,
            "camera": str(getattr(event, "Camera", "")),
            "line": str(getattr(event, "Line", "")),
            "track": int(getattr(event, "Track", 0) or 0),
            "direction": str(getattr(event, "Direction", "")),
            "count": int(match["count"]) if match else -1,
            "crossed_ms": int(getattr(event, "CrossedMs", 0) or 0),
        }
        key = (record["camera"], record["line"], record["direction"], record["count"])
        if match is not None and (key in self.from_history or (history and key in self.seen)):
            return  # one crossing, given by both the history and the subscription
        if history:
            record["history"] = True
            self.from_history.add(key)
            self.tallies["opcua_history_events"] += 1
        self.seen.add(key)
        self.tallies["opcua_events"] += 1
        if match is None:
            self.tallies["opcua_unparsed"] += 1
            record["message"] = message
        self.events.write(json.dumps(record) + "\n")

    async def read_history(self, source: Any, etype: Any) -> None:
        """The events of the last `--history-s` that this PLC has not had yet (HistoryRead)."""
        now = datetime.now(UTC)
        start = now - timedelta(seconds=self.args.history_s)
        for event in await source.read_event_history(start, now + timedelta(seconds=60), 0, [etype]):
            self.record(event, history=True)
        self.tallies["opcua_history_reads"] += 1

    def datachange_notification(self, node: Any, val: Any, _data: Any) -> None:
        key = str(node.nodeid.Identifier).removeprefix("BeltSight/")  # cam0/mid/CountIn
        value = int(val)
        if value < self.opcua_counts.get(key, 0):
            self.tallies["opcua_count_backwards"] += 1
            self.went_back("opcua", key, self.opcua_counts[key], value)
        self.opcua_counts[key] = value

    def status_change_notification(self, status: Any) -> None:  # the session's keep-alive failed
        self.sessions.write(json.dumps({"t": round(time.time(), 3), "session": self.session, "status": str(status)}))
        self.sessions.write("\n")

    async def opcua(self) -> None:
        url = opcua_url(self.args.opcua)
        while not self.stop.is_set():
            client = Client(url, timeout=5)
            try:
                await client.connect()
                self.session += 1
                self.tallies["opcua_sessions"] += 1
                self.sessions.write(
                    json.dumps({"t": round(time.time(), 3), "session": self.session, "up": True}) + "\n"
                )
                ns = await beltsight_ns(client)
                sub = await client.create_subscription(50, self)
                etype, source = await event_type(client, ns, "CrossingEventType"), node(client, ns, "BeltSight")
                await sub.subscribe_events(source, etype, queuesize=10_000)
                if self.args.history_s > 0:  # subscribed first: nothing falls between the two
                    await self.read_history(source, etype)
                nodes = [
                    node(client, ns, f"BeltSight/{cam}/{line}/{name}")
                    for cam, line in self.blocks
                    for name in ("CountIn", "CountOut")
                ]
                await sub.subscribe_data_change(nodes, queuesize=100)
                heartbeat = node(client, ns, "BeltSight/Heartbeat")
                while not self.stop.is_set():
                    await asyncio.wait_for(heartbeat.read_value(), timeout=5)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.stop.wait(), timeout=1.0)
            except Exception as exc:  # a PLC reconnects through anything
                self.sessions.write(json.dumps({"t": round(time.time(), 3), "down": type(exc).__name__}) + "\n")
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.disconnect(), timeout=2)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), timeout=0.5)

    # -- Modbus ---------------------------------------------------------------------------------
    async def modbus(self) -> None:
        host, _, port = self.args.modbus.rpartition(":")
        client = AsyncModbusTcpClient(host, port=int(port), timeout=2, retries=0)
        period = self.args.poll_ms / 1000
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                if not client.connected:
                    await client.connect()
                for n, (cam, line) in enumerate(self.blocks):
                    counts = block_counts(await read_block(client, BLOCK_SIZE * n))
                    for name, value in zip(("CountIn", "CountOut"), counts, strict=True):
                        key = f"{cam}/{line}/{name}"
                        if value < self.modbus_counts.get(key, 0):
                            self.tallies["modbus_backwards"] += 1
                            self.went_back("modbus", key, self.modbus_counts[key], value)
                        self.modbus_counts[key] = value
                self.tallies["modbus_polls"] += 1
            except Exception:  # a PLC keeps polling through anything
                self.tallies["modbus_failed"] += 1
                client.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), timeout=max(0.0, period - (time.monotonic() - started)))
        client.close()

    def went_back(self, protocol: str, key: str, before: int, after: int) -> None:
        if len(self.backwards) < 20:
            self.backwards.append(
                {"t": round(time.time(), 3), "protocol": protocol, "key": key, "from": before, "to": after}
            )

    # -- state ----------------------------------------------------------------------------------
    def write_state(self) -> None:
        state = {
            "t": round(time.time(), 3),
            "opcua": self.opcua_counts,
            "modbus": self.modbus_counts,
            "backwards_first": self.backwards,
            **self.tallies,
        }
        tmp = self.out / "plc-state.json.tmp"
        tmp.write_text(json.dumps(state, sort_keys=True))
        os.replace(tmp, self.out / "plc-state.json")

    async def writer(self) -> None:
        while not self.stop.is_set():
            self.write_state()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), timeout=1.0)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop.set)
        tasks = [asyncio.create_task(c) for c in (self.opcua(), self.modbus(), self.writer())]
        await self.stop.wait()
        _, pending = await asyncio.wait(tasks, timeout=10)
        for task in pending:
            task.cancel()
        self.write_state()
        self.events.close()
        self.sessions.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--opcua", required=True, help="host:port of the bridge's OPC UA server")
    p.add_argument("--modbus", required=True, help="host:port of the bridge's Modbus server")
    p.add_argument("--blocks", required=True, help="camera/line,... in the bridge's block order")
    p.add_argument("--poll-ms", type=float, default=100.0)
    p.add_argument("--history-s", type=float, default=600.0, help="event history read after each (re)connect; 0: none")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(Plc(args).run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
