"""The HTTP endpoint: `/healthz`, `/metrics` and the routes the live view adds, bounded against floods.

`server` (`HealthServer`: the routes and the listener), `report` (`health_report`: what `/healthz`
says), `bound` (`BoundedServer`, `HttpLimits`: connection, header and time limits), `tls` (optional
HTTPS, each handshake inside that bound), `auth` (basic authentication against bcrypt hashes,
`/healthz` optionally left open), `api_lines` (`GET`/`PUT /api/cameras/{id}/lines`, over
`daemon.ops.lines.LinesControl`), `api_models` (`GET /api/models`, `GET`/`POST /api/models/{size}`,
over `daemon.ops.models.ModelsControl`), `preconditions` (their `ETag` and `If-Match`: `412` for a
write on a stale tag), `writes` (the guard of every write route: `401`/`403`).

May import: `daemon.core`, `daemon.config` and the stage rooms. Entry points: `HealthServer`,
`HttpLimits`, `health_report` (re-exported here).
"""

from daemon.ops.http.bound import HttpLimits
from daemon.ops.http.report import health_report
from daemon.ops.http.server import HealthServer

__all__ = ["HealthServer", "HttpLimits", "health_report"]
