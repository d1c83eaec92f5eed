"""The held cameras' tries: a task beside the sink's own batches, on a client of its own.

The cameras held apart (`daemon.publish.sink.held`) that are due a try are tried in a task of
their own, on a client of their own (its failures' topology refreshes stay off the batches'
client), so that a probe of a master still down (even one that never answers) delays no other
camera. A failed try is backed off by the holds (`HeldStreams.settle`) and logged when held; after
a slot fault the slot map is read again (redis-py does so itself after a node's). The try runs in a
`Tracked` task (`daemon.core.tasks`): an unexpected exception is logged (`sink_probe_failed`), never
lost, and `stop` cancels a try under way and waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog
from redis.exceptions import ResponseError

from daemon.core.tasks import Tracked
from daemon.publish.redis_conn import RETRYABLE, RedisClient
from daemon.publish.sink.faults import REDIRECTS, refresh_slots, stream_fault
from daemon.publish.sink.held import HeldStreams

log = structlog.get_logger("beltsight.sink")


class HeldProbe:
    """At most one try of the held cameras at a time (event loop only)."""

    def __init__(
        self,
        held: HeldStreams,
        client_factory: Callable[[], RedisClient],
        publish: Callable[[RedisClient], Awaitable[None]],
        *,
        forget_tops: Callable[[], None],
        wake: asyncio.Event,
    ) -> None:
        """`publish`: one pipeline of the due held cameras on the client given; `forget_tops`: the
        streams' tops are read again (a try cut off may have written unseen); `wake`: set after each try."""
        self._held = held
        self._client_factory = client_factory
        self._publish = publish
        self._forget_tops = forget_tops
        self._wake = wake
        self._tries = Tracked(_probe_failed)  # at most one at a time
        self._client: RedisClient | None = None

    def start(self) -> None:
        """Try the held cameras that are due, unless a try is under way."""
        if not self._tries and self._held.cameras_due():
            self._client = self._client or self._client_factory()
            self._tries.start(self._probe(self._client), "held-probe")

    async def stop(self) -> None:
        """End the try under way and close the client."""
        await self._tries.close()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _probe(self, client: RedisClient) -> None:
        try:
            await self._publish(client)
        except asyncio.CancelledError:
            self._forget_tops()  # writes may have landed unseen
            raise
        except (*RETRYABLE, ResponseError, ValueError) as exc:
            if stream_fault(exc) in REDIRECTS:
                await refresh_slots(client)
        finally:
            self._wake.set()


def _probe_failed(task: str, exc: BaseException) -> None:
    log.error("sink_probe_failed", task=task, error=f"{type(exc).__name__}: {exc}")


__all__ = ["HeldProbe"]
