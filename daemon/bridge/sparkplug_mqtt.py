"""paho's MQTT client (1.x) seen from the asyncio loop, for the Sparkplug edge node (`sparkplug.py`).

paho calls back on its own network thread; `Session` turns each callback into an `Event` on a queue
the loop reads (`call_soon_threadsafe`), so every decision is taken on the loop: `connack` (with its
return code), `lost` (the connection ended; `error` says why when the thread ended on an exception),
`rebirth` (an NCMD `Node Control/Rebirth` = true; at most one queued) and `host` (a STATE of the
primary host, parsed). `network_main` is the network thread's body.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as paho

from daemon.bridge import sparkplug_payloads as sp


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    """connack, lost, rebirth or host (a STATE of the primary host)."""
    rc: int = 0
    state: sp.HostState | None = None


class Session:
    """paho's callbacks (on its thread) turned into events on the loop's queue."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ncmd_topic: str, state_topic: str | None) -> None:
        self.loop = loop
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.ncmd_topic = ncmd_topic
        self.state_topic = state_topic
        self.error = ""
        """Why the network thread ended, when it ended on an exception (a TLS alert, a reset)."""
        self._rebirth_queued = False

    def _put(self, event: Event) -> None:
        if event.kind == "rebirth":
            if self._rebirth_queued:
                return
            self._rebirth_queued = True
        self.events.put_nowait(event)

    async def next(self) -> Event:
        event = await self.events.get()
        if event.kind == "rebirth":
            self._rebirth_queued = False
        return event

    def on_connect(self, _c: Any, _u: Any, _flags: Any, rc: int) -> None:
        self.loop.call_soon_threadsafe(self._put, Event("connack", rc))

    def on_disconnect(self, _c: Any, _u: Any, rc: int) -> None:
        self.loop.call_soon_threadsafe(self._put, Event("lost", rc))

    def on_message(self, _c: Any, _u: Any, message: Any) -> None:
        if message.topic == self.ncmd_topic and sp.is_rebirth(message.payload):
            self.loop.call_soon_threadsafe(self._put, Event("rebirth"))
        elif message.topic == self.state_topic:
            self.loop.call_soon_threadsafe(self._put, Event("host", state=sp.host_state(message.payload)))


def network_main(client: paho.Client, session: Session) -> None:
    """paho's network loop on its own thread, until DISCONNECT or the connection's end; an exception
    (paho lets a TLS alert through) ends the session like a lost connection instead of the thread."""
    try:
        paho.Client._thread_main(client)
    except (OSError, ValueError) as exc:
        session.error = str(exc)[:200]
        session.loop.call_soon_threadsafe(session._put, Event("lost", -1))


__all__ = ["Event", "Session", "network_main"]
