"""The Sparkplug 3.0 primary host's STATE as the edge node reads it (payloads, stale timestamps) and
the bdSeq file kept across restarts (daemon/bridge/sparkplug_host.py, sparkplug_bdseq.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.bridge import sparkplug_bdseq as bdseq
from daemon.bridge import sparkplug_payloads as sp
from daemon.bridge.sparkplug_host import PrimaryHost, state_topic
from daemon.bridge.sparkplug_payloads import HostState
from daemon.core.durable import replace_durably


@pytest.mark.parametrize(
    ("payload", "state"),
    [
        (b'{"online": true, "timestamp": 1700000000123}', HostState(True, 1700000000123)),
        (b'{"online": false, "timestamp": 5}', HostState(False, 5)),
        (b'{"timestamp": 5.0, "online": true}', HostState(True, 5)),
        (b'{"online": true}', HostState(True, None)),
        (b'{"online": true, "timestamp": "5"}', HostState(True, None)),
        (b'{"online": true, "timestamp": -1}', HostState(True, None)),
        (b'{"online": true, "timestamp": true}', HostState(True, None)),
        (b"ONLINE", HostState(True, None)),
        (b" OFFLINE\n", HostState(False, None)),
        (b'{"online": "true", "timestamp": 5}', None),
        (b'{"online": 1}', None),
        (b"[true]", None),
        (b"{", None),
        (b"\xff\xfe", None),
    ],
)
def test_state_payloads(payload: bytes, state: HostState | None) -> None:
    assert sp.host_state(payload) == state


def test_stale_states_are_ignored_and_equal_timestamps_accepted() -> None:
    host = PrimaryHost("scada")
    assert state_topic("scada") == "spBv1.0/STATE/scada"
    assert (host.online, host.last_ms) == (None, None)
    assert host.observe(HostState(False, 100)) == "offline"  # the first STATE is the latest, whatever it says
    assert host.observe(HostState(True, 99)) == "stale"  # an online from before that offline
    assert (host.online, host.last_ms) == (False, 100)
    assert host.observe(HostState(True, 200)) == "online"
    assert host.observe(HostState(False, 150)) == "stale"  # an old session's will, delivered late
    assert host.online is True
    assert host.observe(HostState(False, 200)) == "offline"  # this session's will: same timestamp
    assert host.observe(HostState(False, 200)) == "offline"  # the retained one again, after a reconnect
    assert host.observe(None) == "invalid"
    assert host.observe(HostState(True, None)) == "online"  # no timestamp (2.2): taken as it comes
    assert (host.online, host.last_ms) == (True, 200)


def test_bdseq_file_round_trip_other_node_and_wrap(tmp_path: Path) -> None:
    path = bdseq.path_in(tmp_path / "state")
    assert bdseq.load(path, "g", "e") == bdseq.NONE
    assert bdseq.following(bdseq.NONE) == 0  # a node without a file starts at 0
    bdseq.save(path, "g", "e", 17)
    assert bdseq.load(path, "g", "e") == 17
    assert bdseq.load(path, "g", "other") == bdseq.NONE  # another node's file is not continued
    assert bdseq.following(17) == 18 and bdseq.following(255) == 0
    assert [p.name for p in path.parent.iterdir()] == [bdseq.FILE_NAME]  # no temporary file left


@pytest.mark.parametrize(
    "content",
    [
        b"{",
        b"[]",
        json.dumps({"format": 2, "group_id": "g", "edge_node_id": "e", "bd_seq": 1}).encode(),
        json.dumps({"format": 1, "group_id": "g", "edge_node_id": "e", "bd_seq": 256}).encode(),
        json.dumps({"format": 1, "group_id": "g", "edge_node_id": "e", "bd_seq": "1"}).encode(),
    ],
)
def test_bdseq_file_that_does_not_parse(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / bdseq.FILE_NAME
    path.write_bytes(content)
    with pytest.raises(ValueError):
        bdseq.load(path, "g", "e")


def test_replace_durably_replaces_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.json"
    replace_durably(target, b"one")
    replace_durably(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["b.json"]
    blocked = tmp_path / "file"
    blocked.write_bytes(b"")
    with pytest.raises(OSError):
        replace_durably(blocked / "x.json", b"x")  # its folder is a file
