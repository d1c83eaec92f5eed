"""The README's first command installs everything the demo imports (the runtime dependencies and
the `demo` extra that tools/bootstrap.sh installs by default), and nothing from the dev extras.

A virtualenv is made here from exactly those distributions: the requirement closure of the
project's runtime dependencies plus `demo`, resolved from this environment's installed metadata
and linked into a new `venv --without-pip` (no network, a few seconds). Its Python then imports
every module the demo runs: the tools.demo package (tools/demo.py runs it), the tools/kit
launchers it starts servers with and what it renders clips with, and every module of the
daemon package that `beltsight run` / `beltsight tail` load. A module that needs a dev-only
distribution (Pillow was one: only matplotlib brought it in) fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import venv
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
DEMO_MODULES = [
    "tools.demo",
    "tools.demo.run",
    "tools.demo.procs",
    "tools.demo.watch",
    "tools.demo.view",
    "tools.demo.preflight",
    "tools.demo.parts",
    "tools.demo.plc",
    "tools.demo.reference",
    "tools.demo.clips",
    "tools.demo.scale",
    "tools.kit.ports",
    "tools.kit.redis_server",
    "tools.kit.rtsp",
    "tools.kit.synth.video",
    "tools.kit.synth.scene",
]


def runtime_requirements(extras: tuple[str, ...] = ("demo",)) -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


def closure(roots: list[Requirement]) -> dict[str, Distribution]:
    """Every installed distribution the requirements pull in, markers evaluated for this machine."""
    found: dict[str, Distribution] = {}
    todo = [(req, frozenset[str]()) for req in roots]
    while todo:
        req, from_extras = todo.pop()
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (from_extras or {""})):
            continue
        key = req.name.lower().replace("_", "-")
        if key in found:
            continue
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            pytest.fail(f"runtime requirement {req} is not installed in this environment")
        found[key] = dist
        todo += [(Requirement(r), frozenset(req.extras)) for r in dist.requires or []]
    return found


def link_into(dist: Distribution, site: Path) -> None:
    """Link the distribution's top-level files and folders into `site`, merging shared folders."""
    tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    for top in sorted(tops - {"__pycache__"}):
        merge_link(Path(str(dist.locate_file(top))), site / top)


def merge_link(source: Path, target: Path) -> None:
    if not target.exists() and not target.is_symlink():
        target.symlink_to(source)
        return
    if target.is_symlink():  # a folder two distributions share (a namespace package): merge
        earlier = target.resolve()
        target.unlink()
        target.mkdir()
        for child in earlier.iterdir():
            (target / child.name).symlink_to(child)
    for child in source.iterdir():
        merge_link(child, target / child.name)


GIGE_MODULES = {"daemon.ingest.gige.link", "daemon.ingest.gige.features"}
"""Imported only where a gige:// camera runs: they need the `gige` extra (PyGObject) and Debian's Aravis."""
GRAPH_PREFIX_MODULES = {"daemon.inference.pixel_input"}
"""Imported only with `engine.preprocess = "graph"` (which the config refuses without it): needs `onnx`."""


def daemon_modules() -> list[str]:
    names = (".".join(p.relative_to(REPO).with_suffix("").parts) for p in (REPO / "daemon").rglob("*.py"))
    # a subpackage's __main__ runs its program when imported (daemon.__main__ is beltsight's entry point)
    names = (n for n in names if not n.endswith(".__main__") or n == "daemon.__main__")
    optional = GIGE_MODULES | GRAPH_PREFIX_MODULES
    return sorted(n for n in (name.removesuffix(".__init__") for name in names) if n not in optional)


def import_in_venv(
    dists: dict[str, Distribution], modules: list[str], env_dir: Path
) -> subprocess.CompletedProcess[str]:
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site = env_dir / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    for dist in dists.values():
        link_into(dist, site)
    code = "\n".join(
        [
            "import importlib, sys",
            "for m in sys.argv[1:]:",
            "    importlib.import_module(m)",
            "print('imported', len(sys.argv) - 1)",
        ]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", code, *modules],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_the_demo_imports_in_a_venv_of_the_runtime_dependencies_alone(tmp_path: Path) -> None:
    dists = closure(runtime_requirements())
    assert "pillow" in dists  # the clip renderer draws with it
    assert not {"pytest", "matplotlib", "mypy", "onnx"} & set(dists), "a dev tool is in the runtime closure"
    modules = DEMO_MODULES + daemon_modules()
    result = import_in_venv(dists, modules, tmp_path / "venv")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == f"imported {len(modules)}"


@pytest.mark.slow
def test_the_check_fails_when_a_needed_distribution_is_missing(tmp_path: Path) -> None:
    """The same venv without Pillow (as the runtime dependencies were before the demo extra):
    the clip renderer no longer imports, so the check above can fail."""
    dists = {k: v for k, v in closure(runtime_requirements()).items() if k != "pillow"}
    result = import_in_venv(dists, ["tools.kit.synth.scene"], tmp_path / "venv")
    assert result.returncode != 0
    assert "No module named 'PIL'" in result.stderr
