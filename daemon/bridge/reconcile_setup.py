"""Building the reconciliation from the config: its problems against the layout, the readers, the store,
the `GET /api/counts` routes.

Routes on the bridge's endpoint (`[bridge] health_listen`):
- `GET /api/counts?bucket=1h|shift&since_ms=N`: each reconciled line's state and last window, and the
  persisted counts (`vision` and `reference` side by side) per bucket from `since_ms` (default: a day back);
- `GET /api/counts/report.csv?start_ms=N&end_ms=M`: the shift report, the windows that disagreed between
  the two times (default: the last complete shift, else the last 24 h; with `start_ms` alone: up to now)
  with the crossings in them;
- `GET /report?start_ms=N&end_ms=M`: the same report as a page (`daemon.bridge.report_page`), with the
  periods before and after one click away.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import time as dt_time
from pathlib import Path

from aiohttp import web
from prometheus_client import CollectorRegistry

from daemon.bridge import report_page
from daemon.bridge.layout import BridgeLayout, LayoutError
from daemon.bridge.reconcile_counts import CountsStore
from daemon.bridge.reconcile_service import ReconcileService
from daemon.bridge.reference import Reference, open_reference
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from daemon.core.shifts import bucket_start, parse_shifts
from daemon.ops.http import HealthServer
from daemon.publish.redis_conn import RedisClient

DAY_MS = 86_400_000
QUARTER_MS = 900_000
STORE_FILE = "reconcile.sqlite"


def reconcile_problems(config: BridgeConfig, layout: BridgeLayout) -> list[LayoutError]:
    """Each `[[bridge.reconcile]]` entry naming a camera or a line the bridge does not serve."""
    problems: list[LayoutError] = []
    for i, entry in enumerate(config.reconcile):
        cam = layout.camera(entry.camera)
        if cam is None:
            problems.append(LayoutError(f"bridge.reconcile.{i}.camera", f"no enabled camera {entry.camera!r}"))
        elif entry.line not in {line.id for line in cam.lines}:
            problems.append(
                LayoutError(f"bridge.reconcile.{i}.line", f"camera {entry.camera!r} has no line {entry.line!r}")
            )
    return problems


def bridge_certificate(config: BridgeConfig) -> tuple[Path, Path]:
    """The bridge's own OPC UA certificate and key (the configured pair, else the generated one)."""
    if config.opcua.cert_file is not None and config.opcua.key_file is not None:
        return config.opcua.cert_file, config.opcua.key_file
    return config.state_dir / "opcua" / "server-cert.der", config.state_dir / "opcua" / "server-key.pem"


def build_reconcile(
    config: BridgeConfig,
    redis: RedisConfig,
    redis_client_factory: Callable[[], RedisClient],
    registry: CollectorRegistry,
    readers: dict[str, Reference] | None = None,
) -> ReconcileService | None:
    """The service for `config.reconcile` (None when empty); `readers` replaces the network readers."""
    if not config.reconcile:
        return None
    cert = bridge_certificate(config)
    readers = readers or {e.key: open_reference(e, cert) for e in config.reconcile}
    store = CountsStore(config.state_dir / STORE_FILE, parse_shifts(config.shifts))
    return ReconcileService(
        list(config.reconcile),
        readers,
        store,
        registry,
        redis_client_factory,
        events_stream=redis.events_stream,
        events_maxlen=redis.events_maxlen,
    )


def _int_query(request: web.BaseRequest, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be an integer (Unix ms)\n") from None


def add_routes(server: HealthServer, service: ReconcileService, evidence_url: str = "") -> None:
    """`/api/counts`, the shift report as CSV and as a page (`/report`, linking the crossings' snapshots
    and clips on `evidence_url`, the daemon's endpoint)."""
    store = service.store

    async def counts(request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        now = int(time.time() * 1000)
        bucket = request.query.get("bucket", "1h")
        if bucket not in store.buckets:
            raise web.HTTPBadRequest(text=f"bucket must be one of {', '.join(store.buckets)}\n")
        since = _int_query(request, "since_ms", now - DAY_MS)
        body = {
            "lines": service.report(),
            "bucket": bucket,
            "counts": store.rows(bucket, since),
            "last_shift": {e.key: store.last_shift(e.key, now) for e in service.entries},
        }
        return web.Response(text=json.dumps(body, sort_keys=True) + "\n", content_type="application/json")

    def period(request: web.BaseRequest) -> tuple[int, int]:
        """The report's period: the last complete shift (with shifts; else the last day) unless given."""
        now = int(time.time() * 1000)
        if store.shifts:
            current = bucket_start(now, "shift", store.shifts)
            default_start, default_end = bucket_start(current - 1, "shift", store.shifts), current
        else:
            default_start, default_end = now - DAY_MS, now
        if "start_ms" in request.query:  # from a given time: up to now unless said
            default_end = now
        return _int_query(request, "start_ms", default_start), _int_query(request, "end_ms", default_end)

    async def report(request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        start, end = period(request)
        return web.Response(text=store.report_csv(start, end), content_type="text/csv")

    async def page(request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        start, end = period(request)
        before, after = _neighbours(store.shifts, start, end)
        text = report_page.render(
            store.disagreeing(start, end), start, end, before=before, after=after, evidence_url=evidence_url
        )
        return web.Response(text=text, content_type="text/html")

    server.route(r"/api/counts", counts)
    server.route(r"/api/counts/report\.csv", report)
    server.route(r"/report", page)


def _neighbours(shifts: Sequence[dt_time], start: int, end: int) -> tuple[int, int]:
    """The start of the period before `start` and the end of the one after `end` (shifts, else as long)."""
    if not shifts:
        return start - (end - start), end + (end - start)
    before = bucket_start(start - 1, "shift", shifts)
    after = next(
        (b for k in range(1, 24 * 4 + 2) if (b := bucket_start(end + k * QUARTER_MS, "shift", shifts)) > end),
        end + DAY_MS,
    )
    return before, after


__all__ = ["add_routes", "bridge_certificate", "build_reconcile", "reconcile_problems"]
