"""The config loader under random TOML: a valid config or `ConfigError` naming key paths, never a traceback;
and valid configs drawn from the config models (tests/support/config_strategies.py): each loads to
the settings it describes, and what `check-config` prints loads again to the same settings.

In-process for speed (`load_settings`), plus a few through the real CLI (`beltsight check-config`:
exit 0, or 78 with every error listed, and no traceback on stderr).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.config import ConfigError, load_settings
from daemon.config.settings import Settings
from tests.support.config_strategies import settings_strategy, valid
from tests.support.daemon_harness import run_cli

REPO = Path(__file__).resolve().parents[2]
BASE: dict[str, Any] = tomllib.loads((REPO / "configs" / "demo.toml").read_text())
BASE["models"] = {size: str(REPO / "models" / Path(path).name) for size, path in BASE["models"].items()}


# -- a TOML writer for what tomllib reads back (inline tables keep it one line per top-level key) ---
def toml_key(key: str) -> str:
    return json.dumps(key)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):  # a JSON string is a TOML basic string, but for what TOML must escape otherwise
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


def toml_document(doc: dict[str, Any]) -> str:
    return "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in doc.items())


def test_the_writer_round_trips_the_base_config() -> None:
    assert tomllib.loads(toml_document(BASE)) == BASE


scalars = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(["", "0", "-1", "1e309", "127.0.0.1:0", "redis://", "rtsp://x", "cpu", "cuda", "auto", "none"])
    | st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 1, 1)).map(
        lambda d: d.replace(microsecond=0)
    )
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in `doc` (tables and arrays), the root excluded."""
    out: list[tuple[Any, ...]] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out.append((*prefix, key))
        out.extend(paths(value, (*prefix, key)))
    return out


BASE_PATHS = paths(BASE)


@st.composite
def mutated_configs(draw: st.DrawFn) -> dict[str, Any]:
    """The valid base with 1-4 mutations: a value replaced, a key deleted, an unknown key added."""
    doc = json.loads(json.dumps(BASE))
    for _ in range(draw(st.integers(1, 4))):
        live = [p for p in BASE_PATHS if _get(doc, p[:-1]) is not None and _has(_get(doc, p[:-1]), p[-1])]
        if not live:
            break
        where = draw(st.sampled_from(live))
        parent = _get(doc, where[:-1])
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "replace":
            parent[where[-1]] = draw(values)
        elif action == "delete" and isinstance(parent, dict):
            del parent[where[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(values)
    return doc


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        if (isinstance(doc, dict) and key in doc) or (
            isinstance(doc, list) and isinstance(key, int) and key < len(doc)
        ):
            doc = doc[key]
        else:
            return None
    return doc if isinstance(doc, (dict, list)) else None


def _has(parent: Any, key: Any) -> bool:
    return key in parent if isinstance(parent, dict) else isinstance(key, int) and key < len(parent)


def check_loads_or_refuses(text: str, directory: Path) -> None:
    path = directory / "beltsight.toml"
    path.write_text(text)
    try:
        load_settings(path)
    except ConfigError as exc:
        assert exc.errors, "a ConfigError lists its errors"
        for error in exc.errors:
            if not error.startswith("cannot parse: "):  # a TOML syntax error has a line, not a key path
                where, sep, problem = error.partition(": ")
                assert sep and where and problem, f"no key path in {error!r}"


@pytest.fixture(autouse=True)
def _no_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("BELTSIGHT_"):
            monkeypatch.delenv(name)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutated_configs())
def test_a_mutated_valid_config_loads_or_names_its_key_paths(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        check_loads_or_refuses(toml_document(doc), Path(directory))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from([*BASE, "x"]) | st.text(max_size=8), values, max_size=5))
def test_a_random_toml_document_loads_or_names_its_key_paths(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        check_loads_or_refuses(toml_document(doc), Path(directory))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_random_bytes_as_a_config_file_are_refused_cleanly(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "beltsight.toml"
        path.write_bytes(toml_document(BASE).encode() + raw)
        try:
            load_settings(path)
        except ConfigError as exc:
            assert exc.errors


@pytest.mark.slow
@settings(max_examples=4, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutated_configs())
def test_check_config_exits_0_or_78_without_a_traceback(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "beltsight.toml"
        path.write_text(toml_document(doc))
        result = run_cli("check-config", "-c", str(path), timeout_s=120)
    assert result.returncode in (0, 78), result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    if result.returncode == 78:
        assert "invalid" in result.stderr + result.stdout


# -- valid configurations, drawn from the models: they load, and round-trip through check-config ----


def assert_same_settings(a: Settings, b: Settings) -> None:
    assert a.model_dump() == b.model_dump()
    assert a.redis.url.get_secret_value() == b.redis.url.get_secret_value()


def printed_config(settings: Settings) -> dict[str, Any]:
    """What `check-config` prints (the redacted effective config), as a TOML document. TOML has no
    null: a listener printed null (off) is written as a config turns it off, `""`; any other null
    is left out (each such field's default is null)."""

    def without_nulls(value: Any) -> Any:
        if isinstance(value, dict):
            kept = {k: "" if v is None and k.endswith("listen") else v for k, v in value.items()}
            return {k: without_nulls(v) for k, v in kept.items() if v is not None}
        if isinstance(value, list):
            return [without_nulls(v) for v in value]
        return value

    return dict(without_nulls(settings.redacted()))


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(settings_strategy())
def test_a_valid_config_loads_to_the_settings_it_describes_and_its_printed_config_loads_again(
    drawn: dict[str, Any],
) -> None:
    doc = valid(BASE, drawn)
    want = Settings.model_validate(doc)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "beltsight.toml"
        path.write_text(toml_document(doc))
        loaded = load_settings(path)  # a ConfigError here fails the test: a valid config must load
        assert_same_settings(loaded, want)
        path.write_text(toml_document(printed_config(loaded)))
        assert_same_settings(load_settings(path), loaded)


@pytest.mark.slow
@settings(max_examples=3, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(settings_strategy())
def test_check_config_accepts_a_valid_config_and_prints_one_that_loads_to_the_same_settings(
    drawn: dict[str, Any],
) -> None:
    doc = valid(BASE, drawn)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "beltsight.toml"
        path.write_text(toml_document(doc))
        result = run_cli("check-config", "-c", str(path), timeout_s=120)
        assert result.returncode == 0, result.stderr[-2000:]
        again = Path(directory) / "printed.toml"
        printed = json.loads(result.stdout)
        again.write_text(toml_document(printed_config(Settings.model_validate(printed))))
        assert_same_settings(load_settings(again), load_settings(path))
