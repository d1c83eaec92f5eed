"""The named enumerations (status kinds, drop reasons): each meaning given once, for every member."""

from __future__ import annotations

from daemon.core.drop_reasons import DROP_REASONS, reasons
from daemon.core.status_kinds import STATUS_KINDS, kinds


def test_every_status_kind_and_drop_reason_is_described_and_none_extra() -> None:
    assert list(STATUS_KINDS) == list(kinds())
    assert list(DROP_REASONS) == list(reasons())
    assert all(text.strip() for text in [*STATUS_KINDS.values(), *DROP_REASONS.values()])
