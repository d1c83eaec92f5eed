"""The publish room: detections and status events into Redis Streams, through any outage.

`sink.RedisSink` buffers (`backlog`), writes schema-v1 entries (`schema`, explicit `stream_ids`)
with pipelined XADDs (`sink_pipeline`: one XADD/WAIT pipeline), each frame's tracking events to
the objects stream beside it (`objects`), waits for replicas, and reconnects; `spool`,
`spool_writer` and `spool_record` keep on disk what Redis has not taken within `spool_after_s`
(`spool_recovery` opens a spool after a crash: torn tails, format versions); `redis_conn` makes
the client (single node, Cluster, Sentinel, TLS, keepalive) and classifies errors and refusals,
`sink_report` logs outages; `tail` is `beltsight tail` (`--objects` for the objects streams).

May import: `daemon.core`, `daemon.config`. Entry points: `daemon.publish.sink.RedisSink`,
`daemon.publish.schema` (the entry format consumers read), `daemon.publish.tail.tail`.
"""
