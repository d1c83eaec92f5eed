"""OPC UA for Machine Vision (OPC 40100-1) on the bridge's OPC UA server (`[bridge.opcua] machine_vision`).

At start the vendored MachineVision NodeSet2 (`daemon/bridge/nodesets/`, namespace
`http://opcfoundation.org/UA/MachineVision`) is imported into the asyncua server, and each camera
gets one `VisionSystemType` object, browse name = the camera id, under `Objects/BeltSight/MachineVision`
(node id `BeltSight/MachineVision/<camera>` in `urn:beltsight`; its children `<that>.<Child>`), with
the mandatory `VisionStateMachine`, and the optional `SystemState` and `ResultManagement`.

It is fed from the same path as the rest of the OPC UA server (`OpcUaBridgeServer.fire` and
`publish_status`, called by the reader's sink before the entries are acknowledged), so each crossing
fires exactly one `ResultReadyEventType` event, emitted by its camera's object, and kept in the event
history (daemon.bridge.history: HistoryRead of each VisionSystemType object's events over the last
`[bridge] event_history_s`). `GetResultListFiltered` answers from that history (newest first, at most
`MAX_RESULTS` results per call); with the history off (`event_history_s = 0`) it reads the camera's
objects stream (XREVRANGE, at most `SCAN_ENTRIES` entries scanned). `GetResultById` reads the entry
from the stream (XRANGE).
The field mapping (`daemon.bridge.machine_vision_results`) is documented in
docs/integrations/machine-vision.md.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from asyncua import ua
from asyncua.common.instantiate_util import instantiate
from asyncua.common.node import Node
from asyncua.server.server import Server
from asyncua.ua.status_codes import StatusCodes
from redis.exceptions import RedisError

from daemon.bridge.history import EventHistory, entry_time, fired, stamped
from daemon.bridge.layout import BridgeLayout
from daemon.bridge.machine_vision_results import (
    MV,
    RESULT_COMPLETED,
    ResultFilter,
    creation_time,
    filter_id,
    result_content,
    result_data,
    result_ids,
)
from daemon.bridge.state import Crossing, MalformedEntryError, crossings_from_rows, parse_id
from daemon.config.redis import RedisConfig
from daemon.core.ratelimit import RateLimited
from daemon.publish.redis_conn import RedisClient

log = structlog.get_logger("beltsight.bridge.machine_vision")
NODESET = Path(__file__).parent / "nodesets" / "Opc.Ua.MachineVision.NodeSet2.xml"
MV_NAMESPACE = "http://opcfoundation.org/UA/MachineVision"
FOLDER = "MachineVision"
IMPORT_LOGGERS = ("asyncua.common.xmlimporter", "asyncua.common.xmlparser", "asyncua.ua.uatypes")
# numeric ids of the nodeset (MachineVision/NodeIds.csv), namespace index resolved at start
VISION_SYSTEM_TYPE = 1003
RESULT_MANAGEMENT_TYPE = 1007
RESULT_READY_EVENT_TYPE = 1024
SYSTEM_STATE_DESCRIPTION_DATA_TYPE = 3024
STATE_NODES = {"Preoperational": 5028, "Halted": 5029, "Error": 5030, "Operational": 5031}
"""The states of VisionStateMachineType (CurrentState/Id points at them)."""
VISION_STATE = {"unknown": "Preoperational", "up": "Operational", "stalled": "Error", "down": "Error"}
SYSTEM_STATE = {"unknown": "SBY_2", "up": "PRD_1", "stalled": "UDT_5", "down": "UDT_5"}
SCAN_ENTRIES = 1000
ERROR_NOT_FOUND = -1
ERROR_REDIS = -2
QUERY_LOG_INTERVAL_S = 10.0


def node_id(identifier: str | int, ns: int) -> ua.NodeId:
    value = ua.String(identifier) if isinstance(identifier, str) else ua.Int32(identifier)
    return ua.NodeId(value, ua.Int16(ns))


async def import_nodeset(server: Server) -> int:
    """Import the vendored nodeset; the number of nodes added. RuntimeError when asyncua skipped any.

    asyncua registers the nodeset's data types in `asyncua.ua`, for the whole process, under the
    namespace index of the first import: every server of a process must import it at the same index
    (the bridge: `urn:beltsight` is 2, so MachineVision is 3), or the later imports skip nodes."""
    for name in IMPORT_LOGGERS:  # one INFO line per imported node otherwise
        logging.getLogger(name).setLevel(logging.WARNING)
    declared = sum(1 for node in ET.parse(NODESET).getroot() if node.get("NodeId"))
    added = len(await server.import_xml(str(NODESET)))
    if added != declared:
        raise RuntimeError(f"asyncua imported {added} of the {declared} nodes of {NODESET.name}")
    return added


class MachineVision:
    """The Machine Vision objects of every camera; `attach` before the server starts."""

    def __init__(self, layout: BridgeLayout, redis: RedisConfig, client_factory: Callable[[], RedisClient]) -> None:
        self.layout = layout
        self.streams = {c.id: redis.objects_stream_for(c.id) for c in layout.cameras}
        self._stream_for = redis.objects_stream_for
        self._folder: Node | None = None
        self._factory = client_factory
        self._client: RedisClient | None = None
        self._server: Server | None = None
        self._gens: dict[str, Any] = {}
        self._cameras_by_node: dict[ua.NodeId, str] = {}
        self.ns = 0
        self.mv_ns = 0
        self.fired = 0
        self._query_log = RateLimited(QUERY_LOG_INTERVAL_S)
        self.history: EventHistory | None = None

    async def attach(self, server: Server, root: Node, ns: int, history: EventHistory | None = None) -> None:
        """Import the nodeset and build one VisionSystemType object per camera under `root`; with
        `history`, each one's events are kept there and the result list answers from it."""
        self.history = history
        if any(cam.id == FOLDER for cam in self.layout.cameras):
            raise ValueError(f"a camera named {FOLDER!r} clashes with the Machine Vision folder")
        await import_nodeset(server)
        self.mv_ns = await server.get_namespace_index(MV_NAMESPACE)
        self._server, self.ns = server, ns
        self._folder = await root.add_folder(node_id(f"BeltSight/{FOLDER}", ns), ua.QualifiedName(FOLDER, ns))
        for cam in self.layout.cameras:
            await self.add_camera(cam.id)
        log.info("bridge_machine_vision_ready", cameras=len(self._gens), namespace=MV_NAMESPACE)

    async def add_camera(self, camera: str) -> None:
        """`camera`'s VisionSystemType object (at attach, or for a camera added live to a running server)."""
        assert self._server is not None and self._folder is not None
        if camera == FOLDER:
            raise ValueError(f"a camera named {FOLDER!r} clashes with the Machine Vision folder")
        etype = self._server.get_node(node_id(RESULT_READY_EVENT_TYPE, self.mv_ns))
        obj = await self._vision_system(self._server, self._folder, camera, self.ns)
        self._gens[camera] = await self._server.get_event_generator(etype, obj.nodeid)
        if self.history is not None:
            await self.history.historize(obj)
        self.streams.setdefault(camera, self._stream_for(camera))
        await self.publish_status(camera, "unknown")

    def _mv(self, identifier: int) -> ua.NodeId:
        return node_id(identifier, self.mv_ns)

    async def _vision_system(self, server: Server, folder: Node, camera: str, ns: int) -> Node:
        base = f"BeltSight/{FOLDER}/{camera}"
        vtype = server.get_node(self._mv(VISION_SYSTEM_TYPE))
        nodes = await instantiate(
            folder, vtype, nodeid=node_id(base, ns), bname=ua.QualifiedName(camera, ns), instantiate_optional=False
        )
        obj = nodes[0]
        rtype = server.get_node(self._mv(RESULT_MANAGEMENT_TYPE))
        rm = (
            await instantiate(
                obj,
                rtype,
                nodeid=node_id(f"{base}.ResultManagement", ns),
                bname=ua.QualifiedName("ResultManagement", self.mv_ns),
                instantiate_optional=False,
            )
        )[0]
        state = MV.SystemStateDescriptionDataType(State=MV.SystemStateDataType.SBY_2, StateDescription="unknown")
        await obj.add_variable(
            node_id(f"{base}.SystemState", ns),
            ua.QualifiedName("SystemState", self.mv_ns),
            ua.Variant(state, ua.VariantType.ExtensionObject),
            datatype=self._mv(SYSTEM_STATE_DESCRIPTION_DATA_TYPE),
        )
        self._cameras_by_node[rm.nodeid] = camera
        methods: dict[str, Callable[..., Any]] = {
            "GetResultById": self._get_result_by_id,
            "GetResultListFiltered": self._get_result_list_filtered,
            "GetResultComponentsById": self._not_supported,
        }
        for name, handler in methods.items():
            method = await rm.get_child([ua.QualifiedName(name, self.mv_ns)])
            server.link_method(method, handler)
        return obj  # type: ignore[no-any-return]  # instantiate's nodes are typed Any

    async def _write(self, nodeid: str, value: Any, vtype: ua.VariantType) -> None:
        assert self._server is not None
        node = node_id(nodeid, self.ns)
        await self._server.write_attribute_value(node, ua.DataValue(ua.Variant(value, vtype)))

    async def publish_status(self, camera: str, status: str) -> None:
        """VisionStateMachine's CurrentState and SystemState for the camera's state."""
        if camera not in self._gens:
            return
        base = f"BeltSight/{FOLDER}/{camera}"
        vision = VISION_STATE.get(status, "Preoperational")
        system = MV.SystemStateDescriptionDataType(
            State=getattr(MV.SystemStateDataType, SYSTEM_STATE.get(status, "SBY_2")), StateDescription=status
        )
        await self._write(f"{base}.SystemState", system, ua.VariantType.ExtensionObject)
        current = f"{base}.VisionStateMachine.CurrentState"
        await self._write(current, ua.LocalizedText(vision), ua.VariantType.LocalizedText)
        await self._write(f"{current}.Id", self._mv(STATE_NODES[vision]), ua.VariantType.NodeId)

    async def fire(self, crossing: Crossing) -> None:
        """One ResultReadyEventType event for this crossing, emitted by its camera's object (and kept
        in the event history)."""
        gen = self._gens.get(crossing.camera)
        if gen is None:
            return
        self._fill(gen.event, crossing)
        await gen.trigger(message=_message(crossing))
        self.fired += 1
        if self.history is not None:
            await self.history.record(fired(gen.event), crossing)
            self.history.remember(crossing)

    async def recall(self, crossing: Crossing) -> None:
        """Put a crossing served before this process started in the history (no event fired)."""
        gen = self._gens.get(crossing.camera)
        if gen is None or self.history is None:
            return
        if not self.history.has(gen.event.emitting_node, crossing):
            self._fill(gen.event, crossing)
            await self.history.record(stamped(gen.event, entry_time(crossing.entry_id), _message(crossing)), crossing)
        self.history.remember(crossing)

    def _fill(self, ev: Any, crossing: Crossing) -> None:
        # the type's properties carry no value in the nodeset, so asyncua knows no variant type for
        # them: each field is set with its type
        for name, value in result_ids(crossing).items():
            ev.add_property(name, value, ua.VariantType.ExtensionObject)
        ev.add_property("ResultState", RESULT_COMPLETED, ua.VariantType.Int32)
        ev.add_property("IsPartial", False, ua.VariantType.Boolean)
        ev.add_property("CreationTime", creation_time(crossing.at_ms), ua.VariantType.DateTime)
        content = [ua.Variant(result_content(crossing), ua.VariantType.String)]
        ev.add_property("ResultContent", content, ua.VariantType.Variant)
        ev.Severity = 100

    def _redis(self) -> RedisClient:
        if self._client is None:
            self._client = self._factory()
        return self._client

    async def _get_result_by_id(self, parent: ua.NodeId, *args: ua.Variant) -> list[ua.Variant] | ua.StatusCode:
        if not args:  # a client's mistake: its Bad status, not a handler's exception (BadUnexpectedError)
            return ua.StatusCode(ua.UInt32(StatusCodes.BadArgumentsMissing))
        camera = self._cameras_by_node.get(parent, "")
        entry_id = filter_id(args[0].Value)
        crossing, error = None, ERROR_NOT_FOUND
        try:
            parse_id(entry_id)
            rows = await self._redis().xrange(self.streams[camera], min=entry_id, max=entry_id, count=1)
            found = crossings_from_rows(camera, rows)
            crossing = found[0] if found else None
        except MalformedEntryError:
            pass
        except (RedisError, OSError) as exc:
            error = ERROR_REDIS
            self._query_failed("GetResultById", exc)
        result = result_data(crossing) if crossing is not None else MV.ResultDataType()
        return [
            ua.Variant(0, ua.VariantType.UInt32),
            ua.Variant(result, ua.VariantType.ExtensionObject),
            ua.Variant(0 if crossing is not None else error, ua.VariantType.Int32),
        ]

    async def _get_result_list_filtered(self, parent: ua.NodeId, *args: ua.Variant) -> list[ua.Variant] | ua.StatusCode:
        """Newest first: from the event history (`[bridge] event_history_s`), or without one from the
        camera's objects stream (its last `SCAN_ENTRIES` entries). A criterion that is not of its
        type (a text where a number goes) is `BadInvalidArgument`."""
        camera = self._cameras_by_node.get(parent, "")
        try:
            wanted = ResultFilter(list(args))
        except (TypeError, ValueError, OverflowError):
            return ua.StatusCode(ua.UInt32(StatusCodes.BadInvalidArgument))
        found: list[Crossing] = []
        complete, error = True, 0
        try:
            if self.history is not None:
                candidates = list(reversed(self.history.crossings(camera)))
            else:
                rows = await self._redis().xrevrange(self.streams[camera], count=SCAN_ENTRIES) or []
                complete = len(rows) < SCAN_ENTRIES
                candidates = crossings_from_rows(camera, rows)
            skipped = 0
            for crossing in candidates:
                if not wanted.matches(crossing):
                    continue
                if skipped < wanted.start_index:
                    skipped += 1
                elif len(found) == wanted.max_results:
                    complete = False
                    break
                else:
                    found.append(crossing)
        except (RedisError, OSError) as exc:
            complete, error = False, ERROR_REDIS
            self._query_failed("GetResultListFiltered", exc)
        results = [result_data(c) for c in found]
        return [
            ua.Variant(complete, ua.VariantType.Boolean),
            ua.Variant(len(results), ua.VariantType.UInt32),
            ua.Variant(0, ua.VariantType.UInt32),
            ua.Variant(results, ua.VariantType.ExtensionObject),
            ua.Variant(error, ua.VariantType.Int32),
        ]

    def _query_failed(self, method: str, exc: BaseException) -> None:
        suppressed = self._query_log.allow()
        if suppressed is not None:
            log.warning(
                "bridge_machine_vision_query_failed", method=method, error=str(exc)[:200], suppressed=suppressed
            )

    async def _not_supported(self, parent: ua.NodeId, *_: ua.Variant) -> ua.StatusCode:
        return ua.StatusCode(ua.UInt32(StatusCodes.BadNotSupported))

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


def _message(crossing: Crossing) -> str:
    return f"{crossing.line} {crossing.direction} track {crossing.track}"
