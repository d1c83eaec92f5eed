"""MQTT Sparkplug B: the served state published as an edge node (`[bridge.sparkplug]`).

One edge node per bridge (`edge_node_id`), one device per camera. The MQTT client is paho's (through
pysparkplug, which encodes the payloads) on its own network thread; every decision is taken on the
asyncio loop, which paho's callbacks only notify (`call_soon_threadsafe`).

- Session: CONNECT with the will NDEATH(bdSeq); on CONNACK subscribe to NCMD, publish NBIRTH (seq 0,
  `bdSeq`, `Node Control/Rebirth`) and a DBIRTH per camera from the served state, then the crossings
  kept while offline as historical DDATA. bdSeq goes up by one (mod 256) with every CONNECT and
  starts at 0 when the bridge starts; seq goes 0-255 and wraps, back to 0 with each NBIRTH.
- Changes (`serve`, called by the bridge with what the reader newly served, before it acknowledges
  the entries): one DDATA per crossing and per camera state change, never merged.
- Offline (broker down, not connected yet): crossings wait in a bounded buffer (`offline_buffer`;
  full: the oldest is dropped and counted); the next DBIRTH carries the current values in any case,
  and these come from the bridge's snapshot, so a broker restart loses no count.
- NCMD `Node Control/Rebirth` = true: NBIRTH and every DBIRTH again (same bdSeq, seq from 0).
- Broker gone: reconnect with capped exponential backoff and full jitter (daemon.core.backoff).
- Clean stop: NDEATH published, then DISCONNECT; a killed bridge leaves the broker to publish the will.
- The password (`password_file`) is registered with the log redaction and never logged.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as paho
import structlog

from daemon.bridge import sparkplug_payloads as sp
from daemon.bridge.layout import BridgeLayout
from daemon.bridge.state import BridgeState, Change, Crossing
from daemon.config.base import read_secret_file
from daemon.config.sparkplug import SparkplugConfig
from daemon.core.backoff import Backoff
from daemon.core.ratelimit import RateLimited
from daemon.core.redaction import SECRETS

log = structlog.get_logger("beltsight.bridge.sparkplug")

CONNECT_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 2.0
BACKOFF_BASE_S = 0.2
HEALTHY_RESET_S = 30.0
DROP_LOG_INTERVAL_S = 60.0


@dataclass(slots=True)
class SparkplugStats:
    connected: bool = False
    bd_seq: int = -1
    """bdSeq of the current (or last) CONNECT; -1 before the first."""
    sessions: int = 0
    births: int = 0
    ddata: int = 0
    historical: int = 0
    """Crossings published as historical DDATA after a reconnect."""
    dropped: int = 0
    """Crossings dropped from a full offline buffer (their counts still reach the host in DBIRTH)."""
    rebirths: int = 0
    json_published: int = 0


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


class _Session:
    """paho's callbacks (on its thread) turned into events on the loop's queue."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ncmd_topic: str, state_topic: str | None) -> None:
        self.loop = loop
        self.events: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        self.ncmd_topic = ncmd_topic
        self.state_topic = state_topic
        self.error = ""
        """Why the network thread ended, when it ended on an exception (a TLS alert, a reset)."""
        self._rebirth_queued = False

    def _put(self, kind: str, code: int) -> None:
        if kind == "rebirth":
            if self._rebirth_queued:
                return
            self._rebirth_queued = True
        self.events.put_nowait((kind, code))

    def taken(self, kind: str) -> None:
        if kind == "rebirth":
            self._rebirth_queued = False

    def on_connect(self, _c: Any, _u: Any, _flags: Any, rc: int) -> None:
        self.loop.call_soon_threadsafe(self._put, "connack", rc)

    def on_disconnect(self, _c: Any, _u: Any, rc: int) -> None:
        self.loop.call_soon_threadsafe(self._put, "lost", rc)

    def on_message(self, _c: Any, _u: Any, message: Any) -> None:
        if message.topic == self.ncmd_topic and sp.is_rebirth(message.payload):
            self.loop.call_soon_threadsafe(self._put, "rebirth", 0)
        elif message.topic == self.state_topic:
            online = sp.host_online(message.payload)
            self.loop.call_soon_threadsafe(self._put, "host_online" if online else "host_offline", 0)


def _network(client: paho.Client, session: _Session) -> None:
    """paho's network loop on its own thread, until DISCONNECT or the connection's end; an exception
    (paho lets a TLS alert through) ends the session like a lost connection instead of the thread."""
    try:
        paho.Client._thread_main(client)
    except (OSError, ValueError) as exc:
        session.error = str(exc)[:200]
        session.loop.call_soon_threadsafe(session._put, "lost", -1)


class SparkplugEdge:
    """The edge node; `run` is its long-lived task, `serve`/`serve_all` the reader's pushes."""

    def __init__(self, cfg: SparkplugConfig, layout: BridgeLayout, state: BridgeState) -> None:
        self.cfg = cfg
        self.layout = layout
        self.state = state
        self.stats = SparkplugStats()
        self.gates = {(c.id, line.id): line.gates for c in layout.cameras for line in c.lines}
        self._password: str | None = None
        self._client: paho.Client | None = None
        """The connected client once the births are out; None while offline."""
        self._seq = 0
        self._backlog: collections.deque[Crossing] = collections.deque()
        self._ready = asyncio.Event()
        self._drop_log = RateLimited(DROP_LOG_INTERVAL_S)
        self._backoff = Backoff(min(BACKOFF_BASE_S, cfg.reconnect_max_s), cfg.reconnect_max_s, HEALTHY_RESET_S)

    def start(self) -> None:
        """Read the password (ValueError when it cannot be read)."""
        self._password = read_password(self.cfg)

    # -- the reader's pushes (on the loop) ---------------------------------------------------------

    def serve_all(self, _state: BridgeState) -> None:
        """The state is loaded (snapshot): births may go out now; a connected node is reborn."""
        self._ready.set()
        if self._client is not None:
            self._birth(self._client)

    def serve(self, changes: list[Change]) -> None:
        for change in changes:
            if isinstance(change, Crossing):
                self._crossing(change, historical=False)
            elif self._client is not None:
                self._publish(
                    sp.topic(*self._ids("DDATA", change.camera)), sp.state_data(change.status, *self._stamp())
                )
                self.stats.ddata += 1

    def _crossing(self, crossing: Crossing, *, historical: bool) -> None:
        client = self._client
        if client is None:
            self._keep(crossing)
            return
        gates = self.gates.get((crossing.camera, crossing.line), ())
        payload = sp.crossing_data(crossing, gates, *self._stamp(), historical=historical)
        if not self._publish(sp.topic(*self._ids("DDATA", crossing.camera)), payload):
            self._keep(crossing)  # the connection went before paho noticed: publish it after the rebirth
            return
        self.stats.ddata += 1
        self.stats.historical += historical
        if self.cfg.json_topics:
            client.publish(sp.JSON_TOPIC.format(camera=crossing.camera), sp.crossing_json(crossing), qos=1)
            self.stats.json_published += 1

    def _keep(self, crossing: Crossing) -> None:
        if self.cfg.offline_buffer == 0:
            self._dropped()
            return
        if len(self._backlog) >= self.cfg.offline_buffer:
            self._backlog.popleft()
            self._dropped()
        self._backlog.append(crossing)

    def _dropped(self) -> None:
        self.stats.dropped += 1
        if self._drop_log.allow() is not None:
            log.warning("bridge_sparkplug_dropped", dropped=self.stats.dropped, offline_buffer=self.cfg.offline_buffer)

    def _ids(self, kind: str, camera: str | None = None) -> tuple[str, str, str, str | None]:
        return self.cfg.group_id, kind, self.cfg.edge_node_id, camera

    def _stamp(self) -> tuple[int, int]:
        """(seq, now ms) for the next message; seq wraps at 256."""
        seq = self._seq
        self._seq = (seq + 1) % sp.SEQ_MODULO
        return seq, int(time.time() * 1000)

    def _publish(self, topic: str, payload: bytes) -> bool:
        if self._client is None:
            return False
        return bool(self._client.publish(topic, payload, qos=0).rc == paho.MQTT_ERR_SUCCESS)

    def _birth(self, client: paho.Client) -> None:
        """NBIRTH (seq 0) and a DBIRTH per camera, from the served state."""
        self._seq = 0
        _, now = self._stamp()
        client.publish(sp.topic(*self._ids("NBIRTH")), sp.node_birth(self.stats.bd_seq, now), qos=0)
        for camera in self.layout.cameras:
            payload = sp.device_birth(camera, self.state.cameras[camera.id], *self._stamp())
            client.publish(sp.topic(*self._ids("DBIRTH", camera.id)), payload, qos=0)
        self.stats.births += 1

    # -- the connection (its own task) -------------------------------------------------------------

    async def run(self) -> None:
        """Connect once the state is loaded, and again after each loss (capped backoff, jitter)."""
        await self._ready.wait()
        while True:
            try:
                await self._session()
            except (OSError, ConnectionError, TimeoutError, ssl.SSLError) as exc:
                self._offline(str(exc))
            delay = self._backoff.failed()
            await asyncio.sleep(delay)

    def _offline(self, error: str) -> None:
        was = self.stats.connected
        self.stats.connected = False
        if was or self.stats.sessions <= 1:
            host, port, _ = self.cfg.host_port()
            log.warning("bridge_sparkplug_offline", broker=f"{host}:{port}", error=error[:200], kept=len(self._backlog))

    def _new_client(self, session: _Session) -> paho.Client:
        client = paho.Client(client_id=self.cfg.mqtt_client_id(), clean_session=True, reconnect_on_failure=False)
        client.on_connect = session.on_connect
        client.on_disconnect = session.on_disconnect
        client.on_message = session.on_message
        if self.cfg.username is not None:
            client.username_pw_set(self.cfg.username, self._password)
        _, _, tls = self.cfg.host_port()
        if tls:
            context = ssl.create_default_context(cafile=str(self.cfg.ca_file) if self.cfg.ca_file else None)
            if self.cfg.cert_file is not None and self.cfg.key_file is not None:
                context.load_cert_chain(str(self.cfg.cert_file), str(self.cfg.key_file))
            client.tls_set_context(context)
        self.stats.bd_seq = (self.stats.bd_seq + 1) % sp.SEQ_MODULO
        client.will_set(sp.topic(*self._ids("NDEATH")), sp.node_death(self.stats.bd_seq, int(time.time() * 1000)))
        return client

    async def _session(self) -> None:
        host_id = self.cfg.primary_host_id
        state_topic = f"{sp.NAMESPACE}/STATE/{host_id}" if host_id else None
        session = _Session(asyncio.get_running_loop(), sp.topic(*self._ids("NCMD")), state_topic)
        client = self._new_client(session)
        self.stats.sessions += 1
        host, port, _ = self.cfg.host_port()
        network: threading.Thread | None = None
        try:
            await asyncio.to_thread(client.connect, host, port, self.cfg.keepalive_s)
            client._thread_main = functools.partial(_network, client, session)  # loop_start's thread runs it
            client.loop_start()
            network = client._thread
            kind, rc = await asyncio.wait_for(session.events.get(), CONNECT_TIMEOUT_S)
            if kind != "connack" or rc != 0:
                why = paho.connack_string(rc) if kind == "connack" else session.error or kind
                raise ConnectionError(f"broker refused: {why}")
            client.subscribe(session.ncmd_topic, qos=1)
            if state_topic is not None:
                client.subscribe(state_topic, qos=1)
                await self._host_online(session)
            self._online(client)
            while True:
                kind, rc = await session.events.get()
                session.taken(kind)
                if kind == "host_offline":
                    raise ConnectionError("the primary host is offline")
                if kind == "lost":
                    self._client = None  # gone: no NDEATH to publish on it (the broker sends the will)
                    raise ConnectionError(f"connection lost ({session.error or paho.error_string(rc)})")
                if kind == "rebirth":
                    self.stats.rebirths += 1
                    log.info("bridge_sparkplug_rebirth", bd_seq=self.stats.bd_seq)
                    self._birth(client)
        finally:
            clean = self._client is not None
            self._client = None
            if network is not None:
                await asyncio.shield(asyncio.to_thread(self._close, client, network, clean))

    async def _host_online(self, session: _Session) -> None:
        """Until the primary host's STATE says online (rebirth requests meanwhile are moot)."""
        while True:
            kind, rc = await session.events.get()
            session.taken(kind)
            if kind == "lost":
                raise ConnectionError(f"connection lost ({session.error or paho.error_string(rc)})")
            if kind == "host_online":
                return

    def _online(self, client: paho.Client) -> None:
        self._client = client
        self._birth(client)
        backlog, self._backlog = self._backlog, collections.deque()
        for crossing in backlog:
            self._crossing(crossing, historical=True)
        self.stats.connected = True
        self._backoff.succeeded()
        host, port, tls = self.cfg.host_port()
        log.info(
            "bridge_sparkplug_online",
            broker=f"{host}:{port}",
            tls=tls,
            bd_seq=self.stats.bd_seq,
            historical=len(backlog),
        )

    def _close(self, client: paho.Client, network: threading.Thread, clean: bool) -> None:
        """On paho's side (a thread): NDEATH and DISCONNECT when still connected, then its thread ends."""
        if clean:
            death = sp.node_death(self.stats.bd_seq, int(time.time() * 1000))
            info = client.publish(sp.topic(*self._ids("NDEATH")), death)
            with contextlib.suppress(RuntimeError, ValueError):  # the connection went meanwhile: the will covers it
                info.wait_for_publish(CLOSE_TIMEOUT_S)
        client.disconnect()  # also ends the network thread's loop when the connection is already gone
        client.loop_stop()
        network.join(CLOSE_TIMEOUT_S)
