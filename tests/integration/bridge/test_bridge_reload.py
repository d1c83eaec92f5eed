"""SIGHUP reloads the bridge's OPC UA trust: a newly trusted client connects without a restart while
the open session stays; a certificate taken out of the trusted directory has its session closed; a
config that no longer loads changes nothing. The real path: `beltsight bridge`'s `_serve` with its
signal handlers, a real SIGHUP to this process, real asyncua clients with client certificates."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
from pathlib import Path
from typing import Any

import structlog
from asyncua import Client
from asyncua.crypto import cert_gen
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509 import DNSName, UniformResourceIdentifier
from cryptography.x509.oid import ExtendedKeyUsageOID

from daemon.bridge import cli
from tests.support.bridge_harness import Events, crossing, make_config, read, start_bridge, subscribe, wait_for
from tests.support.fixtures_redis import RedisServerFactory, free_port

CLIENT_URI = "urn:beltsight:test-plc"
PASSWORD = "pl(-secret"

CONFIG = """
[redis]
url = "redis://127.0.0.1:{redis_port}/0"

[models]
640 = "m640.onnx"

[engine]
providers = ["cpu"]

[[cameras]]
id = "cam1"
url = "rtsp://127.0.0.1:1/stream1"
[[cameras.lines]]
id = "L1"
start = [0.5, 0.0]
end = [0.5, 1.0]

[bridge]
health_listen = ""
state_dir = "{state_dir}"
reconnect_max_s = 0.5
[bridge.opcua]
listen = "127.0.0.1:{opcua_port}"
security = "basic256sha256"
trusted_dir = "{trusted}"
users = {{ plc = {{ password_file = "{password_file}" }} }}
[bridge.modbus]
listen = ""
"""


def _client_cert(directory: Path, name: str) -> tuple[Path, Path]:
    key = cert_gen.generate_private_key()
    cert = cert_gen.generate_self_signed_app_certificate(
        key,
        CLIENT_URI,
        {"organizationName": name},
        [UniformResourceIdentifier(CLIENT_URI), DNSName(socket.gethostname())],
        extended=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    cert_path, key_path = directory / f"{name}-cert.der", directory / f"{name}-key.pem"
    cert_path.write_bytes(cert.public_bytes(Encoding.DER))
    key_path.write_bytes(cert_gen.dump_private_key_as_pem(key))
    return cert_path, key_path


async def _connect(url: str, cert: Path, key: Path) -> Client:
    client = Client(url, timeout=5)
    client.application_uri = CLIENT_URI
    client.set_user("plc")
    client.set_password(PASSWORD)
    await client.set_security_string(f"Basic256Sha256,SignAndEncrypt,{cert},{key}")
    await client.connect()
    return client


async def _refused(url: str, cert: Path, key: Path) -> bool:
    try:
        client = await _connect(url, cert, key)
    except Exception:  # asyncua raises several kinds for a refusal: any failure to connect is one here
        return True
    await client.disconnect()
    return False


async def _closed(client: Client) -> bool:
    try:
        await read(client, "BeltSight/cam1/L1/CountIn")
    except Exception:  # the server closed the connection: the read fails, however asyncua words it
        return True
    return False


async def _until(check: Any, within_s: float = 60.0) -> None:
    """Until the coroutine function `check()` returns True (a loaded machine: generous)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not await check():
        assert loop.time() < deadline, "timed out waiting"
        await asyncio.sleep(0.1)


def test_sighup_trusts_a_new_client_keeps_the_old_session_and_closes_a_revoked_one(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    server = redis_server()
    trusted, keys = tmp_path / "trusted", tmp_path / "keys"
    trusted.mkdir()
    keys.mkdir()
    password_file = tmp_path / "plc-password"
    password_file.write_text(PASSWORD + "\n")
    port = free_port()
    config = tmp_path / "beltsight.toml"
    text = CONFIG.format(
        redis_port=server.port,
        state_dir=tmp_path / "state",
        opcua_port=port,
        trusted=trusted,
        password_file=password_file,
    )
    config.write_text(text)
    cert_a, key_a = _client_cert(keys, "plc-a")
    cert_b, key_b = _client_cert(keys, "plc-b")
    shutil.copy(cert_a, trusted / cert_a.name)
    url = f"opc.tcp://127.0.0.1:{port}/beltsight"
    r = server.client()

    async def scenario(logs: list[dict[str, Any]]) -> None:
        settings, layout = cli.load(config)
        serving = asyncio.create_task(cli._serve(config, settings, layout))
        client_a: Client | None = None
        client_b: Client | None = None
        try:
            await _until(lambda: _refused_is(url, cert_a, key_a, False))
            client_a = await _connect(url, cert_a, key_a)
            events_a = Events()
            await subscribe(client_a, events_a)
            assert await _refused(url, cert_b, key_b)  # not trusted yet

            shutil.copy(cert_b, trusted / cert_b.name)
            os.kill(os.getpid(), signal.SIGHUP)
            await _until(lambda: _refused_is(url, cert_b, key_b, False))
            client_b = await _connect(url, cert_b, key_b)
            events_b = Events()
            await subscribe(client_b, events_b)
            r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 1))
            await wait_for(lambda: len(events_a.events) == 1 and len(events_b.events) == 1)  # A's session stayed

            (trusted / cert_a.name).unlink()
            os.kill(os.getpid(), signal.SIGHUP)
            await _until(lambda: _closed(client_a))
            assert await _refused(url, cert_a, key_a)
            r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 2))
            await wait_for(lambda: len(events_b.events) == 2)

            config.write_text(text.replace('security = "basic256sha256"', 'security = "maybe"'))
            os.kill(os.getpid(), signal.SIGHUP)  # no longer loads: logged, nothing changes
            await _until(lambda: _logged(logs, "bridge_reload_failed"))
            assert await read(client_b, "BeltSight/cam1/L1/CountIn") == 2
            assert await _refused(url, cert_a, key_a)
        finally:
            for client in (client_a, client_b):
                if client is not None:
                    with contextlib.suppress(Exception):
                        await client.disconnect()
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(serving, 30)

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario(logs))
    reloads = [e for e in logs if e["event"] in ("bridge_reloaded", "bridge_reload_failed")]
    assert [e["event"] for e in reloads] == ["bridge_reloaded", "bridge_reloaded", "bridge_reload_failed"]
    assert reloads[0]["trusted_added"] == 1 and reloads[0]["sessions_closed"] == 0
    assert reloads[1]["trusted_removed"] == 1 and reloads[1]["sessions_closed"] == 1
    assert reloads[0]["restart_needed"] == [] and reloads[0]["server_certificate"] is False


async def _logged(logs: list[dict[str, Any]], event: str) -> bool:
    return any(e["event"] == event for e in logs)


async def _refused_is(url: str, cert: Path, key: Path, expected: bool) -> bool:
    return await _refused(url, cert, key) is expected


def _server_pair(directory: Path, org: str) -> tuple[Path, Path]:
    key = cert_gen.generate_private_key()
    cert = cert_gen.generate_self_signed_app_certificate(
        key,
        "urn:beltsight:bridge",
        {"organizationName": org},
        [UniformResourceIdentifier("urn:beltsight:bridge"), DNSName("127.0.0.1")],
        extended=[ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    directory.mkdir(exist_ok=True)
    (directory / "server-cert.der").write_bytes(cert.public_bytes(Encoding.DER))
    (directory / "server-key.pem").write_bytes(cert_gen.dump_private_key_as_pem(key))
    return directory / "server-cert.der", directory / "server-key.pem"


def test_reload_serves_a_renewed_server_certificate_to_new_clients_and_keeps_open_sessions(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    server = redis_server()
    trusted, keys = tmp_path / "trusted", tmp_path / "keys"
    trusted.mkdir()
    keys.mkdir()
    cert_file, key_file = _server_pair(tmp_path / "pki", "first")
    config = make_config(
        tmp_path / "state",
        security="basic256sha256",
        trusted_dir=str(trusted),
        cert_file=str(cert_file),
        key_file=str(key_file),
        users={"plc": {"password": PASSWORD}},
    )
    cert_a, key_a = _client_cert(keys, "plc-a")
    shutil.copy(cert_a, trusted / cert_a.name)
    url = f"opc.tcp://{config.opcua.listen}/beltsight"

    async def served_certificate() -> bytes:
        endpoints = await Client(url, timeout=5).connect_and_get_server_endpoints()  # no session needed
        return bytes(endpoints[0].ServerCertificate)

    async def scenario() -> None:
        bridge = await start_bridge(config, server)
        client_a: Client | None = None
        try:
            client_a = await _connect(url, cert_a, key_a)
            _server_pair(tmp_path / "pki", "renewed")  # the files replaced in place, as a renewal does
            with structlog.testing.capture_logs() as logs:
                await bridge.reload(config)
            assert logs[-1]["event"] == "bridge_reloaded" and logs[-1]["server_certificate"] is True
            assert await served_certificate() == cert_file.read_bytes()
            assert await read(client_a, "BeltSight/cam1/L1/CountIn") == 0  # the open session stays
            client_b = await _connect(url, cert_a, key_a)  # a new channel with the renewed certificate
            await client_b.disconnect()
        finally:
            if client_a is not None:
                with contextlib.suppress(Exception):
                    await client_a.disconnect()
            await bridge.stop()

    asyncio.run(scenario())
