"""The `[bridge]` section: where `beltsight bridge` listens, its consumer group, who may connect.

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

The streams it reads are the daemon's own: `[redis] objects_stream` (one per camera) and
`[redis] events_stream`; there are no stream keys under `[bridge]`.

The consumer group (`group`) is created at id 0 on every stream (`MKSTREAM`), so a bridge whose
group is new reads each stream from its start; one bridge per group: two bridges that must both
serve everything need two group names. The served state is also kept as a small JSON snapshot in
Redis (`snapshot_key`), written in the same transaction as the XACK of the entries it reflects.
What is served (cameras, lines, gates) comes from `[[cameras]]` (daemon.bridge.layout).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, SecretStr, field_validator, model_validator

from daemon.config.base import Section, read_secret_file
from daemon.config.reconcile import ReconcileConfig
from daemon.config.sparkplug import SparkplugConfig
from daemon.core.netaddr import parse_host_port
from daemon.core.shifts import parse_shifts


def _listen(v: str | None) -> str | None:
    if not v:
        return None
    try:
        parse_host_port(v)
    except ValueError:
        raise ValueError(f"must be host:port, e.g. 127.0.0.1:4840 (got {v!r})") from None
    return v


Listen = Annotated[str | None, AfterValidator(_listen)]
"""host:port (parse it with `daemon.core.netaddr.parse_host_port`); empty or absent: off."""


class OpcUaUser(Section):
    """One OPC UA user: `password` inline or `password_file` (a systemd credential); never logged."""

    password: SecretStr | None = None
    """The password inline (kept secret: never logged or printed by check-config); or use `password_file`."""
    password_file: Path | None = None
    """File holding the password (e.g. a systemd credential), read and stripped when the bridge starts."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.password is None) == (self.password_file is None):
            raise ValueError("give exactly one of password, password_file")
        return self

    def secret(self) -> str:
        """The password (read from `password_file` each call, stripped, as every `*_file` secret);
        ValueError when the file cannot be read."""
        if self.password is not None:
            return self.password.get_secret_value()
        assert self.password_file is not None
        return read_secret_file(self.password_file)


class OpcUaConfig(Section):
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
    """Private key of `cert_file` (set both or neither); absent: the generated `server-key.pem`."""
    trusted_dir: Path | None = None
    """Client certificates (DER or PEM files) accepted on the encrypted endpoint; default
    `<state_dir>/opcua/trusted`. A client whose certificate is not there is refused."""
    max_connections: int = Field(64, ge=1, le=10_000)
    """OPC UA client connections open at once at most; the OPC UA server refuses one more."""
    machine_vision: bool = False
    """Also serve OPC UA for Machine Vision (OPC 40100-1): one `VisionSystemType` object per camera
    under `Objects/BeltSight/MachineVision` and a `ResultReadyEventType` event per crossing."""

    @model_validator(mode="after")
    def _cert_pair(self) -> Self:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together")
        return self


class ModbusConfig(Section):
    listen: Listen = "127.0.0.1:5020"
    """Modbus TCP; empty or absent: no Modbus server."""
    unit_id: int = Field(1, ge=0, le=255)
    """The Modbus unit id served; requests to another unit get exception 0x0B (gateway target failed)."""
    base_register: int = Field(0, ge=0, le=65535)
    """Protocol address of the first block's register 0 (0 = 4x00001)."""
    block_size: int = Field(16, ge=16, le=1024)
    """Registers per (camera, line): 0-15 are defined (see daemon.bridge.registers), the rest read 0."""
    max_connections: int = Field(32, ge=1, le=10_000)
    """Open client connections at most; one more evicts the longest-idle one, or is refused."""
    idle_timeout_s: float = Field(60.0, gt=0)
    """A connection that sends no request for this long is closed."""


class BridgeConfig(Section):
    health_listen: Listen = "127.0.0.1:9109"
    """/healthz of the bridge (JSON: Redis, last ids, pending, clients); empty: off."""
    group: str = Field("beltsight-bridge", min_length=1, max_length=200)
    """Consumer group on every stream read, created at id 0 (a new group reads each stream from its
    start); one bridge per group."""
    consumer: str = Field("bridge", min_length=1, max_length=200)
    """Consumer name inside the group (fixed, so a restarted bridge finds its own pending entries)."""
    snapshot_key: str = "beltsight:bridge:state:{group}"
    """Redis key of the served state's JSON snapshot (`{group}` is replaced by `group`), written in
    the same transaction as the XACKs it reflects and loaded once when the bridge starts."""
    state_dir: Path = Path("/var/lib/beltsight-bridge")
    """Where the generated OPC UA certificate (`opcua/`), the trusted client certificates
    (`opcua/trusted/`, unless `trusted_dir`), the Sparkplug bdSeq (`sparkplug.json`) and the Modbus
    map's block numbering (`modbus_blocks.json`: a block never moves, `daemon.bridge.blocks`) are kept."""
    read_count: int = Field(256, ge=1, le=10_000)
    """Entries per XREADGROUP call and stream."""
    reconnect_max_s: float = Field(5.0, ge=0.1)
    """Longest wait between Redis reconnect attempts (capped exponential backoff, full jitter)."""
    resume_grace_s: float = Field(5.0, ge=0, le=300)
    """At process start, with OPC UA on and no OPC UA event subscriber yet: the OPC UA events of the
    first entries read are fired once a client has an event subscription, or this long after OPC UA
    starts listening, so that the crossings written while the bridge was down fire their events to a
    PLC that reconnects, not to no one. The counts (Modbus, OPC UA variables, Sparkplug) are served at
    once. 0: fire at once."""
    event_history_s: float = Field(600.0, ge=0, le=86_400)
    """OPC UA event history: HistoryRead of the events of `Objects/BeltSight` and of each Machine
    Vision VisionSystemType object covers at least this many seconds back (kept in memory; rebuilt
    from the objects streams when the bridge starts, so it survives a restart), and Machine Vision's
    GetResultListFiltered answers from it. A PLC reads it after reconnecting to get the crossings
    whose events it missed. 0: no history."""
    opcua: OpcUaConfig = OpcUaConfig()
    """The `[bridge.opcua]` section: the OPC UA server."""
    modbus: ModbusConfig = ModbusConfig()
    """The `[bridge.modbus]` section: the Modbus TCP server."""
    sparkplug: SparkplugConfig = SparkplugConfig()
    """The `[bridge.sparkplug]` section: MQTT Sparkplug B edge node (daemon.bridge.sparkplug); off by default."""
    reconcile: list[ReconcileConfig] = Field(default_factory=list)
    """`[[bridge.reconcile]]`: camera lines whose counts are checked live against the plant's own counter
    (daemon.bridge.reconcile); none by default."""
    evidence_url: str = ""
    """The daemon's endpoint as the operator's browser reaches it (e.g. "https://vision-box:9108"): the
    shift report page (`/report`) links each crossing's snapshot and clip there; "" shows their paths."""
    shifts: list[str] = Field(default_factory=list)
    """Local shift start times ("HH:MM", the last shift wrapping past midnight) for the reconciled counts
    kept per shift (daemon.core.shifts); none: counts are kept per hour only."""

    @field_validator("evidence_url")
    @classmethod
    def _evidence_url(cls, v: str) -> str:
        if v and not re.fullmatch(r"https?://[^\s/?#]+/?", v):
            raise ValueError("must be empty or the daemon endpoint's http:// or https:// origin, e.g. https://box:9108")
        return v

    @field_validator("shifts")
    @classmethod
    def _shifts(cls, v: list[str]) -> list[str]:
        parse_shifts(v)
        return v

    @model_validator(mode="after")
    def _reconcile_unique(self) -> Self:
        keys = [r.key for r in self.reconcile]
        doubles = sorted({k for k in keys if keys.count(k) > 1})
        if doubles:
            raise ValueError(f"reconcile: {', '.join(doubles)} given twice")
        return self

    def snapshot_key_name(self) -> str:
        return self.snapshot_key.replace("{group}", self.group)


__all__ = ["BridgeConfig", "Listen", "ModbusConfig", "OpcUaConfig", "OpcUaUser", "ReconcileConfig", "SparkplugConfig"]
