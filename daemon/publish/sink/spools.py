"""The sink's disk, opened and shut: the spool and the held cameras' spools in `[redis] spool_dir`.

Building a sink touches no disk. `open_spools` (the sink's `open`, a step of the daemon's start-up)
recovers what the previous run left (`daemon.publish.spool.recovery`: every record not yet
published checked, a torn tail cut; the holds left in `<spool_dir>/held`, `HeldStreams.open`) and
starts each spool's writer thread, off the event loop. `shut_spools` (the sink's `close`) spills
what memory still holds to them and stops their threads; it stops whatever `open_spools` started,
also when that failed or was cancelled half-way. A directory that cannot be used (another format
version, unreadable) disables the spool with `spool_disabled` (error), its files kept: the daemon
runs on with the memory buffer instead of stopping (or crash-looping) over it.
"""

from __future__ import annotations

import asyncio

import structlog

from daemon.config.redis import RedisConfig
from daemon.core.frames import FrameResult
from daemon.publish.sink.backlog import Backlog, Drops
from daemon.publish.sink.held import HeldStreams
from daemon.publish.spool.record import SpoolFormatError
from daemon.publish.spool.store import Spool

log = structlog.get_logger("beltsight.sink")


async def open_spools(cfg: RedisConfig, frames: Backlog, held: HeldStreams) -> None:
    """Recover the spools in `cfg.spool_dir` (none without one) into `frames` and `held`, on a worker
    thread; the two are not touched on the loop meanwhile. Cancelled, it still waits for the
    recovery to end, so that `shut_spools` finds every spool it opened."""
    recovery = asyncio.get_running_loop().run_in_executor(None, _recover, cfg, frames, held)
    try:
        await asyncio.shield(recovery)
    except asyncio.CancelledError:
        while not recovery.done():
            try:
                await asyncio.wait([recovery])
            except asyncio.CancelledError:
                continue  # cancelled again: the recovery still has to end first
        raise


def shut_spools(frames: Backlog, held: HeldStreams) -> tuple[int, Drops, list[FrameResult]]:
    """Spill what memory holds to the spools and close them, their writer threads stopped (blocks):
    (entries spilled, entries dropped over the spool's cap, entries that could not be spooled)."""
    spilled, drops, lost = frames.shut()
    held_spilled, held_lost = held.shut()
    return spilled + held_spilled, drops, lost + held_lost


def open_spool(cfg: RedisConfig) -> Spool | None:
    """The spool in `cfg.spool_dir` (None without one, or when it cannot be used: `spool_disabled`)."""
    if cfg.spool_dir is None:
        return None
    try:
        return Spool.open(cfg.spool_dir, cfg.spool_cap_bytes)
    except (SpoolFormatError, OSError) as exc:
        hint = (
            "written by another BeltSight version: run that version to publish it, or move the directory away"
            if isinstance(exc, SpoolFormatError)
            else "check the directory's permissions and the disk"
        )
        log.error("spool_disabled", directory=str(cfg.spool_dir), reason=str(exc), hint=hint)
        return None


def _recover(cfg: RedisConfig, frames: Backlog, held: HeldStreams) -> None:
    """The backlog's spool, then the holds' (only beside a spool that opened)."""
    spool = open_spool(cfg)
    if spool is not None and cfg.spool_dir is not None:
        frames.attach(spool)
        held.open(cfg.spool_dir / "held")


__all__ = ["open_spool", "open_spools", "shut_spools"]
