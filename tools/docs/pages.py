"""Every generated file of the documentation site, as path (relative to the repository) -> bytes.

The report figures under docs/reports/img are not generated: they are a curated set, each put
there by `python -m tools.docs.figure` from a run's output, beside the command that made it."""

from __future__ import annotations

from tools.docs import config_ref, layout_ref, log_events_ref, metrics_ref, status_ref
from tools.docs.discover import ROOT


def generated() -> dict[str, bytes]:
    return {m.PAGE: m.render().encode() for m in (config_ref, metrics_ref, log_events_ref, layout_ref, status_ref)}


def stale() -> list[str]:
    """The generated paths whose file is missing or differs."""
    return [p for p, data in generated().items() if not (ROOT / p).is_file() or (ROOT / p).read_bytes() != data]


def write() -> list[str]:
    """Write every stale page; the paths changed."""
    changed = stale()
    want = generated()
    for rel in changed:
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(want[rel])
    return changed
