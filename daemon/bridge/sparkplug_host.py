"""The Sparkplug 3.0 primary host as the edge node sees it (`[bridge.sparkplug] primary_host_id`).

The host publishes a retained `spBv1.0/STATE/<primary_host_id>` JSON `{"online": bool, "timestamp":
ms}` when it connects, and registers the same payload with `"online": false` (and the same timestamp)
as its MQTT will. `PrimaryHost.observe` applies the specification's rules to each STATE the edge node
receives:

- a STATE whose timestamp is older than the last one accepted is stale and ignored (a retained message
  or a will overtaken by the host's newer session); an equal timestamp is accepted, so the will of the
  session whose online STATE was seen takes the host offline;
- a payload that is not a STATE (no boolean `online`) is ignored; one without a timestamp (Sparkplug
  2.2's `ONLINE`/`OFFLINE`) is accepted as it comes;
- the last accepted state and timestamp are kept for the life of the process, across MQTT sessions.

What the edge node does with the verdicts (births wait for `online`; `offline` while born ends the
session with NDEATH) is `daemon/bridge/sparkplug.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from daemon.bridge.sparkplug_payloads import NAMESPACE, HostState

Verdict = Literal["online", "offline", "stale", "invalid"]


def state_topic(host_id: str) -> str:
    return f"{NAMESPACE}/STATE/{host_id}"


@dataclass(slots=True)
class PrimaryHost:
    host_id: str
    online: bool | None = None
    """The last accepted state; None until a STATE was accepted."""
    last_ms: int | None = None
    """The timestamp of the last accepted STATE that had one."""

    def observe(self, state: HostState | None) -> Verdict:
        """The verdict on one received STATE (None: a payload that is not one); accepted states update
        `online` and `last_ms`."""
        if state is None:
            return "invalid"
        if state.timestamp is not None:
            if self.last_ms is not None and state.timestamp < self.last_ms:
                return "stale"
            self.last_ms = state.timestamp
        self.online = state.online
        return "online" if state.online else "offline"


__all__ = ["PrimaryHost", "Verdict", "state_topic"]
