"""The vendored MachineVision nodeset under the pinned asyncua, and the result mapping (no network)."""

from __future__ import annotations

import asyncio
import json
import logging
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest
from asyncua import ua
from asyncua.server.server import Server

from daemon.bridge.machine_vision import MV_NAMESPACE, NODESET, import_nodeset
from daemon.bridge.machine_vision_results import MV, ResultFilter, result_content, result_data
from daemon.bridge.state import Crossing


def _crossing(**over: object) -> Crossing:
    base: dict[str, object] = dict(
        camera="cam1",
        line="L1",
        track=42,
        label="box",
        cls=2,
        direction="in",
        count=7,
        at_ms=1_700_000_000_250,
        eta_json='{"g1":1700000001000}',
        entry_id="1700000000300-0",
    )
    return Crossing(**(base | over))  # type: ignore[arg-type]


async def _bridge_like_server() -> Server:
    """A server whose namespaces are the bridge's: `urn:beltsight` registered before the nodeset
    (asyncua keeps the nodeset's types per process, under the index of the first import)."""
    server = Server()
    await server.init()
    await server.register_namespace("urn:beltsight")
    return server


async def _import_nodeset() -> None:
    server = await _bridge_like_server()
    await import_nodeset(server)
    await server.stop()


@pytest.fixture
def mv_types() -> None:
    """The nodeset's data types, which asyncua registers in `asyncua.ua` when it imports the nodeset."""
    if not hasattr(ua, "PartIdDataType"):
        asyncio.run(_import_nodeset())


def test_pinned_asyncua_imports_the_vendored_nodeset(caplog: pytest.LogCaptureFixture) -> None:
    declared = [n for n in ET.parse(NODESET).getroot() if n.get("NodeId")]

    async def imported() -> list[ua.NodeId]:
        server = await _bridge_like_server()
        with caplog.at_level(logging.WARNING, logger="asyncua"):
            nodes = await server.import_xml(str(NODESET))
        ns = await server.get_namespace_index(MV_NAMESPACE)
        vtype = server.get_node(ua.NodeId(1003, ns))
        assert (await vtype.read_browse_name()).Name == "VisionSystemType"
        await server.stop()
        return list(nodes)

    nodes = asyncio.run(imported())
    assert len(nodes) == len(declared)  # every node of the file, none skipped
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # no "failure adding node"
    assert MV.PartIdDataType(Id="1").Id == "1" and MV.SystemStateDataType.UDT_5 == 5


def test_result_content_and_result_data(mv_types: None) -> None:
    crossing = _crossing(snapshot="cam1/2026-01-01/42.jpg")
    assert json.loads(result_content(crossing)) == {
        "label": "box",
        "cls": 2,
        "line": "L1",
        "direction": "in",
        "count": 7,
        "eta": {"g1": 1_700_000_001_000},
        "snapshot": "cam1/2026-01-01/42.jpg",
    }
    assert "snapshot" not in json.loads(result_content(_crossing()))
    result = result_data(crossing)
    assert result.ResultId.Id == "1700000000300-0" and result.PartId.Id == "42"
    assert result.ResultState == 1 and result.IsPartial is False and result.JobId.Id == "cam1"
    assert result.CreationTime == datetime(2023, 11, 14, 22, 13, 20, 250000, tzinfo=UTC)


def test_result_filter(mv_types: None) -> None:
    none = ResultFilter([])
    assert none.matches(_crossing()) and none.max_results == 100 and none.start_index == 0
    by_part = ResultFilter([ua.Variant(0, ua.VariantType.Int32), None, MV.PartIdDataType(Id="41")])
    assert not by_part.matches(_crossing()) and by_part.matches(_crossing(track=41))
    assert not ResultFilter([ua.Variant(4, ua.VariantType.Int32)]).matches(_crossing())  # only Completed ones
    assert ResultFilter([1] + [None] * 8 + [500, 3]).max_results == 100  # bounded
    other_job = ResultFilter([0] + [None] * 7 + [MV.JobIdDataType(Id="cam2")])
    assert not other_job.matches(_crossing())
    recipe = ResultFilter([0, None, None, None, MV.RecipeIdInternalDataType(Id="beltsight")])
    assert recipe.matches(_crossing())
