"""The ingest room's rows: each camera's connection, decode and reader thread."""

from __future__ import annotations

from daemon.ops.logging.event import LogEvent

INGEST_EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        "camera_connecting",
        "info",
        "opening a camera; logged for the first attempt of an outage, not every retry",
        ("camera", "url"),
    ),
    LogEvent(
        "camera_behind",
        "warning",
        "a live camera's decoding ran behind its stream (`lag_ms`) for a second: its reader skips to a keyframe "
        "near the live edge, the frames between counted as dropped (`behind`); at most once a minute per camera, "
        "`skips_since` counts the skips not logged since",
        ("camera", "lag_ms", "skips_since"),
    ),
    LogEvent(
        "camera_clock_untrusted",
        "warning",
        "a live camera's own frame times (RTSP presentation times, GigE Vision timestamps) fell more than a second "
        "behind its frames' arrival three times in a minute: its clock does not keep time with the host's, so for "
        "the rest of the connection its frames are stamped when they arrive (`daemon.ingest.capture_clock`); counting "
        "goes on, with its timing as exact as the host's; check the camera's timestamp or RTP clock settings",
        ("camera",),
    ),
    LogEvent(
        "camera_caught_up",
        "debug",
        "a skip of a camera that ran behind ended at a keyframe (`skipped`: packets not decoded)",
        ("camera", "skipped", "lag_ms"),
    ),
    LogEvent("camera_decode_error", "debug", "one packet failed to decode (the stream goes on)", ("camera", "error")),
    LogEvent(
        "camera_down",
        "warning",
        "a camera attempt failed; summarised: logged when the reason or the backoff step changes "
        "(or every few minutes at the cap), `suppressed` counts the attempts not logged since",
        ("camera", "reason", "failures", "retry_in_s", "suppressed"),
    ),
    LogEvent(
        "decoder_process_exited",
        "error",
        "a decoder process (`[engine] processes`) ended unasked; its cameras reconnect through a new one",
        ("process", "exitcode"),
    ),
    LogEvent(
        "decoder_process_started",
        "info",
        "a decoder process started (`restarts`: how many the pool started again after one ended)",
        ("process", "pid", "restarts"),
    ),
    LogEvent(
        "engine_processes",
        "info",
        "how many processes read the cameras (`[engine] processes`), the daemon included, and why; `frames`: what "
        "a decoder process hands on, `rgb` (scaled for the host's fill) or `yuv` (decoded planes, lanes on the device)",
        ("processes", "setting", "reason", "frames"),
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
        "the first frame of a connection arrived (`codec`: a GigE camera's pixel format)",
        ("camera", "size", "codec", "connect_s"),
    ),
    LogEvent(
        "gige_close_error",
        "debug",
        "stopping a GigE camera's acquisition failed while closing it (expected when it is gone)",
        ("error",),
    ),
    LogEvent(
        "gige_feature_refused",
        "warning",
        "a GigE camera refused one of its [cameras.gige] settings at open; it is read with the value it kept",
        ("camera", "feature", "wanted", "kept", "error"),
    ),
    LogEvent(
        "gige_frames_dropped",
        "warning",
        "GigE frames lost (`frame_lost`: never arrived) or incomplete (`incomplete`: packets the resend could "
        "not recover), never handed on; at most once per 10 s per reason, `suppressed` counts the lines held back",
        ("camera", "reason", "frames", "seq", "status", "suppressed"),
    ),
    LogEvent(
        "hwdecode_fallback",
        "warning",
        "NVDEC could not take a stream (or there is no CUDA device): it is decoded on the CPU instead",
        ("camera", "device", "reason"),
    ),
)
