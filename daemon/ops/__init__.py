"""The ops room: what operators see and run around the pipeline, not a stage of it.

`logs` (structlog set-up, secret scrubbing; the event catalogue in `log_events`), `health`
(the bounded HTTP server for /healthz and /metrics, `health_report`), `liveview` (snapshots of
each camera's latest inferred frame), `doctor` (`beltsight doctor`: `doctor_report`,
`doctor_gpu`), `fd_limit` (RLIMIT_NOFILE at start-up).

May import: `daemon.core`, `daemon.config` and the stage rooms (`ingest`, `batching`,
`inference`, `publish`, `thermal`). Entry points: `daemon.ops.logs.configure_logging`,
`daemon.ops.health.HealthServer`, `daemon.ops.liveview.LiveView`, `daemon.ops.doctor.run_doctor`.
"""
