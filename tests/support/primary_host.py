"""A Sparkplug 3.0 primary host played by the test: a paho client publishing `spBv1.0/STATE/<id>` as a
real host application does, with the timestamps the test chooses.

    with ScriptedPrimaryHost(broker.url, "scada") as scada:
        scada.online(2000)       # CONNECT with the will {"online": false, "timestamp": 2000}, then
                                 # {"online": true, "timestamp": 2000}, retained, QoS 1
        scada.crash()            # the connection dropped without DISCONNECT: the broker publishes the will
        scada.publish(True, 5)   # any retained STATE (a stale one, say) from a client of its own
        scada.offline(3000)      # a clean stop: {"online": false, "timestamp": 3000}, then DISCONNECT
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import paho.mqtt.client as paho

CONNECT_TIMEOUT_S = 30.0


def state_payload(online: bool, timestamp: int) -> bytes:
    return json.dumps({"online": online, "timestamp": timestamp}).encode()


class ScriptedPrimaryHost:
    def __init__(self, url: str, host_id: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 1883
        self.topic = f"spBv1.0/STATE/{host_id}"
        self._client: paho.Client | None = None
        self._clients = 0

    def _connect(self, will_timestamp: int | None = None) -> paho.Client:
        self._clients += 1
        client_id = f"scripted-host-{id(self)}-{self._clients}"
        client = paho.Client(client_id=client_id, clean_session=True, reconnect_on_failure=False)
        if will_timestamp is not None:
            client.will_set(self.topic, state_payload(False, will_timestamp), qos=1, retain=True)
        client.connect(self.host, self.port, keepalive=30)
        client.loop_start()
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while not client.is_connected():
            if time.monotonic() > deadline:
                self._close(client)
                raise AssertionError("the scripted primary host could not connect")
            time.sleep(0.01)
        return client

    def _send(self, client: paho.Client, online: bool, timestamp: int) -> None:
        info = client.publish(self.topic, state_payload(online, timestamp), qos=1, retain=True)
        info.wait_for_publish(CONNECT_TIMEOUT_S)
        assert info.is_published(), "the broker did not acknowledge the STATE"

    @staticmethod
    def _close(client: paho.Client, *, clean: bool = True) -> None:
        if clean:
            client.disconnect()
        client.loop_stop()
        client._reset_sockets()  # paho 1.x leaves its wake-up socket pair to the GC

    def online(self, timestamp: int) -> None:
        """A new host session (the previous one ended cleanly first): its will, then online."""
        self._end()
        self._client = self._connect(will_timestamp=timestamp)
        self._send(self._client, True, timestamp)

    def offline(self, timestamp: int) -> None:
        """A clean stop: offline published, then DISCONNECT (the will is dropped)."""
        client = self._client or self._connect()
        self._client = None
        self._send(client, False, timestamp)
        self._close(client)

    def crash(self) -> None:
        """The host's connection ends without DISCONNECT: the broker publishes its will."""
        client, self._client = self._client, None
        assert client is not None, "no host session to crash"
        sock = client.socket()
        if isinstance(sock, socket.socket):
            sock.shutdown(socket.SHUT_RDWR)
        self._close(client, clean=False)

    def publish(self, online: bool, timestamp: int) -> None:
        """A retained STATE from a client of its own (the host session, if any, stays)."""
        client = self._connect()
        try:
            self._send(client, online, timestamp)
        finally:
            self._close(client)

    def _end(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            self._close(client)

    def __enter__(self) -> ScriptedPrimaryHost:
        return self

    def __exit__(self, *_: object) -> None:
        self._end()
