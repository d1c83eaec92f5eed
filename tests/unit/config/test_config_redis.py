"""`[redis]` keys for Redis Cluster, replicas and TLS: what is accepted, what is refused and why."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from daemon.config.redis import RedisConfig
from daemon.config.redis import RedisConfig as ReExported


def test_daemon_config_still_exports_redis_config() -> None:
    assert ReExported is RedisConfig


def test_defaults_are_todays_single_redis_behaviour() -> None:
    cfg = RedisConfig()
    assert (cfg.cluster, cfg.startup_nodes, cfg.min_replicas) == (False, [], 0)
    assert cfg.tls_verify and cfg.tls_check_hostname and not cfg.tls


def test_cluster_seeds_are_the_url_then_startup_nodes() -> None:
    cfg = RedisConfig(url="redis://:pw@10.0.0.1:7000", cluster=True, startup_nodes=["10.0.0.2:7001", "[::1]:7002"])
    assert cfg.seed_nodes() == [("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 7002)]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"url": "unix:///run/redis.sock", "cluster": True}, "no unix socket"),
        ({"url": "redis://10.0.0.1:7000/2", "cluster": True}, "only database 0"),
        ({"startup_nodes": ["10.0.0.2:7001"]}, "needs cluster = true"),
        ({"cluster": True, "startup_nodes": ["10.0.0.2"]}, "must be host:port"),
        ({"min_replicas": 1, "wait_timeout_ms": 5000, "socket_timeout_s": 5.0}, "below socket_timeout_s"),
        ({"min_replicas": -1}, "greater than or equal to 0"),
        ({"tls_ca_file": Path("/etc/ca.crt")}, "need a rediss:// url"),
        ({"url": "rediss://r:6380", "tls_key_file": Path("/etc/k.pem")}, "go together"),
    ],
)
def test_contradictions_are_refused_with_a_reason(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RedisConfig(**kw)  # type: ignore[arg-type]


def test_min_replicas_with_a_wait_under_the_socket_timeout_is_fine() -> None:
    cfg = RedisConfig(min_replicas=2, wait_timeout_ms=800, socket_timeout_s=1.0)
    assert cfg.min_replicas == 2
