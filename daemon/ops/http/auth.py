"""HTTP basic authentication for the health endpoint, against bcrypt hashes (`[health] basic_auth_users`).

As Prometheus' exporter-toolkit does it: a bcrypt verification is slow by design (tens to
hundreds of ms of CPU), so it runs in one thread of its own, never on the event loop, one at a
time; a successful one is remembered for `CACHE_TTL_S` per (user, SHA-256 of the password tried),
so a scrape every few seconds costs one verification a minute, not one per scrape. An unknown user
is checked against a fixed hash all the same (the answer takes as long: no user enumeration by
timing). At most `MAX_PENDING` verifications wait at once; a request beyond that is answered `503`
at once, so a flood of wrong passwords costs at most that thread's core, and its queue stays short.
Refusals are counted (`beltsight_http_auth_failures_total{reason}`) and logged as one
`http_auth_refused` line a minute at most; no password, hash or user name is ever logged.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import bcrypt
import structlog
from aiohttp import web

from daemon.core.metrics import Metrics
from daemon.core.ratelimit import RateLimited

log = structlog.get_logger("beltsight.health")

REALM = "BeltSight"
CACHE_TTL_S = 60.0
CACHE_MAX = 128
MAX_PENDING = 8
REFUSAL_LOG_INTERVAL_S = 60.0
_DUMMY_HASH = b"$2b$10$rOKinJbYZr345p6zjWSyoubIJPiSkkNvLjYZzrEGPerU6LwKNKQQ."
"""What an unknown user's password is checked against (cost 10, `bcrypt.gensalt()`'s default)."""
_CHALLENGE = {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"', "Cache-Control": "no-store"}
REASONS = ("missing", "bad_credentials", "busy")


def _credentials(header: str | None) -> tuple[str, bytes] | None:
    """(user, password) from an `Authorization: Basic ...` header, or None."""
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(b":")
    if not colon:
        return None
    return user.decode("utf-8", "replace"), password


def request_user(request: web.BaseRequest) -> str | None:
    """The basic-auth user a request names (verified already where authentication is configured)."""
    credentials = _credentials(request.headers.get("Authorization"))
    return None if credentials is None else credentials[0]


class BasicAuth:
    """`await refusal(request)`: None when the request carries a valid user's password, else the
    response to send instead (`401` with the challenge, or `503` when verifications are queued up)."""

    def __init__(self, users: Mapping[str, str], metrics: Metrics | None) -> None:
        self._users = {name: hashed.encode() for name, hashed in users.items()}
        self._metrics = metrics
        self._verified: dict[tuple[str, bytes], float] = {}  # -> monotonic expiry
        self._pending = 0
        self._executor: ThreadPoolExecutor | None = None
        self._refused = dict.fromkeys(REASONS, 0)
        self._refusal_log = RateLimited(REFUSAL_LOG_INTERVAL_S)

    async def refusal(self, request: web.BaseRequest) -> web.Response | None:
        credentials = _credentials(request.headers.get("Authorization"))
        if credentials is None:
            return self._refuse("missing", request)
        user, password = credentials
        key = (user, hashlib.sha256(password).digest())
        now = time.monotonic()
        if self._verified.get(key, 0.0) > now:
            return None
        if self._pending >= MAX_PENDING:
            return self._refuse("busy", request)
        hashed = self._users.get(user)
        self._pending += 1
        try:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, "beltsight-bcrypt")
            loop = asyncio.get_running_loop()
            ok = await loop.run_in_executor(self._executor, bcrypt.checkpw, password, hashed or _DUMMY_HASH)
        finally:
            self._pending -= 1
        if not ok or hashed is None:
            return self._refuse("bad_credentials", request)
        self._remember(key, time.monotonic())
        return None

    def _remember(self, key: tuple[str, bytes], now: float) -> None:
        if len(self._verified) >= CACHE_MAX:
            self._verified = {k: t for k, t in self._verified.items() if t > now}
            while len(self._verified) >= CACHE_MAX:  # all still fresh: drop the oldest
                del self._verified[next(iter(self._verified))]
        self._verified[key] = now + CACHE_TTL_S

    def _refuse(self, reason: str, request: web.BaseRequest) -> web.Response:
        self._refused[reason] += 1
        if self._metrics is not None:
            self._metrics.http_auth_failures.labels(reason=reason).inc()
        if self._refusal_log.allow() is not None:  # the counts cover every refusal since the last line
            log.warning("http_auth_refused", peer=request.remote, **self._refused)
            self._refused = dict.fromkeys(REASONS, 0)
        if reason == "busy":
            return web.Response(status=503, text="busy\n", headers={"Retry-After": "1"})
        return web.Response(status=401, text="authentication required\n", headers=_CHALLENGE)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["REALM", "BasicAuth", "request_user"]
