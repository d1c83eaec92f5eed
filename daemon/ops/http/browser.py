"""What a web page in the operator's browser may ask of the endpoint: only what its own pages ask.

A page from any site, open in a browser on the box, can send requests to the endpoint: a "simple"
cross-site `POST` (`text/plain`, a form) needs no CORS preflight, and a page whose host name the
attacker rebinds to `127.0.0.1` (DNS rebinding) is, to the browser, of the same origin as the
endpoint and reads every answer. Jupyter, Grafana and Home Assistant refuse both the same way,
and so does this guard, checked on every request after authentication (so a request without
credentials is still `401` where users are configured):

- `Host`: while the endpoint listens on loopback only, every route but `/healthz` (and `/health`,
  the watchdog's probes) refuses a `Host` that is not a loopback name (`localhost`, `*.localhost`)
  or address, nor listed in `[health] allowed_hosts`: `403`. A rebound name fails here, since the
  browser sends the name it resolved.
- `Origin` on writes (every method but `GET`, `HEAD`, `OPTIONS`): present and neither the
  endpoint's own origin (the scheme it serves and the request's own `Host`) nor listed in
  `[health] allowed_origins`: `403`. Without `Origin`, a `Sec-Fetch-Site` of `cross-site` or
  `same-site` (another port of the same host) is refused the same way; curl and scripts send
  neither and pass.
- `Content-Type` on writes with a body: anything but `application/json` is `415`, so a form or a
  `text/plain` post never reaches a JSON parser. A `DELETE` without a body needs none.

Each refusal is counted (`beltsight_http_requests_refused_total{reason}`) and summarised in one
`http_request_refused` log line per reason a minute at most, with the last peer's address.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import structlog
from aiohttp import web

from daemon.core.metrics import Metrics
from daemon.core.netaddr import loopback_name, normalise_origin
from daemon.core.ratelimit import RateLimited

log = structlog.get_logger("beltsight.health")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
HOST_FREE_PATHS = frozenset({"/healthz", "/health"})
REFUSAL_LOG_INTERVAL_S = 60.0
REASONS = ("host", "origin", "content_type")
JSON_TYPE = "application/json"
JSON_PROBLEM = f"a write's body must be JSON: send it with Content-Type: {JSON_TYPE} (curl: --json)"
ORIGIN_PROBLEM = "writes are accepted from this endpoint's own pages only"
_FOREIGN_FETCH_SITES = frozenset({"cross-site", "same-site"})


def _split_host(value: str) -> tuple[str, int | None] | None:
    """(name, port) of a `Host` header value (`name`, `name:port`, `[v6]:port`); None when malformed."""
    try:
        parts = urlsplit("//" + value.strip())
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not name or parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return name.lower().rstrip("."), port


def loopback_only(listen_host: str) -> bool:
    """Whether an endpoint bound to `listen_host` is reachable from this machine only."""
    name = listen_host.strip("[]")
    return name != "" and loopback_name(name)


@dataclass(frozen=True, slots=True)
class BrowserPolicy:
    """Where the endpoint listens and what `[health] allowed_hosts` / `allowed_origins` add."""

    loopback: bool
    tls: bool
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()

    @classmethod
    def of(cls, *, loopback: bool, tls: bool, hosts: Iterable[str] = (), origins: Iterable[str] = ()) -> BrowserPolicy:
        kept = (normalise_origin(o) for o in origins)
        return cls(loopback, tls, tuple(h.strip().lower() for h in hosts), tuple(o for o in kept if o))

    def host_allowed(self, value: str | None) -> bool:
        if value is None or not self.loopback:
            return True  # no Host: not a browser (they always send one); off loopback auth is the guard
        split = _split_host(value)
        if split is None:
            return False
        name, port = split
        if loopback_name(name):
            return True
        return any(entry in (name, f"{name}:{port}") for entry in self.allowed_hosts)

    def origin_allowed(self, origin: str, host: str | None) -> bool:
        own = normalise_origin(origin)
        if own is None:
            return False  # "null" (a sandboxed frame, a file://) or garbage
        if own in self.allowed_origins:
            return True
        if host is None:
            return False
        served = normalise_origin(("https://" if self.tls else "http://") + host.strip())
        return served is not None and own == served


class BrowserGuard:
    """`host_refusal(request)` and `write_refusal(request)`: None when a browser's page may make this
    request, else the `403`/`415` to answer instead."""

    def __init__(self, policy: BrowserPolicy, metrics: Metrics | None = None) -> None:
        self.policy = policy
        self._metrics = metrics
        self._log = RateLimited(REFUSAL_LOG_INTERVAL_S)

    def host_refusal(self, request: web.BaseRequest) -> web.Response | None:
        """The `403` for a `Host` a loopback endpoint does not answer to (checked on every route)."""
        if request.path in HOST_FREE_PATHS or self.policy.host_allowed(request.headers.get("Host")):
            return None
        problem = "this endpoint answers to its loopback names only (add the name to [health] allowed_hosts)"
        return self._refuse(request, "host", 403, problem)

    def write_refusal(self, request: web.BaseRequest) -> web.Response | None:
        """The `403` for a write from another origin's page, the `415` for a write that is not JSON
        (checked once a route takes the request's method)."""
        if request.method in SAFE_METHODS:
            return None
        origin = request.headers.get("Origin")
        if origin is not None:
            if not self.policy.origin_allowed(origin, request.headers.get("Host")):
                return self._refuse(request, "origin", 403, ORIGIN_PROBLEM + " (add it to [health] allowed_origins)")
        elif request.headers.get("Sec-Fetch-Site", "").lower() in _FOREIGN_FETCH_SITES:
            return self._refuse(request, "origin", 403, ORIGIN_PROBLEM)
        if request.body_exists or request.method != "DELETE":
            media = request.headers.get("Content-Type", "").partition(";")[0].strip().lower()
            if media != JSON_TYPE:
                return self._refuse(request, "content_type", 415, JSON_PROBLEM)
        return None

    def _refuse(self, request: web.BaseRequest, reason: str, status: int, problem: str) -> web.Response:
        if self._metrics is not None:
            self._metrics.http_requests_refused.labels(reason=reason).inc()
        held = self._log.allow(reason)
        if held is not None:
            log.warning(
                "http_request_refused",
                reason=reason,
                peer=request.remote,
                method=request.method,
                path=request.path[:128],
                held_back=held,
            )
        return web.json_response({"problems": [problem]}, status=status)


__all__ = ["REASONS", "BrowserGuard", "BrowserPolicy", "loopback_only"]
