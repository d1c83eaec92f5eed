"""The ops room: what operators see and run around the pipeline, not a stage of it.

Grouped by what each part does:
- `http/`: the endpoint (`/healthz`, `/metrics`): `http.server.HealthServer`, the report it serves
  (`http.report`), its flood bound (`http.bound`), optional TLS (`http.tls`) and basic
  authentication (`http.auth`), the lines and models APIs (`http.api_lines`, `http.api_models`) and
  their `ETag`/`If-Match` (`http.preconditions`);
- `lines` (`LinesControl`: each camera's running lines, applied between frames, persisted, audited),
  `models` (`ModelsControl`: the model serving each size, swaps kept in the models drop-in) and
  `reload` (`Reloader`: SIGHUP re-reads the config and applies what can change live);
- `systemd`: sd_notify (READY/STATUS/WATCHDOG/STOPPING) and the watchdog loop;
- `signals`: the signal rule of `beltsight run` and `beltsight bridge` (SIGTERM/SIGINT stop, a second
  one exits 130, SIGHUP reloads);
- `logging/`: the structlog set-up (`logging.configure`) and the event catalogue
  (`logging.catalogue`, its rows per room in `logging.events`);
- `doctor/`: `beltsight doctor` (`doctor.command`, `doctor.report`, `doctor.gpu`);
- `liveview` (snapshots of each camera's latest inferred frame, served on the endpoint; drawn and
  encoded by `liveview_render`);
- `fd_limit` (RLIMIT_NOFILE at start-up).

May import: `daemon.core`, `daemon.config` and the stage rooms (`ingest`, `batching`,
`inference`, `tracking`, `publish`, `thermal`). Entry points: `daemon.ops.logging.configure_logging`,
`daemon.ops.http.HealthServer`, `daemon.ops.systemd.SystemdNotifier`, `daemon.ops.liveview.LiveView`,
`daemon.ops.doctor.run_doctor`, `daemon.ops.lines.LinesControl`, `daemon.ops.models.ModelsControl`,
`daemon.ops.reload.Reloader`.
"""
