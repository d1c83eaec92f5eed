"""The PLC protocols' seam: one interface (`PlcProtocol`) that every protocol the bridge serves implements.

The bridge (daemon.bridge.service) owns the reader, the heartbeat, the live layout and the health
endpoint; it knows the protocols only through this interface and the table `PROTOCOLS`
(daemon.bridge.protocols: name -> class), in whose order every call below goes to each protocol:

- `build` (a classmethod: the factory): the protocol from the config, or None when it is off there;
- `start` before the reader runs (listen, connect); `tasks`, its long-lived tasks, run beside the
  reader's in the bridge's one task group (one raising or returning ends the bridge: exit 1; a
  protocol starts no task itself); `close` at stop, after those tasks were cancelled;
- `serve_all` once the served state is loaded (the snapshot), `serve` with each batch the reader newly
  applied (crossings, camera states) before it acknowledges them: every protocol has the value first;
  `recall` with the crossings served before this process started (the event history, once);
- `heartbeat` every second (the bridge's counter and the time);
- `plan_growth` then `grow` with the served layout grown live (daemon.bridge.live): `plan_growth` says
  why it cannot be served live (nothing is applied then, by any protocol), changing nothing served;
  `show_status` with a camera's state as the live layout sets it (`removed`, and back);
- `reload` at SIGHUP: what it applied, for the `bridge_reloaded` line; `reloaded` (a classmethod) the
  config with what a reload applies, and the keys whose change needs a restart;
- `check_config` (a classmethod) at config load, before anything listens (`beltsight bridge` exit 78);
- `health` for `/healthz`.

What only one protocol needs (OPC UA's resume grace and event history, Machine Vision, the reconciled
lines' nodes or metrics) stays inside that protocol's class (daemon.bridge.protocol_*).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from daemon.bridge.layout import BridgeLayout, LineLayout
from daemon.bridge.reconcile_service import ReconcileService
from daemon.bridge.state import BridgeState, Change, Crossing
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from daemon.publish.redis_conn import RedisClient

Added = dict[str, tuple[LineLayout, ...]]
"""Camera -> its lines added live (every line of a new camera)."""


@dataclass(frozen=True, slots=True)
class ProtocolContext:
    """What a protocol is built from (`PlcProtocol.build`)."""

    config: BridgeConfig
    layout: BridgeLayout
    """The served layout, validated."""
    state: BridgeState
    """The served state, as the reader applies the entries (read it in `serve`, never write it)."""
    redis: RedisConfig
    redis_client_factory: Callable[[], RedisClient]
    reconcile: ReconcileService | None = None
    """The reconciliation (`[[bridge.reconcile]]`), for a protocol that serves its verdicts."""


@dataclass(frozen=True, slots=True)
class Health:
    """A protocol's part of `/healthz`."""

    clients: int | None = None
    """Connected clients, under `clients.<name>` (None: it has none, being a client itself)."""
    refused: dict[str, int] | None = None
    """Refused or shed clients by reason, under `refused.<name>`."""
    stats: dict[str, Any] | None = field(default=None)
    """Anything else, under `<name>`."""


class PlcProtocol(ABC):
    """One PLC protocol as the bridge drives it (see the module docstring)."""

    name: ClassVar[str]
    """Its key in `PROTOCOLS`, in `/healthz`, and its config section (`[bridge.<name>]`)."""

    @classmethod
    @abstractmethod
    def build(cls, ctx: ProtocolContext) -> Self | None:
        """The protocol for `ctx.config`, or None when it is off there."""

    @classmethod
    def check_config(cls, config: BridgeConfig) -> list[str]:
        """Problems with `config` found before anything listens (an unreadable password file), each
        naming its key path."""
        return []

    @classmethod
    def reloaded(cls, old: BridgeConfig, new: BridgeConfig) -> tuple[BridgeConfig, list[str]]:
        """`old` with what a reload applies of `new`, and the keys whose change needs a restart; by
        default nothing is applied and any change of `[bridge.<name>]` needs one."""
        changed = getattr(old, cls.name, None) != getattr(new, cls.name, None)
        return old, [f"bridge.{cls.name}"] if changed else []

    @abstractmethod
    async def start(self) -> None:
        """Listen or connect (ValueError or OSError: the bridge does not start)."""

    def tasks(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        """Its long-lived tasks by task name, started after `start` in the bridge's task group and
        cancelled before `close` (one that raises or returns ends the bridge)."""
        return {}

    @abstractmethod
    async def serve_all(self, state: BridgeState) -> None:
        """The served state is loaded (the snapshot, once per process): serve all of it."""

    @abstractmethod
    async def serve(self, changes: list[Change]) -> None:
        """Serve what the reader newly applied (in stream order; `state` already holds it)."""

    async def recall(self, crossings: list[Crossing]) -> None:  # noqa: B027 (optional: nothing by default)
        """The crossings served before this process started (oldest first), for an event history."""

    async def heartbeat(self, beat: int, unix_ms: int) -> None:  # noqa: B027 (optional: nothing by default)
        """Every second: the bridge's counter (from 1) and the time."""

    def plan_growth(self, layout: BridgeLayout, added: Added) -> list[str]:
        """Why `layout` (the served one with `added`) cannot be served live; empty: `grow` will be called."""
        return []

    @abstractmethod
    async def grow(self, layout: BridgeLayout, added: Added) -> None:
        """Serve `layout` from now on: `added` is new, with its state in `state`; nothing served moves."""

    async def show_status(self, camera: str, status: str) -> None:  # noqa: B027 (optional: nothing by default)
        """Show `status` as `camera`'s state (the live layout retiring or restoring it)."""

    async def reload(self, config: BridgeConfig) -> dict[str, Any]:
        """Apply what `reloaded` says a reload applies; what changed (ValueError, OSError: nothing did)."""
        return {}

    def health(self) -> Health:
        return Health()

    reports_stats: ClassVar[bool] = False
    """Whether `/healthz` has its `<name>` section (`Health.stats`) even while it is off (then null)."""

    @classmethod
    def health_off(cls) -> Health:
        """Its part of `/healthz` while it is off: monitoring reading its keys finds them (e.g. 0
        clients, nothing refused); nothing by default."""
        return Health()

    async def close(self) -> None:  # noqa: B027 (optional: nothing by default)
        """Stop serving (its tasks are already cancelled)."""


__all__ = ["Added", "Health", "PlcProtocol", "ProtocolContext"]
