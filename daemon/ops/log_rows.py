"""The daemon's rows of the log-event catalogue (`daemon.ops.log_events` joins them with the bridge's).

Adding an event: emit it with a literal name (`log.warning("thing_failed", ...)`), add one `LogEvent`
row here (keep the tuple sorted by name), then `python -m daemon.ops.log_events README.md`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["debug", "info", "warning", "error", "critical"]

LIBRARY_EVENT = "library_log"
"""The event name of every record that comes from the standard `logging` module (asyncio, redis-py,
PyAV/FFmpeg, Python warnings): its text is in `message`, its logger name in `logger`."""


@dataclass(frozen=True, slots=True)
class LogEvent:
    name: str
    level: Level
    meaning: str
    fields: tuple[str, ...] = ()


DAEMON_EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        "array_device",
        "info",
        "where pre- and post-processing run: [engine] device against the session's providers and CuPy",
        ("asked", "device", "reason"),
    ),
    LogEvent(
        "breaker_closed",
        "info",
        "a model's circuit breaker closed: the primary provider serves again",
        ("model", "provider", "open_s"),
    ),
    LogEvent("breaker_half_open", "info", "the breaker lets one probe batch through to the primary", ("model",)),
    LogEvent(
        "breaker_open",
        "error",
        "the primary provider failed repeatedly; batches go to the fallback until reset_timeout_s",
        ("model", "reason", "error", "reset_timeout_s"),
    ),
    LogEvent(
        "breaker_probe_failed", "error", "the half-open probe (build or batch) failed", ("model", "stage", "error")
    ),
    LogEvent(
        "camera_connecting",
        "info",
        "opening a camera; logged for the first attempt of an outage, not every retry",
        ("camera", "url"),
    ),
    LogEvent("camera_decode_error", "debug", "one packet failed to decode (the stream goes on)", ("camera", "error")),
    LogEvent(
        "camera_down",
        "warning",
        "a camera attempt failed; summarised: logged when the reason or the backoff step changes "
        "(or every few minutes at the cap), `suppressed` counts the attempts not logged since",
        ("camera", "reason", "failures", "retry_in_s", "suppressed"),
    ),
    LogEvent("camera_finished", "info", "a file source reached its end and does not loop", ("camera", "reason")),
    LogEvent("camera_no_model", "warning", "no configured model serves this camera's frame size", ("camera", "size")),
    LogEvent(
        "camera_resolution_changed",
        "info",
        "the camera's frame size changed mid-stream",
        ("camera", "old", "new"),
    ),
    LogEvent("camera_source_stopped", "info", "the camera's reader thread ended", ("camera",)),
    LogEvent(
        "camera_thread_crashed",
        "error",
        "an unexpected error in the camera thread (a bug); it retries after the backoff cap",
        ("camera", "error", "traceback"),
    ),
    LogEvent(
        "camera_up",
        "info",
        "the first frame of a connection arrived",
        ("camera", "size", "codec", "connect_s"),
    ),
    LogEvent("config_invalid", "error", "`run` found the configuration invalid: exit 78 (on stderr)", ("error",)),
    LogEvent("daemon_ready", "info", "models validated, lanes started, READY=1 sent", ("cameras", "models")),
    LogEvent("engine_stuck", "error", "an inference call has run far too long; watchdog pings stop", ("lanes",)),
    LogEvent(
        "fallback_batch_failed", "error", "a batch failed on the fallback provider too (dropped)", ("model", "error")
    ),
    LogEvent("fallback_build_failed", "error", "the fallback session could not be built", ("model", "error")),
    LogEvent("forced_exit", "warning", "a second SIGTERM/SIGINT: exit 130 without draining", ("signal",)),
    LogEvent("gpu_unavailable", "error", '[engine] device = "cuda" but no CUDA session or CuPy: exit 69', ("error",)),
    LogEvent("health_listening", "info", "the health endpoint is listening", ("url",)),
    LogEvent(
        "http_auth_refused",
        "warning",
        "the health endpoint refused requests without a valid user's password (basic_auth_users); "
        "summarised: at most one line a minute, counts since the last line, the last one's peer address",
        ("peer", "missing", "bad_credentials", "busy"),
    ),
    LogEvent(
        "http_connections_shed",
        "warning",
        "the health endpoint closed connections itself (over max_connections or past request_timeout_s); "
        "summarised: at most one line a minute, counts since the last line",
        ("open", "max_connections", "evicted", "refused", "deadline"),
    ),
    LogEvent(
        "hwdecode_fallback",
        "warning",
        "NVDEC could not take a stream (or there is no CUDA device): it is decoded on the CPU instead",
        ("camera", "device", "reason"),
    ),
    LogEvent(
        "inference_failed",
        "error",
        "a batch failed; its frames are counted as engine_error drops",
        ("model", "frames", "error"),
    ),
    LogEvent(
        "instance_cameras",
        "info",
        "with [instance] shards > 1: the cameras this instance runs (its share by daemon.config.sharding)",
        ("shard", "shards", "cameras", "of"),
    ),
    LogEvent(
        "lane_started",
        "info",
        "a model's inference lane (sessions, batcher, workers) started",
        ("model", "providers", "workers", "max_batch", "worker_batch"),
    ),
    LogEvent(
        LIBRARY_EVENT,
        "info",
        "a record from the standard logging module or a Python warning (level is the record's own)",
        ("logger", "message"),
    ),
    LogEvent("malloc_tuned", "debug", "glibc malloc settings applied at startup", ()),
    LogEvent(
        "memory_growth",
        "warning",
        "a session's memory grew past the threshold; it will be rebuilt",
        ("model", "growth_mb", "sample"),
    ),
    LogEvent("model_invalid", "error", "a model file is invalid: exit 78", ("error",)),
    LogEvent(
        "model_labels_missing",
        "warning",
        "neither the model file nor [models.<size>] labels name the classes: class ids are published as labels",
        ("model", "classes"),
    ),
    LogEvent(
        "model_outputs_ignored",
        "warning",
        "values after the class scores (segment mask coefficients, pose keypoints) are not decoded",
        ("model", "values", "why"),
    ),
    LogEvent(
        "model_recognised",
        "info",
        "a model file's layout (and why), classes and input convention, once at startup",
        ("model", "size", "layout", "form", "reason", "classes", "input"),
    ),
    LogEvent(
        "open_files_limit",
        "info",
        "at startup: the open-files limit after raising the soft one to the hard one (`error` if refused)",
        ("soft", "hard", "before", "error"),
    ),
    LogEvent(
        "primary_batch_failed",
        "warning",
        "a batch failed on the primary provider (counts towards opening the breaker)",
        ("model", "error", "failures", "state"),
    ),
    LogEvent(
        "provider_fallback",
        "error",
        "ONNX Runtime did not give the execution provider asked for",
        ("model", "asked", "got", "hint"),
    ),
    LogEvent(
        "provider_unavailable", "error", "the configured execution provider is not available: exit 69", ("error",)
    ),
    LogEvent(
        "redis_auth_failed",
        "error",
        "Redis refused the credentials, or the ACL user lacks a command or key (`code` NOPERM); once per outage "
        "and cause, `hint` says what to fix",
        ("url", "reason", "buffered", "hint", "code"),
    ),
    LogEvent(
        "redis_down",
        "warning",
        "Redis unreachable, or not taking writes for now (`code` READONLY: a demoted master; LOADING: wait), "
        "with `hint`; once per outage and cause",
        ("url", "reason", "buffered", "code", "hint"),
    ),
    LogEvent(
        "redis_replicas_short",
        "warning",
        "min_replicas: Redis took entries but fewer replicas confirmed them within wait_timeout_ms; they stay "
        "buffered until a later WAIT confirms them (once per outage)",
        ("url", "reason", "buffered", "min_replicas"),
    ),
    LogEvent(
        "redis_tls_failed",
        "error",
        "the TLS handshake with Redis failed: server certificate not signed by tls_ca_file, wrong host name, "
        "client certificate missing or refused (once per outage; hint says which)",
        ("url", "reason", "buffered", "hint"),
    ),
    LogEvent(
        "redis_tls_unverified",
        "warning",
        "rediss:// with tls_verify or tls_check_hostname turned off: the server is not authenticated",
        ("url", "verify", "check_hostname"),
    ),
    LogEvent("redis_up", "info", "Redis reachable again", ("url", "after_failures")),
    LogEvent(
        "redis_write_failed",
        "error",
        "Redis refused a write (`code` OOM, WRONGTYPE, MISCONF, BUSY with a `hint` on what to do); the entries "
        "stay buffered and spooled; once per outage and cause",
        ("url", "reason", "buffered", "code", "hint"),
    ),
    LogEvent("sd_notify_failed", "warning", "a message to systemd's NOTIFY_SOCKET failed", ("error",)),
    LogEvent(
        "session_built",
        "info",
        "an ONNX Runtime session was built and warmed up",
        ("model", "size", "reason", "placement", "providers", "warmup_ms"),
    ),
    LogEvent("session_close_failed", "error", "closing a replaced session failed", ("model", "error")),
    LogEvent(
        "session_rebuild_failed",
        "error",
        "a planned session rebuild failed; the old session keeps serving",
        ("model", "error", "retry_in_s"),
    ),
    LogEvent(
        "session_rebuilt",
        "info",
        "a session was replaced by a fresh one",
        ("model", "reason", "placement", "build_ms", "frames", "age_s", "growth_mb"),
    ),
    LogEvent("shared_cpu_arena_exists", "debug", "ORT's shared CPU arena was already registered", ("error",)),
    LogEvent("shutdown_complete", "info", "the daemon stopped", ("unflushed",)),
    LogEvent("shutdown_started", "info", "draining: intake stopped, in-flight batches finish", ("grace_s",)),
    LogEvent(
        "sink_buffer_full",
        "warning",
        "results dropped because the memory buffer or the spool is full (`reasons`: buffer_full, spool_full); "
        "at most one line per interval",
        ("dropped", "reasons", "capacity", "spool_max_mb", "spool_max_bytes"),
    ),
    LogEvent("sink_event_dropped", "warning", "a status event could not be queued for Redis", ("kind", "camera")),
    LogEvent(
        "sink_spooled_at_shutdown",
        "info",
        "results still buffered at shutdown went to the spool",
        ("spilled", "dropped"),
    ),
    LogEvent(
        "snapshot_failed",
        "error",
        "a live-view snapshot could not be drawn (that request gets 500); once per camera until one works again",
        ("camera", "error"),
    ),
    LogEvent(
        "spool_corrupt_tail",
        "warning",
        "a spool segment ends in a torn or corrupt record (a crash or power cut mid-write): cut off at `offset` "
        "(`ignored_bytes`), the records before it kept and replayed; once (the file is truncated)",
        ("segment", "offset", "ignored_bytes", "kept_records", "truncated"),
    ),
    LogEvent("spool_count_mismatch", "error", "the spool's record count disagrees with its segments", ("expected",)),
    LogEvent(
        "spool_cursor_unreadable",
        "warning",
        "the spool's cursor file is unreadable; reading restarts at the first segment",
        ("directory", "reason"),
    ),
    LogEvent(
        "spool_disabled",
        "error",
        "the spool directory cannot be used (a segment of another format version, unreadable): the daemon runs "
        "without a spool, the files are kept untouched; `hint` says what to do",
        ("directory", "reason", "hint"),
    ),
    LogEvent(
        "spool_disk_full",
        "error",
        "the spool's disk is full: entries stay in memory (buffer_max), then the oldest are dropped (spool_full); "
        "once per state change",
        ("directory", "reason", "records"),
    ),
    LogEvent(
        "spool_disk_ok", "info", "the spool's disk takes writes again after spool_disk_full", ("directory", "records")
    ),
    LogEvent(
        "spool_opened",
        "info",
        "a spool with records from a previous run was opened",
        ("directory", "records", "segments"),
    ),
    LogEvent(
        "spool_record_unreadable",
        "error",
        "a spool record passed its CRC but could not be decoded (skipped)",
        ("position", "reason"),
    ),
    LogEvent(
        "spool_write_failed",
        "error",
        "writing to the spool failed (disk full, I/O error); results stay in memory or are dropped",
        ("directory", "reason"),
    ),
    LogEvent(
        "status_listener_failed",
        "error",
        "a status-event listener raised (the source goes on)",
        ("camera", "kind", "error"),
    ),
    LogEvent("stop_requested", "info", "SIGTERM/SIGINT received: draining", ("signal",)),
    LogEvent(
        "tensorrt_build",
        "info",
        "a session using TensorRT is being built (from its engine cache, or a first build taking minutes)",
        ("model", "cached", "directory"),
    ),
    LogEvent("tensorrt_building", "info", "a TensorRT build still running (every 30 s)", ("model", "elapsed_s")),
    LogEvent("tensorrt_built", "info", "the TensorRT session build finished", ("model", "seconds")),
    LogEvent(
        "tensorrt_cache_stale",
        "warning",
        "a TensorRT cache built for another model file, ORT or TensorRT version was removed (rebuilt, not loaded)",
        ("model", "removed", "key"),
    ),
    LogEvent(
        "thermal_read_failed",
        "error",
        "a temperature sensor raised while being read; it gives no reading this time (the governor holds)",
        ("sensor", "error"),
    ),
    LogEvent(
        "thermal_started",
        "info",
        "the thermal governor watches these sensors (limit_c null: from the hardware's thresholds)",
        ("sensors", "interval_s", "limit_c"),
    ),
    LogEvent(
        "thermal_unavailable",
        "info",
        "no usable temperature sensor (NVML, thermal zones): inference runs at full speed unthrottled",
        ("missing",),
    ),
    LogEvent(
        "throttle_changed",
        "warning",
        "the thermal throttle level changed (normal, regulating, paused); also an entry in beltsight:events",
        ("from_level", "to_level", "share", "sensor", "celsius", "reason"),
    ),
    LogEvent(
        "tracking_resumed",
        "info",
        "a tracked camera's ids and counts continue from its objects stream (and the spool) after a restart",
        ("camera", "next_track", "counts"),
    ),
    LogEvent(
        "tracking_resume_failed",
        "warning",
        "Redis could not be read at startup to continue track ids and counts: ids continue from a"
        " time-based base (still unique), line counts restart at 0",
        ("error", "cameras"),
    ),
    LogEvent(
        "tracking_state_unreadable",
        "warning",
        "the tracking state file next to the spool could not be read at startup (ids and counts then"
        " continue from the objects stream and the spool alone)",
        ("path", "error"),
    ),
    LogEvent(
        "tracking_state_unwritable",
        "error",
        "the tracking state file could not be written (disk full or read-only): a restart while Redis is"
        " down may then restart line counts",
        ("path", "error"),
    ),
    LogEvent(
        "unhandled_exception",
        "critical",
        "an exception nobody caught (main thread or another thread); the traceback is in `exception`",
        ("thread", "exception"),
    ),
)
