"""Sparkplug config checks and payloads (decoded back with pysparkplug; the integration tests decode
with Eclipse Tahu's JavaScript library instead)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from pysparkplug import DataType, DBirth, DData, Metric, NBirth, NCmd

from daemon.bridge import sparkplug_payloads as sp
from daemon.bridge.layout import layout_from_data
from daemon.bridge.state import CameraState, Crossing, LineState
from daemon.config.sparkplug import SparkplugConfig

LAYOUT = layout_from_data([{"id": "cam1", "lines": [{"id": "L1", "gates": ["g1"]}]}])


@pytest.mark.parametrize(
    "bad",
    [
        {"url": "http://broker"},
        {"url": "mqtt://u:p@broker"},
        {"url": "mqtt://broker/x"},
        {"url": "mqtt://broker", "group_id": "a/b"},
        {"url": "mqtt://broker", "edge_node_id": "#"},
        {"url": "mqtt://broker", "ca_file": "/ca.pem"},
        {"url": "mqtts://broker", "cert_file": "/c.pem"},
        {"url": "mqtt://broker", "password_file": "/pw"},
    ],
)
def test_config_refuses(bad: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        SparkplugConfig.model_validate(bad)


def test_config_defaults_and_ports() -> None:
    assert not SparkplugConfig().enabled
    assert SparkplugConfig(url="mqtt://b").host_port() == ("b", 1883, False)
    assert SparkplugConfig(url="mqtts://b").host_port() == ("b", 8883, True)
    assert SparkplugConfig(url="mqtts://b:9000").host_port() == ("b", 9000, True)
    assert SparkplugConfig(url="mqtt://b", group_id="g", edge_node_id="e").mqtt_client_id() == "beltsight-g-e"


def test_births_and_crossing_payloads_decode() -> None:
    nbirth = NBirth.decode(sp.node_birth(7, 1000))
    assert nbirth.seq == 0
    assert {m.name: m.value for m in nbirth.metrics} == {"bdSeq": 7, "Node Control/Rebirth": False}
    state = CameraState(status="up", lines={"L1": LineState(count_in=5, last_label="box", eta={"g1": 99})})
    dbirth = DBirth.decode(sp.device_birth(LAYOUT.cameras[0], state, 1, 1000))
    values = {m.name: m.value for m in dbirth.metrics}
    assert values["State"] == "up" and values["L1/CountIn"] == 5 and values["L1/g1EtaMs"] == 99
    crossing = Crossing("cam1", "L1", 3, "box", 2, "out", 9, 1234, '{"g1":5000}', "1-0")
    ddata = DData.decode(sp.crossing_data(crossing, ("g1",), 255, 2000, historical=True))
    assert ddata.seq == 255
    by_name = {m.name: m for m in ddata.metrics}
    assert by_name["L1/CountOut"].value == 9 and "L1/CountIn" not in by_name
    assert by_name["L1/g1EtaMs"].value == 5000
    assert all(m.timestamp == 1234 and m.is_historical for m in ddata.metrics)


def test_rebirth_parsing() -> None:
    rebirth = NCmd(timestamp=1, metrics=(Metric(1, sp.REBIRTH, DataType.BOOLEAN, value=True),))
    assert sp.is_rebirth(rebirth.encode(include_dtypes=True))
    other = NCmd(timestamp=1, metrics=(Metric(1, "Other", DataType.BOOLEAN, value=True),))
    assert not sp.is_rebirth(other.encode(include_dtypes=True))
    assert not sp.is_rebirth(b"\xff\xff junk")
    assert sp.topic("g", "DDATA", "e", "cam1") == "spBv1.0/g/DDATA/e/cam1"
