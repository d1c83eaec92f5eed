"""BeltSight bridge: the daemon's Redis streams served to factory PLCs over OPC UA and Modbus TCP.

A separate long-running process (`beltsight bridge -c beltsight.toml`, for now also
`python -m daemon.bridge -c ...`; unit systemd/beltsight-bridge.service). It consumes every camera's
objects stream (`beltsight:objects:{camera}`) and the events stream through one consumer group,
keeps the served state (`state`), and pushes it to an asyncua server (`opcua`) and a pymodbus
server (`modbus`, map in `registers`); entries are acknowledged only once served (`reader`).

What this room may import: its own modules; the config layer and the Redis connection layer; the
ops pieces for logging, health and sd_notify. Nothing of ingest, batching, inference or tracking.
Every import of the daemon's own modules is in `daemon.bridge.deps` (their paths are moving).

Entry points: `daemon.bridge.service.run_bridge` (and `Bridge`), `daemon.bridge.cli.main`,
`daemon.bridge.config.BridgeConfig` (the `[bridge]` section), `daemon.bridge.layout.BridgeLayout`
with `validate_layout`; log events catalogued in `daemon.ops.log_rows_bridge`.
"""
