"""`beltsight bridge`'s rows of the log-event catalogue (a separate process; same logging set-up).

Library records (asyncua, pymodbus, redis-py) go through the `library_log` event.
"""

from __future__ import annotations

from daemon.ops.logging.event import LogEvent

BRIDGE_EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        "bridge_config_invalid",
        "error",
        "`beltsight bridge`: invalid config or layout (every error with its key path); exit 78",
        ("error",),
    ),
    LogEvent(
        "bridge_drain_overdue",
        "warning",
        "at the stop, the batch in flight was not served within shutdown_grace_s: left pending, served at the"
        " next start",
        ("grace_s", "served"),
    ),
    LogEvent(
        "bridge_entry_malformed",
        "warning",
        "a stream entry missing a field or with one that does not parse: counted, acknowledged, nothing served"
        " changes; at most one line per second (`malformed` is the running total)",
        ("stream", "id", "reason", "malformed"),
    ),
    LogEvent(
        "bridge_held_event_failed",
        "error",
        "a crossing's OPC UA event held back at start (until a client subscribed or the grace passed) could"
        " not be fired: that event is lost, the others still fire, the bridge serves on",
        ("camera", "line", "error"),
    ),
    LogEvent(
        "bridge_history_recalled",
        "info",
        "once per process: the crossings of the last event_history_s read back from the objects streams into"
        " the OPC UA event history (HistoryRead)",
        ("crossings", "window_s"),
    ),
    LogEvent(
        "bridge_layout_applied",
        "info",
        "the cameras in the config changed (a camera_added/changed/removed entry of the events stream, or"
        " SIGHUP) and the served layout grew live: the new cameras and lines (`camera/line`) got their OPC UA"
        " nodes, Modbus blocks, Sparkplug births and stream; `retired`: cameras no longer configured, their"
        " nodes and registers kept where they are, frozen (OPC UA State `removed`)",
        ("added", "retired", "restored"),
    ),
    LogEvent(
        "bridge_layout_restart_needed",
        "warning",
        "the cameras in the config changed in a way a running bridge cannot serve without moving or rebuilding"
        " what it serves (`reasons`: e.g. a served line's gates changed, blocks past register 65535): nothing"
        " of it is applied, the old layout is served until a restart",
        ("reasons",),
    ),
    LogEvent(
        "bridge_machine_vision_query_failed",
        "warning",
        "a Machine Vision result method (GetResultById, GetResultListFiltered) could not read the objects stream:"
        " the client gets Error -2; at most one line per 10 s (`suppressed` counts the others)",
        ("method", "error", "suppressed"),
    ),
    LogEvent(
        "bridge_machine_vision_ready",
        "info",
        "the OPC 40100 MachineVision nodeset is imported and each camera has its VisionSystemType object",
        ("cameras", "namespace"),
    ),
    LogEvent(
        "bridge_modbus_blocks_renumbered",
        "warning",
        "the Modbus blocks kept in <state_dir>/modbus_blocks.json could not be read or written, or would pass"
        " register 65535: the map is numbered in the layout's order this time (blocks may have moved)",
        ("path", "reason"),
    ),
    LogEvent("bridge_modbus_listening", "info", "the Modbus TCP server listens", ("address", "unit_id")),
    LogEvent(
        "bridge_modbus_shed",
        "warning",
        "Modbus connections closed or refused since the last such line (at most one a minute): over"
        " max_connections (refused, evicted), idle past idle_timeout_s, overlong frames (malformed)",
        ("open", "refused", "evicted", "idle_closed", "malformed"),
    ),
    LogEvent(
        "bridge_mv_condition_failed",
        "error",
        "a reconciled line's Machine Vision condition event (CountMismatch, count_mismatch or count_agrees)"
        " could not be fired: that event is lost, the next verdicts still fire, the bridge serves on",
        ("camera", "line", "direction", "state", "error"),
    ),
    LogEvent(
        "bridge_opcua_anonymous", "warning", "no OPC UA users configured: anonymous clients are accepted", ("security",)
    ),
    LogEvent(
        "bridge_opcua_certificate",
        "info",
        "the OPC UA server certificate in use (generated when none is configured) and the trusted client certificates",
        ("cert_file", "trusted_dir"),
    ),
    LogEvent("bridge_opcua_insecure", "warning", 'security = "none": the OPC UA endpoint is unencrypted', ("listen",)),
    LogEvent("bridge_opcua_listening", "info", "the OPC UA server listens", ("endpoint", "security")),
    LogEvent(
        "bridge_opcua_refused",
        "warning",
        "OPC UA sessions refused since the last such line (at most one per 10 s): wrong user or password,"
        " untrusted or invalid client certificate; never the password itself",
        ("password", "certificate"),
    ),
    LogEvent("bridge_redis_connected", "info", "connected to Redis; the groups exist", ("streams", "group")),
    LogEvent(
        "bridge_redis_down",
        "warning",
        "Redis unreachable or failing: reconnecting with backoff; what is served stays (once per outage)",
        ("error", "served"),
    ),
    LogEvent(
        "bridge_reload_failed",
        "error",
        "SIGHUP: the config no longer loads, or a password file or certificate cannot be read; nothing changed",
        ("error",),
    ),
    LogEvent(
        "bridge_reloaded",
        "info",
        "SIGHUP: the OPC UA users, trusted client certificates and server certificate read again; what changed"
        " (users added/revoked, trusted certificates added/removed, server certificate changed, connections"
        " closed) and the changed keys that need a restart (`restart_needed`, not applied)",
        (
            "users_added",
            "users_revoked",
            "server_certificate",
            "trusted_added",
            "trusted_removed",
            "sessions_closed",
            "restart_needed",
        ),
    ),
    LogEvent(
        "bridge_replicas_short",
        "warning",
        "a WAIT after acknowledging saw fewer than `[redis] min_replicas` replicas: a failover now could bring"
        " back entries already served (a restarted bridge would fire them again); at most one line per 10 s",
        ("replicas", "min_replicas", "short"),
    ),
    LogEvent(
        "bridge_resume_grace",
        "info",
        "at start: the held OPC UA events of the first new entries are fired (an OPC UA event subscriber came,"
        " or resume_grace_s passed); the counts were served at once",
        ("subscribed", "waited_ms"),
    ),
    LogEvent(
        "bridge_snapshot_invalid", "warning", "the state snapshot in Redis did not parse: ignored", ("key", "reason")
    ),
    LogEvent("bridge_snapshot_loaded", "info", "served state restored from the snapshot in Redis", ("key",)),
    LogEvent(
        "bridge_sparkplug_bdseq_unreadable",
        "warning",
        "at start: the saved Sparkplug bdSeq (`<state_dir>/sparkplug.json`) could not be read or did not parse:"
        " bdSeq starts again at 0 and the file is rewritten at the next CONNECT",
        ("path", "error"),
    ),
    LogEvent(
        "bridge_sparkplug_bdseq_unsaved",
        "warning",
        "the Sparkplug bdSeq could not be written before a CONNECT: it is used all the same, but a bridge"
        " restarted now would start again from the last one saved; at most one line a minute",
        ("path", "error"),
    ),
    LogEvent(
        "bridge_sparkplug_dropped",
        "warning",
        "the offline buffer is full: the oldest crossing was dropped (its count still reaches the host in the"
        " next DBIRTH); at most one line a minute, `dropped` is the running total",
        ("dropped", "offline_buffer"),
    ),
    LogEvent(
        "bridge_sparkplug_host_ignored",
        "info",
        "a message on the primary host's STATE topic was ignored: `stale` (its timestamp is older than the last"
        " one accepted, `last`) or `invalid` (not a STATE payload); at most one line a minute",
        ("host_id", "reason", "timestamp", "last"),
    ),
    LogEvent(
        "bridge_sparkplug_host_offline",
        "warning",
        "the primary host's STATE says offline: when the node was born (`born`) the session ends with NDEATH"
        " and the node connects again and waits; no birth or data until the host is back, crossings kept as"
        " while the broker is down",
        ("host_id", "timestamp", "born"),
    ),
    LogEvent(
        "bridge_sparkplug_host_online",
        "info",
        "the primary host's STATE says online: NBIRTH and every DBIRTH follow",
        ("host_id", "timestamp"),
    ),
    LogEvent(
        "bridge_sparkplug_offline",
        "warning",
        "the MQTT broker is unreachable or the connection was lost: reconnecting with capped backoff; crossings"
        " wait in the offline buffer (logged on the first failure after being connected)",
        ("broker", "error", "kept"),
    ),
    LogEvent(
        "bridge_sparkplug_online",
        "info",
        "connected to the MQTT broker: NBIRTH and every DBIRTH published, then the crossings kept while offline"
        " as historical DDATA",
        ("broker", "tls", "bd_seq", "historical"),
    ),
    LogEvent(
        "bridge_sparkplug_rebirth",
        "info",
        "NCMD Node Control/Rebirth received: NBIRTH and every DBIRTH published again",
        ("bd_seq",),
    ),
    LogEvent(
        "bridge_started",
        "info",
        "the bridge serves (READY=1 sent); `protocols`: the PLC protocols on",
        ("cameras", "lines", "protocols"),
    ),
    LogEvent(
        "bridge_stopping",
        "info",
        "stop asked: intake drained, tasks stopped, servers closed (STOPPING=1 sent)",
        ("served",),
    ),
    LogEvent(
        "bridge_task_failed",
        "error",
        "a bridge task raised (or returned: `error` is `returned`): the others stop, the process exits 1",
        ("task", "error"),
    ),
)
