"""Who may connect to the bridge's OPC UA server: the security policy with the server certificate and the
trusted client certificates (`secure`, `daemon.bridge.opcua_pki`), the configured users with their
passwords compared in constant time (`Users`), refusals counted and summarised in one log line per interval
(`Refusals`), and, on a reload, the open connections that are no longer valid closed (`close_invalid`).
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

import structlog
from asyncua import ua
from asyncua.crypto.permission_rules import User, UserRole
from asyncua.server.server import Server

from daemon.bridge.opcua_pki import TrustedClients, connections, server_certificate
from daemon.config.bridge import OpcUaConfig
from daemon.core.ratelimit import RateLimited

log = structlog.get_logger("beltsight.bridge.opcua")

REFUSAL_LOG_INTERVAL_S = 10.0
NOISY_LOGGERS = ("asyncua.crypto.truststore", "asyncua.server.binary_server_asyncio", "asyncua.server.uaprocessor")


class Refusals:
    """Counts refused logins and certificates; logs at most one summary per interval."""

    def __init__(self) -> None:
        self.counts = {"password": 0, "certificate": 0}
        self._window = dict(self.counts)
        self._log = RateLimited(REFUSAL_LOG_INTERVAL_S)

    def add(self, reason: str) -> None:
        self.counts[reason] += 1
        self._window[reason] += 1
        if self._log.allow() is not None:  # the window counts every refusal since the last line
            log.warning("bridge_opcua_refused", **self._window)
            self._window = dict.fromkeys(self._window, 0)


class Users:
    """asyncua user manager: configured users only, passwords compared in constant time."""

    def __init__(self, users: dict[str, str], refusals: Refusals) -> None:
        self._users = {name.encode(): pw.encode() for name, pw in users.items()}
        self._refusals = refusals

    def replace(self, users: dict[str, str]) -> tuple[set[str], set[str]]:
        """Serve `users` from now on; (names added, names removed or with a new password)."""
        new = {name.encode(): pw.encode() for name, pw in users.items()}
        added = {n.decode() for n in new.keys() - self._users.keys()}
        revoked = {n.decode() for n, pw in self._users.items() if not hmac.compare_digest(new.get(n, b""), pw)}
        self._users = new
        return added, revoked

    def get_user(
        self, iserver: Any, username: str | None = None, password: str | None = None, certificate: Any = None
    ) -> User | None:
        expected = self._users.get((username or "").encode())
        given = (password or "").encode()
        ok = hmac.compare_digest(expected if expected is not None else b"\0" * len(given) + b"x", given)
        if expected is None or not ok:
            self._refusals.add("password")
            return None
        return User(role=UserRole.User, name=username)


async def secure(
    server: Server, cfg: OpcUaConfig, state_dir: Path, host: str, refusals: Refusals
) -> TrustedClients | None:
    """The server's security policy: none (a warning), or Basic256Sha256 SignAndEncrypt with the server
    certificate and the trusted client certificates (returned; a refused one counted in `refusals`)."""
    if cfg.security == "none":
        server.set_security_policy([ua.SecurityPolicyType.NoSecurity])
        log.warning("bridge_opcua_insecure", listen=cfg.listen)
        return None
    cert_file, key_file = await server_certificate(cfg, state_dir, host)
    await server.load_certificate(str(cert_file))
    await server.load_private_key(str(key_file))
    server.set_security_policy([ua.SecurityPolicyType.Basic256Sha256_SignAndEncrypt])
    trusted_dir = cfg.trusted_dir or state_dir / "opcua" / "trusted"
    trusted = TrustedClients(trusted_dir, lambda: refusals.add("certificate"))
    await trusted.load()
    server.set_certificate_validator(trusted)
    log.info("bridge_opcua_certificate", cert_file=str(cert_file), trusted_dir=str(trusted_dir))
    return trusted


def close_invalid(server: Server | None, trusted: TrustedClients | None, revoked: set[str]) -> int:
    """Close every open connection whose certificate is no longer trusted or whose user was revoked; how many."""
    closed = 0
    for conn in connections(server):
        cert = conn.certificate
        untrusted = cert is not None and trusted is not None and not trusted.trusts(cert)
        if untrusted or (conn.user is not None and conn.user in revoked):
            conn.close()
            closed += 1
    return closed
