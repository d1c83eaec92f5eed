"""daemon.ops.signals.Requests: a stop or reload asked before the process's object exists is kept and
replayed once it is attached; after that they go straight through."""

from __future__ import annotations

from daemon.ops.signals import Requests


def test_what_is_asked_before_attach_is_replayed_reload_first_then_stop() -> None:
    calls: list[str] = []
    requests = Requests()
    requests.request_stop()
    requests.request_reload()
    assert calls == [] and requests.stop_pending and requests.reload_pending
    requests.attach(lambda: calls.append("stop"), lambda: calls.append("reload"))
    assert calls == ["reload", "stop"]
    assert not requests.stop_pending and not requests.reload_pending


def test_nothing_asked_nothing_replayed_and_later_requests_go_straight_through() -> None:
    calls: list[str] = []
    requests = Requests()
    requests.attach(lambda: calls.append("stop"), lambda: calls.append("reload"))
    assert calls == []
    requests.request_reload()
    requests.request_stop()
    assert calls == ["reload", "stop"]
