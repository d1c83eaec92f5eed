"""Every generated file of the documentation site, as path (relative to the repository) -> bytes."""

from __future__ import annotations

from tools.docs import config_ref, layout_ref, log_events_ref, metrics_ref, status_ref
from tools.docs.discover import ROOT

REPORTS = ROOT / "tools" / "reports"
PLOTS = "docs/reports/img"


def generated() -> dict[str, bytes]:
    pages = {m.PAGE: m.render().encode() for m in (config_ref, metrics_ref, log_events_ref, layout_ref, status_ref)}
    for png in sorted([*REPORTS.glob("*.png"), *REPORTS.glob("*.svg")]):
        pages[f"{PLOTS}/{png.name}"] = png.read_bytes()
    return pages


def stale() -> list[str]:
    """The generated paths whose file is missing or differs, plus plots no report has any more."""
    want = generated()
    out = [p for p, data in want.items() if not (ROOT / p).is_file() or (ROOT / p).read_bytes() != data]
    out += [
        str(p.relative_to(ROOT))
        for p in sorted([*(ROOT / PLOTS).glob("*.png"), *(ROOT / PLOTS).glob("*.svg")])
        if str(p.relative_to(ROOT)) not in want
    ]
    return out


def write() -> list[str]:
    """Write every stale page (and remove orphaned plots); the paths changed."""
    changed = stale()
    want = generated()
    for rel in changed:
        path = ROOT / rel
        if rel in want:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(want[rel])
        else:
            path.unlink()
    return changed
