"""The bridge's floods are summarised: at most one line per interval, counting every occurrence."""

from __future__ import annotations

from structlog.testing import capture_logs

from daemon.bridge.opcua_access import Refusals


def test_refused_logins_log_one_summary_per_interval_and_count_them_all() -> None:
    refusals = Refusals()
    with capture_logs() as logs:
        for reason in ("password", "certificate", "password", "password"):
            refusals.add(reason)
    lines = [e for e in logs if e["event"] == "bridge_opcua_refused"]
    assert len(lines) == 1  # the three after the first fall inside the interval
    assert (lines[0]["password"], lines[0]["certificate"]) == (1, 0)
    assert refusals.counts == {"password": 3, "certificate": 1}
