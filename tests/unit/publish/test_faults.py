"""How wide a Redis error is (`daemon.publish.sink.faults`): one key, one Cluster slot, or the whole
server or connection; errors built by redis-py's own reply parser from the servers' reply texts."""

from __future__ import annotations

import pytest
from redis._parsers.base import BaseParser
from redis.exceptions import ClusterError, SlotNotCoveredError
from redis.exceptions import ConnectionError as RedisConnectionError

from daemon.publish.sink.faults import HINTS, EventsHold, StreamRefusedError, stream_fault
from tests.support.clock import FakeClock


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("WRONGTYPE Operation against a key holding the wrong kind of value", "WRONGTYPE"),
        ("NOPERM No permissions to access a key", "NOPERM"),
        ("CLUSTERDOWN Hash slot not served", "CLUSTERDOWN"),
        ("TRYAGAIN Multiple keys request during rehashing of slot", "TRYAGAIN"),
        ("MOVED 3999 127.0.0.1:6381", "MOVED"),
        ("ASK 3999 127.0.0.1:6381", "ASK"),
        # every key is refused: a fault of the whole cluster, not of one slot
        ("CLUSTERDOWN The cluster is down", None),
        ("OOM command not allowed when used memory > 'maxmemory'.", None),
        ("NOPERM User beltsight has no permissions to run the 'xadd' command", None),
        ("READONLY You can't write against a read only replica.", None),
    ],
)
def test_a_reply_concerns_one_key_or_slot_or_the_whole_server(reply: str, code: str | None) -> None:
    assert stream_fault(BaseParser.parse_error(reply)) == code


def test_client_side_slot_faults_are_per_slot_and_connection_errors_are_not() -> None:
    assert stream_fault(SlotNotCoveredError('Slot "3999" is not covered by the cluster.')) == "CLUSTERDOWN"
    assert stream_fault(ClusterError("TTL exhausted.")) == "MOVED"  # redis-py's redirect limit: a storm
    assert stream_fault(RedisConnectionError("Connection refused")) is None  # `isolate` decides those


def test_every_code_has_a_hint_and_a_refused_stream_carries_its_code() -> None:
    for reply in ("CLUSTERDOWN Hash slot not served", "MOVED 1 127.0.0.1:1", "WRONGTYPE x"):
        refused = StreamRefusedError("beltsight:detections:cam1", BaseParser.parse_error(reply))
        assert refused.code in HINTS
    node_down = StreamRefusedError("k", RedisConnectionError("refused"), code="NODE_DOWN")
    assert node_down.code == "NODE_DOWN" and HINTS["NODE_DOWN"]


def test_a_held_events_stream_is_tried_with_backoff_and_released_by_one_write() -> None:
    clock = FakeClock()
    hold = EventsHold(clock, (0.2, 5.0))
    assert hold.due() and not hold.held and hold.next_due_s() is None
    assert hold.failed("NODE_DOWN") is True
    assert hold.held and not hold.due()
    waits = []
    for _ in range(8):
        waits.append(hold.next_due_s())
        clock.now += waits[-1] or 0.0
        assert hold.due()
        assert hold.failed("NODE_DOWN") is False  # still held: a failed try
    assert all(w is not None and 0.0 <= w <= 5.0 for w in waits)
    assert hold.succeeded() is True
    assert not hold.held and hold.due() and hold.succeeded() is False
