"""Restarts of the bridge and of Redis mid-stream, and OPC UA security (Basic256Sha256, users, trust)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from asyncua import Client
from asyncua.crypto import cert_gen
from asyncua.ua.uaerrors import UaError
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509 import DNSName, UniformResourceIdentifier
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.support.bridge_harness import (
    Events,
    crossing,
    make_config,
    opcua_server,
    read,
    start_bridge,
    subscribe,
    wait_for,
)
from tests.support.fixtures_redis import RedisServerFactory

CLIENT_URI = "urn:beltsight:test-plc"
FENCE = 5000
"""The track of a crossing sent after the others: once it arrived, everything before it has."""


def test_bridge_and_redis_restarts_lose_nothing_and_show_nothing_twice(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    server = redis_server(appendonly=True)
    config = make_config(tmp_path)
    r = server.client()

    async def scenario() -> None:
        seen: list[int] = []
        bridge = await start_bridge(config, server)
        handler = Events()
        async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
            await subscribe(client, handler)
            for n in range(1, 11):
                r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=n))
            await wait_for(lambda: len(handler.events) == 10)
        seen += [e.Track for e in handler.events]
        await bridge.stop()
        for n in range(11, 21):  # written while the bridge is down
            r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=n))
        bridge = await start_bridge(config, server)
        handler = Events()
        async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
            await wait_for(lambda: bridge.state.line("cam1", "L1").count_in == 20)
            assert await read(client, "BeltSight/cam1/L1/CountIn") == 20
            await subscribe(client, handler)
            await asyncio.to_thread(server.kill)
            await wait_for(lambda: not bridge.reader.stats.connected)
            assert await read(client, "BeltSight/cam1/L1/CountIn") == 20  # still served with Redis down
            beat = bridge.heartbeats
            await wait_for(lambda: bridge.heartbeats > beat + 1)
            await asyncio.to_thread(server.restart)
            await wait_for(lambda: bridge.reader.stats.connected)
            for n in range(21, 31):
                r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=n))
            # a fence on another line, sent last: the stream is read in order, so 11-20 fired again
            # would reach the client before it, however slow the machine
            r.xadd("beltsight:objects:cam1", crossing("cam1", "L2", 1, track=FENCE))
            await wait_for(lambda: any(e.Track == FENCE for e in handler.events))
            assert handler.events[-1].Track == FENCE
            seen += [e.Track for e in handler.events[:-1]]
            assert await read(client, "BeltSight/cam1/L1/CountIn") == 30
        await bridge.stop()
        # entries 11-20 were served (the variables) while no client listened for events: not re-fired later
        assert seen == [*range(1, 11), *range(21, 31)]
        assert r.xpending("beltsight:objects:cam1", config.group)["pending"] == 0
        # a fresh bridge restores from the snapshot, re-fires nothing
        bridge = await start_bridge(config, server)
        try:
            assert bridge.state.line("cam1", "L1").count_in == 30
            assert bridge.reader.stats.served == 0
        finally:
            await bridge.stop()

    asyncio.run(scenario())


async def _client_cert(directory: Path) -> tuple[Path, Path]:
    key = cert_gen.generate_private_key()
    cert = cert_gen.generate_self_signed_app_certificate(
        key,
        CLIENT_URI,
        {"organizationName": "test"},
        [UniformResourceIdentifier(CLIENT_URI), DNSName(socket.gethostname())],
        extended=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    cert_path, key_path = directory / f"{directory.name}-cert.der", directory.parent / f"{directory.name}-key.pem"
    cert_path.write_bytes(cert.public_bytes(Encoding.DER))
    key_path.write_bytes(cert_gen.dump_private_key_as_pem(key))
    return cert_path, key_path


async def _secure_client(url: str, cert: Path, key: Path, user: str, password: str) -> Client:
    client = Client(url)
    client.application_uri = CLIENT_URI
    client.set_user(user)
    client.set_password(password)
    await client.set_security_string(f"Basic256Sha256,SignAndEncrypt,{cert},{key}")
    return client


def test_basic256sha256_users_and_trusted_certificates(redis_server: RedisServerFactory, tmp_path: Path) -> None:
    server = redis_server()
    trusted, other = tmp_path / "trusted", tmp_path / "untrusted"
    trusted.mkdir()
    other.mkdir()
    pw_file = tmp_path / "plc-password"
    pw_file.write_text("pl(-secret\n")
    config = make_config(
        tmp_path / "state",
        security="basic256sha256",
        trusted_dir=str(trusted),
        users={"plc": {"password_file": str(pw_file)}},
    )
    r = server.client()

    async def scenario() -> None:
        good_cert, good_key = await _client_cert(trusted)
        bad_cert, bad_key = await _client_cert(other)
        bridge = await start_bridge(config, server)
        url = f"opc.tcp://{config.opcua.listen}/beltsight"
        try:
            client = await _secure_client(url, good_cert, good_key, "plc", "pl(-secret")
            handler = Events()
            async with client:
                await subscribe(client, handler, "BeltSight/cam2/L1/CountIn")
                r.xadd("beltsight:objects:cam2", crossing("cam2", "L1", 7))
                await wait_for(lambda: len(handler.events) == 1)
                assert await read(client, "BeltSight/cam2/L1/CountIn") == 7
            with pytest.raises((UaError, OSError, asyncio.TimeoutError)):
                async with await _secure_client(url, good_cert, good_key, "plc", "wrong"):
                    pass
            with pytest.raises((UaError, OSError, asyncio.TimeoutError)):
                async with await _secure_client(url, bad_cert, bad_key, "plc", "pl(-secret"):
                    pass
            with pytest.raises((UaError, OSError, asyncio.TimeoutError)):
                async with Client(url):  # no security: no such endpoint
                    pass
            counts = opcua_server(bridge).refusals.counts
            assert counts["password"] >= 1 and counts["certificate"] >= 1
        finally:
            await bridge.stop()

    asyncio.run(scenario())
