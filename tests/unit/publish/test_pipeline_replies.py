"""A pipeline's replies split by kind of command (objects, frames, events, waits), in queue order."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from daemon.publish.sink.pipeline import Replies


def test_each_kind_gets_its_own_replies_in_the_order_queued() -> None:
    refused = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    replies = Replies.split(["1-1", "1-2", "5-0", refused, "9-0", "OK", 1], objects=2, frames=2, events=1, waits=2)
    assert replies.objects == ["1-1", "1-2"]
    assert replies.frames == ["5-0", refused]
    assert replies.events == ["9-0"]
    assert replies.waits == ["OK", 1]


def test_a_kind_with_no_commands_gets_no_replies() -> None:
    replies = Replies.split(["5-0", 2], objects=0, frames=1, events=0, waits=1)
    assert (replies.objects, replies.frames, replies.events, replies.waits) == ([], ["5-0"], [], [2])
    assert Replies() == Replies.split([], objects=0, frames=0, events=0, waits=0)


def test_a_reply_count_that_does_not_match_the_commands_is_refused() -> None:
    with pytest.raises(ValueError, match="3 replies for 4 commands"):
        Replies.split(["1-1", "1-2", 1], objects=1, frames=2, events=0, waits=1)
