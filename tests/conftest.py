"""Shared fixtures live in plugin modules, one per real service, so they can grow independently."""

pytest_plugins = [
    "tests.support.fixtures_redis",
    "tests.support.fixtures_rtsp",
]
