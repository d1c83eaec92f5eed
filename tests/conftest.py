"""Shared fixtures live in plugin modules, one per real service, so they can grow independently."""

import os
import secrets

import pytest
from hypothesis import settings as hypothesis_settings

pytest_plugins = [
    "tests.support.fault_fixtures",
    "tests.support.fixtures_redis",
    "tests.support.fixtures_redis_cluster_tls",
    "tests.support.fixtures_redis_sentinel",
    "tests.support.fixtures_gige",
    "tests.support.fixtures_rtsp",
    "tests.support.mosquitto",
]


# -- Hypothesis (tests/fuzz): a fresh seed every CI run, printed, and named again with any failure ---
# `dev` (local): random per test, failing examples kept in .hypothesis/ and replayed first.
# `ci`: no example database; one seed for the whole run, drawn afresh unless `--hypothesis-seed=N`
# names one, printed in the header, and printed again with the replay command under each failure.
hypothesis_settings.register_profile("dev", deadline=None, print_blob=True)
hypothesis_settings.register_profile("ci", deadline=None, derandomize=False, print_blob=True, database=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
_HYPOTHESIS_SEED: list[str] = []  # the run's seed under the ci profile


@pytest.hookimpl(tryfirst=True)  # before Hypothesis' own pytest_configure reads the option
def pytest_configure(config: pytest.Config) -> None:
    if hypothesis_settings.get_current_profile_name() != "ci":
        return
    seed = config.getoption("hypothesis_seed")
    if seed is None:
        seed = str(secrets.randbelow(2**32))
        config.option.hypothesis_seed = seed
    _HYPOTHESIS_SEED.append(str(seed))


def pytest_report_header(config: pytest.Config) -> str | None:
    if not _HYPOTHESIS_SEED:
        return None
    seed = _HYPOTHESIS_SEED[0]
    return f"hypothesis seed: {seed} (replay this run's examples with --hypothesis-seed={seed})"


def _hypothesis_replay(item: pytest.Item, report: pytest.TestReport) -> None:
    """Under a failed Hypothesis test, the command that replays its examples."""
    if _HYPOTHESIS_SEED and report.failed and getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        command = f"python -m pytest '{item.nodeid}' --hypothesis-seed={_HYPOTHESIS_SEED[0]}"
        report.sections.append(("hypothesis seed", f"replay with: HYPOTHESIS_PROFILE=ci {command}"))
        if command not in _HYPOTHESIS_FAILED:
            _HYPOTHESIS_FAILED.append(command)


_HYPOTHESIS_FAILED: list[str] = []


# -- under CI, a skip outside the `gpu` marker is a failure ----------------------------------------
_CI_SKIPS: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """With `CI=true`, a test that skipped and is not marked `gpu` fails instead: in CI every
    test but the GPU ones must run (tools/bootstrap.sh --dev installs what they need)."""
    report: pytest.TestReport = yield
    _hypothesis_replay(item, report)
    if (
        report.skipped
        and not hasattr(report, "wasxfail")
        and os.environ.get("CI", "").lower() == "true"
        and item.get_closest_marker("gpu") is None
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _CI_SKIPS.append(f"{item.nodeid}: {reason}")
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI=true, which only the `gpu` marker may do: {reason}\n"
            "(install what it needs with tools/bootstrap.sh --dev, or mark it gpu if it needs a CUDA GPU)"
        )
    return report


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A whole module skipped at import (`pytest.importorskip`) counts too, outside tests/gpu/;
    it cannot fail its collection without stopping the run, so the session's exit status says it."""
    if report.skipped and os.environ.get("CI", "").lower() == "true" and not report.nodeid.startswith("tests/gpu/"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _CI_SKIPS.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _CI_SKIPS and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _HYPOTHESIS_SEED:  # the header is hidden under -q: the seed is said again at the end
        terminalreporter.write_line(f"hypothesis seed: {_HYPOTHESIS_SEED[0]}")
    if _HYPOTHESIS_FAILED:
        terminalreporter.section(f"hypothesis seed {_HYPOTHESIS_SEED[0]}: replay the failures with", red=True)
        for command in _HYPOTHESIS_FAILED:
            terminalreporter.line(f"HYPOTHESIS_PROFILE=ci {command}")
    if _CI_SKIPS:
        terminalreporter.section("skipped outside the gpu marker under CI=true (counted as failures)", red=True)
        for line in _CI_SKIPS:
            terminalreporter.line(line)
