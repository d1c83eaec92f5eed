"""The one writer of daemon TOML configs, for tools (bench, soak, tracking eval) and tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MODELS = {size: REPO / "models" / f"conveyor-{size}.onnx" for size in (416, 640, 800)}


def toml_value(value: Any) -> str:
    """A TOML value: tables (dicts) inline, `{ key = value, ... }`, lists of anything; scalars as JSON
    (strings, numbers and booleans are written alike in both)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {toml_value(v)}" for key, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def _table(name: str, values: dict[str, Any]) -> list[str]:
    return [f"\n[{name}]", *(f"{key} = {toml_value(value)}" for key, value in values.items())]


def write_config(
    path: Path,
    *,
    redis_url: str,
    cameras: list[dict[str, Any]],
    extra: str = "",
    health: dict[str, Any] | None = None,
    redis: dict[str, Any] | None = None,
    tracking: dict[str, Any] | None = None,
    shutdown_grace_s: float = 5.0,
    cameras_dir: Path | None = None,
    **engine: Any,
) -> Path:
    """A TOML config: the committed demo models, CPU provider unless overridden (`engine` keys);
    `health` adds keys to `[health]` (listen defaults to a free loopback port), `redis` to `[redis]`,
    `tracking` (when given) writes `[tracking]`; `extra` (TOML text) goes before the `[[cameras]]`.
    A camera's nested values (its `lines`, each with `gates`) are written as inline tables. The models
    drop-in (`[engine] models_dropin`) is `models.toml` beside the config unless `engine` names one, and
    `cameras_dir` (the cameras API's drop-ins) is `cameras/` beside it unless given."""
    dropin = str(path.parent / "models.toml")
    engine = {"providers": ["cpu"], "max_batch": 4, "max_wait_ms": 20, "models_dropin": dropin, **engine}
    lines = [f"shutdown_grace_s = {json.dumps(shutdown_grace_s)}"]
    lines.append(f"cameras_dir = {json.dumps(str(cameras_dir or path.parent / 'cameras'))}")
    lines += _table("redis", {"url": redis_url, **(redis or {})})
    lines += _table("models", {str(size): str(p) for size, p in MODELS.items()})
    lines += _table("engine", engine)
    lines += _table("health", {"listen": "127.0.0.1:0", **(health or {})})
    lines += _table("logging", {"format": "json"})
    if tracking is not None:
        lines += _table("tracking", tracking)
    lines.append("")
    lines.append(extra)
    for cam in cameras:
        lines.append("[[cameras]]")
        lines += [f"{key} = {toml_value(value)}" for key, value in cam.items()]
    path.write_text("\n".join(lines) + "\n")
    return path
