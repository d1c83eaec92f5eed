"""What a model file's metadata and the config say about it, key by key: strides, labels, the
size of a dynamic-size export, a layout named, the input convention (colour, scale, padding,
pad value). `daemon.inference.model_file.load_model_info` reads the file and asks these; a
value that cannot be used raises `MetadataError`, which it reports as a `ModelError` naming the
file.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from daemon.core.frames import LETTERBOX_PAD_VALUE
from daemon.core.model_spec import ModelOverrides
from daemon.inference.layouts import InputConvention, ModelLayout, family_of, names

DEFAULT_STRIDES: tuple[int, ...] = (8, 16, 32)


class MetadataError(ValueError):
    """A metadata value (or a count of labels) the daemon cannot use; the message says which."""


def dynamic_size(meta: Mapping[str, str], expected_size: int | None) -> int | None:
    """The size to run a file whose input height and width are symbolic (`dynamic=True` exports):
    the size it is configured as, else its metadata `imgsz` when square."""
    if expected_size is not None:
        return expected_size
    imgsz = _parse_literal(meta.get("imgsz", ""))
    if isinstance(imgsz, list) and len(imgsz) in (1, 2) and len(set(imgsz)) == 1 and isinstance(imgsz[0], int):
        return int(imgsz[0])
    return None


def strides_of(meta: Mapping[str, str]) -> tuple[int, ...]:
    if "strides" in meta:
        try:
            strides = json.loads(meta["strides"])
        except json.JSONDecodeError:
            strides = None
        if not isinstance(strides, list) or not strides or not all(isinstance(s, int) and s > 0 for s in strides):
            raise MetadataError(f"metadata 'strides' must be a JSON list of positive ints, got {meta['strides']!r}")
        return tuple(strides)
    if "stride" in meta:  # Ultralytics / YOLOv5: the largest stride; P3..P5 (or P6) heads below it
        try:
            largest = int(float(meta["stride"]))
        except ValueError:
            raise MetadataError(f"metadata 'stride' is not a number: {meta['stride']!r}") from None
        return tuple(s for s in (8, 16, 32, 64) if s <= largest) or DEFAULT_STRIDES
    return DEFAULT_STRIDES


def _parse_literal(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def names_of(meta: Mapping[str, str]) -> tuple[str, ...] | None:
    raw = meta.get("names")
    if not raw:
        return None
    value = _parse_literal(raw)
    if isinstance(value, dict):  # Ultralytics: "{0: 'bolt', 1: 'nut'}" (or JSON with string keys)
        try:
            by_id = {int(k): v for k, v in value.items()}
        except (TypeError, ValueError):
            by_id = {}
        value = [by_id.get(i) for i in range(len(by_id))] if by_id else None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise MetadataError(f"metadata 'names' is not a list of labels (or a dict of id -> label): {raw[:120]!r}")
    return tuple(value)


def check_imgsz(meta: Mapping[str, str], size: int) -> None:
    if "imgsz" in meta:
        imgsz = _parse_literal(meta["imgsz"])
        if imgsz not in ([size, size], [size], size):
            raise MetadataError(f"metadata 'imgsz' is {meta['imgsz']} but the input is {size}x{size}")


def layout_override(meta: Mapping[str, str], overrides: ModelOverrides) -> tuple[str, str]:
    """(override, who set it): the config's layout, else metadata 'layout', else auto."""
    if overrides.layout != "auto":
        return overrides.layout, "config"
    layout = meta.get("layout")
    if layout is None:
        return "auto", ""
    if layout not in names():
        raise MetadataError(f"metadata 'layout' is {layout!r}; supported: {list(names())}")
    return layout, "metadata"


def _meta_convention(meta: Mapping[str, str]) -> dict[str, Any]:
    """Input convention keys the file itself carries (`color`, `scale`, `padding`, `pad_value`)."""
    found: dict[str, Any] = {}
    if "color" in meta:
        found["color"] = "bgr" if meta["color"].strip().lower() == "bgr" else "rgb"
    if "padding" in meta:
        found["padding"] = "top-left" if meta["padding"].strip().lower() in ("top-left", "topleft") else "symmetric"
    for key, kind in (("scale", float), ("pad_value", int)):
        if key in meta:
            try:
                found[key] = kind(meta[key])
            except ValueError:
                raise MetadataError(f"metadata {key!r} is not a number: {meta[key]!r}") from None
    return found


def convention_of(
    meta: Mapping[str, str],
    layout: ModelLayout,
    overrides: ModelOverrides,
    *,
    dtype: str,
    batch: int | None,
) -> InputConvention:
    """Config over metadata over the layout's own defaults, key by key; `origin` says which."""
    family = family_of(layout)
    color, scale, padding, default_origin = family.color, family.scale, family.padding, family.convention_origin
    values: dict[str, Any] = {"color": color, "scale": scale, "padding": padding, "pad_value": LETTERBOX_PAD_VALUE}
    from_meta = _meta_convention(meta)
    from_config = {k: getattr(overrides, k) for k in values if getattr(overrides, k) is not None}
    values |= from_meta | from_config
    parts = [f"config {'/'.join(from_config)}"] if from_config else []
    if set(from_meta) - set(from_config):
        parts.append(f"metadata {'/'.join(sorted(set(from_meta) - set(from_config)))}")
    if len(set(from_meta) | set(from_config)) < len(values):
        parts.append(default_origin)
    return InputConvention(
        values["color"],
        float(values["scale"]),
        values["padding"],
        int(values["pad_value"]),
        dtype,  # type: ignore[arg-type]
        batch,
        ", ".join(parts),
        family.boxes(
            values["padding"]
        ),  # each ecosystem's own way back to camera pixels (they differ at fractional sizes)
    )


def labels_of(
    layout: ModelLayout, meta_names: tuple[str, ...] | None, config: tuple[str, ...] | None
) -> tuple[tuple[str, ...], str]:
    labels, origin = (config, "config labels") if config is not None else (meta_names, "metadata names")
    if labels is None:
        return tuple(str(i) for i in range(layout.num_classes)), "no labels in the file or config: class ids"
    if layout.num_classes and len(labels) != layout.num_classes:
        source = "[models] labels" if config is not None else "metadata 'names'"
        raise MetadataError(f"{source} has {len(labels)} labels but the output has {layout.num_classes} classes")
    return labels, origin
