"""Event history of the OPC UA server: what a PLC missed while it reconnected, read back with HistoryRead.

`[bridge] event_history_s` (600 s by default; 0: off) is the window kept. Every event source the
bridge has, `Objects/BeltSight` (CrossingEventType) and each camera's VisionSystemType object
(ResultReadyEventType, with `[bridge.opcua] machine_vision`), gets the `HistoryRead` bit of its
EventNotifier, and asyncua's HistoryRead service answers from this store (an asyncua `HistoryDict`:
events kept in memory, dropped once older than the window, at most `MAX_EVENTS` per source).

- Each crossing is recorded once per source, keyed by its camera and entry id: the copy of the event
  the subscribers got (`record`, from `OpcUaBridgeServer.fire`), or one built the same way, stamped
  with the entry's time, when the bridge starts (`recall`: the reader reads the last
  `event_history_s` of every objects stream from Redis once per process, before any entry is
  served). A crossing fired after it was recalled (an entry read again after a restart) is not
  recorded twice, so a bridge kill loses no history and duplicates none.
- The crossings themselves are kept per camera too (`crossings`): Machine Vision's
  `GetResultListFiltered` answers from them.
"""

from __future__ import annotations

import copy
import uuid
from collections import deque
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncua import ua
from asyncua.common.events import Event
from asyncua.common.node import Node
from asyncua.server.history import HistoryDict

from daemon.bridge.state import Crossing

MAX_EVENTS = 200_000
"""Events kept per source at most, whatever the window (memory bound: about 2 KB each)."""


def fired(event: Event) -> Event:
    """A copy of the event a generator has just triggered (same EventId and Time), to keep."""
    return copy.copy(event)


def stamped(template: Event, at: datetime, message: str) -> Event:
    """A copy of a generator's event (its fields as last set) with a new EventId, `at` as its Time
    and ReceiveTime, and `message`: what `EventGenerator.trigger` stamps, without firing it."""
    ev = copy.copy(template)
    # the event type's fields are attributes asyncua sets at run time (Event declares none of them)
    setattr(ev, "EventId", ua.Variant(uuid.uuid4().hex.encode(), ua.VariantType.ByteString))  # noqa: B010
    setattr(ev, "Time", at)  # noqa: B010
    setattr(ev, "ReceiveTime", at)  # noqa: B010
    setattr(ev, "Message", ua.LocalizedText(message))  # noqa: B010
    return ev


def entry_time(entry_id: str) -> datetime:
    """When a stream entry was added (the milliseconds part of its id), as an aware UTC datetime."""
    return datetime.fromtimestamp(int(entry_id.split("-", 1)[0]) / 1000, UTC)


class EventHistory(HistoryDict):
    """asyncua's in-memory history storage, recording each crossing once per source."""

    def __init__(self, window_s: float) -> None:
        super().__init__()
        self.window = timedelta(seconds=window_s)
        self._keys: dict[ua.NodeId, set[tuple[str, str]]] = {}
        self._order: dict[ua.NodeId, deque[tuple[datetime, tuple[str, str]]]] = {}
        self._crossings: dict[str, deque[Crossing]] = {}
        self._crossing_ids: dict[str, set[str]] = {}
        self.recorded = 0

    async def historize(self, node: Node) -> None:
        """Serve HistoryRead of `node`'s events: the HistoryRead bit on its EventNotifier, a store for it."""
        notifier = await node.read_event_notifier()
        notifier.add(ua.EventNotifier.HistoryRead)
        await node.set_event_notifier(notifier)
        await self.new_historized_event(node.nodeid, [], self.window, MAX_EVENTS)
        self._keys[node.nodeid] = set()
        self._order[node.nodeid] = deque()

    def has(self, source: ua.NodeId, crossing: Crossing) -> bool:
        return (crossing.camera, crossing.entry_id) in self._keys.get(source, ())

    async def record(self, event: Any, crossing: Crossing) -> bool:
        """Keep `event` (a copy the caller no longer changes) for its emitting node, unless this
        crossing is already there; whether it was kept."""
        source = event.emitting_node
        keys = self._keys.get(source)
        key = (crossing.camera, crossing.entry_id)
        if keys is None or key in keys:
            return False
        keys.add(key)
        order = self._order[source]
        order.append((event.Time, key))
        await self.save_event(event)
        self._forget(source, order, keys)
        self.recorded += 1
        return True

    def _forget(self, source: ua.NodeId, order: deque[tuple[datetime, tuple[str, str]]], keys: set[Any]) -> None:
        """Drop the keys of the events `save_event` dropped (older than the window, or over MAX_EVENTS)."""
        kept = len(self._events.get(source, ()))
        while len(order) > kept:
            keys.discard(order.popleft()[1])

    def remember(self, crossing: Crossing) -> None:
        """Keep `crossing` for the result methods (once per entry id; the window applies)."""
        kept = self._crossings.setdefault(crossing.camera, deque())
        ids = self._crossing_ids.setdefault(crossing.camera, set())
        if crossing.entry_id in ids:
            return
        kept.append(crossing)
        ids.add(crossing.entry_id)
        self._prune(kept, ids)

    def _prune(self, kept: deque[Crossing], ids: set[str]) -> None:
        oldest = datetime.now(UTC) - self.window
        while kept and (entry_time(kept[0].entry_id) < oldest or len(kept) > MAX_EVENTS):
            ids.discard(kept.popleft().entry_id)

    def crossings(self, camera: str) -> list[Crossing]:
        """The camera's crossings within the window, oldest first."""
        kept = self._crossings.get(camera)
        if kept is None:
            return []
        self._prune(kept, self._crossing_ids[camera])
        return list(kept)
