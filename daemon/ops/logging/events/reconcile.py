"""`beltsight bridge`'s reconciliation rows of the log-event catalogue (daemon.bridge.reconcile_service)."""

from __future__ import annotations

from daemon.ops.logging.event import LogEvent

_COUNTS = ("camera", "line", "direction", "vision", "reference", "allowed")
_NOTE = ("key", "before", "raw")

RECONCILE_EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        "count_agrees",
        "info",
        "a reconciled line's windows agree with the plant counter again (after count_mismatch, for agree_after_s);"
        " also written to beltsight:events",
        _COUNTS,
    ),
    LogEvent(
        "count_mismatch",
        "warning",
        "a reconciled line's camera count and the plant counter disagree beyond the tolerance for"
        " mismatch_after_s (the last window's counts); also written to beltsight:events",
        _COUNTS,
    ),
    LogEvent(
        "reconcile_counts_unwritten",
        "error",
        "the reconciled counts could not be written to <state_dir>/reconcile.sqlite; kept in memory and retried",
        ("path", "error"),
    ),
    LogEvent(
        "reference_close_failed",
        "error",
        "at the bridge's stop, closing a plant counter's connection failed: the other counters are closed and"
        " the counts flushed all the same",
        ("key", "error"),
    ),
    LogEvent(
        "reference_down",
        "warning",
        "a plant counter does not answer (once per outage): the line is reference_down, never a mismatch",
        ("key", "where", "error"),
    ),
    LogEvent(
        "reference_jump",
        "info",
        "a plant counter jumped forward more than max_rate_per_s allows (a preset): not counted, windows restart",
        _NOTE,
    ),
    LogEvent(
        "reference_reset",
        "info",
        "a plant counter went back (a reset, e.g. at shift change): not a mismatch, windows restart",
        _NOTE,
    ),
    LogEvent("reference_up", "info", "a plant counter answers again after reference_down", ("key", "where")),
    LogEvent(
        "reference_wrapped",
        "info",
        "a plant counter wrapped past its top (16, 32 or 64 bit): counted through, not a mismatch",
        _NOTE,
    ),
)

__all__ = ["RECONCILE_EVENTS"]
