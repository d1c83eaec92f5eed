"""The Modbus map's blocks kept across starts (`daemon.bridge.blocks`): a camera added takes new blocks, a
camera removed leaves its blocks unused, and no block of a camera still served ever moves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from daemon.bridge.blocks import FILE, stable_blocks
from daemon.bridge.layout import layout_from_data
from daemon.bridge.registers import RegisterMap
from daemon.bridge.state import LineState


def cams(*specs: tuple[str, list[str]], disabled: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [{"id": c, "enabled": c not in disabled, "lines": [{"id": line} for line in lines]} for c, lines in specs]


def blocks_of(tmp_path: Path, cameras: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    return stable_blocks(layout_from_data(cameras), tmp_path, base_register=0, block_size=16)


def test_blocks_never_move_when_cameras_come_and_go(tmp_path: Path) -> None:
    first = blocks_of(tmp_path, cams(("infeed", ["L1", "L2"]), ("outfeed", ["L1"])))
    assert first == {("infeed", "L1"): 0, ("infeed", "L2"): 1, ("outfeed", "L1"): 2}  # the map as it always was
    # a camera added before outfeed in the file, and infeed removed: outfeed stays at block 2
    second = blocks_of(tmp_path, cams(("sorter", ["S"]), ("outfeed", ["L1", "L9"])))
    assert second == {("sorter", "S"): 3, ("outfeed", "L1"): 2, ("outfeed", "L9"): 4}
    # infeed back (enabled again): its old blocks; a disabled camera keeps its blocks reserved
    third = blocks_of(
        tmp_path, cams(("infeed", ["L1", "L2"]), ("sorter", ["S"]), ("outfeed", ["L1"]), disabled=("sorter",))
    )
    assert third == {("infeed", "L1"): 0, ("infeed", "L2"): 1, ("outfeed", "L1"): 2}
    kept = json.loads((tmp_path / FILE).read_text())["blocks"]
    assert kept == {"infeed/L1": 0, "infeed/L2": 1, "outfeed/L1": 2, "sorter/S": 3, "outfeed/L9": 4}


def test_unused_blocks_read_zero_and_the_served_ones_sit_at_their_kept_address(tmp_path: Path) -> None:
    blocks_of(tmp_path, cams(("a", ["L"]), ("b", ["L"])))
    layout = layout_from_data(cams(("b", ["L"])))
    regs = RegisterMap(layout, base_register=100, blocks=blocks_of(tmp_path, cams(("b", ["L"]))))
    assert len(regs) == 32 and regs.offset("b", "L") == 116
    regs.update_line("b", "L", LineState(count_in=7))
    assert regs.read(100, 16) == [0] * 16
    assert regs.read(116, 2) == [0, 7]


def test_an_unreadable_file_numbers_the_map_in_the_layout_s_order(tmp_path: Path) -> None:
    (tmp_path / FILE).write_text("not json")
    assert blocks_of(tmp_path, cams(("a", ["L"]), ("b", ["L"]))) == {("a", "L"): 0, ("b", "L"): 1}
    assert json.loads((tmp_path / FILE).read_text())["blocks"] == {"a/L": 0, "b/L": 1}  # and kept from now on
