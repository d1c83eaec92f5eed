"""Where the lab's run output goes (reports, plots, logs, flame graphs): outside the repository.

`reports_dir()` is `$BELTSIGHT_REPORTS_DIR` when set, else `$XDG_STATE_HOME/beltsight/reports`
(`~/.local/state/beltsight/reports` where XDG_STATE_HOME is unset), created on demand. The XDG base
directory specification puts there what a program keeps between runs that is neither configuration
nor a cache anyone may delete: logs and history, which a run's report is. `run_dir("bench")` is a
fresh folder under it named by the time (`bench-20261206-193000`). A tool's `--out` still picks any
other place; each tool prints the paths it wrote.

The repository holds no run output: the figures the docs show are a curated set under
`docs/reports/img/` (tests/test_architecture.py checks both).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "BELTSIGHT_REPORTS_DIR"
WHERE = "$BELTSIGHT_REPORTS_DIR, else ~/.local/state/beltsight/reports"
"""For a tool's help text."""


def reports_dir() -> Path:
    """The run-output folder (absolute; created if missing)."""
    explicit = os.environ.get(ENV)
    if explicit:
        path = Path(explicit).expanduser()
    else:
        state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        path = Path(state).expanduser() / "beltsight" / "reports"
    path = path.resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_dir(name: str) -> Path:
    """A new folder `<name>-<YYYYmmdd-HHMMSS>` under `reports_dir()` for one run's files (not created:
    the tool creates it when it writes)."""
    return reports_dir() / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
