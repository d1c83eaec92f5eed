"""Loopback ports: the one free-port picker and the in-use check servers care about.

A port picked by binding port 0 and closing the socket used to be free for the kernel to hand out
again before the server it was meant for bound it (to another test's `bind(0)`, or as the local
port of an outgoing connection): the server then failed with `EADDRINUSE`. `free_port()` now
reserves the port it returns as the `ephemeral-port-reserve` recipe does (Yelp's, also pytest's
xprocess): it connects to it once and closes the accepted side first, which leaves that side in
`TIME_WAIT` for about a minute. Meanwhile the kernel picks the port neither for `bind(0)` nor for an
outgoing connection, while a server that binds it by number with `SO_REUSEADDR` (redis-server,
mosquitto, asyncio's and so aiohttp's, asyncua's and pymodbus's servers, GStreamer's RTSP server)
gets it. Where a server binds port 0 itself and reports its port (the endpoint, the bridge's
Modbus and OPC UA servers in-process, the RTSP server), that is better still; the kit's redis-server
and mosquitto launchers also retry on another port when theirs was taken.
"""

from __future__ import annotations

import errno
import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at `host`, kept out of the kernel's own picks for about a minute
    (see the module docstring) so that the server it is meant for can bind it by number."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, 0))
        listener.listen(1)
        address = listener.getsockname()
        with socket.create_connection(address, timeout=5):
            accepted, _peer = listener.accept()
            accepted.close()  # the server side closes first: it holds the port in TIME_WAIT
        port: int = address[1]
        return port


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could not listen on host:port now (SO_REUSEADDR, as servers bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False
