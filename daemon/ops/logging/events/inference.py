"""The inference room's rows: model files, sessions and providers, the breaker and rebuilds,
TensorRT caches, lanes, the array device.
"""

from __future__ import annotations

from daemon.ops.logging.event import LogEvent

INFERENCE_EVENTS: tuple[LogEvent, ...] = (
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
        "fallback_batch_failed", "error", "a batch failed on the fallback provider too (dropped)", ("model", "error")
    ),
    LogEvent("fallback_build_failed", "error", "the fallback session could not be built", ("model", "error")),
    LogEvent(
        "inference_failed",
        "error",
        "a batch failed; its frames are counted as engine_error drops",
        ("model", "frames", "error"),
    ),
    LogEvent(
        "lane_started",
        "info",
        "a model's inference lane (sessions, batcher, workers) started",
        ("model", "providers", "workers", "max_batch", "worker_batch"),
    ),
    LogEvent(
        "memory_growth",
        "warning",
        "a session's memory grew past the threshold; it will be rebuilt",
        ("model", "growth_mb", "sample"),
    ),
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
        "model_swap_failed",
        "error",
        "a model swap (POST /api/models/{size} or a reload) was refused; the old model still serves; also written"
        " to beltsight:events as kind model_swap_failed",
        ("size", "path", "reason", "user"),
    ),
    LogEvent(
        "model_swapped",
        "info",
        "a model of one input size was swapped between two batches in every lane worker (POST /api/models/{size}"
        " or a reload); also written to beltsight:events as kind model_swapped",
        ("size", "old", "new", "version", "sha256", "path", "took_ms", "user"),
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
)
