"""Hypothesis strategies for valid configurations, built from the config models themselves.

`sections(model)` walks a pydantic model's fields and draws a value for a random subset of them
from each field's type and declared bounds (`Gt`/`Ge`/`Lt`/`Le`, lengths, `Literal` choices, nested
sections); `None`, which TOML cannot write, is never drawn. A field's own validators and a section's
cross-field rules are not in its type, so `valid(doc)` repairs a drawn document against the models:
each key an error names is dropped (its default is valid) until `Settings` validates it in memory.
What is left is valid by the models' own judgement, which is what the config fuzzers then check the
file loader, `check-config` and its printed config against.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types as at
from hypothesis import strategies as st
from pydantic import BaseModel, SecretStr, ValidationError

from daemon.config.settings import Settings

SCRATCH = Path("/nonexistent/beltsight-fuzz")
"""Where drawn paths point: absolute (nothing to resolve against the config's directory), and absent
(no drop-in or certificate can be found there by chance)."""
STRINGS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=12)
LISTEN = st.sampled_from(["", "127.0.0.1:0", "127.0.0.1:9999", "[::1]:8080", "0.0.0.0:1", "localhost:7"])
SKIPPED = {("redis", "url"), ("health", "basic_auth_users"), ("bridge", "opcua", "users"), ("cameras",), ("models",)}
"""Kept from the base config: the connection and the cameras (their own fuzzers and tests), the
models (real files), and the secrets (`check-config` prints them redacted, by design)."""


def _bounds(metadata: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, at.Gt):
            out["gt"] = m.gt
        elif isinstance(m, at.Ge):
            out["ge"] = m.ge
        elif isinstance(m, at.Lt):
            out["lt"] = m.lt
        elif isinstance(m, at.Le):
            out["le"] = m.le
        elif isinstance(m, at.MinLen):
            out["min_len"] = m.min_length
        elif isinstance(m, at.MaxLen):
            out["max_len"] = m.max_length
    return out


def _number(kind: type, bounds: dict[str, Any]) -> st.SearchStrategy[Any]:
    low = bounds.get("ge", bounds.get("gt"))
    high = bounds.get("le", bounds.get("lt"))
    if kind is int:
        low = -(10**6) if low is None else low + (1 if "gt" in bounds else 0)
        high = 10**9 if high is None else high - (1 if "lt" in bounds else 0)
        return st.integers(low, high)
    return st.floats(
        -1e6 if low is None else low,
        1e9 if high is None else high,
        exclude_min="gt" in bounds,
        exclude_max="lt" in bounds,
        allow_nan=False,
    )


def strategy(ann: Any, metadata: list[Any], name: str) -> st.SearchStrategy[Any] | None:
    """Values of type `ann` within `metadata`'s bounds; None for what is not drawn."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        options = [s for a in kept if (s := strategy(a, metadata, name)) is not None]
        return st.one_of(options) if options else None
    if origin is typing.Annotated:
        return strategy(args[0], [*metadata, *args[1:]], name)
    if origin is typing.Literal:
        return st.sampled_from(args)
    bounds = _bounds(metadata)
    if origin is list:
        item = strategy(args[0], [], name)
        if item is None:
            return None
        return st.lists(item, min_size=bounds.get("min_len", 0), max_size=min(bounds.get("max_len", 3), 3))
    if origin is not None:
        return None  # dicts: users and models, kept from the base
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return section(ann)
    if ann is bool:
        return st.booleans()
    if ann in (int, float):
        return _number(ann, bounds)
    if ann is str:
        if "listen" in name:
            return LISTEN
        return STRINGS.filter(lambda s: bounds.get("min_len", 0) <= len(s) <= bounds.get("max_len", 10**6))
    if ann is Path:
        return st.sampled_from(["a", "b/c", "spool", "x.pem"]).map(lambda p: str(SCRATCH / p))
    if ann is SecretStr:
        return None
    return None


def section(model: type[BaseModel], where: tuple[str, ...] = ()) -> st.SearchStrategy[dict[str, Any]]:
    """A random subset of `model`'s fields, each with a drawn value."""
    drawn: dict[str, st.SearchStrategy[Any]] = {}
    for name, info in model.model_fields.items():
        if (*where, name) in SKIPPED:
            continue
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            drawn[name] = section(ann, (*where, name))
        elif (s := strategy(ann, list(info.metadata), name)) is not None:
            drawn[name] = s
    return st.fixed_dictionaries({}, optional=drawn)


def _drop(doc: dict[str, Any], loc: tuple[Any, ...]) -> bool:
    """Drop the deepest key of `loc` that `doc` has; False when it has none (the error is the base's)."""
    path = [part for part in loc if isinstance(part, (str, int))]
    while path:
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part] if isinstance(parent, dict) and part in parent else None
            if parent is None:
                break
        if isinstance(parent, dict) and path[-1] in parent:
            del parent[path[-1]]
            return True
        if isinstance(parent, list) and isinstance(path[-1], int) and path[-1] < len(parent):
            del parent[path[-1]]
            return True
        path = path[:-1]
    return False


def valid(base: dict[str, Any], drawn: dict[str, Any]) -> dict[str, Any]:
    """`drawn` over `base`, repaired until `Settings` validates it (see the module docstring)."""
    base = json.loads(json.dumps(base))  # repaired in place: the caller's stays as it was
    doc = {**base, **{k: {**base.get(k, {}), **v} if isinstance(v, dict) else v for k, v in drawn.items()}}
    for _ in range(200):
        try:
            Settings.model_validate(doc)
        except ValidationError as exc:
            errors = exc.errors()
            if not any(_drop(doc, tuple(e["loc"])) for e in errors):
                drawn_keys = [k for k in drawn if k in doc and k not in ("models", "cameras", "redis")]
                if not drawn_keys:
                    raise
                doc[drawn_keys[0]] = base.get(drawn_keys[0], {})  # a cross-field rule: the section back to the base
                drawn.pop(drawn_keys[0])
            continue
        return doc
    raise AssertionError("the repair did not converge")


def settings_strategy() -> st.SearchStrategy[dict[str, Any]]:
    """Drawn sections of `Settings` (those of its fields that are sections, and the scalars)."""
    return section(Settings)


__all__ = ["SCRATCH", "section", "settings_strategy", "strategy", "valid"]
