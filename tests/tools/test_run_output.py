"""Run output lands outside the repository: `$BELTSIGHT_REPORTS_DIR`, else the XDG state folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.kit import run_output

ROOT = Path(__file__).resolve().parents[2]


def test_the_variable_names_the_folder_and_it_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(run_output.ENV, str(tmp_path / "mine" / "reports"))
    got = run_output.reports_dir()
    assert got == tmp_path / "mine" / "reports" and got.is_dir()


def test_without_it_the_xdg_state_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(run_output.ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert run_output.reports_dir() == tmp_path / "state" / "beltsight" / "reports"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    got = run_output.reports_dir()
    assert got == tmp_path / "home" / ".local" / "state" / "beltsight" / "reports" and got.is_dir()
    assert ROOT not in got.parents


def test_a_run_gets_its_own_named_folder_under_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(run_output.ENV, str(tmp_path))
    got = run_output.run_dir("bench")
    assert got.parent == tmp_path and got.name.startswith("bench-") and len(got.name) == len("bench-20261206-193000")
