"""The soak's PLC (`tools.soak.plc`, `tools.soak.bridge`, `tools.soak.plc_checks`): the checks on crafted
inputs (a crossing missed, delivered twice, with the wrong track, an event for no crossing, final counts
off on one protocol), and the whole PLC side end to end on a real redis-server and a real
`beltsight bridge` subprocess, through a bridge SIGKILL and restart."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.fixtures_redis import RedisServer
from tools.kit.daemon_config import write_config
from tools.soak.bridge import PlcSide
from tools.soak.plc_checks import (
    SERVE_GRACE_S,
    check_counts,
    check_opcua_events,
    expected_counts,
    stream_crossings,
    unsubscribed_windows,
)
from tools.soak.procs import SOAK_LINE


@pytest.fixture
def server(redis_server: Callable[..., RedisServer]) -> RedisServer:
    return redis_server()


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    c = server.client()
    try:
        yield c
    finally:
        c.close()


def crossed(track: int, count: int, direction: str = "in", camera: str = "cam0") -> dict[str, str]:
    return {
        "v": "1",
        "camera": camera,
        "track": str(track),
        "label": "box",
        "cls": "0",
        "score": "0.9",
        "event": "crossed",
        "at_ms": str(int(time.time() * 1000)),
        "line": "mid",
        "direction": direction,
        "count": str(count),
        "speed_px_s": "40.0",
    }


def seen(track: int, count: int, direction: str = "in", camera: str = "cam0", t: float = 0.0) -> dict[str, Any]:
    return {"camera": camera, "line": "mid", "track": track, "direction": direction, "count": count, "t": t}


def test_every_crossing_once_passes_and_each_fault_is_counted(client: redis.Redis) -> None:
    for track, count, direction in ((1, 1, "in"), (2, 2, "in"), (3, 1, "out"), (4, 3, "in")):
        client.xadd("beltsight:objects:cam0", crossed(track, count, direction))
    client.xadd("beltsight:objects:cam0", {"v": "1", "camera": "cam0", "track": "5", "event": "new"})
    crossings = stream_crossings(client, ["cam0"])
    assert len(crossings) == 4
    clean = [seen(1, 1), seen(2, 2), seen(3, 1, "out"), seen(4, 3)]
    ok = check_opcua_events(crossings, clean, [])
    assert ok["delivered_once"] == 4
    assert ok["missing"] == ok["duplicates"] == ok["extra"] == ok["track_mismatch"] == 0

    bad = [seen(1, 1), seen(1, 1), seen(3, 1, "out"), seen(9, 3), seen(7, 4)]
    result = check_opcua_events(crossings, bad, [])
    assert result["missing"] == 1 and result["missing_first"] == [["cam0", "mid", "in", 2]]
    assert result["duplicates"] == 1
    assert result["track_mismatch"] == 1  # count 3 came with track 9
    assert result["extra"] == 1  # count 4 was never in the stream
    assert result["delivered_once"] == 2


def test_missing_crossings_are_attributed_to_the_windows_without_a_session(client: redis.Redis) -> None:
    client.xadd("beltsight:objects:cam0", crossed(1, 1))
    crossings = stream_crossings(client, ["cam0"])
    written = next(iter(crossings.values()))["ms"] / 1000
    sessions = [{"t": written - 10, "up": True}, {"t": written + 2, "up": True}]
    windows = unsubscribed_windows(sessions, [(written + 1, written + 1.5)])
    # from SERVE_GRACE_S before the kill (entries not yet served) to the first session after the restart
    assert windows == [(written + 1 - SERVE_GRACE_S, written + 2)]
    assert check_opcua_events(crossings, [], windows)["missing_unsubscribed"] == 1
    assert check_opcua_events(crossings, [], [])["missing_subscribed"] == 1


def test_events_for_entries_trimmed_off_the_head_are_not_extra(client: redis.Redis) -> None:
    for count in (5, 6):
        client.xadd("beltsight:objects:cam0", crossed(count, count))
    crossings = stream_crossings(client, ["cam0"])
    result = check_opcua_events(crossings, [seen(4, 4), seen(5, 5), seen(6, 6)], [])
    assert result["extra"] == 0 and result["missing"] == 0


def test_counts_must_agree_on_both_protocols_and_never_go_back(client: redis.Redis) -> None:
    client.xadd("beltsight:objects:cam0", crossed(1, 7))
    client.xadd("beltsight:objects:cam0", crossed(2, 2, "out"))
    expected = expected_counts(stream_crossings(client, ["cam0"]), [("cam0", "mid"), ("cam1", "mid")])
    assert expected == {"cam0/mid/CountIn": 7, "cam0/mid/CountOut": 2, "cam1/mid/CountIn": 0, "cam1/mid/CountOut": 0}
    good = {"opcua": dict(expected), "modbus": dict(expected)}
    result = check_counts(expected, good)
    assert result["opcua_agree"] and result["modbus_agree"]
    off = check_counts(expected, {"opcua": dict(expected), "modbus": {**expected, "cam1/mid/CountOut": 1}})
    assert off["opcua_agree"] and not off["modbus_agree"]
    assert not check_counts(expected, {"opcua": {}, "modbus": dict(expected)})["opcua_agree"]


def test_the_plc_side_sees_every_crossing_through_a_bridge_kill(server: RedisServer, tmp_path: Path) -> None:
    """A real bridge subprocess and the PLC process: crossings before, during and after a SIGKILL of the
    bridge all reach Modbus and the OPC UA counts; the events written while the bridge was down are
    either delivered or attributed to the window without a session, never delivered twice."""
    (tmp_path / "logs").mkdir()
    config = tmp_path / "beltsight.toml"
    blocks = [("cam0", "mid"), ("cam1", "mid")]
    plc = PlcSide(tmp_path, config, blocks, poll_ms=50)
    cameras = [{"id": cam, "url": "rtsp://127.0.0.1:1/x", "mm_per_px": 0.5, "lines": [SOAK_LINE]} for cam, _ in blocks]
    write_config(config, redis_url=server.url, cameras=cameras, extra=plc.config_toml())
    client = server.client()
    try:
        plc.start()
        deadline = time.monotonic() + 60
        while (
            not (plc.plc_dir / "opcua-sessions.jsonl").exists()
            or '"up"' not in (plc.plc_dir / "opcua-sessions.jsonl").read_text()
        ):
            assert time.monotonic() < deadline, "the PLC never got an OPC UA session"
            time.sleep(0.1)
        for n in range(1, 4):
            client.xadd("beltsight:objects:cam0", crossed(n, n))
        client.xadd("beltsight:objects:cam1", crossed(1, 1, "out", camera="cam1"))
        time.sleep(1.0)
        plc.kill_bridge()
        for n in range(4, 6):
            client.xadd("beltsight:objects:cam0", crossed(n, n))
        plc.restart_bridge()
        for n in range(6, 8):
            client.xadd("beltsight:objects:cam0", crossed(n, n))
        result = plc.finish(stream_crossings(client, ["cam0", "cam1"]))
    finally:
        client.close()
        plc.cleanup()
    counts, events = result["counts"], result["opcua_events"]
    assert counts["expected"]["cam0/mid/CountIn"] == 7 and counts["expected"]["cam1/mid/CountOut"] == 1
    assert counts["opcua_agree"] and counts["modbus_agree"], counts
    assert counts["modbus_polls"] > 0 and counts["opcua_sessions"] >= 2
    assert counts["opcua_count_backwards"] == counts["modbus_backwards"] == 0
    assert events["crossings"] == 8 and events["duplicates"] == events["extra"] == events["track_mismatch"] == 0
    assert events["missing_subscribed"] == 0, events  # only the kill's window may miss events
    assert result["bridge_kills"] == 1 and result["bridge_exit_code"] == 0
