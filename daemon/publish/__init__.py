"""The publish room: detections and status events into Redis Streams, through any outage.

`sink.RedisSink` buffers (`backlog`), writes schema-v1 entries (`schema`, explicit `stream_ids`)
with pipelined XADDs, waits for replicas, and reconnects; `spool`, `spool_writer` and
`spool_record` keep what the memory buffer cannot hold on disk; `redis_conn` makes the client
(single node, Cluster, TLS) and classifies errors, `sink_report` logs outages; `tail` is
`beltsight tail`.

May import: `daemon.core`, `daemon.config`. Entry points: `daemon.publish.sink.RedisSink`,
`daemon.publish.schema` (the entry format consumers read), `daemon.publish.tail.tail`.
"""
