"""Where the bridge's acknowledgements and snapshot go per topology (daemon/bridge/topology.py), the
snapshot in parts (a cluster's), and the unit's reload command."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.bridge.cli import load
from daemon.bridge.layout import layout_from_data
from daemon.bridge.reader import read_streams
from daemon.bridge.state import BridgeState
from daemon.bridge.topology import AckLayout, hash_tag, slot_of
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from daemon.config.settings import ConfigError

LAYOUT = layout_from_data([{"id": c, "lines": [{"id": "L1"}]} for c in ("cam1", "cam2", "cam3")])
UNIT = Path(__file__).resolve().parents[3] / "systemd" / "beltsight-bridge.service"


def _acks(**redis: object) -> AckLayout:
    cfg = RedisConfig.model_validate(redis)
    return AckLayout.of(BridgeConfig(), cfg, read_streams(LAYOUT, cfg))


def test_hash_tag_is_what_a_cluster_hashes() -> None:
    assert hash_tag("beltsight:objects:cam1") == "beltsight:objects:cam1"
    assert hash_tag("plant:{line7}:objects") == "line7"
    assert hash_tag("a{}b") == "a{}b"  # an empty tag: the whole key
    assert slot_of("x:{plant:{line7}:objects}") != slot_of("plant:{line7}:objects")  # why parts use the tag


def test_one_redis_has_one_snapshot_key_and_one_read_group() -> None:
    acks = _acks()
    assert acks.snapshot_keys() == [("beltsight:bridge:state:beltsight-bridge", None, "")]
    assert acks.read_groups() == [[*(f"beltsight:objects:{c}" for c in ("cam1", "cam2", "cam3")), "beltsight:events"]]
    assert acks.by_slot(["beltsight:objects:cam1", "beltsight:events"]) == [
        ["beltsight:objects:cam1", "beltsight:events"]
    ]
    assert acks.problems() == []


def test_a_cluster_keeps_one_snapshot_part_per_stream_in_the_stream_s_slot() -> None:
    for objects in ("beltsight:objects:{camera}", "plant:{{camera}}:objects"):
        acks = _acks(url="redis://127.0.0.1:7000", cluster=True, objects_stream=objects)
        keys = acks.snapshot_keys()
        assert len(keys) == 4 and all(slot_of(key) == slot_of(stream) for key, _, stream in keys)
        assert {camera for _, camera, _ in keys} == {"cam1", "cam2", "cam3", None}
        groups = acks.read_groups()
        assert all(len({slot_of(s) for s in g}) == 1 for g in groups)
        assert sorted(s for g in groups for s in g) == sorted(acks.streams)
        assert acks.problems() == []


def test_a_snapshot_key_with_its_own_hash_tag_is_refused_on_a_cluster() -> None:
    cfg = RedisConfig(url="redis://127.0.0.1:7000", cluster=True)
    acks = AckLayout.of(BridgeConfig(snapshot_key="bs:{fixed}:state"), cfg, read_streams(LAYOUT, cfg))
    assert len(acks.problems()) == 4


def test_snapshot_parts_restore_what_the_whole_snapshot_does() -> None:
    state = BridgeState(LAYOUT)
    fields = {"v": "1", "camera": "cam2", "track": "4", "label": "box", "cls": "1", "score": "0.9"}
    fields |= {"event": "crossed", "at_ms": "5", "line": "L1", "direction": "out", "count": "9", "speed_px_s": "3"}
    assert state.apply_object("cam2", "7-1", fields) is not None
    state.apply_event("8-0", {"kind": "camera_down", "camera": "cam3"})
    restored = BridgeState(LAYOUT)
    for camera in (None, "cam1", "cam2", "cam3"):
        restored.load_snapshot_part(state.to_snapshot_part(camera))
    assert restored.to_snapshot() == state.to_snapshot()
    assert restored.apply_object("cam2", "7-1", fields) is None  # a replay after restore serves nothing


def test_the_unit_reloads_with_sighup() -> None:
    assert "ExecReload=/bin/kill -HUP $MAINPID" in UNIT.read_text().splitlines()


def test_the_cli_refuses_a_cluster_snapshot_key_with_its_own_hash_tag(tmp_path: Path) -> None:
    config = tmp_path / "beltsight.toml"
    config.write_text(
        '[redis]\nurl = "redis://127.0.0.1:7000"\ncluster = true\n[models]\n640 = "m.onnx"\n'
        '[[cameras]]\nid = "cam1"\nurl = "rtsp://127.0.0.1:1/s"\n'
        '[[cameras.lines]]\nid = "L1"\nstart = [0.5, 0.0]\nend = [0.5, 1.0]\n'
        '[bridge]\nsnapshot_key = "bs:{fixed}:state"\n'
    )
    with pytest.raises(ConfigError, match="hashes to another slot"):
        load(config)
    config.write_text(config.read_text().replace('"bs:{fixed}:state"', '"bs:state:{group}"'))
    load(config)
