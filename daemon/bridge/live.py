"""The served layout grown live: cameras and lines added to the config served without a restart.

The bridge reads the config file again (the loader `beltsight bridge` starts with, the `cameras_dir`
drop-ins applied) after each `camera_added`, `camera_changed` or `camera_removed` entry of the events
stream and at SIGHUP, and serves the difference on the running protocols (each one's `plan_growth`,
`grow` and `show_status`, daemon.bridge.protocol); with the built-in ones:

- a new camera, or a new line of a served camera, gets its OPC UA nodes (and, with `machine_vision`, its
  VisionSystemType object), its Modbus block (`daemon.bridge.blocks.extend`: after the highest ever
  given), a Sparkplug DBIRTH, and its objects stream read through the group (from its start when the
  group is new there);
- a camera no longer configured (removed or disabled) keeps its nodes and registers where they are,
  frozen at their last values; its OPC UA `State` reads `removed` until it comes back;
- nothing served moves, is rebuilt or reconnects: no node id, no register address, no PLC connection.

What cannot be served that way (a served line whose gates changed: its `<gate>EtaMs` nodes; blocks that
would pass register 65535) is logged (`bridge_layout_restart_needed`) and nothing of that change is
applied: the old layout is served until a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog

from daemon.bridge.layout import BridgeLayout, CameraLayout, LineLayout
from daemon.bridge.protocol import PlcProtocol
from daemon.bridge.reader import StreamReader
from daemon.bridge.state import BridgeState, CameraState, LineState

log = structlog.get_logger("beltsight.bridge")

RETIRED = "removed"
"""The OPC UA `State` of a camera no longer configured (its other nodes frozen)."""


@dataclass(frozen=True, slots=True)
class Growth:
    """What a new config adds to the served layout."""

    layout: BridgeLayout
    """The served layout with the additions: served cameras first, as they were, each with its new lines
    after its served ones; the new cameras after them (in the config's order)."""
    added: dict[str, tuple[LineLayout, ...]] = field(default_factory=dict)
    """camera -> its lines added (every line of a new camera)."""
    configured: frozenset[str] = frozenset()
    """The cameras the new config serves (the served ones not in it are retired)."""
    problems: tuple[str, ...] = ()
    """Why the change cannot be served live; non-empty: nothing is applied."""


def grow(served: BridgeLayout, new: BridgeLayout) -> Growth:
    """The served layout grown by what `new` (the config read again) adds; nothing served is dropped."""
    problems: list[str] = []
    added: dict[str, tuple[LineLayout, ...]] = {}
    cameras: list[CameraLayout] = []
    for cam in served.cameras:
        now = new.camera(cam.id)
        lines = {line.id: line for line in cam.lines}
        extra: list[LineLayout] = []
        for li, line in enumerate(now.lines if now is not None else ()):
            old = lines.get(line.id)
            if old is None:
                extra.append(line)
            elif old.gates != line.gates and now is not None:
                problems.append(f"cameras.{now.index}.lines.{li}.gates: {cam.id}/{line.id}'s gates changed")
        if extra:
            added[cam.id] = tuple(extra)
        cameras.append(CameraLayout(cam.id, cam.lines + tuple(extra), cam.index))
    known = {c.id for c in served.cameras}
    for cam in new.cameras:
        if cam.id not in known:
            added[cam.id] = cam.lines
            cameras.append(cam)
    return Growth(BridgeLayout(tuple(cameras)), added, frozenset(c.id for c in new.cameras), tuple(problems))


class LiveLayout:
    """Reads the layout again when woken (`wake`: the reader's camera entries, SIGHUP) and serves what it adds."""

    def __init__(
        self,
        source: Callable[[], BridgeLayout | None],
        layout: BridgeLayout,
        *,
        state: BridgeState,
        reader: StreamReader,
        protocols: Sequence[PlcProtocol],
    ) -> None:
        """`source`: the config's layout read again (None: it does not load, already logged). `protocols`:
        the bridge's, in the table's order (daemon.bridge.protocols), each told what is added."""
        self.source = source
        self.layout = layout
        self.state, self.reader = state, reader
        self.protocols = tuple(protocols)
        self.retired: set[str] = set()
        self._wake = asyncio.Event()
        self.applied = 0
        """Reads of the config that changed what is served (tests wait on it)."""
        reader.on_cameras = self.wake

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            new = self.source()
            if new is not None:
                async with self.reader.serving:  # between two batches of entries
                    await self.apply(new)

    async def apply(self, new: BridgeLayout) -> None:
        """Serve what `new` adds (see the module docstring); log why not where it cannot be served live."""
        growth = grow(self.layout, new)
        problems = list(growth.problems)
        if growth.added and not problems:
            for protocol in self.protocols:
                problems += protocol.plan_growth(growth.layout, growth.added)
        if problems:
            log.warning("bridge_layout_restart_needed", reasons=problems)
            return
        await self._add(growth)
        retired = {c.id for c in growth.layout.cameras} - growth.configured - self.retired
        restored = self.retired & growth.configured
        for cid in retired:
            await self._status(cid, RETIRED)
        for cid in restored:
            await self._status(cid, self.state.cameras[cid].status)
        self.retired = (self.retired | retired) - restored
        self.layout = growth.layout
        if growth.added or retired or restored:
            self.applied += 1
            log.info(
                "bridge_layout_applied",
                added=[f"{c}/{line.id}" for c, lines in growth.added.items() for line in lines],
                retired=sorted(retired),
                restored=sorted(restored),
            )

    async def _status(self, camera: str, status: str) -> None:
        for protocol in self.protocols:
            await protocol.show_status(camera, status)

    async def _add(self, growth: Growth) -> None:
        if not growth.added:
            return
        for cid, lines in growth.added.items():
            cam = self.state.cameras.setdefault(cid, CameraState())
            for line in lines:
                cam.lines[line.id] = LineState()
        self.state.layout = growth.layout
        for protocol in self.protocols:
            await protocol.grow(growth.layout, growth.added)
        self.reader.grow(growth.layout)


__all__ = ["RETIRED", "Growth", "LiveLayout", "grow"]
