"""The protocols' part of the bridge's `/healthz` (daemon.bridge.protocols.health_report): every
built-in protocol is there while it is off, with its off-defaults, as before the protocol table
(monitoring reads `clients.opcua`, `refused.modbus`, `sparkplug`)."""

from __future__ import annotations

from daemon.bridge.protocols import health_report


def test_the_built_in_protocols_off_keep_their_keys_with_their_defaults() -> None:
    assert health_report([]) == {
        "clients": {"opcua": 0, "modbus": 0},
        "refused": {"opcua": {}, "modbus": {}},
        "sparkplug": None,
    }
