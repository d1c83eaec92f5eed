"""The publish room's rows: the Redis connection and writes, the sink's buffer, the spool on disk."""

from __future__ import annotations

from daemon.ops.logging.event import LogEvent

PUBLISH_EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        "capture_dir_failed",
        "error",
        "`[capture] dir`'s data.yaml could not be written (the directory cannot be created, or the disk is "
        "full); each capture then fails as `write_error` or `disk_full`",
        ("dir", "error"),
    ),
    LogEvent(
        "capture_dropped",
        "warning",
        "a captured frame was not written (`reason`: queue_full, no_frame, disk_full, write_error, encode_error); "
        "the frame itself is not affected; at most once a minute per reason, `held_back` counts the ones not "
        "logged (all are in beltsight_capture_dropped_total)",
        ("reason", "held_back", "error"),
    ),
    LogEvent(
        "capture_limited",
        "info",
        "a capture strategy reached its per-camera `limit` (per_minute or per_hour): frames it picks are not "
        "captured until the window moves on; at most once a minute per camera, strategy and limit "
        "(all are in beltsight_capture_limited_total)",
        ("camera", "strategy", "limit", "held_back"),
    ),
    LogEvent(
        "capture_classes_added",
        "info",
        "a captured frame had a label the dataset's data.yaml did not list (a model swapped in with other "
        "classes): it was appended, ids already given keep their meaning (`names`: the list now)",
        ("dir", "names"),
    ),
    LogEvent(
        "capture_started",
        "info",
        "the frame capture's thread started, wrote data.yaml and indexed the directory (`files`: images found)",
        ("dir", "files", "queue"),
    ),
    LogEvent(
        "redis_auth_failed",
        "error",
        "Redis refused the credentials, or the ACL user lacks a command or key (`code` NOPERM); once per outage "
        "and cause, `hint` says what to fix",
        ("url", "reason", "buffered", "hint", "code"),
    ),
    LogEvent(
        "redis_down",
        "warning",
        "Redis unreachable, or not taking writes for now (`code` READONLY: a demoted master; LOADING: wait), "
        "with `hint`; once per outage and cause",
        ("url", "reason", "buffered", "code", "hint"),
    ),
    LogEvent(
        "redis_replicas_short",
        "warning",
        "min_replicas: Redis took entries but fewer replicas confirmed them within wait_timeout_ms; they stay "
        "buffered until a later WAIT confirms them (once per outage)",
        ("url", "reason", "buffered", "min_replicas"),
    ),
    LogEvent(
        "redis_tls_failed",
        "error",
        "the TLS handshake with Redis failed: server certificate not signed by tls_ca_file, wrong host name, "
        "client certificate missing or refused (once per outage; hint says which)",
        ("url", "reason", "buffered", "hint"),
    ),
    LogEvent(
        "redis_tls_unverified",
        "warning",
        "rediss:// with tls_verify or tls_check_hostname turned off: the server is not authenticated",
        ("url", "verify", "check_hostname"),
    ),
    LogEvent("redis_up", "info", "Redis reachable again", ("url", "after_failures")),
    LogEvent(
        "redis_write_failed",
        "error",
        "Redis refused a write (`code` OOM, WRONGTYPE, MISCONF, BUSY with a `hint` on what to do); the entries "
        "stay buffered and spooled; once per outage and cause",
        ("url", "reason", "buffered", "code", "hint"),
    ),
    LogEvent(
        "sink_buffer_full",
        "warning",
        "results dropped because the memory buffer or the spool is full (`reasons`: buffer_full, spool_full, "
        "stream_refused: a held camera beyond its bound); "
        "at most one line per interval",
        ("dropped", "reasons", "capacity", "spool_max_mb", "spool_max_bytes"),
    ),
    LogEvent(
        "sink_stream_held",
        "error",
        "Redis refused one stream key (`code` WRONGTYPE, or NOPERM on that key) or, in a Cluster, its slot or "
        "master failed alone (`code` CLUSTERDOWN: slot not served, TRYAGAIN, MOVED/ASK: slot moving or a "
        "redirect storm, NODE_DOWN: its master does not answer while others do): its camera's entries are held "
        "apart, in order and bounded, while the other cameras keep publishing (`camera` null: the events "
        "stream); once per key and cause (again at most every 5 min while it lasts), `hint` says what to fix",
        ("camera", "stream", "code", "reason", "hint", "held", "repeats"),
    ),
    LogEvent(
        "sink_stream_released",
        "info",
        "a held camera's entries (or the held events stream's events: `camera` null) all went through after its "
        "stream key, slot or master was fixed; it publishes with the others again",
        ("camera", "stream", "held_s"),
    ),
    LogEvent(
        "sink_probe_failed",
        "error",
        "a try of the held cameras raised an unexpected error (not Redis's refusal or outage, which are backed"
        " off and logged as sink_stream_held): the holds stay; the next try comes when they are due",
        ("task", "error"),
    ),
    LogEvent("sink_event_dropped", "warning", "a status event could not be queued for Redis", ("kind", "camera")),
    LogEvent(
        "sink_spooled_at_shutdown",
        "info",
        "results still buffered at shutdown went to the spool",
        ("spilled", "dropped"),
    ),
    LogEvent(
        "clip_dropped",
        "warning",
        "a crossing's clip was not written (`reason`: queue_full, no_packets, late, disk_full, write_error); "
        "frames and events are not affected (a crossing whose clip could not be opened is published without "
        "`clip`); at most once a minute per reason, `held_back` counts the ones not logged (all are in "
        "beltsight_clips_dropped_total)",
        ("reason", "held_back", "error"),
    ),
    LogEvent(
        "clips_dir_failed",
        "error",
        "the `[clips] dir` could not be created; each clip then fails as `write_error`",
        ("dir", "error"),
    ),
    LogEvent(
        "clips_started",
        "info",
        "the clip writer's thread started, indexed the directory (`files` found there) and renamed the "
        "`recovered` clips a crash had left unfinished (fragmented MP4s, playable up to their last fragment)",
        ("dir", "files", "recovered"),
    ),
    LogEvent(
        "snapshot_dropped",
        "warning",
        "a crossing's snapshot was not written (`reason`: queue_full, no_frame, disk_full, write_error, "
        "encode_error); the frame and the event are not affected; at most once a minute per reason, `held_back` "
        "counts the ones not logged (all are in beltsight_snapshots_dropped_total)",
        ("reason", "held_back", "error"),
    ),
    LogEvent(
        "snapshots_dir_failed",
        "error",
        "the `[snapshots] dir` could not be created; each snapshot then fails as `write_error`",
        ("dir", "error"),
    ),
    LogEvent(
        "snapshots_started",
        "info",
        "the snapshot writer's thread started and indexed the directory (`files` found there)",
        ("dir", "files", "queue"),
    ),
    LogEvent(
        "spool_corrupt_tail",
        "warning",
        "a spool segment ends in a torn or corrupt record (a crash or power cut mid-write): cut off at `offset` "
        "(`ignored_bytes`), the records before it kept and replayed; once (the file is truncated)",
        ("segment", "offset", "ignored_bytes", "kept_records", "truncated"),
    ),
    LogEvent("spool_count_mismatch", "error", "the spool's record count disagrees with its segments", ("expected",)),
    LogEvent(
        "spool_cursor_unreadable",
        "warning",
        "the spool's cursor file is unreadable; reading restarts at the first segment",
        ("directory", "reason"),
    ),
    LogEvent(
        "spool_disabled",
        "error",
        "the spool directory cannot be used (a segment of another format version, unreadable): the daemon runs "
        "without a spool, the files are kept untouched; `hint` says what to do",
        ("directory", "reason", "hint"),
    ),
    LogEvent(
        "spool_disk_full",
        "error",
        "the spool's disk is full: entries stay in memory (buffer_max), then the oldest are dropped (spool_full); "
        "once per state change",
        ("directory", "reason", "records"),
    ),
    LogEvent(
        "spool_disk_ok", "info", "the spool's disk takes writes again after spool_disk_full", ("directory", "records")
    ),
    LogEvent(
        "spool_opened",
        "info",
        "a spool with records from a previous run was opened",
        ("directory", "records", "segments"),
    ),
    LogEvent(
        "spool_record_unreadable",
        "error",
        "a spool record passed its CRC but could not be decoded (skipped)",
        ("position", "reason"),
    ),
    LogEvent(
        "spool_write_failed",
        "error",
        "writing to the spool failed (disk full, I/O error); results stay in memory or are dropped",
        ("directory", "reason"),
    ),
)
