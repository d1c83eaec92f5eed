"""A fault-injecting TCP proxy, to put in front of a real redis-server or RTSP server in tests.

The proxy runs an asyncio loop in a background thread, so synchronous tests drive it:

    with FaultProxy("127.0.0.1", redis_port) as proxy:
        client = redis.Redis(port=proxy.port, socket_timeout=0.5)
        proxy.latency(50)            # +50 ms each way on every chunk
        proxy.black_hole()           # connections stay up, nothing is forwarded
        proxy.restore()              # clean forwarding again

Every control runs on the proxy's loop and has taken effect, on live connections too, when it
returns. Faults, in terms of what the peers see:

- `latency(ms)`: a chunk read at t is written to the other side no earlier than t + ms
  (a pipeline delay: throughput is not cut to one chunk per delay).
- `bandwidth(bytes_per_s)`: a cap per direction, shared by all connections (one link); the
  last byte of S bytes leaves no earlier than S / cap after the first was taken.
- `reset_mid_reply(after_bytes=N)`: the next server -> client bytes (on whichever connection
  carries them first) are cut after N bytes, which are flushed to the client, then both sides
  are reset (RST, SO_LINGER 0). Arm it after the client's handshake (redis-py sends CLIENT
  SETINFO on connect; its reply would be the one cut).
- `black_hole()`: new connections are accepted, nothing is forwarded either way (not data,
  not FIN, not a reset) on new or live connections. What the peers send is held, bounded
  (reading pauses at a high-water mark), and forwarded after `restore()`, as TCP would
  retransmit it once a link is back.
- `half_open()`: as `black_hole()`, and the proxy stops reading its sockets at all (the
  peers' send buffers fill up); sockets stay open, no FIN, no RST: a switch reboot.
- `refuse()`: the listener is closed (clients get ECONNREFUSED); `refuse(rst=True)` keeps
  listening and resets new connections at once. Live connections are not touched.
- `drop_all()`: every live connection is reset now, both sides.
- `restore()`: all of the above undone (latency 0, no cap, nothing armed, listening again).

Counters: `stats()` (accepted, refused, live, bytes each way...) and `connections()`; wait on
them with `wait_for(predicate)`. `close()` (or leaving the `with`) resets what is still
connected, closes every socket and stops the thread; an unexpected error inside the proxy is
raised there, so a broken proxy fails the test that used it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import struct
import termios
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

Direction = Literal["both", "upstream", "downstream"]
"""`upstream`: client -> server bytes (commands); `downstream`: server -> client (replies, media)."""

_Mode = Literal["clean", "black_hole", "half_open"]
_T = TypeVar("_T")

_HIGH_WATER = 256 * 1024
"""Bytes held from one socket before the proxy stops reading it (resumes under `_LOW_WATER`)."""
_LOW_WATER = 64 * 1024
_SLICE_S = 0.02
"""Under a bandwidth cap, bytes are written in slices of at most this many seconds' worth."""
_FLUSH_BEFORE_RESET_S = 2.0
"""How long `reset_mid_reply` waits for the cut reply's bytes to leave before the RST."""
_CONTROL_TIMEOUT_S = 10.0


def _directions(direction: Direction) -> tuple[Literal["upstream", "downstream"], ...]:
    if direction == "both":
        return ("upstream", "downstream")
    if direction in ("upstream", "downstream"):
        return (direction,)
    raise ValueError(f"direction must be 'both', 'upstream' or 'downstream', not {direction!r}")


def _rst_close(sock: socket.socket) -> None:
    """Close `sock` with a reset (SO_LINGER on, 0 s) instead of a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@dataclass(frozen=True)
class ProxyStats:
    """A consistent snapshot of the proxy's counters."""

    accepted: int
    """Connections accepted for proxying (not those reset by `refuse(rst=True)`)."""
    refused: int
    """Connections accepted and reset at once under `refuse(rst=True)`."""
    upstream_failures: int
    """Accepted connections whose upstream connect failed (the client was reset)."""
    live: int
    """Connections being proxied now."""
    bytes_upstream: int
    """Bytes written to the server, all connections."""
    bytes_downstream: int
    """Bytes written to clients, all connections."""
    resets_injected: int
    """`reset_mid_reply` cuts done."""
    dropped: int
    """Connections reset by `drop_all`."""
    listening: bool


@dataclass(frozen=True)
class ConnectionInfo:
    """One live proxied connection."""

    id: int
    client_address: tuple[Any, ...]
    """The client's address as the proxy sees it: match it to the client socket's `getsockname()`."""
    client_open: bool
    """The proxy's socket to the client is open (no close or reset from either end noticed)."""
    upstream_open: bool
    bytes_upstream: int
    bytes_downstream: int
    held_upstream: int
    """Bytes read from the client and not forwarded yet (held by a fault, or in flight)."""
    held_downstream: int


class _Side(asyncio.Protocol):
    """One socket of a proxied connection; holds what it reads for the pump toward the other side."""

    def __init__(self, conn: _Connection) -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[tuple[float, bytes]] = deque()
        self.buffered = 0
        self.eof = False
        self.lost = False
        self.lost_exc: BaseException | None = None
        self.writable = True
        self.closed: asyncio.Future[None] = conn.loop.create_future()
        self._flow_paused = False
        self._fault_paused = False
        self._reading_paused = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._apply_reading()

    def data_received(self, data: bytes) -> None:
        self.chunks.append((time.monotonic(), data))
        self.buffered += len(data)
        if self.buffered > _HIGH_WATER:
            self._flow_paused = True
            self._apply_reading()
        self.conn.wake()

    def eof_received(self) -> bool:
        self.eof = True
        self.conn.wake()
        return True  # keep the socket open for writing: the other direction may still flow

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = True
        self.lost_exc = exc
        self.writable = True
        if not self.closed.done():
            self.closed.set_result(None)
        self.conn.wake()

    def pause_writing(self) -> None:
        self.writable = False

    def resume_writing(self) -> None:
        self.writable = True
        self.conn.wake()

    # used by the proxy

    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.lost and not self.transport.is_closing()

    def take(self) -> tuple[float, bytes]:
        chunk = self.chunks.popleft()
        self.buffered -= len(chunk[1])
        if self._flow_paused and self.buffered <= _LOW_WATER:
            self._flow_paused = False
            self._apply_reading()
        return chunk

    def put_back(self, chunk: tuple[float, bytes]) -> None:
        self.chunks.appendleft(chunk)
        self.buffered += len(chunk[1])

    def set_fault_paused(self, paused: bool) -> None:
        self._fault_paused = paused
        self._apply_reading()

    def _apply_reading(self) -> None:
        want_paused = self._flow_paused or self._fault_paused
        transport = self.transport
        if transport is None or self.eof or transport.is_closing() or want_paused == self._reading_paused:
            return
        if want_paused:
            transport.pause_reading()
        else:
            transport.resume_reading()
        self._reading_paused = want_paused

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.lost:
            self.transport.write(data)

    def write_eof(self) -> None:
        if self.is_open and self.transport is not None and self.transport.can_write_eof():
            try:
                self.transport.write_eof()
            except OSError:  # the peer is gone already (ENOTCONN after its reset): pass that on
                self.reset()

    def close(self) -> None:
        """Close after flushing what is buffered (FIN)."""
        if self.is_open and self.transport is not None:
            self.transport.close()

    def reset(self) -> None:
        """Close now with a reset (RST); buffered bytes are discarded."""
        transport = self.transport
        if transport is None or self.lost:
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()

    def unsent(self) -> int:
        """Bytes not yet acknowledged by the peer: the transport's buffer and the kernel's send queue."""
        transport = self.transport
        if transport is None or self.lost:
            return 0
        pending = transport.get_write_buffer_size()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, ValueError):
                raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0))
                pending += struct.unpack("i", raw)[0]
        return pending


class _Connection:
    def __init__(self, cid: int, loop: asyncio.AbstractEventLoop, address: tuple[Any, ...]) -> None:
        self.id = cid
        self.loop = loop
        self.address = address
        self.client = _Side(self)
        self.upstream = _Side(self)
        self.bytes_upstream = 0
        self.bytes_downstream = 0
        self._changed = asyncio.Event()

    def wake(self) -> None:
        self._changed.set()

    async def changed(self) -> None:
        """Wait for the next change; call it right after finding there is nothing to do (no await between)."""
        self._changed.clear()
        await self._changed.wait()

    def sides(self) -> tuple[_Side, _Side]:
        return (self.client, self.upstream)


@dataclass
class _Link:
    rate: float | None = None
    next_free: float = 0.0


@dataclass
class _ResetPlan:
    after_bytes: int
    remaining: int
    owner: _Connection | None = None


class FaultProxy:
    """A TCP proxy to `upstream_host:upstream_port` on `listen_host:listen_port` (0: a free port)."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.listen_host = listen_host
        self._port = listen_port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        # loop-thread state
        self._listener: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._conns: dict[int, _Connection] = {}
        self._unserved: set[socket.socket] = set()
        """Accepted sockets whose `_serve` has not started yet (closed at shutdown if it never does)."""
        self._next_id = 0
        self._errors: list[BaseException] = []
        self._mode: _Mode = "clean"
        self._refuse_rst = False
        self._latency_s = {"upstream": 0.0, "downstream": 0.0}
        self._links = {"upstream": _Link(), "downstream": _Link()}
        self._reset_plan: _ResetPlan | None = None
        self._accepted = 0
        self._refused = 0
        self._upstream_failures = 0
        self._bytes_upstream = 0
        self._bytes_downstream = 0
        self._resets_injected = 0
        self._dropped = 0

    # lifecycle (any thread but the proxy's)

    def start(self) -> Self:
        if self._loop is not None or self._closed:
            raise RuntimeError("a FaultProxy starts once")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=self._run_loop, args=(loop,), name="faultproxy", daemon=True)
        self._thread.start()
        try:
            self._on_loop(self._listen)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Reset what is still connected, close every socket, stop the thread; raise errors seen inside."""
        loop, thread = self._loop, self._thread
        if self._closed or loop is None or thread is None:
            self._closed = True
            return
        self._closed = True
        try:
            self._run(self._shutdown(), timeout=_CONTROL_TIMEOUT_S)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_CONTROL_TIMEOUT_S)
            if thread.is_alive():
                raise RuntimeError("the FaultProxy loop thread did not stop")
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        if self._errors:
            raise RuntimeError(f"FaultProxy failed inside: {self._errors!r}") from self._errors[0]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # addresses

    @property
    def port(self) -> int:
        if self._loop is None:
            raise RuntimeError("the proxy is not started")
        return self._port

    @property
    def address(self) -> tuple[str, int]:
        return (self.listen_host, self.port)

    def url_for(self, scheme: str, path: str = "") -> str:
        """`scheme://host:port/path` for the proxy, e.g. `url_for("redis", "/0")`, `url_for("rtsp", "/cam1")`."""
        host = f"[{self.listen_host}]" if ":" in self.listen_host else self.listen_host
        if path and not path.startswith("/"):
            path = "/" + path
        return f"{scheme}://{host}:{self.port}{path}"

    # controls (thread-safe; in effect when they return)

    def latency(self, ms: float, direction: Direction = "both") -> None:
        """Add `ms` of one-way delay to every chunk in `direction` (0 removes it)."""
        if ms < 0:
            raise ValueError("latency must be >= 0 ms")

        def apply() -> None:
            for d in _directions(direction):
                self._latency_s[d] = ms / 1000.0

        self._on_loop(apply)

    def bandwidth(self, bytes_per_s: float | None, direction: Direction = "both") -> None:
        """Cap `direction` at `bytes_per_s` (shared by all connections); None removes the cap."""
        if bytes_per_s is not None and bytes_per_s <= 0:
            raise ValueError("bandwidth must be > 0 bytes/s, or None for no cap")

        def apply() -> None:
            for d in _directions(direction):
                self._links[d] = _Link(rate=bytes_per_s, next_free=time.monotonic())

        self._on_loop(apply)

    def reset_mid_reply(self, after_bytes: int = 0) -> None:
        """Cut the next server -> client bytes after `after_bytes`, then reset that connection (one shot)."""
        if after_bytes < 0:
            raise ValueError("after_bytes must be >= 0")

        def apply() -> None:
            self._reset_plan = _ResetPlan(after_bytes=after_bytes, remaining=after_bytes)
            for conn in self._conns.values():
                conn.wake()

        self._on_loop(apply)

    def black_hole(self) -> None:
        """Accept connections, forward nothing on new or live ones (held until `restore()`)."""
        self._on_loop(lambda: self._set_mode("black_hole"))

    def half_open(self) -> None:
        """Forward nothing and read nothing, keep every socket open without FIN or RST."""
        self._on_loop(lambda: self._set_mode("half_open"))

    def refuse(self, rst: bool = False) -> None:
        """New connections fail: the listener closes (ECONNREFUSED), or with `rst` they are reset."""

        def apply() -> None:
            self._refuse_rst = rst
            if not rst:
                self._stop_listening()

        self._on_loop(apply)

    def drop_all(self) -> None:
        """Reset every live connection now (both sides)."""

        def apply() -> None:
            for conn in list(self._conns.values()):
                if conn.client.is_open or conn.upstream.is_open:
                    self._dropped += 1
                for side in conn.sides():
                    side.reset()

        self._on_loop(apply)

    def restore(self) -> None:
        """Clean forwarding: no latency, no cap, nothing armed, not refusing, listening."""

        def apply() -> None:
            self._latency_s = {"upstream": 0.0, "downstream": 0.0}
            self._links = {"upstream": _Link(), "downstream": _Link()}
            self._reset_plan = None
            self._refuse_rst = False
            self._set_mode("clean")

        self._on_loop(apply)

    # counters

    def stats(self) -> ProxyStats:
        return self._on_loop(self._stats)

    def connections(self) -> list[ConnectionInfo]:
        def snapshot() -> list[ConnectionInfo]:
            return [
                ConnectionInfo(
                    id=c.id,
                    client_address=c.address,
                    client_open=c.client.is_open,
                    upstream_open=c.upstream.is_open,
                    bytes_upstream=c.bytes_upstream,
                    bytes_downstream=c.bytes_downstream,
                    held_upstream=c.client.buffered,
                    held_downstream=c.upstream.buffered,
                )
                for c in self._conns.values()
            ]

        return self._on_loop(snapshot)

    def wait_for(
        self, predicate: Callable[[ProxyStats], bool], timeout: float = 10.0, interval: float = 0.01
    ) -> ProxyStats:
        """Poll `stats()` until `predicate` holds; TimeoutError (with the last stats) after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.stats()
            if predicate(stats):
                return stats
            if time.monotonic() >= deadline:
                raise TimeoutError(f"condition not met within {timeout} s; last stats: {stats}")
            time.sleep(interval)

    # plumbing between threads

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    def _run(self, coro: Coroutine[Any, Any, _T], timeout: float = _CONTROL_TIMEOUT_S) -> _T:
        loop = self._loop
        if loop is None:
            coro.close()
            raise RuntimeError("the proxy is not started")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("FaultProxy controls are for other threads, not the proxy's own loop")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def _on_loop(self, fn: Callable[[], _T]) -> _T:
        if self._closed:
            raise RuntimeError("the proxy is closed")

        async def call() -> _T:
            return fn()

        return self._run(call())

    # loop-thread internals

    def _stats(self) -> ProxyStats:
        return ProxyStats(
            accepted=self._accepted,
            refused=self._refused,
            upstream_failures=self._upstream_failures,
            live=len(self._conns),
            bytes_upstream=self._bytes_upstream,
            bytes_downstream=self._bytes_downstream,
            resets_injected=self._resets_injected,
            dropped=self._dropped,
            listening=self._listener is not None,
        )

    def _listen(self) -> None:
        if self._listener is not None:
            return
        loop = self._loop
        assert loop is not None
        family, type_, proto, _, sockaddr = socket.getaddrinfo(
            self.listen_host, self._port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, type_, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
            sock.listen(128)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._listener = sock
        self._port = sock.getsockname()[1]
        self._accept_task = loop.create_task(self._accept_loop(sock))

    def _stop_listening(self) -> None:
        if self._accept_task is not None:
            self._accept_task.cancel()
            self._accept_task = None
        if self._listener is not None:
            loop = self._loop
            assert loop is not None
            # the cancelled sock_accept drops its reader when the task runs next; remove it now too
            loop.remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None

    def _set_mode(self, mode: _Mode) -> None:
        self._mode = mode
        if not self._refuse_rst:
            self._listen()
        for conn in self._conns.values():
            for side in conn.sides():
                side.set_fault_paused(mode == "half_open")
            conn.wake()

    async def _accept_loop(self, listener: socket.socket) -> None:
        loop = self._loop
        assert loop is not None
        while True:
            sock, address = await loop.sock_accept(listener)
            if self._refuse_rst:
                self._refused += 1
                _rst_close(sock)
                continue
            self._accepted += 1
            self._next_id += 1
            conn = _Connection(self._next_id, loop, address)
            self._unserved.add(sock)
            self._spawn(self._serve(conn, sock))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        loop = self._loop
        assert loop is not None
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._errors.append(exc)

    async def _serve(self, conn: _Connection, sock: socket.socket) -> None:
        loop = self._loop
        assert loop is not None
        self._unserved.discard(sock)
        try:
            sock.setblocking(False)
            await loop.connect_accepted_socket(lambda: conn.client, sock)
        except BaseException:
            sock.close()
            raise
        self._conns[conn.id] = conn
        try:
            if self._mode == "half_open":
                for side in conn.sides():
                    side.set_fault_paused(True)
            try:
                await loop.create_connection(lambda: conn.upstream, self.upstream_host, self.upstream_port)
            except OSError:
                self._upstream_failures += 1
                conn.client.reset()
                return
            if self._mode == "half_open":
                conn.upstream.set_fault_paused(True)
            pumps = [
                loop.create_task(self._pump(conn, conn.client, conn.upstream, "upstream")),
                loop.create_task(self._pump(conn, conn.upstream, conn.client, "downstream")),
            ]
            try:
                await asyncio.gather(*pumps)
            finally:
                for pump in pumps:
                    pump.cancel()
                # the pumps end (or are cancelled) here; their errors surface through gather above
                await asyncio.wait(pumps)
            for side in conn.sides():
                side.close()
        finally:
            # whatever ended us (cancellation at close, an error), nothing stays open
            for side in conn.sides():
                if side.is_open:
                    side.reset()
            await asyncio.shield(self._all_closed(conn))
            del self._conns[conn.id]
            if self._reset_plan is not None and self._reset_plan.owner is conn:
                self._reset_plan.owner = None
                self._reset_plan.remaining = self._reset_plan.after_bytes

    @staticmethod
    async def _all_closed(conn: _Connection) -> None:
        for side in conn.sides():
            if side.transport is not None:
                await side.closed

    def _forwarding(self) -> bool:
        return self._mode == "clean"

    async def _pump(
        self, conn: _Connection, src: _Side, dst: _Side, direction: Literal["upstream", "downstream"]
    ) -> None:
        while True:
            if dst.lost:
                return  # nothing can reach it; the other pump sees it as its source and passes that on
            if not self._forwarding():
                await conn.changed()
                continue
            if src.chunks:
                if not await self._deliver(conn, src, dst, direction, src.take()):
                    return
                continue
            if src.lost:
                if src.lost_exc is not None:
                    dst.reset()
                else:
                    dst.close()
                return
            if src.eof:
                dst.write_eof()
                return
            await conn.changed()

    async def _deliver(
        self,
        conn: _Connection,
        src: _Side,
        dst: _Side,
        direction: Literal["upstream", "downstream"],
        chunk: tuple[float, bytes],
    ) -> bool:
        """Write one chunk to `dst` under the faults; False when the connection was cut."""
        received_at, data = chunk
        delay = received_at + self._latency_s[direction] - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        view = memoryview(data)
        while view:
            if not self._forwarding() or dst.lost:
                src.put_back((received_at, bytes(view)))  # held, with its original receive time
                return True
            link = self._links[direction]
            size = len(view)
            if link.rate is not None:
                size = max(1, min(size, int(link.rate * _SLICE_S)))
                now = time.monotonic()
                link.next_free = max(now, link.next_free) + size / link.rate
                await asyncio.sleep(link.next_free - now)
                if not self._forwarding() or dst.lost:
                    continue  # held at the top of the loop
            piece = bytes(view[:size])
            plan = self._reset_plan
            if direction == "downstream" and plan is not None and plan.owner in (None, conn):
                plan.owner = conn
                if len(piece) >= plan.remaining:
                    self._count(conn, direction, piece[: plan.remaining])
                    dst.write(piece[: plan.remaining])
                    self._reset_plan = None
                    self._resets_injected += 1
                    await self._flush_then_reset(conn)
                    return False
                plan.remaining -= len(piece)
            self._count(conn, direction, piece)
            dst.write(piece)
            view = view[size:]
            while not dst.writable and not dst.lost:
                await conn.changed()
        return True

    def _count(self, conn: _Connection, direction: Literal["upstream", "downstream"], data: bytes) -> None:
        if direction == "upstream":
            conn.bytes_upstream += len(data)
            self._bytes_upstream += len(data)
        else:
            conn.bytes_downstream += len(data)
            self._bytes_downstream += len(data)

    async def _flush_then_reset(self, conn: _Connection) -> None:
        # the kernel's send queue has no event to wait on: poll it, for a bounded time
        deadline = time.monotonic() + _FLUSH_BEFORE_RESET_S
        for _ in range(int(_FLUSH_BEFORE_RESET_S / 0.001)):
            if conn.client.unsent() == 0 or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.001)
        for side in conn.sides():
            side.reset()

    async def _shutdown(self) -> None:
        self._stop_listening()
        for conn in list(self._conns.values()):
            for side in conn.sides():
                side.reset()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for sock in self._unserved:
            _rst_close(sock)
        self._unserved.clear()
        # a cancelled sock_accept's reader callback and the transports' connection_lost run next
        await asyncio.sleep(0)
