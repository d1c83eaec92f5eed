"""The core room: the values and small services every other room shares, and nothing above them.

What crosses stage boundaries (`frames`: Frame, FrameResult, StatusEvent, Letterbox and the
FrameConsumer/Router seams; `yuv`, `model_spec`), the one `clock.Clock` and `status.StatusCallback`,
Prometheus `metrics`, secret `redaction`, reconnect `backoff` and `log_repeat`, `ratelimit` (at most
one log line per interval), `tasks` (a task group's `spawn`, stopping a task that may swallow a
cancel, a fan-out run together, the `Tracked` short-lived tasks an owner starts on request,
`run_close_steps`: a process's close, every step run),
`durable` (small state files replaced atomically and durably), `netaddr`'s host:port parser, the
array module `xp`, `nvml` and process `memory`.

May import: the standard library and third-party packages only (no other `daemon` room).
Entry points: `daemon.core.frames`, `daemon.core.clock.SYSTEM_CLOCK`, `daemon.core.metrics.Metrics`,
`daemon.core.redaction.SECRETS`, `daemon.core.backoff.Backoff`.
"""
