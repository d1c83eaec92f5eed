"""BeltSight bridge: the daemon's Redis streams served to factory PLCs over OPC UA, Modbus TCP and MQTT Sparkplug B.

A separate long-running process, `beltsight bridge -c beltsight.toml` (unit
systemd/beltsight-bridge.service), on the daemon's own config file: `[bridge]`
(`daemon.config.bridge`), `[redis]` for the connection and the stream names, `[logging]`, and the
enabled cameras' lines and gates. It consumes every camera's objects stream and the events stream
through one consumer group, keeps the served state (`state`), and pushes it to the PLC protocols the
table `protocols.PROTOCOLS` builds from the config (each a `protocol.PlcProtocol`, `protocol_*`): an asyncua server
(`opcua`, with OPC 40100 Machine Vision objects and events from `machine_vision`, results in
`machine_vision_results`, when
`[bridge.opcua] machine_vision`; its nodeset vendored in `nodesets/`), a pymodbus server (`modbus`,
map in `registers`) and, with `[bridge.sparkplug]`, a Sparkplug B edge node on an MQTT broker
(`sparkplug`: payloads in `sparkplug_payloads`, paho's client, made and closed, its callbacks as
loop events in `sparkplug_mqtt`,
the Sparkplug 3.0 primary host's STATE in `sparkplug_host`, bdSeq kept across restarts in
`sparkplug_bdseq`); entries are acknowledged only once served (`reader`),
on one Redis, Sentinel or a Cluster (acknowledgements and snapshot per slot, WAIT for `min_replicas`:
`topology`). SIGHUP reloads the OPC UA users and certificates (`Bridge.reload`, `opcua_access`, `opcua_pki`).

May import: `daemon.ops` (logging, the HTTP endpoint, systemd), `daemon.publish` (the Redis connection),
`daemon.config`, `daemon.core`; nothing of ingest, batching, inference or tracking. Only
`daemon.__main__` imports this room (import-linter, pyproject.toml).

Entry points: `daemon.bridge.cli.main` (the `bridge` subcommand), `daemon.bridge.service.Bridge`
(`run`; `serving`, `start`/`stop` for tools and tests: the daemon's lifecycle shape),
`daemon.bridge.layout.BridgeLayout` with `layout_from_data`, `layout_problems` and `validate_layout`;
log events catalogued in `daemon.ops.logging.events.bridge`.
"""
