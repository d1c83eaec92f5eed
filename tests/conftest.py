"""Shared fixtures live in plugin modules, one per real service, so they can grow independently."""

pytest_plugins = [
    "tests.support.fault_fixtures",
    "tests.support.fixtures_redis",
    "tests.support.fixtures_redis_cluster_tls",
    "tests.support.fixtures_redis_sentinel",
    "tests.support.fixtures_rtsp",
]
