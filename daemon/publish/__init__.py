"""The publish room: detections, tracking events and status events into Redis Streams, through any outage.

- `sink/`: the writer. `RedisSink` buffers (`backlog`: memory, then the spool), gives each entry
  its explicit stream ID (`stream_ids`), writes schema-v1 entries and each frame's object events
  (`objects`) in one XADD/WAIT pipeline whose replies come back typed (`pipeline.Replies`), waits
  for replicas, reconnects, and says what happened to Redis (`report`: outages, drops). Built, it
  touches no disk; `open()` recovers its spools and starts their writer threads (`spools`), `close()`
  stops them.
- `spool/`: the disk spool, what Redis has not taken within `spool_after_s` (`store.Spool`, its
  index on the event loop; `writer`, the file I/O thread; `record`, the format; `recovery`,
  opening a spool after a crash: torn tails, format versions).
- `resume`: where tracking continues at start (the objects streams read back, then the spool).
- `redis_conn`: what the rest imports, shared with `beltsight tail` and the bridge: the client
  (`redis_client`: single node, Cluster, Sentinel, TLS, keepalive), what its errors and refusals
  mean (`redis_errors`), replication WAITs and slot groups; `schema`: the entry format
  consumers read; `tail`: `beltsight tail` (`--objects` for the objects streams).

May import: `daemon.core`, `daemon.config`. Entry points: `daemon.publish.sink.RedisSink`,
`daemon.publish.schema` (the entry format consumers read), `daemon.publish.tail.tail`,
`daemon.publish.redis_conn.make_client` (the bridge's connections).
"""
