"""The documentation site: it builds strictly, its generated pages are current, every config key is on the
reference page, and reference pages carry no commit hashes or development narratives."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.docs import config_ref, pages

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Reports may name the commit and the versions they measured; every other page is reference.
REPORTS = DOCS / "reports"
HEX = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")
NARRATIVE = re.compile(
    r"this round|last session|earlier (?:live )?runs?\b|earlier round|an earlier (?:live )?run|\(before[:,]|"
    r"until now|not done this round|issue #\d+|round's code",
    re.IGNORECASE,
)


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("material", reason="mkdocs-material is in the dev extra")
    start = time.monotonic()
    result = mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    print(f"mkdocs build --strict: {time.monotonic() - start:.1f} s")
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "integrations" / "plc-bridge" / "index.html").is_file()


@pytest.mark.slow
def test_a_broken_link_or_a_page_outside_the_nav_fails_the_build(tmp_path: Path) -> None:
    """The strict build is a real check: a copy of the site with one defect of each kind fails."""
    pytest.importorskip("material", reason="mkdocs-material is in the dev extra")
    for defect in ("link", "orphan"):
        copy = tmp_path / defect
        shutil.copytree(DOCS, copy / "docs")
        shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
        if defect == "link":
            page = copy / "docs" / "concepts.md"
            page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
        else:
            (copy / "docs" / "forgotten.md").write_text("# Not in the nav\n")
        result = mkdocs_build(copy / "mkdocs.yml", copy / "site")
        assert result.returncode != 0, defect
        assert ("no-such-page.md" if defect == "link" else "forgotten.md") in result.stderr + result.stdout


def test_the_generated_pages_are_current() -> None:
    assert pages.stale() == [], "generated docs are stale: run `.venv/bin/python -m tools.docs`"


def test_the_check_notices_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--check` against a copy whose metrics page lost a row."""
    for rel in pages.generated():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    monkeypatch.setattr(pages, "ROOT", tmp_path)
    assert pages.stale() == []
    page = tmp_path / "docs/operations/metrics.md"
    page.write_text("\n".join(x for x in page.read_text().splitlines() if "beltsight_camera_up" not in x))
    assert pages.stale() == ["docs/operations/metrics.md"]
    assert pages.write() == ["docs/operations/metrics.md"]
    assert pages.stale() == []


def test_every_config_key_is_on_the_reference_page() -> None:
    text = (ROOT / config_ref.PAGE).read_text()
    found = config_ref.keys()
    assert len(found) > 100
    missing = [k.path for k in found if f"`{k.path}`" not in text]
    assert missing == []
    assert "`cameras[].lines[].gates[].distance_mm`" in text and "`BELTSIGHT_REDIS__URL`" in text


def reference_pages() -> list[Path]:
    return [p for p in sorted(DOCS.rglob("*.md")) if REPORTS not in p.parents]


def test_the_patterns_catch_what_they_are_for() -> None:
    assert HEX.search("A fourth association stage (7c937c4) takes")
    assert HEX.search("on commit 458e3f7 with")
    assert not HEX.search('`{"reject":1733070000123}` and 0x01, 40001-40016, sha256, deadline')
    assert NARRATIVE.search("(an earlier live run lost a part this way)")
    assert NARRATIVE.search("not done this round")


def test_reference_pages_carry_no_commit_hash_or_narrative() -> None:
    pages_checked = reference_pages()
    assert len(pages_checked) >= 10 and (ROOT / "README.md") not in pages_checked
    bad = []
    for path in [*pages_checked, ROOT / "README.md"]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if HEX.search(line) or NARRATIVE.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert bad == []


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    assert links and all((ROOT / link).is_file() for link in links), links
    # two clicks at most: README -> the page that holds it
    assert "docs/integrations/plc-bridge.md" in links and "docs/development/extending.md" in links
    assert "register map" in (DOCS / "integrations/plc-bridge.md").read_text()
    assert "How to add a model layout" in (DOCS / "development/extending.md").read_text()


CODE_PATH = re.compile(r"`((?:daemon|tools|tests|configs|systemd|models)/[\w./-]*\w)/?`")
COMMAND = re.compile(r"python -m ((?:daemon|tools)(?:\.\w+)+)")


def named_code(text: str) -> tuple[set[str], set[str]]:
    """The repository paths (in backticks) and the `python -m` modules a page names."""
    return set(CODE_PATH.findall(text)), set(COMMAND.findall(text))


def test_the_path_pattern_finds_what_a_page_names() -> None:
    paths, modules = named_code(
        "see `daemon/ops/http/` and `tools/kit/rtsp_server.py`; run `python -m tools.docs --check`"
    )
    assert paths == {"daemon/ops/http", "tools/kit/rtsp_server.py"} and modules == {"tools.docs"}


def test_every_file_and_command_a_page_names_exists() -> None:
    """Modules move; a page that names `daemon/publish/spool_writer.py` after it moved sends a reader nowhere."""
    missing: list[str] = []
    for page in [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]:
        paths, modules = named_code(page.read_text(encoding="utf-8"))
        rel = page.relative_to(ROOT)
        missing += [f"{rel}: {p}" for p in sorted(paths) if "<" not in p and not (ROOT / p).exists()]
        for module in sorted(modules):
            base = ROOT / module.replace(".", "/")
            if not (base.with_suffix(".py").exists() or (base / "__main__.py").exists()):
                missing += [f"{rel}: python -m {module}"]
    assert missing == []
