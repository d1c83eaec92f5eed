"""Register encoding, config models and layout validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from daemon.bridge.layout import LayoutError, layout_from_data, validate_layout
from daemon.bridge.registers import RegisterMap, encode_line, u32_words, words_u32
from daemon.bridge.state import LineState
from daemon.config.bridge import BridgeConfig


def test_u32_high_word_first_modulo() -> None:
    assert u32_words(0x12345678) == (0x1234, 0x5678)
    assert u32_words((1 << 32) + 5) == (0, 5)
    assert words_u32(*u32_words(4_000_000_000)) == 4_000_000_000


def test_encode_line_documented_map() -> None:
    line = LineState(
        count_in=70000,
        count_out=3,
        last_track=(1 << 32) + 9,
        last_cls=2,
        last_crossed_ms=1_700_000_000_123,
        eta={"g1": 1_700_000_005_450},
    )
    regs = encode_line(line, "g1", heartbeat=65537)
    assert regs[0:2] == [1, 70000 - 65536]
    assert regs[2:4] == [0, 3]
    assert regs[4:6] == [0, 9]
    assert regs[6] == 2
    assert words_u32(regs[7], regs[8]) == 1_700_000_000 and regs[9] == 123
    assert words_u32(regs[10], regs[11]) == 1_700_000_005 and regs[12] == 450
    assert regs[13] == 1 and regs[14:16] == [0, 0]
    assert encode_line(line, None, 0)[10:13] == [0, 0, 0]


def test_register_map_blocks_follow_config_order() -> None:
    layout = layout_from_data([{"id": "b", "lines": ["x", "y"]}, {"id": "a", "lines": [{"id": "z", "gates": ["g"]}]}])
    regs = RegisterMap(layout, base_register=100, block_size=20)
    assert [regs.offset(c, line) for c, line in layout.blocks()] == [100, 120, 140]
    regs.update_line("a", "z", LineState(count_in=5))
    assert regs.read(140, 2) == [0, 5]
    regs.set_heartbeat(3)
    assert regs.read(113, 1) == [3] and regs.read(153, 1) == [3]
    assert regs.read(99, 1) is None and regs.read(159, 2) is None


def test_config_defaults_and_off_switches() -> None:
    cfg = BridgeConfig()
    assert cfg.opcua.listen == "127.0.0.1:4840" and cfg.modbus.block_size == 16 and cfg.group == "beltsight-bridge"
    off = BridgeConfig.model_validate({"opcua": {"listen": ""}, "modbus": {"listen": ""}, "health_listen": ""})
    assert off.opcua.listen is None and off.modbus.listen is None and off.health_listen is None
    with pytest.raises(ValidationError):
        BridgeConfig.model_validate({"opcua": {"lisen": "x"}})
    with pytest.raises(ValidationError):
        BridgeConfig.model_validate({"opcua": {"users": {"plc": {}}}})
    with pytest.raises(ValidationError):
        BridgeConfig.model_validate({"modbus": {"listen": "nohost"}})
    user = BridgeConfig.model_validate({"opcua": {"users": {"plc": {"password": "s3cret"}}}}).opcua.users["plc"]
    assert "s3cret" not in repr(user) and user.secret() == "s3cret"


@pytest.mark.parametrize(
    ("cameras", "path"),
    [
        ([{"id": "c", "lines": ["L1", "State"]}], "cameras.0.lines.1.id"),
        ([{"id": "c", "lines": ["L1", "L1"]}], "cameras.0.lines.1.id"),
        ([{"id": "c"}, {"id": "Heartbeat"}], "cameras.1.id"),
        ([{"id": "c"}, {"id": "c"}], "cameras.1.id"),
        ([{"id": "c", "lines": [{"id": "L", "gates": ["g", "g"]}]}], "cameras.0.lines.0.gates.1.id"),
        ([{"id": "c", "lines": ["a/b"]}], "cameras.0.lines.0.id"),
    ],
)
def test_layout_collisions_name_the_key_path(cameras: list[dict[str, object]], path: str) -> None:
    with pytest.raises(LayoutError) as info:
        validate_layout(layout_from_data(cameras))
    assert info.value.path == path and str(info.value).startswith(path)


def test_layout_must_fit_the_register_space() -> None:
    layout = layout_from_data([{"id": "c", "lines": ["a", "b"]}])
    validate_layout(layout, base_register=65536 - 32)
    with pytest.raises(LayoutError, match="65535"):
        validate_layout(layout, base_register=65536 - 31)
