"""The served layout grown live (`daemon.bridge.live.grow`) and the blocks it takes (`blocks.extend`):
what a new config adds goes after what is served, nothing served is dropped or moved, and a change that
would rebuild something served is refused whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.bridge.blocks import extend, stable_blocks
from daemon.bridge.layout import layout_from_data
from daemon.bridge.live import grow


def cams(*specs: tuple[str, list[Any]]) -> list[dict[str, Any]]:
    return [
        {"id": c, "lines": [line if isinstance(line, dict) else {"id": line} for line in lines]} for c, lines in specs
    ]


def test_additions_go_after_what_is_served_and_nothing_is_dropped() -> None:
    served = layout_from_data(cams(("cam1", ["L1", "L2"]), ("cam2", ["L1"])))
    new = layout_from_data(cams(("cam3", ["X"]), ("cam1", ["L0", "L2", "L1"])))  # cam2 removed, cam3 first
    growth = grow(served, new)
    assert growth.problems == ()
    assert growth.layout.blocks() == [
        ("cam1", "L1"),
        ("cam1", "L2"),
        ("cam1", "L0"),
        ("cam2", "L1"),
        ("cam3", "X"),
    ]
    assert {c: [line.id for line in lines] for c, lines in growth.added.items()} == {"cam1": ["L0"], "cam3": ["X"]}
    assert growth.configured == {"cam1", "cam3"}
    assert grow(growth.layout, new).added == {}  # read again: nothing more


def test_a_served_line_whose_gates_changed_is_refused_whole() -> None:
    served = layout_from_data(cams(("cam1", [{"id": "L1", "gates": ["g1"]}])))
    new = layout_from_data(cams(("cam1", [{"id": "L1", "gates": ["g2"]}]), ("cam2", ["L1"])))
    growth = grow(served, new)
    assert growth.problems == ("cameras.0.lines.0.gates: cam1/L1's gates changed",)


def test_extend_keeps_every_block_and_refuses_past_the_last_register(tmp_path: Path) -> None:
    served = layout_from_data(cams(("cam1", ["L1"]), ("cam2", ["L1"])))
    current = stable_blocks(served, tmp_path, base_register=0, block_size=16)
    # cam2 was removed in an earlier run of this file: its block is never given again
    grown = grow(served, layout_from_data(cams(("cam1", ["L1"]), ("cam3", ["X", "Y"])))).layout
    assert extend(grown, current, tmp_path, base_register=0, block_size=16) == {
        ("cam1", "L1"): 0,
        ("cam2", "L1"): 1,
        ("cam3", "X"): 2,
        ("cam3", "Y"): 3,
    }
    full = extend(grown, current, tmp_path, base_register=65536 - 3 * 16, block_size=16)
    assert isinstance(full, str) and "65535" in full
