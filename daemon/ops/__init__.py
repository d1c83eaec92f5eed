"""The ops room: what operators see and run around the pipeline, not a stage of it.

`logs` (structlog set-up, secret scrubbing; the event catalogue in `log_events`, its rows in
`log_rows` and `log_rows_bridge`), `health` (the HTTP server for /healthz and /metrics, and the
report it serves, `health_report`), `http_bound` (`BoundedServer`: connection, header and time
limits against floods), `http_tls` (optional TLS, each handshake inside that bound), `http_auth`
(basic authentication against bcrypt hashes, `/healthz` optionally left open), `liveview` (snapshots of
each camera's latest inferred frame), `doctor` (`beltsight doctor`: `doctor_report`,
`doctor_gpu`), `fd_limit` (RLIMIT_NOFILE at start-up).

May import: `daemon.core`, `daemon.config` and the stage rooms (`ingest`, `batching`,
`inference`, `tracking`, `publish`, `thermal`). Entry points: `daemon.ops.logs.configure_logging`,
`daemon.ops.health.HealthServer`, `daemon.ops.liveview.LiveView`, `daemon.ops.doctor.run_doctor`.
"""
