"""The ops room's rows: the HTTP endpoint (health, metrics, authentication, connection limits), the
systemd watchdog and sd_notify, the live view.
"""

from __future__ import annotations

from daemon.ops.logging.event import LogEvent

OPS_EVENTS: tuple[LogEvent, ...] = (
    LogEvent("engine_stuck", "error", "an inference call has run far too long; watchdog pings stop", ("lanes",)),
    LogEvent("health_listening", "info", "the health endpoint is listening", ("url",)),
    LogEvent(
        "http_auth_refused",
        "warning",
        "the health endpoint refused requests without a valid user's password (basic_auth_users); "
        "summarised: at most one line a minute, counts since the last line, the last one's peer address",
        ("peer", "missing", "bad_credentials", "busy"),
    ),
    LogEvent(
        "http_request_refused",
        "warning",
        "the health endpoint refused a request a browser's page could have forged: reason host (not a loopback"
        " name nor in [health] allowed_hosts), origin (a write from a page of another origin) or content_type"
        " (a write whose body is not application/json); at most one line a minute per reason, `held_back` counts"
        " the refusals since the last line",
        ("reason", "peer", "method", "path", "held_back"),
    ),
    LogEvent(
        "http_connections_shed",
        "warning",
        "the health endpoint closed connections itself (over max_connections or past request_timeout_s); "
        "summarised: at most one line a minute, counts since the last line",
        ("open", "max_connections", "evicted", "refused", "deadline"),
    ),
    LogEvent(
        "http_tls_setup_failed",
        "error",
        "setting up an accepted TLS connection raised an unexpected error (not a client's failed or abandoned"
        " handshake, which only closes it): that connection was closed; the endpoint goes on",
        ("task", "error"),
    ),
    LogEvent(
        "config_reload_failed",
        "error",
        "a reload (SIGHUP, `systemctl reload`) found the config or a drop-in (lines, cameras) invalid, or a"
        " camera's classes unknown to the models: nothing changed",
        ("path", "problems"),
    ),
    LogEvent(
        "camera_added",
        "info",
        "a camera was added to the running daemon (the cameras API or a reload), started alone between frames;"
        " `changed`: the keys it was given (never a value); also written to beltsight:events as kind camera_added",
        ("camera", "user", "changed"),
    ),
    LogEvent(
        "camera_changed",
        "info",
        "a camera's settings changed on the running daemon (the cameras API or a reload): reopened alone where"
        " its reader's keys changed, else applied between two of its frames; `changed`: the keys (never a"
        " value); also written to beltsight:events as kind camera_changed",
        ("camera", "user", "changed"),
    ),
    LogEvent(
        "camera_removed",
        "info",
        "a camera was removed from the running daemon (the cameras API or a reload): its reader stopped, its"
        " frames drained and published, its tracker and metric series retired; also written to beltsight:events"
        " as kind camera_removed",
        ("camera", "user", "changed"),
    ),
    LogEvent(
        "camera_drain_incomplete",
        "warning",
        "a camera removed live still had a frame waiting or a batch unpublished after the drain's timeout; a"
        " frame left in its slot is counted as dropped (reason removed)",
        ("camera", "timeout_s"),
    ),
    LogEvent(
        "camera_change_failed",
        "error",
        "applying a camera's change (the cameras API) failed after it was recorded: the drop-in holds it, the"
        " running pipeline may not; a reload or a restart applies it",
        ("change", "error"),
    ),
    LogEvent(
        "camera_reader_slow_to_stop",
        "warning",
        "a removed or reopened camera's reader thread had not ended after its open and read timeouts; the change"
        " went on (the thread ends at its next packet or timeout)",
        ("camera", "waited_s"),
    ),
    LogEvent(
        "config_reloaded",
        "info",
        "a reload (SIGHUP) applied what changed and can change live (cameras added, removed or changed, lines,"
        " mm_per_px, conf_threshold, the tracking knobs, the log level, the endpoint's users); `changed` names"
        " each, `restart_needed` the rest",
        ("path", "changed", "restart_needed"),
    ),
    LogEvent(
        "config_restart_needed",
        "warning",
        "a reload found changes that need a restart (model sizes removed, a model swap refused, Redis,"
        " the engine, the endpoint's address, [instance] ...): they are named here and left as they run until"
        " the daemon restarts",
        ("changed",),
    ),
    LogEvent(
        "lines_changed",
        "info",
        "a camera's mm_per_px and counting lines changed (the lines API or a reload), applied between two of its"
        " frames; also written to beltsight:events as kind lines_changed",
        ("camera", "user", "before", "after"),
    ),
    LogEvent(
        "models_dropin_failed",
        "error",
        "the models drop-in ([engine] models_dropin) could not be written (a swap through the API is then undone"
        " and refused) or read during a reload (the reload goes on with it as the config's load read it)",
        ("path", "reason"),
    ),
    LogEvent(
        "models_dropin_pruned",
        "info",
        "the models drop-in's entries of these sizes were removed: the config file's [models.<size>] changed"
        " since they were swapped through the API, and the file wins (at start or on a reload)",
        ("path", "sizes"),
    ),
    LogEvent(
        "review_entry_malformed",
        "warning",
        "an objects stream entry the review record could not read was skipped (read past); at most one line a"
        " minute, `held_back` counts the ones since the last line",
        ("stream", "entry", "reason", "held_back"),
    ),
    LogEvent(
        "review_read_failed",
        "warning",
        "the review record could not read the objects streams (Redis down): retried with backoff; at most one"
        " line a minute, `held_back` counts the failures since the last line",
        ("error", "held_back"),
    ),
    LogEvent(
        "review_started",
        "info",
        "the review record ([review]) opened its file and reads the objects streams from its positions",
        ("db", "streams", "retention_days"),
    ),
    LogEvent("sd_notify_failed", "warning", "a message to systemd's NOTIFY_SOCKET failed", ("error",)),
    LogEvent(
        "snapshot_failed",
        "error",
        "a live-view snapshot could not be drawn (that request gets 500); once per camera until one works again",
        ("camera", "error"),
    ),
)
