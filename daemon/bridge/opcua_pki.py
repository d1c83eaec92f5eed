"""OPC UA certificates that can change under a running server (`beltsight bridge` reload, SIGHUP).

- `TrustedClients`: the trusted client certificates (a directory of DER or PEM files) as asyncua's
  certificate validator; `load` reads the directory again and swaps the trust store in one step.
- `server_certificate`: the server certificate and key in use (`cert_file`/`key_file`, or the
  self-signed pair generated, and renewed before it expires, under `<state_dir>/opcua/`);
  `swap_server_certificate` puts a new pair in place for the connections that open from then on
  (asyncua builds its endpoints and security policies at start: they are rebuilt here).
- `Connection`: what a reload needs of an open client connection (its certificate, its user), and
  how it is closed.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Any

from asyncua import ua
from asyncua.crypto import cert_gen, uacrypto
from asyncua.crypto.truststore import TrustStore
from asyncua.crypto.validator import CertificateValidator, CertificateValidatorOptions
from asyncua.server.server import Server
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID

from daemon.config.bridge import OpcUaConfig

APP_URI = "urn:beltsight:bridge"
VALIDATION = (
    CertificateValidatorOptions.TIME_RANGE
    | CertificateValidatorOptions.TRUSTED
    | CertificateValidatorOptions.PEER_CLIENT
)


def fingerprint(cert: x509.Certificate) -> str:
    return sha256(cert.public_bytes(Encoding.DER)).hexdigest()


class TrustedClients:
    """The client certificates accepted, from `directory` (read by `load`, again on each reload)."""

    def __init__(self, directory: Path, on_refused: Callable[[], None]) -> None:
        self.directory = directory
        self._on_refused = on_refused
        self._store: TrustStore | None = None
        self._validator: CertificateValidator | None = None
        self.fingerprints: frozenset[str] = frozenset()

    async def load(self) -> tuple[int, int]:
        """Read the directory; (certificates added, certificates removed) since the previous load."""
        self.directory.mkdir(parents=True, exist_ok=True)
        store = TrustStore([self.directory], [])
        await store.load()
        prints: set[str] = set()
        for path in sorted(self.directory.iterdir()):
            if path.is_file():
                try:
                    prints.add(fingerprint(await uacrypto.load_certificate(path)))
                except (ValueError, TypeError):
                    continue  # not a certificate: TrustStore skips it too
        before, self.fingerprints = self.fingerprints, frozenset(prints)
        self._store, self._validator = store, CertificateValidator(VALIDATION, store)
        return len(self.fingerprints - before), len(before - self.fingerprints)

    def trusts(self, cert: x509.Certificate) -> bool:
        return self._store is not None and self._store.is_trusted(cert)

    async def __call__(self, cert: x509.Certificate, app: ua.ApplicationDescription) -> None:
        """asyncua's certificate validator: raises (and counts a refusal) for an untrusted certificate."""
        assert self._validator is not None
        try:
            await self._validator.validate(cert, app)
        except Exception:
            self._on_refused()
            raise


async def server_certificate(cfg: OpcUaConfig, state_dir: Path, host: str) -> tuple[Path, Path]:
    """(cert_file, key_file): the configured pair, or the generated one (created or renewed now)."""
    if cfg.cert_file is not None and cfg.key_file is not None:
        return cfg.cert_file, cfg.key_file
    pki = state_dir / "opcua"
    pki.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = pki / "server-cert.der", pki / "server-key.pem"
    await cert_gen.setup_self_signed_certificate(
        key_file,
        cert_file,
        APP_URI,
        host or socket.gethostname(),
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
        {"organizationName": "BeltSight"},
    )
    key_file.chmod(0o600)
    return cert_file, key_file


async def swap_server_certificate(server: Server, cert_file: Path, key_file: Path) -> bool:
    """Load the pair; when the certificate differs from the one served, serve it to new connections
    (open ones keep the channel they have). True when it changed."""
    cert = await uacrypto.load_certificate(cert_file)
    key = await uacrypto.load_private_key(key_file)
    current = server.iserver.certificate
    if current is not None and fingerprint(current) == fingerprint(cert):
        return False
    server.iserver.certificate, server.iserver.private_key = cert, key
    # asyncua builds endpoints and policies once, in start(): rebuilt in place (the binary server
    # hands the same `_policies` list to every new connection)
    policies: list[Any] = server._policies
    policies.clear()
    server.iserver.endpoints.clear()
    await server._setup_server_nodes()
    return True


@dataclass(frozen=True, slots=True)
class Connection:
    """One open OPC UA client connection (an asyncua `OPCUAProtocol`)."""

    protocol: Any

    @property
    def certificate(self) -> x509.Certificate | None:
        processor = self.protocol.processor
        policy = getattr(getattr(processor, "_connection", None), "security_policy", None)
        der = getattr(policy, "peer_certificate", None)
        return x509.load_der_x509_certificate(der) if der else None

    @property
    def user(self) -> str | None:
        session = getattr(self.protocol.processor, "session", None)
        user = getattr(session, "user", None)
        return getattr(user, "name", None)

    def close(self) -> None:
        if self.protocol.transport is not None:
            self.protocol.transport.close()


def connections(server: Server | None) -> list[Connection]:
    bserver = server.bserver if server is not None else None
    return [Connection(p) for p in (bserver.clients if bserver is not None else [])]
