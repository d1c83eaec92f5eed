"""RedisSink and `beltsight tail` against real redis-server processes."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import time
from pathlib import Path
from typing import Any

import pytest
import structlog
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from daemon.config.redis import RedisConfig
from daemon.core.frames import FrameResult, StatusEvent
from daemon.core.metrics import Metrics
from daemon.publish.redis_conn import is_auth_error
from daemon.publish.schema import ENTRY_FIELDS, decode_entry, encode_entry
from daemon.publish.tail import tail
from tests.support.fault_fixtures import FaultProxyFactory
from tests.support.metrics import sample
from tests.support.sink_helpers import BASE_MS, BOLT, config, make_sink, readme_acl, result, running, stored
from tests.support.waits import async_wait_until

SINK_STATES = (
    "redis_up",
    "redis_down",
    "redis_auth_failed",
    "redis_tls_failed",
    "redis_replicas_short",
    "redis_write_failed",
)
"""What the sink logs about Redis: each once per outage and kind (`daemon.publish.sink.report`)."""


class StoppedClock:
    """Monotonic time that stands still (wall-clock time runs): a rate limit sees one instant."""

    def monotonic(self) -> float:
        return 0.0

    def time(self) -> float:
        return time.time()


def test_entries_reach_their_streams_in_order_with_schema_v1(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url, publish_batch=16)
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            for seq in range(60):
                sink.accept(result(seq, "cam1", n_dets=seq % 3))  # a third of them empty
                sink.accept(result(seq, "cam2", captured_ms=BASE_MS))  # all in the same ms
            await async_wait_until(lambda: sink.buffered == 0 and sample(metrics, "beltsight_redis_up") == 1)

    asyncio.run(scenario())
    r = server.client()
    for camera in ("cam1", "cam2"):
        raw = r.xrange(cfg.stream_for(camera))
        assert [tuple(fields) for _, fields in raw] == [ENTRY_FIELDS] * 60
        entries = [decode_entry(f) for _, f in raw]
        assert [e["seq"] for e in entries] == list(range(60))
        assert {e["camera"] for e in entries} == {camera}
        assert sample(metrics, "beltsight_entries_published_total", camera=camera) == 60
        assert sample(metrics, "beltsight_latency_seconds_count", camera=camera) == 60
    cam1 = stored(r, cfg.stream_for("cam1"))
    assert [e["n"] for e in cam1] == [seq % 3 for seq in range(60)]
    assert cam1[0]["dets"] == [] and cam1[1]["dets"] == [BOLT.as_json()]
    assert cam1[5]["model"] == "640:conveyor-640@1.0.0" and (cam1[5]["w"], cam1[5]["h"]) == (1280, 720)
    assert all(e["published_ms"] >= BASE_MS for e in cam1)
    ids = [i for i, _ in r.xrange(cfg.stream_for("cam1"))]
    assert ids[:2] == [f"{BASE_MS}-0", f"{BASE_MS + 10}-0"]  # <captured_ms>-<n>
    ids2 = [i for i, _ in r.xrange(cfg.stream_for("cam2"))]
    assert ids2[:3] == [f"{BASE_MS}-0", f"{BASE_MS}-1", f"{BASE_MS}-2"]
    assert sample(metrics, "beltsight_sink_buffered_entries") == 0


def test_maxlen_trims_approximately(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url, maxlen=100, publish_batch=200)

    async def scenario() -> None:
        async with running(make_sink(cfg)) as sink:
            for seq in range(1500):
                sink.accept(result(seq, n_dets=0))
            await async_wait_until(lambda: sink.buffered == 0)

    asyncio.run(scenario())
    r = server.client()
    length = r.xlen(cfg.stream_for("cam1"))
    assert 100 <= length < 400
    assert r.xrevrange(cfg.stream_for("cam1"), count=1)[0][1]["seq"] == "1499"


def test_redis_killed_and_restarted_with_aof_loses_and_duplicates_nothing(redis_server: Any) -> None:
    server = redis_server(appendonly=True)
    cfg = config(server.url, publish_batch=8)
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            for seq in range(40):
                sink.accept(result(seq))
            await async_wait_until(lambda: sink.buffered == 0)
            assert sink.connected
            server.kill()
            for seq in range(40, 100):
                sink.accept(result(seq))
                await asyncio.sleep(0.002)
            await async_wait_until(lambda: not sink.connected)
            assert sample(metrics, "beltsight_redis_up") == 0
            assert sink.buffered > 0
            await asyncio.to_thread(server.restart)
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario())
    entries = stored(server.client(), cfg.stream_for("cam1"))
    assert [e["seq"] for e in entries] == list(range(100))
    assert sample(metrics, "beltsight_entries_published_total", camera="cam1") == 100
    assert sample(metrics, "beltsight_redis_up") == 1
    # once per outage, never per retry (a timeout on a loaded machine may make an outage of its own)
    states = [e["event"] for e in logs if e["event"] in SINK_STATES]
    assert "redis_down" in states and states[-1] == "redis_up", states
    assert all(not (a == b == "redis_down") for a, b in itertools.pairwise(states)), states


def test_retry_after_lost_reply_writes_each_entry_once(redis_server: Any, fault_proxy: FaultProxyFactory) -> None:
    """Redis executes the pipeline; the connection is reset partway through its reply (a real proxy cuts it)."""
    server = redis_server()
    proxy = fault_proxy("127.0.0.1", server.port)
    cfg = config(proxy.url_for("redis", "/0"), publish_batch=200)
    metrics = Metrics()
    # The first server -> client bytes are the handshake's and the stream lookup's replies (about 30
    # to 350 bytes, by Redis version); the 200 XADD replies (about 24 bytes each) follow: cut in those.
    proxy.reset_mid_reply(after_bytes=1000)

    async def scenario() -> None:
        sink = make_sink(cfg, metrics)
        for seq in range(200):
            sink.accept(result(seq, captured_ms=BASE_MS))  # same ms: IDs BASE-0 .. BASE-199
        async with running(sink):
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)

    asyncio.run(scenario())
    stats = proxy.stats()
    assert stats.resets_injected == 1 and stats.accepted >= 2
    calls = server.client().info("commandstats")
    assert calls["cmdstat_xadd"]["calls"] >= 1, "the cut pipeline's writes reached Redis"
    assert calls["cmdstat_xrange"]["calls"] >= 1, "the retry looked up the writes whose reply was lost"
    entries = stored(server.client(), cfg.stream_for("cam1"))
    assert [e["seq"] for e in entries] == list(range(200))
    assert sample(metrics, "beltsight_entries_published_total", camera="cam1") == 200


class SwallowsCancel:
    """A client whose pipeline turns the task's cancellation into a connection error, as a
    redis-py connect or disconnect can when the cancel lands in its own timeout.

    Kept as a stand-in (not a fault proxy): what it injects is a client library's behaviour
    inside the event loop, which no network fault can provoke on demand."""

    def __init__(self) -> None:
        self.swallowed = 0
        self.attempts = 0  # pipelines started
        self.executing = asyncio.Event()  # set while a pipeline runs

    def pipeline(self, transaction: bool = False) -> Any:
        client = self

        class Pipe:
            async def __aenter__(self) -> Any:
                return self

            async def __aexit__(self, *exc: object) -> None:
                return None

            def __getattr__(self, name: str) -> Any:
                return lambda *a, **kw: None

            async def execute(self, raise_on_error: bool = True) -> list[Any]:
                client.attempts += 1
                client.executing.set()
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:
                    client.swallowed += 1
                    raise RedisConnectionError("connect interrupted") from None
                finally:
                    client.executing.clear()
                raise RedisConnectionError("Connection refused")

        return Pipe()

    async def aclose(self) -> None:
        return None


def test_a_cancellation_swallowed_below_the_sink_still_stops_it() -> None:
    """Shutdown cancels `run()`; a library that eats the CancelledError must not keep it retrying."""
    fake = SwallowsCancel()

    async def scenario() -> None:
        sink = make_sink(config("redis://127.0.0.1:1"), client_factory=lambda: fake)
        await sink.open()
        sink.accept(result(0))
        task = asyncio.create_task(sink.run())
        await async_wait_until(lambda: fake.attempts >= 3, timeout_s=30)  # failed, backed off, retried
        await fake.executing.wait()  # the cancel must land inside the pipeline
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 2.0)
        assert task.cancelled()

    asyncio.run(scenario())
    assert fake.swallowed >= 1


def test_replay_by_a_fresh_sink_creates_no_duplicates(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url, publish_batch=7)
    results = [result(seq, captured_ms=BASE_MS + seq // 3) for seq in range(20)]

    async def publish(batch: list[FrameResult]) -> None:
        async with running(make_sink(cfg)) as sink:
            for res in batch:
                sink.accept(res)
            await async_wait_until(lambda: sink.buffered == 0)

    asyncio.run(publish(results))
    asyncio.run(publish([*results, result(20, captured_ms=BASE_MS + 6), result(21)]))
    entries = stored(server.client(), cfg.stream_for("cam1"))
    assert [e["seq"] for e in entries] == list(range(22))


def test_foreign_entries_above_our_ids_are_not_mistaken_for_ours(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url)
    r = server.client()
    stream = cfg.stream_for("cam1")
    # a previous run (other seq numbering) wrote at the IDs this run will first try
    for seq in range(3):
        r.xadd(stream, encode_entry(result(100 + seq, captured_ms=BASE_MS + 50), 0), id=f"{BASE_MS + 50}-{seq}")

    async def scenario() -> None:
        async with running(make_sink(cfg)) as sink:
            for seq in range(6):
                sink.accept(result(seq, captured_ms=BASE_MS + 50 + seq // 4))  # 50,50,50,50,51,51
            await async_wait_until(lambda: sink.buffered == 0)

    asyncio.run(scenario())
    entries = stored(r, stream)
    assert [e["seq"] for e in entries] == [100, 101, 102, 0, 1, 2, 3, 4, 5]


def test_wrong_password_is_reported_as_auth_and_recovers_when_fixed(redis_server: Any, tmp_path: Path) -> None:
    server = redis_server(password="right-horse-battery")
    secret = tmp_path / "redis-password"
    secret.write_text("wrong-password\n")
    cfg = config(server.url, password_file=secret)
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            for seq in range(5):
                sink.accept(result(seq))
            await async_wait_until(lambda: any(e["event"] == "redis_auth_failed" for e in logs))
            assert sample(metrics, "beltsight_redis_up") == 0
            assert sink.buffered == 5
            secret.write_text("right-horse-battery\n")
            await async_wait_until(lambda: sink.buffered == 0)

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario())
    assert [e["seq"] for e in stored(server.client(), cfg.stream_for("cam1"))] == list(range(5))
    auth = [e for e in logs if e["event"] == "redis_auth_failed"]
    assert auth and all(e["log_level"] == "error" for e in auth)
    # once per outage and kind, never per retry (a timeout in between is a kind of its own)
    states = [e["event"] for e in logs if e["event"] in SINK_STATES]
    assert all(not (a == b == "redis_auth_failed") for a, b in itertools.pairwise(states)), states
    assert "wrong-password" not in repr(logs) and "right-horse-battery" not in repr(logs)


def test_missing_acl_permission_on_the_key_holds_that_stream_with_a_hint(redis_server: Any) -> None:
    """NOPERM on a key (the ACL user's key patterns leave out the stream) concerns that stream only:
    it is held apart (`sink_stream_held`, with the ACL hint), not taken for a lost connection."""
    server = redis_server(acl_users=["writer on >pw-writer ~other:* +@all"])
    cfg = config(server.auth_url("pw-writer", user="writer"))
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            sink.accept(result(0))
            await async_wait_until(lambda: any(e["event"] == "sink_stream_held" for e in logs))
            assert sink.buffered == 1

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario())
    held = next(e for e in logs if e["event"] == "sink_stream_held")
    assert held["code"] == "NOPERM" and held["stream"] == cfg.stream_for("cam1") and "ACL" in held["hint"]
    assert not any(e["event"] == "redis_auth_failed" for e in logs)


def test_missing_acl_permission_for_a_command_is_classified_as_auth(redis_server: Any) -> None:
    """NOPERM on a command (no XADD for the user) holds every camera: an auth problem with a hint."""
    server = redis_server(acl_users=["writer on >pw-writer ~* +@all -xadd"])
    cfg = config(server.auth_url("pw-writer", user="writer"))
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            sink.accept(result(0))
            await async_wait_until(lambda: any(e["event"] == "redis_auth_failed" for e in logs))
            assert sink.buffered == 1 and not sink.connected

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario())
    assert "XADD" in next(e["hint"] for e in logs if e["event"] == "redis_auth_failed")
    assert sample(metrics, "beltsight_redis_up") == 0
    assert sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason="shutdown") == 1


def test_is_auth_error_classification() -> None:
    assert is_auth_error(AuthenticationError("invalid username-password pair"))
    assert is_auth_error(NoPermissionError("this user has no permissions to run the 'xadd' command"))
    assert is_auth_error(ResponseError("NOAUTH Authentication required."))
    assert not is_auth_error(RedisConnectionError("Connection refused"))
    assert not is_auth_error(ResponseError("WRONGTYPE Operation against a key"))


def test_buffer_full_drops_the_oldest_and_counts_it(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url, buffer_max=10)
    metrics = Metrics()

    async def scenario() -> None:
        sink = make_sink(cfg, metrics, clock=StoppedClock())  # all 15 drops within one log interval
        for seq in range(25):
            sink.accept(result(seq))
        assert sink.buffered == 10
        assert sample(metrics, "beltsight_sink_buffered_entries") == 10
        async with running(sink):
            await async_wait_until(lambda: sink.buffered == 0)

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario())
    assert sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason="buffer_full") == 15
    assert [e["seq"] for e in stored(server.client(), cfg.stream_for("cam1"))] == list(range(15, 25))
    assert [e["event"] for e in logs].count("sink_buffer_full") == 1  # rate-limited


def test_drain_flushes_within_the_deadline(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url, publish_batch=64)
    metrics = Metrics()

    async def scenario() -> int:
        sink = make_sink(cfg, metrics)
        for seq in range(500):
            sink.accept(result(seq, n_dets=2))
        sink.accept_event(StatusEvent("shutdown", "draining"))
        try:
            return await sink.drain(5.0)
        finally:
            await sink.close()

    assert asyncio.run(scenario()) == 0
    r = server.client()
    assert r.xlen(cfg.stream_for("cam1")) == 500
    assert r.xlen(cfg.events_stream) == 1
    assert sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason="shutdown") == 0


def test_drain_gives_up_at_the_deadline_when_redis_is_down(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url)
    server.kill()
    metrics = Metrics()

    async def scenario() -> int:
        sink = make_sink(cfg, metrics)
        for seq in range(7):
            sink.accept(result(seq))
        try:
            # Redis never comes back: a drain that kept retrying past its deadline would never return
            return await asyncio.wait_for(sink.drain(0.5), timeout=60)
        finally:
            await sink.close()

    left = asyncio.run(scenario())
    assert left == 7
    assert sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason="shutdown") == 7


def test_events_go_to_the_events_stream(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url, events_maxlen=50)

    async def scenario() -> None:
        async with running(make_sink(cfg)) as sink:
            sink.accept_event(StatusEvent("camera_down", "stream ended", "cam1", at_ms=BASE_MS))
            sink.accept_event(StatusEvent("throttle_on", "GPU at 86 C"))
            await async_wait_until(lambda: server.client().xlen(cfg.events_stream) == 2)

    asyncio.run(scenario())
    events = [fields for _, fields in server.client().xrange(cfg.events_stream)]
    assert events[0] == {"kind": "camera_down", "camera": "cam1", "detail": "stream ended", "at_ms": str(BASE_MS)}
    assert events[1]["kind"] == "throttle_on" and "camera" not in events[1]
    assert int(events[1]["at_ms"]) > BASE_MS


async def publish_all(cfg: RedisConfig, results: list[FrameResult]) -> None:
    async with running(make_sink(cfg)) as sink:
        for res in results:
            sink.accept(res)
        await async_wait_until(lambda: sink.buffered == 0)


def test_tail_with_group_prints_and_acks(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url)
    asyncio.run(publish_all(cfg, [result(seq, n_dets=seq % 2) for seq in range(8)]))
    out = io.StringIO()
    code = asyncio.run(tail(cfg, ["cam1"], group="g", consumer="c1", count=5, from_start=True, out=out))
    assert code == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 5
    assert "cam1 seq=0 n=0" in lines[0] and "bolt 0.90 [1, 2, 3, 4]" in lines[1]
    r = server.client()
    assert r.xpending(cfg.stream_for("cam1"), "g")["pending"] == 0
    # the next run of the same consumer continues after the acknowledged entries
    out2 = io.StringIO()
    asyncio.run(tail(cfg, ["cam1"], group="g", consumer="c1", count=3, from_start=True, out=out2))
    assert [line.split()[2] for line in out2.getvalue().splitlines()] == ["seq=5", "seq=6", "seq=7"]
    assert r.xpending(cfg.stream_for("cam1"), "g")["pending"] == 0


def blocked_in(client: Any, command: str) -> bool:
    """Whether some client of this Redis is blocked in `command` (CLIENT LIST: flag b)."""
    return any(c["cmd"] == command and "b" in c["flags"] for c in client.client_list())


def test_tail_without_group_reads_new_entries(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url)
    asyncio.run(publish_all(cfg, [result(seq) for seq in range(3)]))

    async def scenario() -> str:
        out = io.StringIO()
        reader = asyncio.create_task(
            tail(cfg, ["cam1", "cam2"], group=None, consumer="x", count=2, from_start=False, out=out)
        )
        # once its XREAD blocks, the reader has taken the streams' last IDs: what follows is new
        await async_wait_until(lambda: blocked_in(server.client(), "xread"), timeout_s=30)
        assert out.getvalue() == ""  # old entries are not printed
        await publish_all(cfg, [result(3), result(0, "cam2")])
        await asyncio.wait_for(reader, 5)
        return out.getvalue()

    lines = asyncio.run(scenario()).splitlines()
    assert sorted(line.split()[1:3] for line in lines) == [["cam1", "seq=3"], ["cam2", "seq=0"]]


def test_redis_killed_mid_stream_with_aof_keeps_exactly_once(redis_server: Any) -> None:
    server = redis_server(appendonly=True)
    cfg = config(server.url, publish_batch=4)
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:

            async def produce() -> None:
                for seq in range(300):
                    sink.accept(result(seq, captured_ms=BASE_MS + seq // 5))
                    await asyncio.sleep(0.001)

            producer = asyncio.create_task(produce())
            await async_wait_until(lambda: sample(metrics, "beltsight_entries_published_total", camera="cam1") >= 50)
            server.kill()  # while pipelines are in flight
            await asyncio.sleep(0.1)
            await asyncio.to_thread(server.restart)
            await producer
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)

    asyncio.run(scenario())
    entries = stored(server.client(), cfg.stream_for("cam1"))
    assert [e["seq"] for e in entries] == list(range(300))


def short_waits(metrics: Metrics) -> float:
    """WAITs that counted too few replicas so far."""
    return sample(metrics, "beltsight_redis_replica_waits_total", outcome="short")


def test_min_replicas_keeps_entries_buffered_until_the_replica_has_them(redis_server: Any) -> None:
    """One Redis with a replica (as under Sentinel): WAIT after each batch; while the replica is
    away entries are in Redis but stay buffered, and are counted once it confirmed them."""
    master = redis_server()
    replica = redis_server(replica_of=master)
    cfg = config(master.url, publish_batch=8, min_replicas=1, wait_timeout_ms=200)
    metrics = Metrics()

    def replica_linked() -> bool:
        return master.client().info("replication").get("slave0", {}).get("state") == "online"

    async def scenario() -> None:
        await async_wait_until(replica_linked)
        async with running(make_sink(cfg, metrics)) as sink:
            for seq in range(10):
                sink.accept(result(seq))
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)
            await asyncio.to_thread(replica.kill)
            for seq in range(10, 30):
                sink.accept(result(seq))
                sink.accept(result(seq, "cam2"))
            await async_wait_until(lambda: master.client().xlen(cfg.stream_for("cam2")) == 20)  # all written...
            short = short_waits(metrics)
            # a WAIT that came back after all 40 were in Redis
            await async_wait_until(lambda: short_waits(metrics) > short, timeout_s=30)
            assert sink.buffered == 40 and not sink.connected  # ...none confirmed
            assert sample(metrics, "beltsight_redis_up") == 0
            await asyncio.to_thread(replica.restart)
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario())
    assert [e["seq"] for e in stored(master.client(), cfg.stream_for("cam1"))] == list(range(30))
    assert [e["seq"] for e in stored(replica.client(), cfg.stream_for("cam2"))] == list(range(10, 30))
    assert sample(metrics, "beltsight_entries_published_total", camera="cam1") == 30
    assert sample(metrics, "beltsight_entries_published_total", camera="cam2") == 20
    assert sample(metrics, "beltsight_redis_replica_waits_total", outcome="short") > 0
    # once per outage, never per retry: a slow first WAIT on a loaded machine (the replica just
    # linked) may make a short outage of its own before the one the kill makes
    states = [e["event"] for e in logs if e["event"] in ("redis_replicas_short", "redis_up")]
    assert 1 <= states.count("redis_replicas_short") <= 2, states
    assert all(not (a == b == "redis_replicas_short") for a, b in itertools.pairwise(states)), states


def test_the_documented_acl_users_can_publish_and_read_and_nothing_more(redis_server: Any) -> None:
    server = redis_server()
    admin = server.client()
    admin.execute_command(*readme_acl("beltsight", "pw-w"))
    admin.execute_command(*readme_acl("plc", "pw-r"))
    cfg = config(server.auth_url("pw-w", user="beltsight"))
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            for seq in range(5):
                sink.accept(result(seq))
            sink.accept_event(StatusEvent("camera_up", "ok", "cam1", at_ms=BASE_MS))
            await async_wait_until(lambda: sink.buffered == 0 and admin.xlen(cfg.events_stream) == 1)

    asyncio.run(scenario())
    out = io.StringIO()
    reader = config(server.auth_url("pw-r", user="plc"))
    asyncio.run(tail(reader, ["cam1"], group="plc", consumer="c1", count=5, from_start=True, out=out))
    assert [line.split()[2] for line in out.getvalue().splitlines()] == [f"seq={i}" for i in range(5)]
    writer = server.client(password="pw-w", user="beltsight")
    with pytest.raises(NoPermissionError):
        writer.set("beltsight:detections:cam1-x", 1)  # its keys, not its commands
    with pytest.raises(NoPermissionError):
        writer.xadd("other", {"a": 1})  # its command, not its keys
    with pytest.raises(NoPermissionError):
        server.client(password="pw-r", user="plc").xadd(cfg.stream_for("cam1"), {"a": 1})


def test_entries_found_stored_after_a_reconnect_are_confirmed_only_once_the_replica_has_them(
    redis_server: Any,
) -> None:
    """After a reconnect the stored entries are found again, not written: they still wait for the
    replica (attached but frozen, so a WAIT that covered nothing would pass). Redis 7.0 already
    counts a new connection's WAIT from its first command; the sink's XSETID before such a WAIT
    does not rely on that."""
    master = redis_server()
    replica = redis_server(replica_of=master)
    cfg = config(master.url, publish_batch=8, min_replicas=1, wait_timeout_ms=200)
    metrics = Metrics()
    admin = master.client()

    async def scenario() -> None:
        await async_wait_until(lambda: admin.info("replication").get("slave0", {}).get("state") == "online")
        async with running(make_sink(cfg, metrics)) as sink:
            sink.accept(result(0))
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)
            replica.freeze()  # its link stays up: the master still counts it as attached
            for seq in range(1, 6):
                sink.accept(result(seq))
            await async_wait_until(lambda: admin.xlen(cfg.stream_for("cam1")) == 6)
            admin.client_kill_filter(_type="normal", skipme=True)  # the sink's connection goes
            # reconnected, found the 5 stored, WAITed: at most one short WAIT is the old connection's
            # (its reply read after the kill); the one after it is the new connection's
            short = short_waits(metrics)
            await async_wait_until(lambda: short_waits(metrics) >= short + 2, timeout_s=30)
            assert sink.buffered == 5
            replica.thaw()
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)

    asyncio.run(scenario())
    assert [e["seq"] for e in stored(master.client(), cfg.stream_for("cam1"))] == list(range(6))
    assert sample(metrics, "beltsight_entries_published_total", camera="cam1") == 6
