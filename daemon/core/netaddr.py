"""`host:port` text to a (host, port) pair: the one parser for listen addresses and Redis nodes; and
what a host name or a web origin means for the endpoint's browser checks."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


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


def loopback_name(name: str) -> bool:
    """Whether a host name or address always means this machine (no resolver can rebind it):
    `localhost`, `*.localhost` (RFC 6761), 127.0.0.0/8, ::1."""
    name = name.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def normalise_origin(value: str) -> str | None:
    """A web origin as `scheme://host[:port]` (lower case, the default port left out); None when
    `value` is not an http(s) origin (`null`, a path, user info, garbage)."""
    try:
        parts = urlsplit(value.strip())
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not name or parts.username is not None or parts.path not in ("", "/"):
        return None
    if parts.query or parts.fragment:
        return None
    host = f"[{name}]" if ":" in name else name
    return f"{scheme}://{host}" if port in (None, _DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"


__all__ = ["loopback_name", "normalise_origin", "parse_host_port"]
