"""Cameras shared out between instances that read one configuration (`[instance]`).

Every instance gets the same file and its own `shard` (0 .. shards-1), typically from the unit
instance: `BELTSIGHT_INSTANCE__SHARD=%i` in `systemd/beltsight@.service`. Each camera belongs
to exactly one shard:

- `shard = N` in a `[[cameras]]` entry pins it to shard N (explicit assignment);
- otherwise rendezvous (highest-random-weight) hashing of the camera id: the shard with the
  highest `sha256("<camera id>/<shard>")` wins. The rule depends only on the id and `shards`,
  so every instance computes the same owner without talking to the others; going from `n` to
  `n + 1` shards moves only the cameras the new shard wins (about 1/(n + 1) of them), and
  nothing moves between the old shards.

Two instances never publish the same camera as long as their `shard` numbers differ and they
read the same `shards` and camera list (`beltsight check-config` prints the assignment).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Self

from pydantic import Field, model_validator

from daemon.config.base import Section


class InstanceConfig(Section):
    shard: int = Field(0, ge=0)
    """This instance's number, 0 .. shards-1 (e.g. `BELTSIGHT_INSTANCE__SHARD=%i`)."""
    shards: int = Field(1, ge=1, le=1024)
    """How many instances share the cameras; 1: this instance runs every camera."""

    @model_validator(mode="after")
    def _check_shard(self) -> Self:
        if self.shard >= self.shards:
            raise ValueError(f"shard {self.shard} is not below shards = {self.shards} (shards are 0 .. shards-1)")
        return self


def _weight(camera_id: str, shard: int) -> int:
    digest = hashlib.sha256(f"{camera_id}/{shard}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def owner(camera_id: str, shards: int, pinned: int | None = None) -> int:
    """The shard that runs `camera_id`: its pin, or the rendezvous winner among `shards`."""
    if pinned is not None:
        if not 0 <= pinned < shards:
            raise ValueError(f"camera {camera_id!r} is pinned to shard {pinned}, not below shards = {shards}")
        return pinned
    return max(range(shards), key=lambda s: (_weight(camera_id, s), -s))


def assignment(cameras: Iterable[str], shards: int, pins: Mapping[str, int | None] | None = None) -> list[list[str]]:
    """Camera ids per shard (index = shard), each list in the order given."""
    out: list[list[str]] = [[] for _ in range(shards)]
    for camera_id in cameras:
        out[owner(camera_id, shards, (pins or {}).get(camera_id))].append(camera_id)
    return out


def runs(camera_id: str, instance: InstanceConfig, pinned: int | None = None) -> bool:
    """True when this instance (`instance.shard`) runs `camera_id`."""
    return owner(camera_id, instance.shards, pinned) == instance.shard


def describe(cameras: Iterable[str], instance: InstanceConfig, pins: Mapping[str, int | None]) -> list[str]:
    """Lines for `check-config`: what each shard runs, this instance marked."""
    ids = list(cameras)
    per_shard = assignment(ids, instance.shards, pins)
    mine = per_shard[instance.shard]
    lines = [
        f"instance: shard {instance.shard} of {instance.shards} (0..{instance.shards - 1})"
        f" runs {len(mine)} of {len(ids)} cameras: " + (", ".join(mine) or "(none)")
    ]
    if instance.shards > 1:
        for shard, members in enumerate(per_shard):
            mark = "  <- this instance" if shard == instance.shard else ""
            lines.append(f"  shard {shard}: {', '.join(members) or '(none)'}{mark}")
    return lines


__all__ = ["InstanceConfig", "assignment", "describe", "owner", "runs"]
