"""Loopback ports: the one free-port picker and the in-use check servers care about."""

from __future__ import annotations

import errno
import socket


def free_port() -> int:
    """A port nothing listens on at 127.0.0.1 now (the kernel's pick; another process may race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
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
