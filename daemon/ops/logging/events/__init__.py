"""The rows of the log-event catalogue, one module per room that emits them (or, for the bridge, per
process): `process` (start-up, readiness, shutdown, the logging set-up's own events), `ops` (the HTTP
endpoint, systemd, the live view), `ingest`, `inference`, `tracking`, `publish`, `thermal`, `bridge`.

Adding an event: emit it with a literal name (`log.warning("thing_failed", ...)`), add one `LogEvent`
row to the module of the room that emits it (keep its tuple sorted by name), then
`python -m daemon.ops.logging.catalogue README.md`. `daemon.ops.logging.catalogue` joins the rows.

May import: `daemon.ops.logging.event` only (rows are data).
"""
