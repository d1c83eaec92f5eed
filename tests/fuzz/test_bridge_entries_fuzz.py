"""The bridge's objects- and events-stream parser under random field maps: each entry is either
served (a crossing or a status change whose values are the entry's own), a counted bad entry, or
a well-formed one that serves nothing; no exception ever escapes the reader, whose acknowledging
MULTI runs against a real redis-server."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.bridge.reader import StreamReader
from daemon.bridge.state import BridgeState, Change, Crossing, MalformedEntryError, crossing_from_entry
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from tests.support.bridge_harness import LAYOUT, crossing
from tools.kit.redis_server import RedisServer

REDIS = RedisConfig()
FIELD_NAMES = [*crossing("cam1", "L1", 1), "first_ms", "last_ms", "frames", "eta", "speed_mm_s", "snapshot", "kind"]
TEXT_VALUES = st.sampled_from(
    ["", "0", "-1", "1", "2", "in", "out", "crossed", "new", "end", "cam1", "cam2", "L1", "L2", "g1", "nan", "inf",
     "1e400", "1_000", " 7", "0x10", '{"g1": 5}', '{"g1": true}', "[]", "null", "9" * 5000, "camera_up", "camera_down"]
)  # fmt: skip
values = TEXT_VALUES | st.text(max_size=20) | st.integers().map(str)


@st.composite
def object_fields(draw: st.DrawFn) -> dict[str, str]:
    """A valid crossing, then some fields replaced, deleted or added."""
    camera = draw(st.sampled_from(["cam1", "cam2"]))
    fields = crossing(camera, draw(st.sampled_from(["L1", "L2", "L9"])), draw(st.integers(0, 50)))
    fields["event"] = draw(st.sampled_from(["crossed", "crossed", "new", "end"]))
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from(FIELD_NAMES) | st.text(max_size=8))
        if draw(st.booleans()) and name in fields:
            del fields[name]
        else:
            fields[name] = draw(values)
    return fields


entry_ids = st.integers(0, 2**64).map(lambda ms: f"{ms}-0") | st.sampled_from(["0-1", "1-x", "-", "", "5", "1-2-3"])


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    srv = RedisServer(shutil.which("redis-server") or "redis-server", None).start()
    yield srv
    srv.stop()


class Served:
    """A `Sink` that records what the reader serves."""

    def __init__(self) -> None:
        self.changes: list[Change] = []

    async def serve(self, changes: list[Change]) -> None:
        self.changes.extend(changes)

    async def serve_all(self, state: BridgeState) -> None:
        return None

    async def recall(self, crossings: list[Crossing]) -> None:
        return None


@settings(max_examples=200)
@given(st.text(max_size=10), st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), values, max_size=16))
def test_the_pure_parser_raises_only_malformed_entry_error(entry_id: str, fields: dict[str, str]) -> None:
    try:
        result = crossing_from_entry("cam1", entry_id, fields)
    except MalformedEntryError as exc:
        assert exc.reason
    else:
        assert result is None or (result.camera == "cam1" and result.count >= 0 and result.direction in ("in", "out"))


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["objects", "events"]), entry_ids, object_fields()), max_size=12))
def test_the_reader_serves_or_counts_every_entry(server: RedisServer, batch: list[tuple[str, str, Any]]) -> None:
    asyncio.run(_through_the_reader(server, batch))


async def _through_the_reader(server: RedisServer, batch: list[tuple[str, str, dict[str, str]]]) -> None:
    state, sink = BridgeState(LAYOUT), Served()
    reader = StreamReader(BridgeConfig(), REDIS, state, sink, lambda: aioredis.Redis(port=server.port))
    entries = []
    for kind, entry_id, fields in batch:
        camera = fields.get("camera", "cam1") if fields.get("camera") in ("cam1", "cam2") else "cam1"
        stream = REDIS.objects_stream_for(camera) if kind == "objects" else REDIS.events_stream
        entries.append((stream, entry_id, fields))
    client = aioredis.Redis(port=server.port)
    try:
        for stream, entry_id, fields in entries:
            await reader.process(client, [(stream, [(entry_id, fields)])])
    finally:
        await client.aclose()
    assert reader.stats.entries == len(entries)
    assert reader.stats.malformed == malformed_count(entries), "every bad entry counted, and only those"
    for change in sink.changes:
        if isinstance(change, Crossing):
            served = (change.count, change.direction, change.label)
            sources = [(c.count, c.direction, c.label) for c in _crossings_of(entries, change)]
            assert served in sources, (served, sources)
    BridgeState(LAYOUT).load_snapshot(state.to_snapshot())  # what was acknowledged reloads


def _crossings_of(entries: list[tuple[str, str, dict[str, str]]], change: Crossing) -> list[Crossing]:
    """The crossings that the entries `change` may have come from parse to: entry ids repeat (across cameras'
    streams, and within one, where a malformed entry and a valid one share an id), so every entry of the
    crossing's stream with its id and line that parses, each with its own values."""
    out = []
    for stream, entry_id, fields in entries:
        if entry_id != change.entry_id or stream != REDIS.objects_stream_for(change.camera):
            continue
        try:
            parsed = crossing_from_entry(change.camera, entry_id, fields)
        except MalformedEntryError:
            continue
        if parsed is not None and parsed.line == change.line:
            out.append(parsed)
    return out


def malformed_count(entries: list[tuple[str, str, dict[str, str]]]) -> int:
    """The entries a fresh state refuses, in the same order (anything but MalformedEntryError fails)."""
    oracle, refused = BridgeState(LAYOUT), 0
    for stream, entry_id, fields in entries:
        try:
            if stream == REDIS.events_stream:
                oracle.apply_event(entry_id, fields)
            else:
                oracle.apply_object(stream.rsplit(":", 1)[1], entry_id, fields)
        except MalformedEntryError:
            refused += 1
    return refused
