"""The configuration reference, generated from the pydantic models: every key with its type, default,
meaning (the field's docstring or trailing comment) and environment override."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import textwrap
import types
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from tools.docs.discover import ROOT, module_name, source_files

PAGE = "docs/configuration/reference.md"


@dataclass(frozen=True)
class Key:
    """One configuration key: `path` as written in TOML (`redis.url`, `cameras[].lines[].id`)."""

    path: str
    type: str
    default: str
    meaning: str
    env: str


def settings_model() -> type[BaseModel]:
    """The one `BaseSettings` subclass in the daemon package: the whole configuration."""
    for path in source_files(ROOT / "daemon"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("BaseSettings") for b in node.bases):
                model = getattr(importlib.import_module(module_name(path)), node.name)
                assert isinstance(model, type) and issubclass(model, BaseModel)
                return model
    raise LookupError("no BaseSettings subclass under daemon/")


def _class_notes(cls: type) -> dict[str, str]:
    """Field name -> its attribute docstring, else the comment ending its line, for `cls` and its bases."""
    notes: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        lines = source.splitlines()
        body = ast.parse(source).body[0]
        assert isinstance(body, ast.ClassDef)
        for i, node in enumerate(body.body):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            nxt = body.body[i + 1] if i + 1 < len(body.body) else None
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                notes[node.target.id] = " ".join(inspect.cleandoc(nxt.value.value).split())
            elif "#" in lines[node.lineno - 1]:
                notes[node.target.id] = lines[node.lineno - 1].split("#", 1)[1].strip()
    return notes


_CONSTRAINTS = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤", "min_length": "min length", "max_length": "max length"}


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join("none" if a is type(None) else _type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(a) for a in args)}]"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "table"
        return {"SecretStr": "secret str", "Path": "path", "PosixPath": "path"}.get(
            annotation.__name__, annotation.__name__
        )
    return re.sub(r"\btyping\.", "", str(annotation))


def _constraints(info: FieldInfo) -> str:
    out = []
    for meta in info.metadata:
        for attr, sign in _CONSTRAINTS.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sign} {value}")
    return ", ".join(out)


def _toml(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "(table)"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, tuple | frozenset | set):
        value = list(value)
    if hasattr(value, "get_secret_value"):
        return '"**********"' if value.get_secret_value() else '""'
    try:
        return json.dumps(value)
    except TypeError:
        return str(value)


def _default(info: FieldInfo) -> str:
    if info.default is not PydanticUndefined:
        return f"`{_toml(info.default)}`"
    if info.default_factory is not None:
        try:
            return f"`{_toml(info.default_factory())}`"  # type: ignore[call-arg]
        except TypeError:
            return "(computed)"
    return "**required**"


def _models_in(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """The models a field holds, with the path suffix they sit under: `` (a table), `[]` (a list of
    tables), `.<key>` (a table of tables)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    if origin is typing.Annotated:
        return _models_in(args[0])
    if origin in (list, tuple, set, frozenset):
        return [("[]" + s, m) for a in args for s, m in _models_in(a)]
    if origin is dict:
        return [(".<key>" + s, m) for s, m in _models_in(args[1])]
    if origin in (typing.Union, types.UnionType):
        return [x for a in args for x in _models_in(a)]
    return []


def keys(model: type[BaseModel] | None = None, prefix: str = "", env: str | None = "BELTSIGHT_") -> list[Key]:
    """Every key of `model` (default: the settings), depth first, in declaration order."""
    model = model or settings_model()
    notes = _class_notes(model)
    out: list[Key] = []
    for field_name, info in model.model_fields.items():
        name = info.alias or field_name  # the key as written in TOML
        path = f"{prefix}{name}"
        var = f"{env}{name.upper()}" if env is not None else ""
        kind = _type_name(info.annotation)
        limits = _constraints(info)
        out.append(Key(path, f"{kind} ({limits})" if limits else kind, _default(info), notes.get(field_name, ""), var))
        for suffix, sub in _models_in(info.annotation):
            # environment overrides reach nested tables by `__`; inside lists and dicts only as JSON of the whole
            nested_env = f"{var}__" if env is not None and suffix == "" else None
            out += keys(sub, f"{path}{suffix}.", nested_env)
    return out


def section_of(key: Key) -> str:
    """The TOML table a key is written in: `redis`, `cameras[].lines[]`; `` for top-level scalars."""
    return key.path.rsplit(".", 1)[0] if "." in key.path else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _heading(section: str) -> str:
    if not section:
        return "Top level"
    toml = re.sub(r"\[\]", "", section)
    return f"[[{toml}]]" if section.endswith("[]") else f"[{toml}]"


def _sections_table(model: type[BaseModel]) -> list[str]:
    """One row per top-level table of the settings (what it is for, from its docstring), linked to its
    keys below: the configuration page's list of sections, which cannot omit one."""
    notes = _class_notes(model)
    rows = ["## Sections", "", "| section | what it is for |", "|---|---|"]
    for name, info in model.model_fields.items():
        tables = _models_in(info.annotation)
        if not tables:
            continue
        title = _heading(f"{name}{tables[0][0]}")
        anchor = re.sub(r"[^a-z0-9 -]", "", f"`{title}`".lower()).replace(" ", "-")
        rows.append(f"| [`{title}`](#{anchor}) | {_cell(notes.get(name, ''))} |")
    return [*rows, ""]


def render() -> str:
    model = settings_model()
    all_keys = keys(model)
    lines = [
        "<!-- generated by `python -m tools.docs` from the config models: do not edit by hand -->",
        "# Configuration reference",
        "",
        f"Every key `{model.__module__}.{model.__name__}` accepts, generated from the models, so it cannot"
        " drift from the code. Unknown keys are errors. A key path such as `redis.url` is the key `url` in the"
        " `[redis]` table; `cameras[].id` is `id` in each `[[cameras]]` table; `models.<key>.path` is `path`"
        " in a `[models.<size>]` table.",
        "",
        "Environment: every key outside lists and tables keyed by name can be overridden with the variable"
        " shown (`BELTSIGHT_` prefix, `__` between levels); a list or keyed table is overridden whole, as JSON"
        " in its own variable (`BELTSIGHT_CAMERAS='[...]'`).",
        "",
        "For how the sections fit together, see [Configuration](index.md).",
        "",
    ]
    lines += _sections_table(model)
    sections: dict[str, list[Key]] = {}
    for key in all_keys:
        if key.default == "`(table)`" and key.type == "table":
            sections.setdefault(key.path, [])
        sections.setdefault(section_of(key), []).append(key)
    for section, members in sections.items():
        if not members:
            continue
        title = f"`{_heading(section)}`" if section else "Top level"
        lines += [f"## {title}", "", "| key | type | default | meaning | environment |", "|---|---|---|---|---|"]
        for k in members:
            env = f"`{k.env}`" if k.env else ""
            lines.append(f"| `{k.path}` | {_cell(k.type)} | {_cell(k.default)} | {_cell(k.meaning)} | {env} |")
        lines.append("")
    return "\n".join(lines)
