"""TLS on the health endpoint, inside its connection bound (`daemon.ops.http.bound.BoundedServer`).

asyncio's own TLS servers (`create_server(ssl=...)`) hide a connection from the application
protocol until its handshake is over: a flood of connections that never finish one would hold
descriptors the bound does not see, each for asyncio's handshake timeout. So the listener is
plain TCP and each accepted connection starts TLS itself (`loop.start_tls`): the bound counts it
from accept, as an idle connection (the first evicted for a new one), and its deadline
(`request_timeout_s`, from accept to the end of the response) covers the handshake. A connection
refused at the bound gets the plain-text `503` and is closed at once, without a handshake. Each
handshake runs in a task of the server's `Tracked` (`daemon.core.tasks`): one that raises unexpectedly
closes its connection and is logged (`http_tls_setup_failed`), and the server's close ends those
still running.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Protocol

from aiohttp.web_protocol import RequestHandler

from daemon.core.tasks import Tracked


class Bound(Protocol):
    """What `TlsAccept` needs of the bounded server."""

    def track(self, handler: RequestHandler, transport: asyncio.Transport) -> None: ...
    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None: ...


class TlsAccept(asyncio.Protocol):
    """The protocol of an accepted TLS connection until its handshake is done; then the
    connection is `handler`'s (aiohttp's, which sees the decrypted bytes)."""

    def __init__(
        self, bound: Bound, handler: RequestHandler, context: ssl.SSLContext, timeout_s: float, tasks: Tracked
    ) -> None:
        """`tasks`: where the handshake's task runs (the server's, ended by its close)."""
        self._bound = bound
        self._tasks = tasks
        self._handler = handler
        self._context = context
        self._timeout_s = timeout_s
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.pause_reading()  # nothing is read before start_tls has the transport (it resumes it)
        self._bound.track(self._handler, transport)
        self._task = self._tasks.start(self._handshake(transport), "health-tls")

    async def _handshake(self, raw: asyncio.Transport) -> None:
        try:
            await self._start_tls(raw)
        except Exception:  # not the client's doing: the connection goes, the failure is the task's (logged)
            self._bound.connection_lost(self._handler)
            raw.abort()
            raise

    async def _start_tls(self, raw: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        try:
            tls = await loop.start_tls(
                raw, self._handler, self._context, server_side=True, ssl_handshake_timeout=self._timeout_s
            )
        except (OSError, ssl.SSLError, ConnectionError, TimeoutError, RuntimeError):
            # not TLS, given up, evicted or past its deadline: counted where it was closed, if by us
            self._bound.connection_lost(self._handler)
            raw.abort()
            return
        if tls is None or raw.is_closing():
            self._bound.connection_lost(self._handler)
            return
        self._handler.connection_made(tls)

    def connection_lost(self, exc: Exception | None) -> None:
        """Only before start_tls took the transport over (closed at once, evicted before it ran)."""
        self._bound.connection_lost(self._handler, exc)
        if self._task is not None:
            self._task.cancel()


__all__ = ["TlsAccept"]
