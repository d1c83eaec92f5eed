"""Helpers for the Machine Vision (OPC 40100-1) tests: the client side of the MachineVision objects."""

from __future__ import annotations

from typing import Any

from asyncua import Client, Node, ua

from tests.support.bridge_harness import Events
from tools.kit.plc_clients import event_type, mv_ns, vision_system


async def subscribe_results(client: Client, handler: Events, *cameras: str) -> Any:
    """ResultReadyEventType events of each camera's VisionSystemType object."""
    etype = await event_type(client, await mv_ns(client), "ResultReadyEventType")
    sub = await client.create_subscription(10, handler)
    for camera in cameras:
        await sub.subscribe_events(await vision_system(client, camera), etype, queuesize=1000)
    return sub


async def result_management(client: Client, camera: str) -> Node:
    ns = await mv_ns(client)
    return await (await vision_system(client, camera)).get_child([f"{ns}:ResultManagement"])


async def get_result_by_id(client: Client, camera: str, entry_id: str) -> tuple[int, Any, int]:
    ns = await mv_ns(client)
    rm = await result_management(client, camera)
    handle, result, error = await rm.call_method(
        f"{ns}:GetResultById", ua.ResultIdDataType(Id=entry_id), ua.Variant(1000, ua.VariantType.Int32)
    )
    return handle, result, error


async def get_result_list(
    client: Client, camera: str, *, part: str = "", max_results: int = 0, start: int = 0
) -> tuple[bool, int, list[Any], int]:
    ns = await mv_ns(client)
    rm = await result_management(client, camera)
    args = [
        ua.Variant(0, ua.VariantType.Int32),
        ua.MeasIdDataType(Id=""),
        ua.PartIdDataType(Id=part),
        ua.RecipeIdExternalDataType(Id=""),
        ua.RecipeIdInternalDataType(Id=""),
        ua.ConfigurationIdDataType(Id=""),
        ua.ConfigurationIdDataType(Id=""),
        ua.ProductIdDataType(Id=""),
        ua.JobIdDataType(Id=""),
        ua.Variant(max_results, ua.VariantType.UInt32),
        ua.Variant(start, ua.VariantType.UInt32),
        ua.Variant(1000, ua.VariantType.Int32),
    ]
    complete, count, _handle, results, error = await rm.call_method(f"{ns}:GetResultListFiltered", *args)
    return complete, count, list(results or []), error
