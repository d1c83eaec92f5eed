"""`beltsight tail`: the reference consumer of the detection streams (schema v1), and with
`--objects` of the objects streams (tracked parts: `new`, `crossed`, `end`).

With `--group`, it reads as a member of a consumer group (created if missing, MKSTREAM):
first its own pending entries (delivered before but never acknowledged, e.g. it crashed
while printing), then new ones; each entry is acknowledged (XACK) after it was printed.
Without a group it is a plain XREAD from now on (or from the start of the streams).

A minimal consumer for a PLC gateway, to copy (the same loop in 20 lines):

    import json, redis

    def example_consumer(url: str, camera: str, group: str = "plc", consumer: str = "plc-1") -> None:
        r = redis.Redis.from_url(url, decode_responses=True)
        stream = f"beltsight:detections:{camera}"
        try:
            r.xgroup_create(stream, group, id="$", mkstream=True)
        except redis.ResponseError as exc:          # BUSYGROUP: it exists already
            if "BUSYGROUP" not in str(exc):
                raise
        last_id = "0"                               # first our own unacknowledged entries
        while True:
            reply = r.xreadgroup(group, consumer, {stream: last_id}, count=100, block=5000)
            entries = reply[0][1] if reply else []
            if last_id == "0" and not entries:
                last_id = ">"                       # pending done: now only new entries
            for entry_id, f in entries:
                for det in json.loads(f["dets"]):   # f["n"] == "0": camera alive, belt empty
                    print(f["camera"], f["seq"], det["label"], det["score"], det["box"])
                r.xack(stream, group, entry_id)     # only after the entry was handled
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any, TextIO

from redis.exceptions import ResponseError

from daemon.config.redis import RedisConfig
from daemon.core.objects import parse_fields
from daemon.publish.redis_conn import RedisClient, as_text, make_client, slot_groups
from daemon.publish.schema import decode_entry

BLOCK_MS = 1000
READ_COUNT = 100


def format_entry(entry_id: str, entry: dict[str, Any]) -> str:
    """One human-readable line: time, camera, seq, n, labels with scores and boxes, latency."""
    when = datetime.fromtimestamp(entry["captured_ms"] / 1000).strftime("%H:%M:%S.%f")[:-3]
    latency_ms = entry["published_ms"] - entry["captured_ms"]
    dets = "  ".join(f"{d['label']} {d['score']:.2f} [{', '.join(f'{v:g}' for v in d['box'])}]" for d in entry["dets"])
    return f"{when} {entry['camera']} seq={entry['seq']} n={entry['n']} lat={latency_ms}ms ({entry_id})" + (
        f"  {dets}" if dets else ""
    )


def format_object(entry_id: str, fields: dict[str, str]) -> str:
    """One objects-stream entry: time, camera, event, track and label, and for a crossing its line,
    direction, count, speed and gate arrival times."""
    e = parse_fields(fields)
    when = datetime.fromtimestamp(e.at_ms / 1000).strftime("%H:%M:%S.%f")[:-3]
    text = f"{when} {e.camera} {e.event} track={e.track} {e.label} {e.score:.2f}"
    if e.event == "crossed":
        speed = f"{e.speed_mm_s:.0f}mm/s" if e.speed_mm_s is not None else f"{e.speed_px_s:.0f}px/s"
        text += f" line={e.line} {e.direction} count={e.count} {speed}"
        for gate, ms in e.eta or ():
            text += f" {gate}@{datetime.fromtimestamp(ms / 1000).strftime('%H:%M:%S.%f')[:-3]}"
    elif e.event == "end":
        text += f" frames={e.frames} for {((e.last_ms or 0) - (e.first_ms or 0)) / 1000:.1f}s"
    return f"{text} ({entry_id})"


def _format(objects: bool) -> Callable[[str, dict[str, str]], str]:
    if objects:
        return lambda entry_id, fields: format_object(entry_id, as_text(fields))
    return lambda entry_id, fields: format_entry(entry_id, decode_entry(fields))


async def tail(
    redis_cfg: RedisConfig,
    cameras: list[str],
    *,
    group: str | None,
    consumer: str,
    count: int | None,
    from_start: bool,
    objects: bool = False,
    out: TextIO = sys.stdout,
) -> int:
    """Print entries of the cameras' streams (`objects`: their objects streams) until `count`
    entries were printed (or cancelled).

    Works the same against one Redis and a Redis Cluster (`[redis] cluster`): streams are read
    in groups that share a slot, side by side. Returns the exit code: 0, or 2 when there is no
    camera to read.
    """
    if not cameras:
        print("no cameras to read: configure [[cameras]] or pass --camera", file=sys.stderr)
        return 2
    streams = [redis_cfg.objects_stream_for(c) if objects else redis_cfg.stream_for(c) for c in cameras]
    show = _format(objects)
    client = make_client(redis_cfg)
    try:
        if group is None:
            await _read_plain(client, streams, count, from_start, out, show)
        else:
            await _read_group(
                client, streams, group=group, consumer=consumer, count=count, from_start=from_start, out=out, show=show
            )
    finally:
        await client.aclose()
    return 0


async def _read_plain(  # noqa: PLR0917 - internal, mirrors tail()'s arguments
    client: RedisClient,
    streams: list[str],
    count: int | None,
    from_start: bool,
    out: TextIO,
    show: Callable[[str, dict[str, str]], str],
) -> None:
    # Resolve "$" once: re-sending "$" after an empty read would skip entries added in between.
    positions = {s: ("0-0" if from_start else await _last_id(client, s)) for s in streams}
    groups = slot_groups(client, streams)
    printed = 0
    while count is None or printed < count:
        replies = await asyncio.gather(
            *(client.xread({s: positions[s] for s in g}, count=READ_COUNT, block=BLOCK_MS) for g in groups)
        )
        for stream, entries in [pair for reply in replies for pair in _by_stream(reply)]:
            for entry_id, fields in entries:
                if count is not None and printed >= count:
                    break
                positions[stream] = entry_id
                out.write(show(entry_id, fields) + "\n")
                printed += 1
        out.flush()


async def _read_group(
    client: RedisClient,
    streams: list[str],
    *,
    group: str,
    consumer: str,
    count: int | None,
    from_start: bool,
    out: TextIO,
    show: Callable[[str, dict[str, str]], str],
) -> None:
    for stream in streams:
        try:
            await client.xgroup_create(stream, group, id="0" if from_start else "$", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
    positions = {s: "0" for s in streams}  # own pending entries first, then ">" (new ones)
    groups = slot_groups(client, streams)
    printed = 0
    while count is None or printed < count:
        want = READ_COUNT if count is None else min(READ_COUNT, count - printed)

        async def read(members: list[str], want: int = want) -> Any:
            block = None if all(positions[s] == "0" for s in members) else BLOCK_MS
            return await client.xreadgroup(group, consumer, {s: positions[s] for s in members}, count=want, block=block)

        replies = await asyncio.gather(*(read(g) for g in groups))
        got = dict(pair for reply in replies for pair in _by_stream(reply))
        for stream in streams:
            entries = got.get(stream, [])
            if positions[stream] != ">":
                if not entries:
                    positions[stream] = ">"
                    continue
                positions[stream] = entries[-1][0]  # continue through the pending list
            for entry_id, fields in entries:
                if count is not None and printed >= count:
                    break
                out.write(show(entry_id, fields) + "\n")
                out.flush()
                await client.xack(stream, group, entry_id)
                printed += 1


async def _last_id(client: RedisClient, stream: str) -> str:
    try:
        info = await client.xinfo_stream(stream)
    except ResponseError as exc:
        if "no such key" in str(exc):
            return "0-0"
        raise
    return str(info["last-generated-id"])


def _by_stream(reply: Any) -> list[tuple[str, list[tuple[str, dict[str, str]]]]]:
    """XREAD/XREADGROUP replies as (stream, entries), for both RESP2 (list) and RESP3 (dict)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return [(k, v[0] if v and isinstance(v[0], list) else v) for k, v in reply.items()]
    return [(stream, entries) for stream, entries in reply]
