"""TLS to Redis (`rediss://`) against a real redis-server on a TLS port, with a CA and
certificates the test made with `openssl` (tests/support/fixtures_redis_tls.py)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from daemon.config.redis import RedisConfig
from daemon.config.settings import ConfigError, load_settings
from daemon.core.metrics import Metrics
from daemon.publish.tail import tail
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis_tls import TlsMaterial, TlsRedisServer
from tests.support.fixtures_rtsp import Clip
from tests.support.metrics import inferred, sample, total
from tests.support.outage_log import assert_once_per_change
from tests.support.sink_helpers import make_sink, result, running, stored
from tests.support.streams import assert_exactly_once_in_order
from tests.support.waits import async_wait_until, wait_until


def tls_config(server: TlsRedisServer, material: TlsMaterial, *, client_cert: bool = False, **kw: Any) -> RedisConfig:
    certs: dict[str, Any] = {}
    if client_cert:
        certs = {"tls_cert_file": material.client_cert, "tls_key_file": material.client_key}
    return RedisConfig(
        url=server.url, tls_ca_file=material.ca, connect_timeout_s=1.0, socket_timeout_s=2.0, **certs, **kw
    )


def publish_some(cfg: RedisConfig, n: int, metrics: Metrics) -> list[dict[str, Any]]:
    """Run a sink until it published `n` entries or failed to; returns the log events."""

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            for seq in range(n):
                sink.accept(result(seq))
            await async_wait_until(
                lambda: sink.buffered == 0 or any(e["event"] == "redis_tls_failed" for e in logs), timeout_s=60
            )
            if sink.buffered:  # failing: three retries more, each a chance to log the outage again
                failures = sink._backoff.failures
                await async_wait_until(lambda: sink._backoff.failures >= failures + 3, timeout_s=60)

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario())
    return logs


def test_the_sink_publishes_through_tls_verified_by_the_tests_ca(
    redis_tls_server: Callable[..., TlsRedisServer], tls_material: TlsMaterial
) -> None:
    server = redis_tls_server()
    cfg = tls_config(server, tls_material)
    metrics = Metrics()
    logs = publish_some(cfg, 20, metrics)
    assert [e["seq"] for e in stored(server.client(), cfg.stream_for("cam1"))] == list(range(20))
    assert sample(metrics, "beltsight_entries_published_total", camera="cam1") == 20
    assert not [e for e in logs if e["event"] in ("redis_tls_failed", "redis_tls_unverified")]


def test_a_server_certificate_the_ca_did_not_sign_is_refused_with_a_tls_event(
    redis_tls_server: Callable[..., TlsRedisServer], tls_material: TlsMaterial
) -> None:
    rogue = redis_tls_server(rogue=True)
    metrics = Metrics()
    logs = publish_some(tls_config(rogue, tls_material), 5, metrics)
    failed = [e for e in logs if e["event"] == "redis_tls_failed"]
    assert failed and all(e["log_level"] == "error" for e in failed)
    assert all("tls_ca_file" in e["hint"] and "CERTIFICATE_VERIFY_FAILED" in e["reason"] for e in failed)
    assert_once_per_change(logs)
    assert rogue.client().xlen("beltsight:detections:cam1") == 0  # nothing went to that server
    assert sample(metrics, "beltsight_redis_up") == 0
    assert sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason="shutdown") == 5


def test_turning_verification_off_is_explicit_and_logged(
    redis_tls_server: Callable[..., TlsRedisServer], tls_material: TlsMaterial
) -> None:
    rogue = redis_tls_server(rogue=True)
    cfg = RedisConfig(url=rogue.url, tls_verify=False)
    logs = publish_some(cfg, 3, Metrics())
    unverified = [e for e in logs if e["event"] == "redis_tls_unverified"]
    # once: the sink says it when it is built, from its config, whatever its connections do
    assert len(unverified) == 1 and unverified[0]["log_level"] == "warning"
    assert unverified[0]["verify"] is False
    assert rogue.client().xlen(cfg.stream_for("cam1")) == 3


def test_a_certificate_for_another_host_name_is_refused_unless_that_check_is_turned_off(
    redis_tls_server: Callable[..., TlsRedisServer], tls_material: TlsMaterial
) -> None:
    server = redis_tls_server(wrong_name=True)  # signed by the CA, for redis.elsewhere only
    logs = publish_some(tls_config(server, tls_material), 2, Metrics())
    failed = [e for e in logs if e["event"] == "redis_tls_failed"]
    assert failed and all("host" in e["hint"] for e in failed)
    assert_once_per_change(logs)
    assert server.client().xlen("beltsight:detections:cam1") == 0

    logs = publish_some(tls_config(server, tls_material, tls_check_hostname=False), 2, Metrics())
    unverified = [e for e in logs if e["event"] == "redis_tls_unverified"]  # once, at the sink's start
    assert len(unverified) == 1 and unverified[0]["verify"] is True and unverified[0]["check_hostname"] is False
    assert server.client().xlen("beltsight:detections:cam1") == 2


def test_a_client_certificate_is_required_when_the_server_asks_for_one(
    redis_tls_server: Callable[..., TlsRedisServer], tls_material: TlsMaterial
) -> None:
    server = redis_tls_server(auth_clients=True)
    logs = publish_some(tls_config(server, tls_material), 4, Metrics())
    failed = [e for e in logs if e["event"] == "redis_tls_failed"]
    # with TLS 1.3 a missing client certificate surfaces as a TLS error or as a reset on the next
    # read, so the outage may change kind between retries: never one TLS line per retry, though
    assert failed and all("tls_cert_file" in e["hint"] for e in failed)
    assert_once_per_change(logs)
    assert server.client().xlen("beltsight:detections:cam1") == 0

    metrics = Metrics()
    cfg = tls_config(server, tls_material, client_cert=True)
    logs = publish_some(cfg, 4, metrics)
    assert [e["seq"] for e in stored(server.client(), cfg.stream_for("cam1"))] == list(range(4))
    assert not [e for e in logs if e["event"] == "redis_tls_failed"]


def test_tail_with_a_group_reads_through_mutual_tls(
    redis_tls_server: Callable[..., TlsRedisServer], tls_material: TlsMaterial
) -> None:
    server = redis_tls_server(auth_clients=True)
    cfg = tls_config(server, tls_material, client_cert=True)
    publish_some(cfg, 6, Metrics())
    out = io.StringIO()
    assert asyncio.run(tail(cfg, ["cam1"], group="plc", consumer="c1", count=6, from_start=True, out=out)) == 0
    assert [line.split()[2] for line in out.getvalue().splitlines()] == [f"seq={i}" for i in range(6)]
    assert server.client().xpending(cfg.stream_for("cam1"), "plc")["pending"] == 0


def test_tls_files_need_a_rediss_url(tmp_path: Path, tls_material: TlsMaterial) -> None:
    with pytest.raises(ValueError, match="need a rediss:// url"):
        RedisConfig(url="redis://127.0.0.1:6379/0", tls_ca_file=tls_material.ca)
    with pytest.raises(ValueError, match="go together"):
        RedisConfig(url="rediss://127.0.0.1:6379/0", tls_cert_file=tls_material.client_cert)
    path = write_config(tmp_path / "b.toml", redis_url="redis://127.0.0.1:6379/0", cameras=[])
    path.write_text(path.read_text().replace("[redis]\n", f'[redis]\ntls_ca_file = "{tls_material.ca}"\n', 1))
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert any(e.startswith("redis") and "rediss://" in e for e in err.value.errors)


def test_the_daemon_publishes_through_mutual_tls(
    tmp_path: Path,
    redis_tls_server: Callable[..., TlsRedisServer],
    tls_material: TlsMaterial,
    clip_factory: Callable[..., Clip],
) -> None:
    server = redis_tls_server(auth_clients=True)
    clip = clip_factory(320, 240, fps=10, seconds=2.0, seed=5, synthetic=False)
    path = write_config(
        tmp_path / "beltsight.toml",
        redis_url=server.url,
        cameras=[{"id": "file", "url": str(clip.path), "realtime": False}],
    )
    tls = f'tls_ca_file = "{tls_material.ca}"\ntls_cert_file = "{tls_material.client_cert}"\n'
    tls += f'tls_key_file = "{tls_material.client_key}"\n'
    path.write_text(path.read_text().replace("[redis]\n", "[redis]\n" + tls, 1))
    with InProcessDaemon(path) as d:
        wait_until(lambda: inferred(d, "file") >= clip.frames, 60, "every frame of the clip", d)
        d.stop()
    client = server.client()
    entries = [((int(i.split("-")[0]), int(i.split("-")[1])), f) for i, f in client.xrange("beltsight:detections:file")]
    assert_exactly_once_in_order(entries, clip.frames)
    assert total(d, "beltsight_entries_published_total", camera="file") == clip.frames
