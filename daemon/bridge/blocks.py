"""The Modbus block of each (camera, line), kept so that no block of a camera still served ever moves.

The rule (the Modbus map's, `docs/integrations/plc-bridge.md`): at the bridge's first start the blocks
are numbered in the layout's order (cameras in config order, then each camera's lines), the map as
it always was. The numbering is kept in `<[bridge] state_dir>/modbus_blocks.json`; at every later start
a (camera, line) already numbered keeps its block, a new one (a camera added, through the cameras API
or the file, or a line added) takes the next block after the highest ever given, in the layout's order,
and one no longer served (its camera removed or disabled, its line deleted) leaves its block unused
(only the heartbeat register counts there) so that the blocks after it stay where they are.
Deleting the file numbers the map afresh at the next start. Where the kept numbering would pass
register 65535, or the file cannot be read or written, the map is numbered in the layout's order
(`bridge_modbus_blocks_renumbered`, with the reason).
"""

from __future__ import annotations

import json
from pathlib import Path

import structlog

from daemon.bridge.layout import MAX_REGISTER, BridgeLayout
from daemon.core.durable import replace_durably

log = structlog.get_logger("beltsight.bridge")

FILE = "modbus_blocks.json"
Blocks = dict[tuple[str, str], int]


def _key(camera: str, line: str) -> str:
    return f"{camera}/{line}"


def read(path: Path) -> Blocks:
    """The kept numbering (empty when there is none); ValueError or OSError when it cannot be read."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    blocks: Blocks = {}
    for key, index in dict(raw["blocks"]).items():
        camera, _, line = str(key).partition("/")
        if not line or not isinstance(index, int) or index < 0:
            raise ValueError(f"{path}: bad entry {key!r}: {index!r}")
        blocks[(camera, line)] = index
    return blocks


def assign(layout: BridgeLayout, kept: Blocks) -> Blocks:
    """Every block of `layout` numbered: the kept ones where they were, the new ones after the highest
    ever given; the entries of blocks no longer served stay in the result (their numbers are never
    given again)."""
    out = dict(kept)
    following = max(kept.values(), default=-1) + 1
    for camera, line in layout.blocks():
        if (camera, line) not in out:
            out[(camera, line)] = following
            following += 1
    return out


def served(layout: BridgeLayout, blocks: Blocks) -> Blocks:
    """The numbering of what `layout` serves."""
    return {pair: blocks[pair] for pair in layout.blocks()}


def stable_blocks(layout: BridgeLayout, state_dir: Path | None, *, base_register: int, block_size: int) -> Blocks:
    """The blocks to serve `layout` with (see the module docstring), the numbering kept on disk."""
    compact = {pair: i for i, pair in enumerate(layout.blocks())}
    if state_dir is None:
        return compact
    path = state_dir / FILE
    try:
        blocks = assign(layout, read(path))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("bridge_modbus_blocks_renumbered", path=str(path), reason=f"cannot read: {exc}")
        blocks = assign(layout, {})
    if base_register + (max(blocks.values(), default=-1) + 1) * block_size > MAX_REGISTER:
        log.warning("bridge_modbus_blocks_renumbered", path=str(path), reason="the kept blocks pass register 65535")
        blocks = assign(layout, {})
    data = {"blocks": {_key(c, line): i for (c, line), i in sorted(blocks.items(), key=lambda kv: kv[1])}}
    try:
        replace_durably(path, (json.dumps(data, indent=1) + "\n").encode())
    except OSError as exc:
        log.warning("bridge_modbus_blocks_renumbered", path=str(path), reason=f"cannot write: {exc.strerror}")
        return compact
    return served(layout, blocks)


def extend(
    layout: BridgeLayout, current: Blocks, state_dir: Path | None, *, base_register: int, block_size: int
) -> Blocks | str:
    """A running bridge's blocks for `layout` (its served layout grown live, daemon.bridge.live): every block
    of `current` where it is, each new (camera, line) after the highest ever given (in the kept file too);
    the file written. A string saying why not when the new blocks would pass register 65535 or the file
    cannot be written (nothing changes then: the bridge keeps serving `current`)."""
    kept: Blocks = {}
    if state_dir is not None:
        try:
            kept = read(state_dir / FILE)
        except (OSError, ValueError, KeyError, TypeError):
            kept = {}
    blocks = assign(layout, {**kept, **current})
    if base_register + (max(blocks.values(), default=-1) + 1) * block_size > MAX_REGISTER:
        return "the new blocks would pass register 65535"
    if state_dir is not None:
        data = {"blocks": {_key(c, line): i for (c, line), i in sorted(blocks.items(), key=lambda kv: kv[1])}}
        try:
            replace_durably(state_dir / FILE, (json.dumps(data, indent=1) + "\n").encode())
        except OSError as exc:
            return f"cannot write {state_dir / FILE}: {exc.strerror}"
    return served(layout, blocks)


__all__ = ["FILE", "Blocks", "assign", "extend", "read", "served", "stable_blocks"]
