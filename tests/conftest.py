"""Shared fixtures live in plugin modules, one per real service, so they can grow independently."""

pytest_plugins = [
    "tests.fixtures_redis",
    "tests.fixtures_rtsp",
]
