"""The `[bridge]` section: where the bridge listens, which streams it reads, who may connect.

```toml
[bridge]
health_listen = "127.0.0.1:9109"          # "" turns the health endpoint off
group = "beltsight-bridge"                # the bridge's consumer group on every stream it reads
state_dir = "/var/lib/beltsight-bridge"   # generated OPC UA certificate, trusted client certs
[bridge.opcua]
listen = "127.0.0.1:4840"                 # "" turns OPC UA off
security = "basic256sha256"               # or "none" (a warning at start)
users = { plc = { password_file = "/run/credentials/beltsight-bridge.service/plc-password" } }
[bridge.modbus]
listen = "127.0.0.1:5020"                 # "" turns Modbus off
unit_id = 1
base_register = 0
block_size = 16
```

The consumer group (`group`) is created at id 0 on every stream (`MKSTREAM`), so a bridge whose
group is new reads each stream from its start; one bridge per group: two bridges that must both
serve everything need two group names. The served state is also kept as a small JSON snapshot in
Redis (`snapshot_key`), written in the same transaction as the XACK of the entries it reflects.

The served layout (cameras, their lines, each line's gates) is `daemon.bridge.layout.BridgeLayout`,
re-exported here; `validate_layout` checks it against the node names of the address space.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from daemon.bridge.layout import (
    NODE_NAMES,
    BridgeLayout,
    CameraLayout,
    LayoutError,
    LineLayout,
    layout_from_data,
    validate_layout,
)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def parse_listen(value: str) -> tuple[str, int]:
    """`host:port` -> (host, port); `[::1]:4840` -> ("::1", 4840)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"must be host:port, e.g. 127.0.0.1:4840 (got {value!r})")
    return host.strip("[]"), int(port)


def _listen(v: str | None) -> str | None:
    if not v:
        return None
    parse_listen(v)
    return v


Listen = Annotated[str | None, AfterValidator(_listen)]
"""host:port; empty or absent: off."""


class OpcUaUser(_Section):
    """One OPC UA user: `password` inline or `password_file` (a systemd credential); never logged."""

    password: SecretStr | None = None
    password_file: Path | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.password is None) == (self.password_file is None):
            raise ValueError("give exactly one of password, password_file")
        return self

    def secret(self) -> str:
        """The password (read from `password_file` each call; trailing newline dropped)."""
        if self.password is not None:
            return self.password.get_secret_value()
        assert self.password_file is not None
        return self.password_file.read_text(encoding="utf-8").rstrip("\r\n")


class OpcUaConfig(_Section):
    listen: Listen = "127.0.0.1:4840"
    """Endpoint `opc.tcp://<listen>/beltsight`; empty or absent: no OPC UA server."""
    security: Literal["basic256sha256", "none"] = "basic256sha256"
    """basic256sha256: the only endpoint is Basic256Sha256 SignAndEncrypt; client certificates must be
    in `trusted_dir`. none: one unencrypted endpoint, logged as a warning at start."""
    users: dict[str, OpcUaUser] = Field(default_factory=dict)
    """Username/password users; none configured: anonymous clients are allowed (logged at start)."""
    cert_file: Path | None = None
    """Server certificate (DER or PEM); absent: a self-signed one is generated (and kept) as
    `<state_dir>/opcua/server-cert.der` with its key `<state_dir>/opcua/server-key.pem`."""
    key_file: Path | None = None
    trusted_dir: Path | None = None
    """Client certificates (DER or PEM files) accepted on the encrypted endpoint; default
    `<state_dir>/opcua/trusted`. A client whose certificate is not there is refused."""
    max_connections: int = Field(64, ge=1, le=10_000)

    @model_validator(mode="after")
    def _cert_pair(self) -> Self:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together")
        return self


class ModbusConfig(_Section):
    listen: Listen = "127.0.0.1:5020"
    """Modbus TCP; empty or absent: no Modbus server."""
    unit_id: int = Field(1, ge=0, le=255)
    base_register: int = Field(0, ge=0, le=65535)
    """Protocol address of the first block's register 0 (0 = 4x00001)."""
    block_size: int = Field(16, ge=16, le=1024)
    """Registers per (camera, line): 0-15 are defined (see daemon.bridge.registers), the rest read 0."""
    max_connections: int = Field(32, ge=1, le=10_000)
    """Open client connections at most; one more evicts the longest-idle one, or is refused."""
    idle_timeout_s: float = Field(60.0, gt=0)
    """A connection that sends no request for this long is closed."""


class BridgeConfig(_Section):
    health_listen: Listen = "127.0.0.1:9109"
    group: str = Field("beltsight-bridge", min_length=1, max_length=200)
    consumer: str = Field("bridge", min_length=1, max_length=200)
    """Consumer name inside the group (fixed, so a restarted bridge finds its own pending entries)."""
    objects_stream: str = "beltsight:objects:{camera}"
    events_stream: str = "beltsight:events"
    snapshot_key: str = "beltsight:bridge:state:{group}"
    state_dir: Path = Path("/var/lib/beltsight-bridge")
    read_count: int = Field(256, ge=1, le=10_000)
    """Entries per XREADGROUP call and stream."""
    reconnect_max_s: float = Field(5.0, ge=0.1)
    """Longest wait between Redis reconnect attempts (capped exponential backoff, full jitter)."""
    opcua: OpcUaConfig = OpcUaConfig()
    modbus: ModbusConfig = ModbusConfig()

    @field_validator("objects_stream")
    @classmethod
    def _check_stream(cls, v: str) -> str:
        if "{camera}" not in v:
            raise ValueError("must contain '{camera}' (one stream per camera)")
        return v

    def stream_for(self, camera: str) -> str:
        return self.objects_stream.replace("{camera}", camera)

    def snapshot_key_name(self) -> str:
        return self.snapshot_key.replace("{group}", self.group)


__all__ = [
    "NODE_NAMES",
    "BridgeConfig",
    "BridgeLayout",
    "CameraLayout",
    "LayoutError",
    "LineLayout",
    "ModbusConfig",
    "OpcUaConfig",
    "OpcUaUser",
    "layout_from_data",
    "parse_listen",
    "validate_layout",
]
