"""The `[bridge.sparkplug]` section: the bridge as an MQTT Sparkplug B edge node (daemon.bridge.sparkplug).

```toml
[bridge.sparkplug]
url = "mqtts://broker.plant.example:8883"   # "" (the default) turns Sparkplug off; mqtt:// is plain TCP
group_id = "beltsight"
edge_node_id = "line-3"
username = "beltsight"
password_file = "/run/credentials/beltsight-bridge.service/mqtt-password"
ca_file = "/etc/beltsight/mqtt-ca.pem"       # mqtts://: the broker's CA (absent: the system's CAs)
cert_file = "/etc/beltsight/mqtt-client.pem" # mqtts://: a client certificate, with key_file
key_file = "/etc/beltsight/mqtt-client.key"
primary_host_id = "ignition"                # Sparkplug 3.0: births only while this host's STATE says online
json_topics = false                         # also beltsight/<camera>/crossed as plain JSON
```

Topics: `spBv1.0/<group_id>/{NBIRTH,NDEATH,NCMD}/<edge_node_id>` and
`spBv1.0/<group_id>/{DBIRTH,DDATA}/<edge_node_id>/<camera>`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Self
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, model_validator

from daemon.config.base import Section

_TOPIC_ID = re.compile(r"^[^/+#]{1,128}$")


def _url(v: str) -> str:
    if not v:
        return ""
    parts = urlsplit(v)
    if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
        raise ValueError("must be mqtt://host[:port] or mqtts://host[:port]")
    if parts.username or parts.password:
        raise ValueError("no user or password in the url: use username and password_file")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("must be mqtt://host[:port] or mqtts://host[:port], nothing after the port")
    _ = parts.port  # ValueError on a bad port
    return v


def _topic_id(v: str) -> str:
    if not _TOPIC_ID.match(v):
        raise ValueError("must be 1-128 characters without '/', '+' or '#' (a Sparkplug topic element)")
    return v


BrokerUrl = Annotated[str, AfterValidator(_url)]
TopicId = Annotated[str, AfterValidator(_topic_id)]


class SparkplugConfig(Section):
    url: BrokerUrl = ""
    """Broker: `mqtt://host[:port]` (default port 1883) or `mqtts://host[:port]` (TLS, default 8883);
    empty: no Sparkplug."""
    group_id: TopicId = "beltsight"
    """Sparkplug group id (the topic's second element)."""
    edge_node_id: TopicId = "bridge"
    """Sparkplug edge node id: this bridge. Each camera is a device under it."""
    primary_host_id: TopicId | None = None
    """Sparkplug 3.0 primary host (Ignition: the MQTT Engine's Primary Host ID): births only once that
    host's retained `spBv1.0/STATE/<id>` says online, and the session ends (NDEATH, then a new CONNECT
    that waits for the host) when it says offline, so nothing is published while the host cannot
    receive it; crossings meanwhile are kept as in a broker outage (`offline_buffer`). A STATE older
    than the last one accepted (its `timestamp`) is ignored. Absent: births right after CONNACK."""
    client_id: str = Field("", max_length=200)
    """MQTT client id; empty: `beltsight-<group_id>-<edge_node_id>`."""
    username: str | None = None
    """MQTT user name; absent: connect without one."""
    password_file: Path | None = None
    """File holding the MQTT password (e.g. a systemd credential), read when the bridge starts;
    never logged. Needs `username`."""
    ca_file: Path | None = None
    """mqtts://: PEM CA bundle the broker's certificate is checked against; absent: the system's CAs."""
    cert_file: Path | None = None
    """mqtts://: client certificate (PEM) for brokers that require one; set with `key_file`."""
    key_file: Path | None = None
    """mqtts://: private key (PEM) of `cert_file`."""
    keepalive_s: int = Field(30, ge=5, le=3600)
    """MQTT keep-alive: the broker publishes NDEATH (the will) after 1.5 times this without traffic."""
    reconnect_max_s: float = Field(10.0, ge=0.1)
    """Longest wait between broker reconnect attempts (capped exponential backoff, full jitter)."""
    offline_buffer: int = Field(10_000, ge=0, le=1_000_000)
    """Crossings kept while the broker is unreachable, published after the next DBIRTH as historical
    DDATA (`is_historical`), oldest first; past this the oldest are dropped and counted."""
    json_topics: bool = False
    """Also publish each crossing as a JSON object on `beltsight/<camera>/crossed` (QoS 1), for
    consumers without Sparkplug."""

    @model_validator(mode="after")
    def _pairs(self) -> Self:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together")
        if self.password_file is not None and self.username is None:
            raise ValueError("password_file needs username")
        tls_files = self.ca_file or self.cert_file
        if tls_files and self.url and not self.url.startswith("mqtts://"):
            raise ValueError("ca_file/cert_file/key_file need an mqtts:// url")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    def host_port(self) -> tuple[str, int, bool]:
        """(host, port, tls) of `url`."""
        parts = urlsplit(self.url)
        tls = parts.scheme == "mqtts"
        return parts.hostname or "", parts.port or (8883 if tls else 1883), tls

    def mqtt_client_id(self) -> str:
        return self.client_id or f"beltsight-{self.group_id}-{self.edge_node_id}"


__all__ = ["SparkplugConfig"]
