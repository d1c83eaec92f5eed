"""paho's MQTT client (1.x) seen from the asyncio loop, for the Sparkplug edge node (`sparkplug.py`).

paho calls back on its own network thread; `Session` turns each callback into an `Event` on a queue
the loop reads (`call_soon_threadsafe`), so every decision is taken on the loop: `connack` (with its
return code), `lost` (the connection ended; `error` says why when the thread ended on an exception),
`rebirth` (an NCMD `Node Control/Rebirth` = true; at most one queued) and `host` (a STATE of the
primary host, parsed). `network_main` is the network thread's body. `make_client` makes the client of one
session (credentials, TLS, the will NDEATH), `close_client` ends it (NDEATH and DISCONNECT, its thread
joined); `read_password` reads the MQTT password once, at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as paho

from daemon.bridge import sparkplug_payloads as sp
from daemon.config.base import read_secret_file
from daemon.config.sparkplug import SparkplugConfig
from daemon.core.redaction import SECRETS

CLOSE_TIMEOUT_S = 2.0


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


def read_password(cfg: SparkplugConfig) -> str | None:
    """The MQTT password (file read now, registered with the log redaction); ValueError naming the
    key when the file cannot be read or is empty."""
    if cfg.password_file is None:
        return None
    try:
        secret = read_secret_file(cfg.password_file)
    except ValueError as exc:
        raise ValueError(f"bridge.sparkplug.password_file: {exc}") from None
    if not secret:
        raise ValueError("bridge.sparkplug.password_file: the password is empty")
    SECRETS.add(secret)
    return secret


def make_client(
    cfg: SparkplugConfig, password: str | None, session: Session, death_topic: str, bd_seq: int
) -> paho.Client:
    """One session's client: its callbacks on `session`, the credentials, TLS for `mqtts://`, and the
    will NDEATH(`bd_seq`) on `death_topic` (QoS 1)."""
    client = paho.Client(client_id=cfg.mqtt_client_id(), clean_session=True, reconnect_on_failure=False)
    client.on_connect = session.on_connect
    client.on_disconnect = session.on_disconnect
    client.on_message = session.on_message
    if cfg.username is not None:
        client.username_pw_set(cfg.username, password)
    _, _, tls = cfg.host_port()
    if tls:
        context = ssl.create_default_context(cafile=str(cfg.ca_file) if cfg.ca_file else None)
        if cfg.cert_file is not None and cfg.key_file is not None:
            context.load_cert_chain(str(cfg.cert_file), str(cfg.key_file))
        client.tls_set_context(context)
    death = sp.node_death(bd_seq, int(time.time() * 1000))
    client.will_set(death_topic, death, qos=1)
    return client


def close_client(client: paho.Client, network: threading.Thread, death: tuple[str, int] | None) -> None:
    """On paho's side (a thread): NDEATH (`death`: its topic and bdSeq; None: the connection is gone) and
    DISCONNECT, then its thread ends."""
    if death is not None:
        topic, bd_seq = death
        info = client.publish(topic, sp.node_death(bd_seq, int(time.time() * 1000)), qos=1)
        with contextlib.suppress(RuntimeError, ValueError):  # the connection went meanwhile: the will covers it
            info.wait_for_publish(CLOSE_TIMEOUT_S)
    client.disconnect()  # also ends the network thread's loop when the connection is already gone
    client.loop_stop()
    network.join(CLOSE_TIMEOUT_S)
    if not network.is_alive():
        client._reset_sockets()  # the wake-up socket pair loop_start opened (paho 1.x leaves it to the GC)


__all__ = ["Event", "Session", "close_client", "make_client", "network_main", "read_password"]
