"""The bridge room's public seam: what the lab (`tools/`) may use of `daemon.bridge`.

One `seam` per room (see `daemon.core.seam` and `PUBLIC_SEAMS` in tests/test_architecture.py): the
bridge (`Bridge`), its layout (`BridgeLayout`, `layout_from_data`, `ETA_SUFFIX`), the PLC protocols
the bridge benches serve one at a time, the Modbus register map (`DEFINED_REGISTERS`,
`words_u32`) and the counts reconciler the PLC simulator replays (`Reconciler` and its values).
"""

from daemon.bridge.layout import ETA_SUFFIX, BridgeLayout, layout_from_data
from daemon.bridge.protocol_modbus import ModbusProtocol
from daemon.bridge.protocol_opcua import OpcUaProtocol
from daemon.bridge.protocol_sparkplug import SparkplugProtocol
from daemon.bridge.reconcile import CounterNote, Reconciler, Verdict, Window
from daemon.bridge.registers import DEFINED_REGISTERS, words_u32
from daemon.bridge.service import Bridge

__all__ = [
    "DEFINED_REGISTERS",
    "ETA_SUFFIX",
    "Bridge",
    "BridgeLayout",
    "CounterNote",
    "ModbusProtocol",
    "OpcUaProtocol",
    "Reconciler",
    "SparkplugProtocol",
    "Verdict",
    "Window",
    "layout_from_data",
    "words_u32",
]
