"""The bridge's Modbus/TCP and OPC UA ports under random and mutated frames, against a real bridge
(daemon/bridge/service.py on its own event loop and thread) reading a real redis-server.

Valid frames are built byte by byte: Modbus ADUs (MBAP header + PDU: reads, writes, other function
codes, other unit ids) and OPC UA binary messages (HEL, OPN OpenSecureChannel with security None,
MSG requests on the channel that OPN opened). Hypothesis mutates them (bit flips, truncations,
length fields rewritten, bytes inserted, deleted or repeated) and sends them over raw sockets;
after each one a fresh connection still gets a right answer (a Modbus read, an OPC UA ACK). Held
connections that send nothing or half a frame, and several fuzzing connections at once, stay within
the ports' `max_connections`. Meanwhile crossings go into the objects stream, and every test ends
with a real PLC client (pymodbus and asyncua) reading the right count for all of them, the ones
written during the fuzz and one written after it.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import pytest
import redis
from asyncua import Client, ua
from asyncua.common.utils import Buffer
from asyncua.ua.ua_binary import struct_from_binary, struct_to_binary
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymodbus.client import AsyncModbusTcpClient

from daemon.bridge.registers import u32_words
from daemon.bridge.service import Bridge
from daemon.config.bridge import BridgeConfig
from daemon.core.netaddr import parse_host_port
from tests.support.bridge_harness import bridge_on_a_thread, crossing, make_config, read
from tools.kit.redis_server import RedisServer

MAX_CONNECTIONS = 16
IDLE_TIMEOUT_S = 6.0  # longer than the fuzzers run and the PLC reads, while the connections are held
FUZZERS_S = 2.0
REGISTERS = 3 * 16  # LAYOUT: cam1/L1, cam1/L2, cam2/L1, one 16-register block each
ANSWER_S = 10.0  # a generous deadline for an answer (a loaded 2-core machine), never a timing claim
STRAY_S = 0.05  # how long a mutated frame's answer, if any, is waited for
POLICY_NONE = "http://opcfoundation.org/UA/SecurityPolicy#None"
SERVICE_FAULT = 397  # ServiceFault_Encoding_DefaultBinary


# -- the plant: redis-server, the bridge on its own loop, crossings written by a thread ------------
@dataclass
class Plant:
    redis: RedisServer
    config: BridgeConfig
    bridge: Bridge
    loop: asyncio.AbstractEventLoop
    writer: redis.Redis
    count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def modbus(self) -> tuple[str, int]:
        return parse_host_port(self.config.modbus.listen or "")

    @property
    def opcua(self) -> tuple[str, int]:
        return parse_host_port(self.config.opcua.listen or "")

    @property
    def url(self) -> str:
        return f"opc.tcp://{self.config.opcua.listen}/beltsight"

    def cross(self) -> None:
        with self.lock:
            self.count += 1
            self.writer.xadd("beltsight:objects:cam1", crossing("cam1", "L1", self.count, track=self.count))

    @contextmanager
    def writing(self, every_s: float = 0.02) -> Iterator[None]:
        """Crossings into the objects stream from a thread while the block runs."""
        stop = threading.Event()

        def write() -> None:
            while not stop.wait(every_s):
                self.cross()

        writer = threading.Thread(target=write, name="crossings", daemon=True)
        writer.start()
        try:
            yield
        finally:
            stop.set()
            writer.join(30)

    def assert_plc_reads_right(self) -> None:
        """One more crossing, then pymodbus and asyncua both read the count of every crossing written."""
        self.cross()
        asyncio.run(asyncio.wait_for(self._plc_reads(self.count), 60))

    async def _plc_reads(self, expected: int) -> None:
        host, port = self.modbus
        modbus = AsyncModbusTcpClient(host, port=port, timeout=5)
        assert await modbus.connect()
        try:
            async with Client(self.url, timeout=10) as opcua:
                while True:
                    regs = await modbus.read_holding_registers(0, count=2, device_id=self.config.modbus.unit_id)
                    assert not regs.isError(), regs
                    value = await read(opcua, "BeltSight/cam1/L1/CountIn")
                    if tuple(regs.registers) == u32_words(expected) and value == expected:
                        return
                    await asyncio.sleep(0.05)
        finally:
            modbus.close()


@pytest.fixture(scope="module")
def plant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plant]:
    config = make_config(tmp_path_factory.mktemp("bridge"), max_connections=MAX_CONNECTIONS)
    config = config.model_copy(
        update={
            "modbus": config.modbus.model_copy(
                update={"max_connections": MAX_CONNECTIONS, "idle_timeout_s": IDLE_TIMEOUT_S}
            )
        }
    )
    with bridge_on_a_thread(config) as (server, bridge, loop), server.client() as writer:
        yield Plant(server, config, bridge, loop, writer)


# -- raw sockets ------------------------------------------------------------------------------------
def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def stray_answer(sock: socket.socket) -> bytes:
    """Whatever the server says (or nothing) within STRAY_S; a reset is an answer too."""
    sock.settimeout(STRAY_S)
    data = b""
    with suppress(TimeoutError, ConnectionError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def send_quietly(sock: socket.socket, data: bytes) -> None:
    with suppress(ConnectionError):  # the server may close on the first bad byte; that is an answer
        sock.sendall(data)


# -- mutations --------------------------------------------------------------------------------------
@st.composite
def mutated(draw: st.DrawFn, frame: bytes, length_at: int, length_size: int) -> bytes:
    """`frame` with 1-4 mutations; `length_at`/`length_size`: where its length field is."""
    data = bytearray(frame)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "length", "insert", "delete", "repeat", "byte"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[at:]
        elif op == "length" and len(data) >= length_at + length_size:
            bound = (1 << (8 * length_size)) - 1
            value = draw(st.sampled_from([0, 1, 2, len(data) - 1, len(data) + 1, bound]) | st.integers(0, bound))
            order = ">" if length_size == 2 else "<"
            struct.pack_into(order + ("H" if length_size == 2 else "I"), data, length_at, max(0, value) & bound)
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif op == "repeat":
            data += data[at:]
    return bytes(data)


# -- Modbus -----------------------------------------------------------------------------------------
def mbap(tid: int, unit: int, pdu: bytes) -> bytes:
    return struct.pack(">HHHB", tid, 0, len(pdu) + 1, unit) + pdu


@st.composite
def modbus_pdus(draw: st.DrawFn) -> bytes:
    fc = draw(st.sampled_from([3, 4, 3, 4, 6, 16, 23, 1, 2, 5, 8, 15, 43, 0, 0x83, 255]))
    address, count = draw(st.integers(0, 70)), draw(st.integers(0, 130))
    if fc in (3, 4, 1, 2):
        return struct.pack(">BHH", fc, address, count)
    if fc in (6, 5):
        return struct.pack(">BHH", fc, address, draw(st.integers(0, 0xFFFF)))
    values = draw(st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=10))
    body = struct.pack(f">{len(values)}H", *values)
    if fc in (16, 15):
        return struct.pack(">BHHB", fc, address, len(values), len(body)) + body
    if fc == 23:
        return struct.pack(">BHHHHB", fc, address, count, address, len(values), len(body)) + body
    return bytes([fc]) + draw(st.binary(max_size=8))


def modbus_answer(sock: socket.socket) -> tuple[int, int, bytes]:
    """(transaction id, unit, pdu) of the next ADU."""
    tid, pid, length, unit = struct.unpack(">HHHB", recv_exactly(sock, 7))
    assert pid == 0 and 2 <= length <= 254, (pid, length)
    return tid, unit, recv_exactly(sock, length - 1)


def assert_modbus_serves(plant: Plant) -> None:
    """A fresh connection's read of cam1/L1's first registers gets its right-shaped answer."""
    with socket.create_connection(plant.modbus, timeout=ANSWER_S) as sock:
        sock.sendall(mbap(0x4242, plant.config.modbus.unit_id, struct.pack(">BHH", 3, 0, 4)))
        tid, unit, pdu = modbus_answer(sock)
    assert (tid, unit, pdu[:2]) == (0x4242, plant.config.modbus.unit_id, b"\x03\x08"), pdu


def check_modbus_answer(request: bytes, pdu: bytes, unit_id: int) -> None:
    """What an unmutated request must get: the registers it read, or the documented exception."""
    fc, unit = request[7], request[6]
    if fc in (3, 4) and unit == unit_id:
        address, count = struct.unpack(">HH", request[8:12])
        if 1 <= count <= 125 and address + count <= REGISTERS:
            assert pdu[:2] == bytes([fc, 2 * count]) and len(pdu) == 2 + 2 * count, pdu
            return
    # anything else, writes included, gets an exception, never a register it has not got nor a write done:
    # its function code + 0x80 (0x80 alone when pymodbus cannot decode it: a count of 0, for one) and
    # illegal function/address/value, device failure (a request with an exception's function code,
    # which pymodbus decodes as an exception) or gateway target failed (another unit)
    assert len(pdu) == 2 and pdu[0] in (fc | 0x80, 0x80) and pdu[1] in (0x01, 0x02, 0x03, 0x04, 0x0B), pdu
    if fc == 6 and unit == unit_id and struct.unpack(">H", request[8:10])[0] < REGISTERS:
        assert pdu == b"\x86\x01", pdu  # a write to a served register: refused as a function


@st.composite
def modbus_frames(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """(the valid ADU, what is sent: it, or it mutated)."""
    unit = draw(st.sampled_from([1, 1, 1, 0, 2, 255]))
    frame = mbap(draw(st.integers(0, 0xFFFF)), unit, draw(modbus_pdus()))
    sent = draw(st.just(frame) | mutated(frame, 4, 2))
    return frame, sent


def fuzz_modbus_once(plant: Plant, frame: bytes, sent: bytes) -> None:
    with socket.create_connection(plant.modbus, timeout=ANSWER_S) as sock:
        send_quietly(sock, sent)
        if sent == frame:
            tid, unit, pdu = modbus_answer(sock)
            assert (tid, unit) == (struct.unpack(">H", frame[:2])[0], frame[6])
            check_modbus_answer(frame, pdu, plant.config.modbus.unit_id)
        else:
            stray_answer(sock)
    assert_modbus_serves(plant)


def test_mutated_modbus_frames_leave_the_port_serving(plant: Plant) -> None:
    @settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
    @given(modbus_frames())
    def fuzz(frames: tuple[bytes, bytes]) -> None:
        fuzz_modbus_once(plant, *frames)

    with plant.writing():
        fuzz()
    plant.assert_plc_reads_right()


# -- OPC UA -----------------------------------------------------------------------------------------
def ua_string(value: bytes | None) -> bytes:
    return struct.pack("<i", -1) if value is None else struct.pack("<i", len(value)) + value


def hello(url: str) -> bytes:
    body = struct.pack("<IIIII", 0, 65536, 65536, 0, 0) + ua_string(url.encode())
    return b"HELF" + struct.pack("<I", 8 + len(body)) + body


def open_channel() -> bytes:
    request = ua.OpenSecureChannelRequest()
    request.Parameters = ua.OpenSecureChannelParameters(
        ClientProtocolVersion=0,
        RequestType=ua.SecurityTokenRequestType.Issue,
        SecurityMode=ua.MessageSecurityMode.None_,
        ClientNonce=b"",
        RequestedLifetime=600_000,
    )
    body = struct.pack("<I", 0) + ua_string(POLICY_NONE.encode()) + ua_string(None) + ua_string(None)
    body += struct.pack("<II", 1, 1) + struct_to_binary(request)
    return b"OPNF" + struct.pack("<I", 8 + len(body)) + body


def secure_message(channel: int, token: int, request: object, sequence: int = 2) -> bytes:
    body = struct.pack("<IIII", channel, token, sequence, sequence) + struct_to_binary(request)
    return b"MSGF" + struct.pack("<I", 8 + len(body)) + body


def ua_answer(sock: socket.socket) -> tuple[bytes, bytes]:
    """(message type with chunk type, body) of the next OPC UA message."""
    header = recv_exactly(sock, 8)
    size = struct.unpack("<I", header[4:])[0]
    assert 8 <= size <= 1 << 24, header
    return header[:4], recv_exactly(sock, size - 8)


def handshake(sock: socket.socket, url: str) -> tuple[int, int]:
    """HEL/ACK, OPN/OPN on security None: the channel id and token id."""
    sock.sendall(hello(url))
    kind, _ = ua_answer(sock)
    assert kind == b"ACKF", kind
    sock.sendall(open_channel())
    kind, body = ua_answer(sock)
    assert kind == b"OPNF", (kind, body[:200])
    buf = Buffer(body)
    channel = struct.unpack("<I", buf.read(4))[0]
    for _ in range(3):  # policy uri, sender certificate, receiver thumbprint
        length = struct.unpack("<i", buf.read(4))[0]
        buf.read(max(0, length))
    buf.read(8)  # sequence number, request id
    response = struct_from_binary(ua.OpenSecureChannelResponse, buf)
    assert response.Parameters.SecurityToken.ChannelId == channel
    return channel, response.Parameters.SecurityToken.TokenId


def requests(url: str) -> list[object]:
    """MSG requests a PLC's first steps send on a channel."""
    endpoints = ua.GetEndpointsRequest()
    endpoints.Parameters.EndpointUrl = url
    session = ua.CreateSessionRequest()
    session.Parameters.EndpointUrl = url
    session.Parameters.SessionName = "fuzz"
    session.Parameters.RequestedSessionTimeout = 10_000
    session.Parameters.ClientNonce = b"\x01" * 32
    find = ua.FindServersRequest()
    find.Parameters.EndpointUrl = url
    read_request = ua.ReadRequest()  # without a session: an error status, never a value
    read_request.Parameters.NodesToRead = [ua.ReadValueId(NodeId=ua.NodeId(2258), AttributeId=ua.AttributeIds.Value)]
    return [endpoints, session, find, read_request, ua.CloseSecureChannelRequest()]


def assert_opcua_serves(plant: Plant) -> None:
    """A fresh connection's Hello gets its Acknowledge."""
    with socket.create_connection(plant.opcua, timeout=ANSWER_S) as sock:
        sock.sendall(hello(plant.url))
        kind, _ = ua_answer(sock)
    assert kind == b"ACKF", kind


@st.composite
def opcua_frames(draw: st.DrawFn) -> tuple[str, int, bool]:
    """(stage mutated: HEL, OPN or MSG; which MSG request; mutate it or send it whole)."""
    return draw(st.sampled_from(["HEL", "OPN", "MSG", "MSG"])), draw(st.integers(0, 4)), draw(st.booleans())


def fuzz_opcua_once(plant: Plant, stage: str, which: int, mutate: Callable[[bytes], bytes] | None) -> None:
    with socket.create_connection(plant.opcua, timeout=ANSWER_S) as sock:
        if stage == "HEL":
            frame = hello(plant.url)
        elif stage == "OPN":
            sock.sendall(hello(plant.url))
            assert ua_answer(sock)[0] == b"ACKF"
            frame = open_channel()
        else:
            channel, token = handshake(sock, plant.url)
            frame = secure_message(channel, token, requests(plant.url)[which])
        if mutate is None:
            sock.sendall(frame)
            if stage != "MSG" or which != 4:  # CloseSecureChannel: an answer or just the close
                kind, body = ua_answer(sock)
                assert kind == {"HEL": b"ACKF", "OPN": b"OPNF"}.get(stage, b"MSGF"), (kind, body[:200])
                if stage == "MSG":  # the response's type: a ServiceFault for a Read without a session
                    assert (body[16:18], struct.unpack("<H", body[18:20])[0] == SERVICE_FAULT) == (
                        b"\x01\x00",
                        which == 3,
                    )
        else:
            send_quietly(sock, mutate(frame))
            stray_answer(sock)
    assert_opcua_serves(plant)


def test_mutated_opcua_messages_leave_the_port_serving(plant: Plant) -> None:
    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
    @given(opcua_frames(), st.data())
    def fuzz(choice: tuple[str, int, bool], data: st.DataObject) -> None:
        stage, which, mutate = choice

        def mutation(frame: bytes) -> bytes:
            return data.draw(mutated(frame, 4, 4))

        fuzz_opcua_once(plant, stage, which, mutation if mutate else None)

    with plant.writing():
        fuzz()
    plant.assert_plc_reads_right()


# -- held connections and many fuzzers at once -------------------------------------------------------
def blast(plant: Plant, seed: int, until: float, errors: list[BaseException], sent: list[int]) -> None:
    """Seeded random mutated frames on both ports, one connection at a time, until `until`."""
    rng = random.Random(seed)
    frames = [mbap(1, 1, struct.pack(">BHH", 3, 0, 4)), hello(plant.url), open_channel()]
    try:
        while time.monotonic() < until:
            frame = bytearray(rng.choice(frames))
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(frame)) if frame else 0
                if rng.random() < 0.5 and frame:
                    frame[at] ^= 1 << rng.randrange(8)
                elif rng.random() < 0.5:
                    del frame[at:]
                else:
                    frame[at:at] = rng.randbytes(rng.randint(1, 12))
            target = plant.modbus if frame[:1] == b"\x00" or rng.random() < 0.3 else plant.opcua
            with socket.create_connection(target, timeout=ANSWER_S) as sock:
                send_quietly(sock, bytes(frame))
                stray_answer(sock)
            sent.append(seed)
    except BaseException as exc:  # handed to the test's thread
        errors.append(exc)


def test_held_connections_and_many_fuzzers_at_once_leave_the_plc_reading(plant: Plant) -> None:
    half_read = mbap(7, 1, struct.pack(">BHH", 3, 0, 4))
    held: list[socket.socket] = []
    try:
        for port, frame in ((plant.modbus, half_read), (plant.opcua, hello(plant.url))):
            for i in range(6):  # 6 + 6 held, 4 fuzzers, the PLC and the probes: within MAX_CONNECTIONS
                sock = socket.create_connection(port, timeout=ANSWER_S)
                held.append(sock)
                if i % 3 == 1:
                    sock.sendall(frame[: len(frame) // 2])  # half a frame, then nothing
                elif i % 3 == 2:
                    sock.sendall(frame[:5])  # less than a header
        errors: list[BaseException] = []
        sent: list[int] = []
        until = time.monotonic() + FUZZERS_S
        fuzzers = [threading.Thread(target=blast, args=(plant, seed, until, errors, sent)) for seed in range(4)]
        with plant.writing():
            for thread in fuzzers:
                thread.start()
            for thread in fuzzers:
                thread.join(60)
            assert not errors, errors
            assert set(sent) == set(range(4)), "a fuzzer never got a frame through"
            assert_modbus_serves(plant)
            assert_opcua_serves(plant)
        plant.assert_plc_reads_right()  # with every held connection still open
        # the held Modbus connections are closed once idle for idle_timeout_s (OPC UA's after its
        # activation window, 30 s, longer than this test waits)
        for sock in held[:6]:
            sock.settimeout(IDLE_TIMEOUT_S + ANSWER_S)
            with suppress(ConnectionError):
                assert sock.recv(1) == b""
    finally:
        for sock in held:
            sock.close()
