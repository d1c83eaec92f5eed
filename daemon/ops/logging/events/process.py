"""The daemon process's rows: start-up checks, readiness, shutdown, and the logging set-up's own
events (library records, uncaught exceptions); emitted by `daemon.__main__`, `daemon.app`, `daemon.ops.logging`.
"""

from __future__ import annotations

from daemon.ops.logging.event import LIBRARY_EVENT, LogEvent

PROCESS_EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        "close_step_failed",
        "error",
        "a step of the daemon's close (`step`: cameras, health, liveview, snapshots, capture, clips, review,"
        " source <id>, sink, lanes, workers, decoders; `beltsight bridge`'s: reconcile, health, protocol <name>)"
        " raised or was cut off; the later steps ran all the same and the first such failure ends the process"
        " (non-zero)",
        ("step", "error"),
    ),
    LogEvent("config_invalid", "error", "`run` found the configuration invalid: exit 78 (on stderr)", ("error",)),
    LogEvent("daemon_ready", "info", "models validated, lanes started, READY=1 sent", ("cameras", "models")),
    LogEvent("forced_exit", "warning", "a second SIGTERM/SIGINT: exit 130 without draining", ("signal",)),
    LogEvent("gpu_unavailable", "error", '[engine] device = "cuda" but no CUDA session or CuPy: exit 69', ("error",)),
    LogEvent(
        "instance_cameras",
        "info",
        "with [instance] shards > 1: the cameras this instance runs (its share by daemon.config.sharding)",
        ("shard", "shards", "cameras", "of"),
    ),
    LogEvent(
        LIBRARY_EVENT,
        "info",
        "a record from the standard logging module or a Python warning (level is the record's own)",
        ("logger", "message"),
    ),
    LogEvent("malloc_tuned", "debug", "glibc malloc settings applied at startup", ()),
    LogEvent("model_invalid", "error", "a model file is invalid: exit 78", ("error",)),
    LogEvent(
        "open_files_limit",
        "info",
        "at startup: the open-files limit after raising the soft one to the hard one (`error` if refused)",
        ("soft", "hard", "before", "error"),
    ),
    LogEvent(
        "provider_unavailable", "error", "the configured execution provider is not available: exit 69", ("error",)
    ),
    LogEvent("shutdown_complete", "info", "the daemon stopped", ("unflushed",)),
    LogEvent("shutdown_started", "info", "draining: intake stopped, in-flight batches finish", ("grace_s",)),
    LogEvent(
        "status_listener_failed",
        "error",
        "a status-event listener raised (the source goes on)",
        ("camera", "kind", "error"),
    ),
    LogEvent("stop_requested", "info", "SIGTERM/SIGINT received: draining", ("signal",)),
    LogEvent(
        "unhandled_exception",
        "critical",
        "an exception nobody caught (main thread or another thread); the traceback is in `exception`",
        ("thread", "exception"),
    ),
)
