"""The one writer of daemon TOML configs, for tools (bench, soak) and tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MODELS = {size: REPO / "models" / f"conveyor-{size}.onnx" for size in (416, 640, 800)}


def _table(name: str, values: dict[str, Any]) -> list[str]:
    return [f"\n[{name}]", *(f"{key} = {json.dumps(value)}" for key, value in values.items())]


def write_config(
    path: Path,
    *,
    redis_url: str,
    cameras: list[dict[str, Any]],
    extra: str = "",
    health: dict[str, Any] | None = None,
    redis: dict[str, Any] | None = None,
    shutdown_grace_s: float = 5.0,
    **engine: Any,
) -> Path:
    """A TOML config: the committed demo models, CPU provider unless overridden (`engine` keys);
    `health` adds keys to `[health]` (listen defaults to a free loopback port), `redis` to `[redis]`;
    `extra` (TOML text) goes before the `[[cameras]]`."""
    engine = {"providers": ["cpu"], "max_batch": 4, "max_wait_ms": 20, **engine}
    lines = [f"shutdown_grace_s = {json.dumps(shutdown_grace_s)}"]
    lines += _table("redis", {"url": redis_url, **(redis or {})})
    lines += _table("models", {str(size): str(p) for size, p in MODELS.items()})
    lines += _table("engine", engine)
    lines += _table("health", {"listen": "127.0.0.1:0", **(health or {})})
    lines += _table("logging", {"format": "json"})
    lines.append("")
    lines.append(extra)
    for cam in cameras:
        lines.append("[[cameras]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in cam.items()]
    path.write_text("\n".join(lines) + "\n")
    return path
