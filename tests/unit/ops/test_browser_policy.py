"""The browser checks' rules (`daemon.ops.http.browser`, `daemon.core.netaddr`) and their config keys."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from daemon.config.health import HealthConfig
from daemon.core.netaddr import loopback_name, normalise_origin
from daemon.ops.http.browser import BrowserPolicy, loopback_only


@pytest.mark.parametrize(
    ("value", "origin"),
    [
        ("http://127.0.0.1:9108", "http://127.0.0.1:9108"),
        ("HTTP://LocalHost:80", "http://localhost"),
        ("https://hmi.example:443/", "https://hmi.example"),
        ("http://[::1]:9108", "http://[::1]:9108"),
        ("null", None),
        ("file://", None),
        ("http://user@host", None),
        ("http://host/path", None),
        ("http://host:99999", None),
        ("javascript:alert(1)", None),
        ("", None),
    ],
)
def test_origins_are_normalised_or_refused(value: str, origin: str | None) -> None:
    assert normalise_origin(value) == origin


def test_loopback_names_are_the_ones_no_resolver_can_rebind() -> None:
    assert all(map(loopback_name, ["localhost", "a.localhost", "127.0.0.1", "127.9.9.9", "::1", "[::1]", "LOCALHOST."]))
    assert not any(map(loopback_name, ["localhost.evil.example", "evil.example", "10.0.0.1", "0.0.0.0", ""]))
    assert loopback_only("127.0.0.1") and loopback_only("[::1]") and loopback_only("localhost")
    assert not loopback_only("") and not loopback_only("0.0.0.0") and not loopback_only("box.example")


def test_the_host_check_applies_on_loopback_only() -> None:
    loopback = BrowserPolicy.of(loopback=True, tls=False, hosts=["proxy.example", "other.example:8443"])
    assert loopback.host_allowed("127.0.0.1:9108") and loopback.host_allowed(None)
    assert loopback.host_allowed("proxy.example:1234") and loopback.host_allowed("other.example:8443")
    assert not loopback.host_allowed("other.example:9108") and not loopback.host_allowed("evil.example")
    assert not loopback.host_allowed("127.0.0.1:9108/x") and not loopback.host_allowed("a@127.0.0.1")
    assert BrowserPolicy.of(loopback=False, tls=False).host_allowed("evil.example")


def test_the_own_origin_follows_the_scheme_served() -> None:
    plain = BrowserPolicy.of(loopback=True, tls=False)
    tls = BrowserPolicy.of(loopback=True, tls=True, origins=["https://hmi.example"])
    assert plain.origin_allowed("http://127.0.0.1:9108", "127.0.0.1:9108")
    assert not plain.origin_allowed("https://127.0.0.1:9108", "127.0.0.1:9108")
    assert tls.origin_allowed("https://127.0.0.1:9108", "127.0.0.1:9108")
    assert tls.origin_allowed("https://hmi.example:443", "127.0.0.1:9108")
    assert not tls.origin_allowed("https://127.0.0.1:9108", None)


def test_the_config_keys_refuse_what_is_not_a_host_or_an_origin() -> None:
    cfg = HealthConfig.model_validate(
        {"allowed_hosts": ["Box.Example", "[::1]:80"], "allowed_origins": ["HTTPS://hmi.example:443"]}
    )
    assert cfg.allowed_hosts == ["box.example", "[::1]:80"] and cfg.allowed_origins == ["https://hmi.example"]
    assert HealthConfig().allowed_hosts == [] and HealthConfig().allowed_origins == []
    with pytest.raises(ValidationError, match="allowed_hosts"):
        HealthConfig.model_validate({"allowed_hosts": ["http://box.example"]})
    with pytest.raises(ValidationError, match="allowed_origins"):
        HealthConfig.model_validate({"allowed_origins": ["hmi.example"]})
