"""A real `redis-server` on a TLS port, with a CA and certificates made by `openssl` for the test.

    def test_x(redis_tls_server, tls_material):
        server = redis_tls_server(auth_clients=True)        # asks for a client certificate
        rogue = redis_tls_server(rogue=True)                # its certificate: another CA's
        cfg = RedisConfig(url=server.url, tls_ca_file=tls_material.ca, ...)

`tls_material` (session): `ca` (the test CA), `server_cert`/`server_key` (signed by it, for
127.0.0.1 and localhost), `client_cert`/`client_key` (signed by it), `rogue_ca` and
`rogue_cert`/`rogue_key` (a server certificate for the same names from a CA nobody trusts),
`other_cert`/`other_key` (signed by the CA, for another host name only).
`redis_tls_server(wrong_name=True)` serves the latter.
These fixtures are registered through tests/support/fixtures_redis.py.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tools.kit.redis_server import RedisServer, find_redis_server


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_ca: Path
    rogue_cert: Path
    rogue_key: Path
    other_cert: Path
    other_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {proc.stderr[-500:]}")


def _make_ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=BeltSight test {name}",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=d)  # fmt: skip


def _make_cert(d: Path, name: str, ca: str, cn: str, san: str) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", cwd=d)  # fmt: skip
    (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", "2", "-out", f"{name}.crt", "-extfile", f"{name}.ext", cwd=d)  # fmt: skip


@pytest.fixture(scope="session")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed (Debian: apt-get install openssl)")
    d = tmp_path_factory.mktemp("tls")
    _make_ca(d, "ca")
    _make_ca(d, "rogue-ca")
    _make_cert(d, "server", "ca", "localhost", "IP:127.0.0.1,DNS:localhost")
    _make_cert(d, "client", "ca", "beltsight", "DNS:beltsight")
    _make_cert(d, "rogue", "rogue-ca", "localhost", "IP:127.0.0.1,DNS:localhost")
    _make_cert(d, "other", "ca", "redis.elsewhere", "DNS:redis.elsewhere")
    return TlsMaterial(
        ca=d / "ca.crt",
        server_cert=d / "server.crt",
        server_key=d / "server.key",
        client_cert=d / "client.crt",
        client_key=d / "client.key",
        rogue_ca=d / "rogue-ca.crt",
        rogue_cert=d / "rogue.crt",
        rogue_key=d / "rogue.key",
        other_cert=d / "other.crt",
        other_key=d / "other.key",
    )


class TlsRedisServer(RedisServer):
    """redis-server with only a TLS port (`--port 0 --tls-port N`); `url` is rediss://."""

    def __init__(
        self, binary: str, data_dir: Path, material: TlsMaterial, *, auth_clients: bool, rogue: bool, wrong_name: bool
    ) -> None:
        super().__init__(binary, data_dir)
        self.material = material
        self.auth_clients = auth_clients
        self.rogue = rogue
        self.wrong_name = wrong_name

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0"

    @property
    def _server_ca(self) -> Path:
        return self.material.rogue_ca if self.rogue else self.material.ca

    def _argv(self) -> list[str]:
        argv = super()._argv()
        argv[argv.index("--port") + 1] = "0"
        m = self.material
        cert, key = (m.rogue_cert, m.rogue_key) if self.rogue else (m.server_cert, m.server_key)
        if self.wrong_name:
            cert, key = m.other_cert, m.other_key
        argv += ["--tls-port", str(self.port), "--tls-cert-file", str(cert), "--tls-key-file", str(key)]
        argv += ["--tls-ca-cert-file", str(m.ca), "--tls-auth-clients", "yes" if self.auth_clients else "no"]
        return argv

    def _tls_client(self, **kw: object) -> redis.Redis:
        m = self.material
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            ssl=True,
            ssl_ca_certs=str(self._server_ca),
            ssl_certfile=str(m.client_cert),
            ssl_keyfile=str(m.client_key),
            ssl_check_hostname=not self.wrong_name,
            **kw,  # type: ignore[arg-type]
        )

    def _probe(self) -> redis.Redis:
        return self._tls_client(socket_timeout=0.5, socket_connect_timeout=0.5)

    def client(self, *, password: str | None = None, user: str | None = None) -> redis.Redis:
        c = self._tls_client(decode_responses=True, socket_timeout=5)
        self._clients.append(c)
        return c


TlsServerFactory = Callable[..., TlsRedisServer]


@pytest.fixture
def redis_tls_server(tmp_path_factory: pytest.TempPathFactory, tls_material: TlsMaterial) -> Iterator[TlsServerFactory]:
    """Factory: `redis_tls_server(auth_clients=False, rogue=False, wrong_name=False)` -> started server."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not installed (Debian: apt-get install redis-server)")
    servers: list[TlsRedisServer] = []

    def start(*, auth_clients: bool = False, rogue: bool = False, wrong_name: bool = False) -> TlsRedisServer:
        server = TlsRedisServer(
            binary,
            tmp_path_factory.mktemp("redis-tls"),
            tls_material,
            auth_clients=auth_clients,
            rogue=rogue,
            wrong_name=wrong_name,
        )
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.close()
