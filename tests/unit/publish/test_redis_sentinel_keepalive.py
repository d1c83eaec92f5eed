"""`[redis]` keys for Redis Sentinel and dead-connection detection: accepted, refused, and the client built."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from pydantic import ValidationError

from daemon.config.redis import RedisConfig
from daemon.core.redaction import SECRETS
from daemon.publish.redis_conn import SentinelRedis, make_client


def sentinel_config(**kw: object) -> RedisConfig:
    return RedisConfig(
        url="redis://beltsight:pw-master@ignored:1/2",
        sentinels=["10.0.0.1:26379", "[::1]:26380"],
        sentinel_master="belt",
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"sentinels": ["10.0.0.1:26379"], "sentinel_master": "m", "cluster": True}, "sentinels and cluster = true"),
        ({"sentinels": ["10.0.0.1:26379"]}, "sentinels and sentinel_master go together"),
        ({"sentinel_master": "m"}, "sentinels and sentinel_master go together"),
        ({"sentinels": ["10.0.0.1"], "sentinel_master": "m"}, "sentinel '10.0.0.1' must be host:port"),
        ({"sentinel_username": "s"}, "sentinel_username need sentinels"),
        ({"sentinel_password_file": Path("/run/pw")}, "sentinel_password_file need sentinels"),
        (
            {"url": "unix:///run/redis.sock", "sentinels": ["10.0.0.1:26379"], "sentinel_master": "m"},
            "no unix socket",
        ),
        ({"keepalive_s": 0}, "greater than 0"),
    ],
)
def test_sentinel_contradictions_are_refused_naming_the_key(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RedisConfig(**kw)  # type: ignore[arg-type]


def test_a_sentinel_client_asks_the_sentinels_with_their_own_credentials(tmp_path: Path) -> None:
    secret = tmp_path / "sentinel-pw"
    secret.write_text("s3ntinel-secret\n")
    cfg = sentinel_config(sentinel_username="watcher", sentinel_password_file=secret, socket_timeout_s=1.5)
    assert cfg.sentinel_nodes() == [("10.0.0.1", 26379), ("::1", 26380)]
    client = make_client(cfg)
    assert isinstance(client, SentinelRedis) and client.sentinels is not None
    on_sentinel = client.sentinels.sentinels[0].connection_pool.connection_kwargs
    assert (on_sentinel["username"], on_sentinel["password"]) == ("watcher", "s3ntinel-secret")
    assert on_sentinel["socket_timeout"] == 1.5 and on_sentinel["socket_keepalive"] is True
    on_master = client.connection_pool.connection_kwargs
    assert (on_master["username"], on_master["password"], on_master["db"]) == ("beltsight", "pw-master", 2)
    assert "host" not in on_master  # the sentinels name the master
    assert "s3ntinel-secret" not in SECRETS.scrub("password s3ntinel-secret")  # never logged
    asyncio.run(client.aclose())


def test_tls_goes_to_the_master_and_the_sentinels() -> None:
    cfg = RedisConfig(url="rediss://m:1/0", sentinels=["10.0.0.1:26379"], sentinel_master="belt", tls_verify=False)
    client = make_client(cfg)
    assert isinstance(client, SentinelRedis) and client.sentinels is not None
    assert client.connection_pool.connection_class.__name__ == "SentinelManagedSSLConnection"
    assert client.sentinels.sentinels[0].connection_pool.connection_class.__name__ == "SSLConnection"
    asyncio.run(client.aclose())


def test_tcp_connections_get_keepalive_and_a_health_check_from_keepalive_s() -> None:
    client = make_client(RedisConfig(keepalive_s=9.0))
    kwargs = client.connection_pool.connection_kwargs  # type: ignore[union-attr]
    assert kwargs["socket_keepalive"] is True and kwargs["health_check_interval"] == 9.0
    options = kwargs["socket_keepalive_options"]
    assert (options[socket.TCP_KEEPIDLE], options[socket.TCP_KEEPINTVL], options[socket.TCP_KEEPCNT]) == (9, 3, 3)
    unix = make_client(RedisConfig(url="unix:///run/redis.sock")).connection_pool.connection_kwargs  # type: ignore[union-attr]
    assert "socket_keepalive" not in unix and unix["health_check_interval"] == 10.0
