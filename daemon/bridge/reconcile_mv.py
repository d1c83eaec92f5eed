"""The reconciliation as an OPC 40100 Machine Vision condition (with `[bridge.opcua] machine_vision`).

A reconciled line entering `count_mismatch` fires a `VisionWarningConditionType` event from its
camera's `VisionSystemType` object (`Objects/BeltSight/MachineVision/<camera>`): `ConditionName`
`CountMismatch <line>/<direction>`, `ErrorString` `count_mismatch`, `Message` with both counts,
`Severity` 700, `Retain` true. `count_agrees` fires the same condition cleared: `ErrorString`
`count_agrees`, `Severity` 100, `Retain` false. A PLC subscribed to the object's events (the same
subscription that receives its `ResultReadyEventType` events) sees the alarm come and go.

The verdicts are fired in order by one task (`run`); an event that fails to fire is logged
(`bridge_mv_condition_failed`) and the next one goes on. At most `VERDICTS_QUEUED_MAX` wait: past
that the oldest is dropped (the newest state of a line is what a PLC needs), counted in `dropped`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from asyncua import ua
from asyncua.server.server import Server

from daemon.bridge.machine_vision import FOLDER, MachineVision, node_id
from daemon.bridge.reconcile_service import LineVerdict, ReconcileService

VISION_WARNING_CONDITION_TYPE = 1034
SEVERITY_ACTIVE = 700
SEVERITY_CLEARED = 100
VERDICTS_QUEUED_MAX = 256
"""The verdicts waiting to be fired, at most: past it the oldest is dropped (keep newest)."""

log = structlog.get_logger("beltsight.bridge")


class MismatchCondition:
    def __init__(self, server: Server, mv: MachineVision, service: ReconcileService) -> None:
        self.server = server
        self.mv = mv
        self.service = service
        self._gens: dict[str, Any] = {}
        self._verdicts: asyncio.Queue[LineVerdict] = asyncio.Queue(VERDICTS_QUEUED_MAX)
        self.fired = 0
        self.failed = 0
        self.dropped = 0

    async def attach(self) -> None:
        """Event generators for the reconciled cameras; listen to the service's verdicts."""
        etype = self.server.get_node(node_id(VISION_WARNING_CONDITION_TYPE, self.mv.mv_ns))
        for camera in {e.camera for e in self.service.entries}:
            source = node_id(f"BeltSight/{FOLDER}/{camera}", self.mv.ns)
            self._gens[camera] = await self.server.get_event_generator(etype, source)
        self.service.listeners.append(self._on_verdict)

    def _on_verdict(self, verdict: LineVerdict) -> None:
        if verdict.state not in ("count_mismatch", "agrees") or verdict.camera not in self._gens:
            return
        if self._verdicts.full():  # keep newest: the oldest waiting is dropped, counted
            self._verdicts.get_nowait()
            self.dropped += 1
        self._verdicts.put_nowait(verdict)  # fired by `run`, in order

    async def run(self) -> None:
        """Fire each verdict's condition event, in order (the OPC UA protocol's long-lived task
        `bridge-mv-conditions`, in the bridge's task group; what is queued at the stop is dropped).
        One that fails to fire is logged and skipped: never the end of the bridge."""
        while True:
            verdict = await self._verdicts.get()
            try:
                await self._fire(verdict)
            except Exception as exc:  # asyncua's trigger: one event lost, the next ones still fire
                self.failed += 1
                log.error(
                    "bridge_mv_condition_failed",
                    camera=verdict.camera,
                    line=verdict.line,
                    direction=verdict.direction,
                    state=verdict.state,
                    error=f"{type(exc).__name__}: {exc}"[:300],
                )

    async def _fire(self, verdict: LineVerdict) -> None:
        active = verdict.state == "count_mismatch"
        rec = self.service.reconcilers[f"{verdict.camera}/{verdict.line}/{verdict.direction}"]
        window = rec.last
        counts = f"vision {window.vision}, reference {window.reference}" if window is not None else ""
        ev = self._gens[verdict.camera].event
        for name in ("ConditionName", "ErrorString"):  # typed here: asyncua leaves them without a type
            ev.data_types[name] = ua.VariantType.String
        ev.ConditionName = f"CountMismatch {verdict.line}/{verdict.direction}"
        ev.ErrorString = "count_mismatch" if active else "count_agrees"
        ev.Message = ua.LocalizedText(f"{ev.ErrorString} on {verdict.line}/{verdict.direction}: {counts}")
        ev.Severity = SEVERITY_ACTIVE if active else SEVERITY_CLEARED
        ev.Retain = active
        await self._gens[verdict.camera].trigger()
        self.fired += 1


__all__ = ["MismatchCondition"]
