"""OPC UA: the served state as variables and one event per crossing (asyncua).

Endpoint `opc.tcp://<listen>/beltsight`; every node is in namespace `urn:beltsight`, with string
node ids equal to the browse path below Objects (`BeltSight/<camera>/<line>/CountIn`):

    Objects/BeltSight/Heartbeat                 Int64, Unix ms, written every second
    Objects/BeltSight/<camera>/State            String: unknown | up | down | stalled
    Objects/BeltSight/<camera>/<line>/CountIn   UInt64 (also CountOut, LastTrack)
                                   /LastLabel   String
                                   /LastCrossedMs Int64
                                   /<gate>EtaMs Int64 (0: the last crossing had no ETA for it)

Every crossing fires one `CrossingEventType` event (a BaseEventType subtype in `urn:beltsight`)
with source `Objects/BeltSight` (which has EventNotifier SubscribeToEvents); properties Camera,
Line, Track, Label, Direction, CrossedMs, Eta (the entry's eta JSON, "" without gates). asyncua
queues events per monitored item (never coalesced) and honours any publishing interval a client
asks for, 10 ms included.

Security: `basic256sha256` offers one endpoint, Basic256Sha256 SignAndEncrypt, with the server
certificate (`cert_file`/`key_file`, or generated under `<state_dir>/opcua/`); a client certificate
must be in the trusted directory. `none` offers one unencrypted endpoint (a warning at start).
With users configured only username/password tokens are accepted, compared in constant time;
without users anonymous clients are accepted (a warning at start). All of it: `daemon.bridge.opcua_access`.

Until the served state is loaded (the snapshot from Redis, read on the reader's first Redis
session), the camera and line variables carry StatusCode BadWaitingForInitialData (their
placeholder values, 0 and "", are not counts); `publish_all` then writes them Good.

At process start, `await_event_subscriber` holds the first new entries back until a client has an
event monitored item or `[bridge] resume_grace_s` has passed since listening: a restarted bridge
serves its backlog within milliseconds, before a PLC can reconnect and subscribe again, and those
crossings' events would be fired to no one (`daemon.bridge.service` calls it once).

`reload` (SIGHUP) reads the trusted directory, the server certificate and the users again: new
clients are checked against them from then on; an open connection whose certificate is no longer
trusted, or whose user was removed or given a new password, is closed; the others stay open
(`daemon.bridge.opcua_pki`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import structlog
from asyncua import ua
from asyncua.server.server import Server
from asyncua.ua.object_ids import ObjectIds
from asyncua.ua.status_codes import StatusCodes

from daemon.bridge.history import EventHistory, entry_time, fired, stamped
from daemon.bridge.layout import ETA_SUFFIX, BridgeLayout, CameraLayout, LineLayout
from daemon.bridge.machine_vision import MachineVision
from daemon.bridge.opcua_access import NOISY_LOGGERS, Refusals, Users, close_invalid, secure
from daemon.bridge.opcua_pki import APP_URI, TrustedClients, server_certificate, swap_server_certificate
from daemon.bridge.state import BridgeState, Crossing, LineState
from daemon.config.bridge import OpcUaConfig
from daemon.core.netaddr import parse_host_port

log = structlog.get_logger("beltsight.bridge.opcua")

NAMESPACE = "urn:beltsight"
ROOT = "BeltSight"
EVENT_TYPE = "CrossingEventType"
EVENT_PROPERTIES = (
    ("Camera", ua.VariantType.String),
    ("Line", ua.VariantType.String),
    ("Track", ua.VariantType.UInt64),
    ("Label", ua.VariantType.String),
    ("Direction", ua.VariantType.String),
    ("CrossedMs", ua.VariantType.Int64),
    ("Eta", ua.VariantType.String),
)
_U64 = 1 << 64
_I64 = 1 << 63
SUBSCRIBER_POLL_S = 0.05
WAITING = ua.StatusCode(ua.UInt32(StatusCodes.BadWaitingForInitialData))


def _message(crossing: Crossing) -> str:
    return f"{crossing.camera}/{crossing.line} {crossing.direction} #{crossing.count}"


def _u64(value: int) -> int:
    return value % _U64


def _i64(value: int) -> int:
    return max(-_I64, min(_I64 - 1, value))


class OpcUaBridgeServer:
    """The address space above, kept current by `publish_line`, `publish_status`, `fire`."""

    def __init__(
        self,
        cfg: OpcUaConfig,
        layout: BridgeLayout,
        state_dir: Path,
        machine_vision: MachineVision | None = None,
        history_s: float = 0.0,
    ) -> None:
        """`machine_vision`: the OPC 40100 objects, fed from the same calls (`[bridge.opcua] machine_vision`).
        `history_s`: the event history's window (`[bridge] event_history_s`, daemon.bridge.history); 0: none."""
        self.machine_vision = machine_vision
        self.history = EventHistory(history_s) if history_s > 0 else None
        self.cfg = cfg
        self.layout = layout
        self.state_dir = state_dir
        self.refusals = Refusals()
        self.server: Server | None = None
        self._users: Users | None = None
        self.trusted: TrustedClients | None = None
        self._host = ""
        self.ns = 0
        self._gen: Any = None
        self.port = 0
        self.listening_at = 0.0

    def node_id(self, *path: str) -> ua.NodeId:
        return ua.NodeId(ua.String("/".join((ROOT, *path))), ua.Int16(self.ns))

    @property
    def clients(self) -> int:
        bserver = self.server.bserver if self.server is not None else None
        return len(bserver.clients) if bserver is not None else 0

    async def start(self, users: dict[str, str]) -> None:
        """Start listening; `users` maps user names to their passwords (already read)."""
        assert self.cfg.listen is not None
        host, port = parse_host_port(self.cfg.listen)
        self._host = host
        for noisy in NOISY_LOGGERS:
            logging.getLogger(noisy).setLevel(logging.CRITICAL)  # refusals are counted and summarised here
        self._users = Users(users, self.refusals) if users else None
        server = Server(user_manager=self._users)  # type: ignore[arg-type]
        await server.init()
        if self.history is not None:
            server.iserver.history_manager.set_storage(self.history)
        server.set_endpoint(f"opc.tcp://{host}:{port}/beltsight")
        server.set_server_name("BeltSight bridge")
        await server.set_application_uri(APP_URI)
        server.iserver.max_connections = self.cfg.max_connections
        server.set_identity_tokens([ua.UserNameIdentityToken] if users else [ua.AnonymousIdentityToken])
        self.trusted = await secure(server, self.cfg, self.state_dir, host, self.refusals)
        self.ns = await server.register_namespace(NAMESPACE)
        root = await self._build(server)
        etype = await server.create_custom_event_type(
            self.ns, EVENT_TYPE, ObjectIds.BaseEventType, list(EVENT_PROPERTIES)
        )
        self._gen = await server.get_event_generator(etype, root.nodeid)
        if self.history is not None:
            await self.history.historize(root)
        if self.machine_vision is not None:
            await self.machine_vision.attach(server, root, self.ns, self.history)
        await server.start()
        self.server = server
        self.listening_at = time.monotonic()
        listener: Any = server.bserver._server if server.bserver is not None else None
        sockets = getattr(listener, "sockets", None) or ()
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        if not users:
            log.warning("bridge_opcua_anonymous", security=self.cfg.security)
        log.info(
            "bridge_opcua_listening", endpoint=f"opc.tcp://{host}:{self.port}/beltsight", security=self.cfg.security
        )

    async def _variable(self, parent: Any, path: tuple[str, ...], value: Any, vtype: ua.VariantType) -> None:
        """A served variable; all but the heartbeat start BadWaitingForInitialData (see the module doc)."""
        node = await parent.add_variable(
            self.node_id(*path), ua.QualifiedName(path[-1], self.ns), ua.Variant(value, vtype)
        )
        if path != ("Heartbeat",):
            await node.write_value(ua.DataValue(ua.Variant(value, vtype), StatusCode=WAITING))

    async def _build(self, server: Server) -> Any:
        root = await server.nodes.objects.add_object(self.node_id(), ua.QualifiedName(ROOT, self.ns))
        await self._variable(root, ("Heartbeat",), int(time.time() * 1000), ua.VariantType.Int64)
        for cam in self.layout.cameras:
            await self._build_camera(server, root, cam, cam.lines)
        return root

    async def _build_camera(self, server: Server, root: Any, cam: CameraLayout, lines: tuple[LineLayout, ...]) -> None:
        """`cam`'s object (unless it is there) and the nodes of `lines` under it."""
        cnode = server.get_node(self.node_id(cam.id))
        if cam.id not in {c.id for c in self.layout.cameras} or self.server is None:
            cnode = await root.add_object(self.node_id(cam.id), ua.QualifiedName(cam.id, self.ns))
            await self._variable(cnode, (cam.id, "State"), "unknown", ua.VariantType.String)
        for line in lines:
            lnode = await cnode.add_object(self.node_id(cam.id, line.id), ua.QualifiedName(line.id, self.ns))
            base = (cam.id, line.id)
            for name in ("CountIn", "CountOut", "LastTrack"):
                await self._variable(lnode, (*base, name), 0, ua.VariantType.UInt64)
            await self._variable(lnode, (*base, "LastLabel"), "", ua.VariantType.String)
            await self._variable(lnode, (*base, "LastCrossedMs"), 0, ua.VariantType.Int64)
            for gate in line.gates:
                await self._variable(lnode, (*base, gate + ETA_SUFFIX), 0, ua.VariantType.Int64)

    async def grow(self, layout: BridgeLayout, added: dict[str, tuple[LineLayout, ...]]) -> None:
        """Serve `layout` (the served one grown live, daemon.bridge.live): the nodes of `added` (camera ->
        its new lines; a new camera gets its object, and its Machine Vision object) added to the running
        server; no existing node moves or is rebuilt."""
        assert self.server is not None
        root = self.server.get_node(self.node_id())
        for cid, lines in added.items():
            cam = layout.camera(cid)
            assert cam is not None
            new_camera = self.layout.camera(cid) is None
            await self._build_camera(self.server, root, cam, lines)
            if new_camera and self.machine_vision is not None:
                await self.machine_vision.add_camera(cid)
        self.layout = layout

    async def _write(self, nodeid: ua.NodeId, value: Any, vtype: ua.VariantType) -> None:
        assert self.server is not None
        await self.server.write_attribute_value(nodeid, ua.DataValue(ua.Variant(value, vtype)))

    async def publish_line(self, camera: str, line_id: str, line: LineState) -> None:
        layout = self.layout.camera(camera)
        gates = next((ln.gates for ln in layout.lines if ln.id == line_id), ()) if layout else ()
        base = (camera, line_id)
        u64, i64 = ua.VariantType.UInt64, ua.VariantType.Int64
        await self._write(self.node_id(*base, "CountIn"), _u64(line.count_in), u64)
        await self._write(self.node_id(*base, "CountOut"), _u64(line.count_out), u64)
        await self._write(self.node_id(*base, "LastTrack"), _u64(line.last_track), u64)
        await self._write(self.node_id(*base, "LastLabel"), line.last_label, ua.VariantType.String)
        await self._write(self.node_id(*base, "LastCrossedMs"), _i64(line.last_crossed_ms), i64)
        for gate in gates:
            await self._write(self.node_id(*base, gate + ETA_SUFFIX), _i64(line.eta.get(gate, 0)), i64)

    async def publish_status(self, camera: str, status: str) -> None:
        await self._write(self.node_id(camera, "State"), status, ua.VariantType.String)
        if self.machine_vision is not None:
            await self.machine_vision.publish_status(camera, status)

    async def publish_all(self, state: BridgeState) -> None:
        for cid, cam in state.cameras.items():
            await self.publish_status(cid, cam.status)
            for lid, line in cam.lines.items():
                await self.publish_line(cid, lid, line)

    async def fire(self, crossing: Crossing) -> None:
        """One event for this crossing (never coalesced with another), kept in the event history."""
        self._fill(crossing)
        await self._gen.trigger(message=_message(crossing))
        if self.history is not None:
            await self.history.record(fired(self._gen.event), crossing)
        if self.machine_vision is not None:
            await self.machine_vision.fire(crossing)

    async def recall(self, crossings: list[Crossing]) -> None:
        """Put crossings served before this process started (read back from Redis, oldest first) in
        the event history, stamped with their entry's time; no event is fired."""
        if self.history is None:
            return
        for crossing in crossings:
            if not self.history.has(self._gen.event.emitting_node, crossing):
                self._fill(crossing)
                await self.history.record(
                    stamped(self._gen.event, entry_time(crossing.entry_id), _message(crossing)), crossing
                )
            if self.machine_vision is not None:
                await self.machine_vision.recall(crossing)

    def _fill(self, crossing: Crossing) -> None:
        ev = self._gen.event
        ev.Camera = crossing.camera
        ev.Line = crossing.line
        ev.Track = _u64(crossing.track)
        ev.Label = crossing.label
        ev.Direction = crossing.direction
        ev.CrossedMs = _i64(crossing.at_ms)
        ev.Eta = crossing.eta_json
        ev.Severity = 100

    def has_event_subscriber(self) -> bool:
        """Some client has an event monitored item (on any node). asyncua has no public accessor: its
        subscription service keeps each subscription's event items in `_monitored_events`."""
        if self.server is None:
            return False
        subs = self.server.iserver.subscription_service.subscriptions.values()
        return any(getattr(sub.monitored_item_srv, "_monitored_events", None) for sub in subs)

    async def await_event_subscriber(self, grace_s: float) -> None:
        """Until a client has an event monitored item or `grace_s` has passed since listening."""
        started = time.monotonic()
        deadline = self.listening_at + grace_s
        subscribed = self.has_event_subscriber()
        while not subscribed and time.monotonic() < deadline:  # polled: asyncua signals no event for this
            await asyncio.sleep(SUBSCRIBER_POLL_S)
            subscribed = self.has_event_subscriber()
        log.info("bridge_resume_grace", subscribed=subscribed, waited_ms=round((time.monotonic() - started) * 1000))

    async def heartbeat(self, unix_ms: int) -> None:
        await self._write(self.node_id("Heartbeat"), unix_ms, ua.VariantType.Int64)

    async def reload(self, cfg: OpcUaConfig, users: dict[str, str]) -> dict[str, Any]:
        """Read the trusted certificates, the server certificate and `users` again (SIGHUP); close the
        connections that are no longer valid. What changed, for the `bridge_reloaded` line."""
        changes: dict[str, Any] = {}
        revoked: set[str] = set()
        if self.cfg.security != "none" and self.server is not None and self.trusted is not None:
            # certificates first: one that cannot be read fails the reload before anything changed
            cert_file, key_file = await server_certificate(cfg, self.state_dir, self._host)
            changes["server_certificate"] = await swap_server_certificate(self.server, cert_file, key_file)
            self.cfg = self.cfg.model_copy(update={"cert_file": cfg.cert_file, "key_file": cfg.key_file})
            changes["trusted_added"], changes["trusted_removed"] = await self.trusted.load()
        if self._users is not None:
            added, revoked = self._users.replace(users)
            changes |= {"users_added": sorted(added), "users_revoked": sorted(revoked)}
        changes["sessions_closed"] = close_invalid(self.server, self.trusted, revoked)
        return changes

    async def close(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            await server.stop()
        if self.machine_vision is not None:
            await self.machine_vision.close()
