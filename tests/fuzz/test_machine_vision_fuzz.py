"""The bridge's Machine Vision methods (OPC 40100-1, daemon/bridge/machine_vision.py) called by a real
asyncua client with fuzzed arguments, against a real bridge reading a real redis-server:

- any arguments at all (none, too many, every variant type, null, the MV id types with any text) to
  GetResultById, GetResultListFiltered, GetResultComponentsById and the state machine's methods get
  an answer or a Bad status, never a dropped session or a dead server: after each call the same
  session still gets a known result by its id;
- arguments of the right types with any values get an answer that holds: GetResultById's result is
  the entry asked for (error 0) or none (-1); GetResultListFiltered's results are entries of the
  camera's stream, newest first, as many as it says, at most 100.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from asyncua import Client, Node, ua
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from daemon.bridge.service import Bridge
from tests.support.bridge_harness import bridge_on_a_thread, crossing, make_config, wait_for
from tests.support.mv_harness import mv_ns, result_management, vision_system
from tools.kit.redis_server import RedisServer

# the bridge's loop thread (asyncua's server and client) draws from `random` while Hypothesis draws
# the next example on this one: Hypothesis sees the global state move and blames the strategy
pytestmark = pytest.mark.filterwarnings("ignore:Do not use the `random` module inside strategies")

CAMERAS = ("cam1", "cam2")
CALL_S = 30.0  # a generous deadline for one call on a loaded machine, never a timing claim
RESULT_METHODS = ("GetResultById", "GetResultListFiltered", "GetResultComponentsById")
MACHINE_METHODS = ("Halt", "Reset")  # the state machine's mandatory methods (the bridge takes no commands)


@dataclass
class Station:
    loop: asyncio.AbstractEventLoop
    bridge: Bridge
    client: Client
    ns: int
    managers: dict[str, Node]
    machines: dict[str, Node]
    ids: dict[str, list[str]]  # camera -> its crossings' entry ids, oldest first

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, CALL_S), self.loop).result(CALL_S + 10)


async def _open(server: RedisServer, bridge: Bridge, ids: dict[str, list[str]], port: str) -> Station:
    client = Client(f"opc.tcp://{port}/beltsight", timeout=CALL_S)
    await client.connect()
    ns = await mv_ns(client)
    managers = {c: await result_management(client, c) for c in CAMERAS}
    machines = {c: await (await vision_system(client, c)).get_child([f"{ns}:VisionStateMachine"]) for c in CAMERAS}
    return Station(asyncio.get_running_loop(), bridge, client, ns, managers, machines, ids)


@pytest.fixture(scope="module")
def station(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Station]:
    config = make_config(tmp_path_factory.mktemp("bridge"), machine_vision=True)
    with bridge_on_a_thread(config) as (server, bridge, loop):
        with server.client() as writer:
            ids = {
                camera: [
                    str(writer.xadd(f"beltsight:objects:{camera}", crossing(camera, "L1", n, track=n % 4)))
                    for n in range(1, 31)
                ]
                for camera in CAMERAS
            }
        done = asyncio.run_coroutine_threadsafe(
            wait_for(lambda: all(bridge.state.line(c, "L1").count_in == 30 for c in CAMERAS)), loop
        )
        done.result(60)
        opened = asyncio.run_coroutine_threadsafe(_open(server, bridge, ids, config.opcua.listen or ""), loop)
        station = opened.result(60)
        try:
            yield station
        finally:
            station.run(station.client.disconnect())


# -- arguments --------------------------------------------------------------------------------------

ID_TYPES = [
    "ResultIdDataType",
    "MeasIdDataType",
    "PartIdDataType",
    "RecipeIdExternalDataType",
    "RecipeIdInternalDataType",
    "ConfigurationIdDataType",
    "ProductIdDataType",
    "JobIdDataType",
]
"""The MV id types, by name: asyncua makes them once the bridge has imported the nodeset."""
FILTER_TYPES = [*ID_TYPES[1:6], "ConfigurationIdDataType", *ID_TYPES[6:]]
"""GetResultListFiltered's id arguments in order (the external and the internal configuration id)."""


def id_value(name: str, text: str) -> ua.Variant:
    return ua.Variant(getattr(ua, name)(Id=text), ua.VariantType.ExtensionObject)


TEXT = st.text(max_size=40) | st.sampled_from(["", "0-0", "1-1", "18446744073709551615-18446744073709551615", "*"])
INT32 = st.integers(-(2**31), 2**31 - 1)
UINT32 = st.integers(0, 2**32 - 1)
VARIANTS = st.one_of(
    st.builds(lambda v: ua.Variant(v, ua.VariantType.Int32), INT32),
    st.builds(lambda v: ua.Variant(v, ua.VariantType.UInt32), UINT32),
    st.builds(lambda v: ua.Variant(v, ua.VariantType.Int64), st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda v: ua.Variant(v, ua.VariantType.Double), st.floats()),
    st.builds(lambda v: ua.Variant(v, ua.VariantType.Boolean), st.booleans()),
    st.builds(lambda v: ua.Variant(v, ua.VariantType.String), TEXT),
    st.builds(lambda v: ua.Variant(v, ua.VariantType.ByteString), st.binary(max_size=40)),
    st.builds(lambda v: ua.Variant(v, ua.VariantType.Int32), st.lists(INT32, max_size=5)),
    st.just(ua.Variant()),
    st.builds(id_value, st.sampled_from(ID_TYPES), TEXT),
    st.builds(lambda v: ua.Variant(ua.LocalizedText(v), ua.VariantType.LocalizedText), TEXT),
    st.builds(lambda v: ua.Variant(ua.NodeId(v, 1), ua.VariantType.NodeId), UINT32),
)


def filters(station: Station) -> st.SearchStrategy[list[ua.Variant]]:
    """GetResultListFiltered's twelve arguments, each of its type, any value."""
    known = st.sampled_from([str(n % 4) for n in range(4)] + list(CAMERAS))
    return st.tuples(
        st.builds(lambda v: ua.Variant(v, ua.VariantType.Int32), st.sampled_from([0, 1, 2, -1]) | INT32),
        *(st.builds(id_value, st.just(name), TEXT | known) for name in FILTER_TYPES),
        st.builds(lambda v: ua.Variant(v, ua.VariantType.UInt32), st.sampled_from([0, 1, 5, 100, 101]) | UINT32),
        st.builds(lambda v: ua.Variant(v, ua.VariantType.UInt32), st.sampled_from([0, 1, 29, 30]) | UINT32),
        st.builds(lambda v: ua.Variant(v, ua.VariantType.Int32), INT32),
    ).map(list)


async def _call(node: Node, name: str, ns: int, args: list[ua.Variant]) -> tuple[Any, ua.UaStatusCodeError | None]:
    try:
        return await node.call_method(f"{ns}:{name}", *args), None
    except ua.UaStatusCodeError as exc:
        return None, exc


def still_serves(station: Station, camera: str = "cam1") -> None:
    """The same session still gets a known result by its id."""
    known = station.ids[camera][7]
    arg = ua.Variant(ua.ResultIdDataType(Id=known), ua.VariantType.ExtensionObject)
    out, refused = station.run(_call(station.managers[camera], "GetResultById", station.ns, [arg]))
    assert refused is None and out[2] == 0 and out[1].ResultId.Id == known


def assert_bad(refused: ua.UaStatusCodeError) -> None:
    assert ua.StatusCode(refused.code).is_bad(), refused


# -- the properties ---------------------------------------------------------------------------------


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(CAMERAS),
    st.sampled_from(RESULT_METHODS + MACHINE_METHODS),
    st.lists(VARIANTS, max_size=14),
)
def test_any_arguments_get_an_answer_or_a_bad_status(
    station: Station, camera: str, method: str, args: list[ua.Variant]
) -> None:
    node = station.managers[camera] if method in RESULT_METHODS else station.machines[camera]
    _out, refused = station.run(_call(node, method, station.ns, args))
    if refused is not None:
        assert_bad(refused)
    event(f"{method}: {'answered' if refused is None else ua.StatusCode(refused.code).name}")
    still_serves(station, camera)


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CAMERAS), TEXT, st.data())
def test_get_result_by_id_answers_the_entry_asked_for_or_none(
    station: Station, camera: str, text: str, data: st.DataObject
) -> None:
    entry = data.draw(st.sampled_from(station.ids[camera] + station.ids["cam2" if camera == "cam1" else "cam1"]))
    asked = data.draw(st.sampled_from([text, entry]))
    arg = ua.Variant(ua.ResultIdDataType(Id=asked), ua.VariantType.ExtensionObject)
    timeout = ua.Variant(5, ua.VariantType.Int32)
    out, refused = station.run(_call(station.managers[camera], "GetResultById", station.ns, [arg, timeout]))
    assert refused is None, refused
    _handle, result, error = out
    if asked in station.ids[camera]:
        assert error == 0 and result.ResultId.Id == asked
    else:
        assert error == -1  # another camera's entry, or no entry at all


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CAMERAS), st.data())
def test_get_result_list_filtered_answers_entries_of_the_camera_newest_first(
    station: Station, camera: str, data: st.DataObject
) -> None:
    args = data.draw(filters(station))
    out, refused = station.run(_call(station.managers[camera], "GetResultListFiltered", station.ns, args))
    assert refused is None, refused
    complete, count, _handle, results, error = out
    results = list(results or [])
    got = [r.ResultId.Id for r in results]
    assert error == 0 and count == len(results) <= 100
    assert set(got) <= set(station.ids[camera])
    order = [station.ids[camera].index(i) for i in got]
    assert order == sorted(order, reverse=True), "not newest first"
    if complete and args[0].Value in (0, 1) and all(a.Value.Id == "" for a in args[1:9]):
        start = args[10].Value
        assert count == max(0, 30 - start)  # no filter: everything past the start index


def test_a_missing_or_wrongly_typed_argument_is_refused_as_invalid(station: Station) -> None:
    wrong = [ua.Variant("newest", ua.VariantType.String), *[ua.Variant() for _ in range(11)]]
    for method, args in (("GetResultById", []), ("GetResultListFiltered", wrong)):
        _out, refused = station.run(_call(station.managers["cam1"], method, station.ns, args))
        assert refused is not None and refused.code in (
            ua.StatusCodes.BadInvalidArgument,
            ua.StatusCodes.BadArgumentsMissing,
            ua.StatusCodes.BadTypeMismatch,
        ), (method, refused)
