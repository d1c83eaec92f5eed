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
        "http_connections_shed",
        "warning",
        "the health endpoint closed connections itself (over max_connections or past request_timeout_s); "
        "summarised: at most one line a minute, counts since the last line",
        ("open", "max_connections", "evicted", "refused", "deadline"),
    ),
    LogEvent("sd_notify_failed", "warning", "a message to systemd's NOTIFY_SOCKET failed", ("error",)),
    LogEvent(
        "snapshot_failed",
        "error",
        "a live-view snapshot could not be drawn (that request gets 500); once per camera until one works again",
        ("camera", "error"),
    ),
)
