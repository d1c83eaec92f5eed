"""`host:port` text to a (host, port) pair: the one parser for listen addresses and Redis nodes."""

from __future__ import annotations


def parse_host_port(text: str, *, listen: bool = True) -> tuple[str, int]:
    """`host:port` -> (host, port), IPv6 brackets stripped (`[::1]:9108` -> ("::1", 9108)).

    `listen` (an address to bind): the host may be empty (every interface) and the port 0 (any
    free one). Otherwise (an address to connect to) both must be set. ValueError when it is not
    host:port."""
    host, sep, port = text.rpartition(":")
    lowest = 0 if listen else 1
    if not sep or (not listen and not host) or not port.isdigit() or not lowest <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not host:port")
    return host.strip("[]"), int(port)


__all__ = ["parse_host_port"]
