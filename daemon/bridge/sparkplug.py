"""MQTT Sparkplug B: the served state published as an edge node (`[bridge.sparkplug]`).

One edge node per bridge (`edge_node_id`), one device per camera. The MQTT client is paho's (through
pysparkplug, which encodes the payloads) on its own network thread; every decision is taken on the
asyncio loop, which paho's callbacks only notify (`call_soon_threadsafe`).

- Session: CONNECT with the will NDEATH(bdSeq) (QoS 1); on CONNACK subscribe to NCMD, publish NBIRTH
  (seq 0, `bdSeq`, `Node Control/Rebirth`) and a DBIRTH per camera from the served state, then the
  crossings kept while offline as historical DDATA. bdSeq goes up by one (mod 256) with every CONNECT
  and continues across bridge restarts (`sparkplug_bdseq`: saved before each CONNECT); seq goes 0-255
  and wraps, back to 0 with each NBIRTH.
- Primary host (`primary_host_id`, Sparkplug 3.0): also subscribe to its STATE; births wait until a
  STATE says online (crossings meanwhile are kept as while offline); a STATE offline while born ends
  the session (NDEATH, DISCONNECT) and the node connects again at once (next bdSeq) and waits for the
  host. Stale STATEs (older timestamp) are ignored (`sparkplug_host`).
- Changes (`serve`, called by the bridge with what the reader newly served, before it acknowledges
  the entries): one DDATA per crossing and per camera state change, never merged.
- Offline (broker down, not connected yet): crossings wait in a bounded buffer (`offline_buffer`;
  full: the oldest is dropped and counted); the next DBIRTH carries the current values in any case,
  and these come from the bridge's snapshot, so a broker restart loses no count.
- NCMD `Node Control/Rebirth` = true: NBIRTH and every DBIRTH again (same bdSeq, seq from 0).
- Broker gone: reconnect with capped exponential backoff and full jitter (daemon.core.backoff).
- Clean stop: NDEATH published (QoS 1), then DISCONNECT; a killed bridge leaves the broker to publish
  the will.
- The password (`password_file`) is registered with the log redaction and never logged.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as paho
import structlog
from pysparkplug import Metric

from daemon.bridge import sparkplug_bdseq as bdseq
from daemon.bridge import sparkplug_payloads as sp
from daemon.bridge.layout import BridgeLayout
from daemon.bridge.sparkplug_host import PrimaryHost, Verdict, state_topic
from daemon.bridge.sparkplug_mqtt import Session, close_client, make_client, network_main, read_password
from daemon.bridge.state import BridgeState, Change, Crossing
from daemon.config.sparkplug import SparkplugConfig
from daemon.core.backoff import Backoff
from daemon.core.ratelimit import RateLimited

log = structlog.get_logger("beltsight.bridge.sparkplug")

CONNECT_TIMEOUT_S = 10.0
BACKOFF_BASE_S = 0.2
HEALTHY_RESET_S = 30.0
DROP_LOG_INTERVAL_S = 60.0


@dataclass(slots=True)
class SparkplugStats:
    connected: bool = False
    bd_seq: int = -1
    """bdSeq of the current (or last) CONNECT, the saved one before the first (-1: none saved)."""
    sessions: int = 0
    births: int = 0
    ddata: int = 0
    historical: int = 0
    """Crossings published as historical DDATA after a reconnect."""
    dropped: int = 0
    """Crossings dropped from a full offline buffer (their counts still reach the host in DBIRTH)."""
    rebirths: int = 0
    json_published: int = 0
    host_online: bool | None = None
    """The primary host's last accepted STATE (None: no `primary_host_id`, or no STATE seen yet)."""
    host_offline: int = 0
    """Sessions ended (NDEATH) because the primary host went offline."""
    host_ignored: int = 0
    """STATE messages ignored: stale (older timestamp than the last accepted) or not a STATE."""


class SparkplugEdge:
    """The edge node; `run` is its long-lived task, `serve`/`serve_all` the reader's pushes."""

    def __init__(
        self, cfg: SparkplugConfig, layout: BridgeLayout, state: BridgeState, state_dir: Path | None = None
    ) -> None:
        """`state_dir`: where bdSeq is kept across restarts (`sparkplug.json`); None: not kept."""
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
        self.host = PrimaryHost(cfg.primary_host_id) if cfg.primary_host_id else None
        self._host_log = RateLimited(DROP_LOG_INTERVAL_S)
        self._bd_seq_path = bdseq.path_in(state_dir) if state_dir is not None else None
        self._bd_seq_log = RateLimited(DROP_LOG_INTERVAL_S)
        self.birth_extra: Callable[[str], Sequence[Metric]] | None = None
        """More metrics for a camera's DBIRTH (the reconciled lines', daemon.bridge.reconcile_service)."""

    def start(self) -> None:
        """Read the password (ValueError when it cannot be read) and the last bdSeq used."""
        self._password = read_password(self.cfg)
        if self._bd_seq_path is not None:
            try:
                self.stats.bd_seq = bdseq.load(self._bd_seq_path, self.cfg.group_id, self.cfg.edge_node_id)
            except (OSError, ValueError) as exc:
                log.warning("bridge_sparkplug_bdseq_unreadable", path=str(self._bd_seq_path), error=str(exc)[:200])

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

    def grow(self, layout: BridgeLayout, added: dict[str, tuple[str, ...]]) -> None:
        """Serve `layout` (the served one grown live, daemon.bridge.live; `added`: camera -> its new lines).
        While online: a DBIRTH of each new camera; a camera that gained lines is born again the only way
        Sparkplug adds metrics, a rebirth of the node (NBIRTH and every DBIRTH, on the same connection)."""
        known = {c.id for c in self.layout.cameras}
        self.layout = layout
        self.gates = {(c.id, line.id): line.gates for c in layout.cameras for line in c.lines}
        if self._client is None:
            return  # the next birth carries them
        if any(cid in known for cid in added):
            self._birth(self._client)
            return
        for cid in added:
            camera = layout.camera(cid)
            assert camera is not None
            extra = self.birth_extra(cid) if self.birth_extra is not None else ()
            payload = sp.device_birth(camera, self.state.cameras[cid], *self._stamp(), extra=extra)
            self._client.publish(sp.topic(*self._ids("DBIRTH", cid)), payload, qos=0)

    def publish_metrics(self, camera: str, metrics: Sequence[Metric]) -> None:
        """DDATA of metrics the camera's DBIRTH holds (via `birth_extra`); dropped while offline (the
        next birth carries the current values)."""
        if self._publish(sp.topic(*self._ids("DDATA", camera)), sp.metrics_data(metrics, *self._stamp())):
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
            extra = self.birth_extra(camera.id) if self.birth_extra is not None else ()
            payload = sp.device_birth(camera, self.state.cameras[camera.id], *self._stamp(), extra=extra)
            client.publish(sp.topic(*self._ids("DBIRTH", camera.id)), payload, qos=0)
        self.stats.births += 1

    # -- the connection (its own task) -------------------------------------------------------------

    async def run(self) -> None:
        """Connect once the state is loaded, and again after each loss (capped backoff, jitter)."""
        await self._ready.wait()
        while True:
            try:
                await self._session()
                continue  # the primary host went offline: connect again and wait for it
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

    async def _save_bd_seq(self, bd_seq: int) -> None:
        """Written before the CONNECT that uses it, so a restart after it continues past it; a bdSeq
        that cannot be written is used all the same (logged at most once a minute)."""
        if self._bd_seq_path is None:
            return
        ids = (self.cfg.group_id, self.cfg.edge_node_id)
        try:
            await asyncio.to_thread(bdseq.save, self._bd_seq_path, *ids, bd_seq)
        except OSError as exc:
            if self._bd_seq_log.allow() is not None:
                log.warning("bridge_sparkplug_bdseq_unsaved", path=str(self._bd_seq_path), error=str(exc)[:200])

    async def _session(self) -> None:
        """One MQTT session; returns when the primary host went offline (NDEATH sent), raises when the
        connection failed or was lost."""
        host = self.host
        session = Session(
            asyncio.get_running_loop(), sp.topic(*self._ids("NCMD")), state_topic(host.host_id) if host else None
        )
        bd_seq = bdseq.following(self.stats.bd_seq)
        await self._save_bd_seq(bd_seq)
        client = make_client(self.cfg, self._password, session, sp.topic(*self._ids("NDEATH")), bd_seq)
        self.stats.bd_seq = bd_seq
        self.stats.sessions += 1
        broker, port, _ = self.cfg.host_port()
        network: threading.Thread | None = None
        try:
            await asyncio.to_thread(client.connect, broker, port, self.cfg.keepalive_s)
            client._thread_main = functools.partial(network_main, client, session)  # loop_start's thread runs it
            client.loop_start()
            network = client._thread
            event = await asyncio.wait_for(session.next(), CONNECT_TIMEOUT_S)
            if event.kind != "connack" or event.rc != 0:
                why = paho.connack_string(event.rc) if event.kind == "connack" else session.error or event.kind
                raise ConnectionError(f"broker refused: {why}")
            client.subscribe(session.ncmd_topic, qos=1)
            if host is not None:
                client.subscribe(state_topic(host.host_id), qos=1)
                await self._host_online(session, host)
            self._online(client)
            while True:
                event = await session.next()
                if event.kind == "lost":
                    self._client = None  # gone: no NDEATH to publish on it (the broker sends the will)
                    raise ConnectionError(f"connection lost ({session.error or paho.error_string(event.rc)})")
                if event.kind == "host" and host is not None and self._host_says(host, event.state) == "offline":
                    self.stats.host_offline += 1
                    self.stats.connected = False
                    return  # NDEATH and DISCONNECT below; the caller connects again at once
                if event.kind == "rebirth":
                    self.stats.rebirths += 1
                    log.info("bridge_sparkplug_rebirth", bd_seq=self.stats.bd_seq)
                    self._birth(client)
        finally:
            clean = self._client is not None
            self._client = None
            if network is not None:
                death = (sp.topic(*self._ids("NDEATH")), self.stats.bd_seq) if clean else None
                await asyncio.shield(asyncio.to_thread(close_client, client, network, death))

    async def _host_online(self, session: Session, host: PrimaryHost) -> None:
        """Until the primary host's STATE says online (rebirth requests meanwhile are moot)."""
        while True:
            event = await session.next()
            if event.kind == "lost":
                raise ConnectionError(f"connection lost ({session.error or paho.error_string(event.rc)})")
            if event.kind == "host" and self._host_says(host, event.state) == "online":
                return

    def _host_says(self, host: PrimaryHost, state: sp.HostState | None) -> Verdict:
        """The primary host's verdict on one STATE, logged when it changes what the host is."""
        was = host.online
        verdict = host.observe(state)
        self.stats.host_online = host.online
        host_id, stamp = host.host_id, state.timestamp if state is not None else None
        if verdict in ("stale", "invalid"):
            self.stats.host_ignored += 1
            if self._host_log.allow() is not None:
                last = host.last_ms
                log.info("bridge_sparkplug_host_ignored", host_id=host_id, reason=verdict, timestamp=stamp, last=last)
        elif verdict == "online" and was is not True:
            log.info("bridge_sparkplug_host_online", host_id=host_id, timestamp=stamp)
        elif verdict == "offline" and was is not False:
            log.warning(
                "bridge_sparkplug_host_offline", host_id=host_id, timestamp=stamp, born=self._client is not None
            )
        return verdict

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
