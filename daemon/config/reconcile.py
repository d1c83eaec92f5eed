"""The `[[bridge.reconcile]]` entries: the plant's own counter as a reference for a camera line's count.

```toml
[[bridge.reconcile]]
camera = "line1-infeed"
line = "exit"
direction = "in"
modbus = "10.0.0.5:502"        # or opcua = "opc.tcp://10.0.0.5:4840", node = "ns=2;s=Counters.Infeed"
unit = 1
register = 100                 # protocol address, 0-based (4x00101)
words = 2                      # 32-bit counter in two registers
word_order = "high_first"
table = "holding"              # or "input"
poll_s = 0.5
window_s = 15
lag_s = 2.0                    # or distance_mm = 800 with the belt speed the daemon measures
tolerance = 2                  # parts
tolerance_share = 0.02         # of the reference's increase; the larger of the two applies
```

`beltsight bridge` polls the counter and compares, over a rolling `window_s`, the camera's crossings
against the counter's increase (daemon.bridge.reconcile). The hysteresis keys (`mismatch_after_s`,
`agree_after_s`, `clear_ratio`) have defaults that fit most lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from daemon.config.base import Section, read_secret_file
from daemon.core.netaddr import parse_host_port


class ReconcileConfig(Section):
    """One camera line and direction checked against one PLC counter (Modbus TCP or OPC UA)."""

    camera: str = Field(min_length=1)
    """Camera id (one of `[[cameras]]`)."""
    line: str = Field(min_length=1)
    """Line id of that camera whose crossings are counted."""
    direction: Literal["in", "out"] = "in"
    """Which crossings of the line the counter counts."""
    modbus: str | None = None
    """The PLC's Modbus TCP server, "host:port" (or use `opcua`)."""
    unit: int = Field(1, ge=0, le=255)
    """Modbus unit id of the counter."""
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    register_address: int = Field(0, ge=0, le=65535, alias="register")
    """Modbus protocol address of the counter's (first) register, 0-based (0 = 4x00001 / 3x00001)."""
    words: Literal[1, 2] = 1
    """Registers the counter takes: 1 (16-bit, wraps at 65536) or 2 (32-bit, wraps at 2^32)."""
    word_order: Literal["high_first", "low_first"] = "high_first"
    """With `words = 2`: which register holds the high 16 bits (the common default is the first)."""
    table: Literal["holding", "input"] = "holding"
    """Modbus table the counter is in: holding registers (function 3) or input registers (function 4)."""
    opcua: str | None = None
    """The PLC's OPC UA endpoint URL, e.g. "opc.tcp://10.0.0.5:4840" (or use `modbus`)."""
    node: str | None = None
    """With `opcua`: the counter variable's node id, e.g. "ns=2;s=Counters.Infeed"."""
    counter_bits: Literal[16, 32, 64] = 32
    """With `opcua`: the counter's width, where it wraps (UInt16, UInt32, UInt64). Modbus: from `words`."""
    opcua_user: str | None = None
    """With `opcua`: user name, where the PLC's server needs one (with `opcua_password` or `opcua_password_file`)."""
    opcua_password: SecretStr | None = None
    """The OPC UA user's password inline (never logged); or `opcua_password_file`."""
    opcua_password_file: Path | None = None
    """File holding the OPC UA user's password (e.g. a systemd credential)."""
    opcua_security: Literal["none", "basic256sha256"] = "none"
    """With `opcua`: `basic256sha256` connects with Basic256Sha256 SignAndEncrypt using the bridge's own
    certificate (`[bridge.opcua] cert_file`, or the generated one in `<state_dir>/opcua/`); the PLC must trust it."""
    poll_s: float = Field(0.5, ge=0.05, le=60)
    """Seconds between two reads of the counter."""
    timeout_s: float = Field(2.0, gt=0, le=60)
    """A read that takes longer fails; the reference is `reference_down` until a read succeeds again."""
    window_s: float = Field(15.0, ge=1, le=3600)
    """The rolling window over which the two counts' increases are compared."""
    lag_s: float | None = Field(None, ge=0, le=600)
    """Seconds a part takes from the camera's line to the photo-eye (negative travel is not supported:
    put the photo-eye downstream). Default 0 unless `distance_mm` is given."""
    distance_mm: float | None = Field(None, gt=0)
    """Instead of `lag_s`: the distance from the line to the photo-eye; the lag is this over the belt
    speed measured from the line's crossings (`speed_mm_s`), `lag_s` until a speed is known."""
    tolerance: int = Field(2, ge=0)
    """A window disagrees when the two increases differ by more than this many parts (or the share)."""
    tolerance_share: float = Field(0.0, ge=0, le=1)
    """A window disagrees when the difference exceeds this share of the reference's increase (or `tolerance`,
    whichever is larger)."""
    mismatch_after_s: float = Field(5.0, ge=0, le=3600)
    """Windows must disagree this long without a break before `count_mismatch` (no flapping)."""
    agree_after_s: float = Field(5.0, ge=0, le=3600)
    """After a mismatch, windows must agree this long without a break before `count_agrees`."""
    clear_ratio: float = Field(0.5, ge=0, le=1)
    """Hysteresis: during a mismatch a window agrees only when the difference is within this share of the
    allowed difference."""
    settle_s: float = Field(1.0, ge=0, le=60)
    """Time a crossing may take to reach the bridge (daemon latency): windows end this long before now."""
    max_rate_per_s: float = Field(50.0, gt=0)
    """The most parts per second the counter can count; a larger jump is a reset or a preset, not parts."""

    @field_validator("modbus")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v:
            try:
                parse_host_port(v)
            except ValueError:
                raise ValueError(f"must be host:port, e.g. 10.0.0.5:502 (got {v!r})") from None
        return v or None

    @field_validator("opcua")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v and not v.startswith("opc.tcp://"):
            raise ValueError(f"must be an opc.tcp:// URL (got {v!r})")
        return v or None

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.modbus is None) == (self.opcua is None):
            raise ValueError("give exactly one of modbus, opcua")
        if self.opcua is not None and not self.node:
            raise ValueError("opcua needs node (the counter's node id)")
        if self.opcua_password is not None and self.opcua_password_file is not None:
            raise ValueError("give at most one of opcua_password, opcua_password_file")
        if self.modbus is not None and self.words == 2 and self.register_address == 65535:
            raise ValueError("words = 2 needs register <= 65534")
        return self

    @property
    def bits(self) -> int:
        """Where the counter wraps: 2**bits."""
        return 16 * self.words if self.modbus is not None else self.counter_bits

    @property
    def key(self) -> str:
        """`camera/line/direction`: the reconciled line's name in logs, metrics and state."""
        return f"{self.camera}/{self.line}/{self.direction}"

    def password(self) -> str | None:
        """The OPC UA password (file read now), None without one."""
        if self.opcua_password is not None:
            return self.opcua_password.get_secret_value()
        if self.opcua_password_file is not None:
            return read_secret_file(self.opcua_password_file)
        return None

    def where(self) -> str:
        """The reference's address for logs (no credentials)."""
        return (
            f"modbus://{self.modbus}/{self.unit}/{self.table}/{self.register_address}"
            if self.modbus
            else f"{self.opcua} {self.node}"
        )


__all__ = ["ReconcileConfig"]
