"""The sink: every accepted frame's entry and object events, and every status event, into Redis once.

`redis_sink.RedisSink` is the entry point (its docstring holds the policies: buffer, IDs,
exactly once, outages, replicas). Beside it: `backlog` (memory buffer ahead of the spool),
`held` (a camera whose stream key Redis refuses, held apart), `stream_ids` (explicit IDs, the
same-ID check against each stream's top), `objects` (the objects
stream's writes), `pipeline` (one XADD/WAIT pipeline, its replies as `Replies`), `report` (the
outage and drop log lines), `probe` (the held cameras' tries, beside the batches), `spools` (the
spools opened, recovered, at start-up and shut at close: building a sink touches no disk).
"""

from daemon.publish.sink.redis_sink import RedisSink

__all__ = ["RedisSink"]
