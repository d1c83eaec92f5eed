"""The bridge's Redis replies read into types (daemon/bridge/replies.py), bytes or str, RESP2 or RESP3."""

from __future__ import annotations

from daemon.bridge.replies import AutoClaim, pending_count, stream_entries


def test_xautoclaim_with_and_without_the_deleted_ids_of_redis_7() -> None:
    claimed = AutoClaim.of([b"5-0", [(b"1-0", {b"event": b"crossed"})], [b"2-0"]])
    assert claimed == AutoClaim("5-0", [("1-0", {"event": "crossed"})], [("2-0", None)])
    assert AutoClaim.of(["0-0", []]) == AutoClaim("0-0", [], [])


def test_xreadgroup_as_resp2_list_and_resp3_dict_and_xpending_summaries() -> None:
    resp2 = [[b"s", [(b"1-0", {b"a": b"1"}), (b"2-0", None)]]]
    resp3 = {b"s": [[(b"1-0", {b"a": b"1"}), (b"2-0", None)]]}
    expected = [("s", [("1-0", {"a": "1"}), ("2-0", None)])]
    assert stream_entries(resp2) == expected == stream_entries(resp3)
    assert stream_entries(None) == []
    assert pending_count({"pending": 3, "min": None}) == 3 == pending_count([3, b"1-0", b"3-0", []])
