"""The shape of the code, checked: the layers (import-linter), no import cycle in daemon/ or tools/,
tools/ reaching the daemon through its public seams only, tests that import only tests/support/
(never each other), the size targets of daemon/ and tools/ (modules <= 400 lines, functions <= 60),
daemon/'s docstring targets, and no run output in the repository (only the docs' curated figures,
each under 200 KB). Import graphs are read from
the source with `ast` (module-level and function-level imports alike), nothing is imported."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_FIGURE_BYTES = 200 * 1024
FIGURE_SUFFIXES = {".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp"}


@dataclass(frozen=True, slots=True)
class Import:
    """One import of `target` (a dotted module name, resolved) at `path:line`, at module level or in a function."""

    source: str
    target: str
    path: Path
    line: int
    scope: str

    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}, {self.scope}"


def module_name(path: Path) -> str:
    """tools/kit/synth/video.py -> tools.kit.synth.video; daemon/core/__init__.py -> daemon.core."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def python_files(*roots: str) -> list[Path]:
    return sorted(p for root in roots for p in (REPO / root).rglob("*.py") if "__pycache__" not in p.parts)


def imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, int, str]]:
    """Every (dotted name, line, scope) an import anywhere in `tree` names, scope being "module" or
    the enclosing function: `a.b` for `from a import b` (the module a.b, or the name b in a: the
    caller takes the longest prefix that is a module); relative imports resolved against `module`."""
    package = module if is_package else module.rpartition(".")[0]

    def visit(node: ast.AST, scope: str) -> Iterator[tuple[str, int, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno, scope
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base_parts = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*base_parts, *([child.module] if child.module else [])])
                else:
                    base = child.module or ""
                for alias in child.names:
                    yield f"{base}.{alias.name}", child.lineno, scope
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from visit(child, f"in {child.name}()")
            else:
                yield from visit(child, scope)

    return visit(tree, "module")


def longest_module(target: str, modules: Collection[str]) -> str | None:
    """The longest prefix of the dotted `target` that is one of `modules` (None: none is)."""
    parts = target.split(".")
    return next((m for n in range(len(parts), 0, -1) if (m := ".".join(parts[:n])) in modules), None)


def import_graph(*roots: str) -> tuple[set[str], list[Import]]:
    """The modules under `roots` and the imports between them (each import to the most specific
    module of the set it names)."""
    files = python_files(*roots)
    modules = {module_name(p): p for p in files}
    edges: list[Import] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for target, line, scope in imported_names(tree, name, path.name == "__init__.py"):
            known = longest_module(target, modules)
            if known is not None and known != name:
                edges.append(Import(name, known, path, line, scope))
    return set(modules), edges


def strongly_connected(nodes: set[str], edges: list[Import]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components of the graph, each a list of its nodes."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        succ[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(succ[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def a_cycle(component: list[str], edges: list[Import]) -> list[Import]:
    """One closed path of imports through the component's first module (breadth first: the shortest)."""
    inside = set(component)
    start = component[0]
    via: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for e in edges:
                if e.source != node or e.target not in inside:
                    continue
                if e.target == start:
                    path = [e]
                    while path[0].source != start:
                        path.insert(0, via[path[0].source])
                    return path
                if e.target not in via:
                    via[e.target] = e
                    following.append(e.target)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {component}")


def test_the_layers_hold() -> None:
    """import-linter's contract in pyproject.toml: __main__ > app | bridge > ops > stages > config > core."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe is not None, "lint-imports not installed (tools/bootstrap.sh --dev)"
    result = subprocess.run([exe], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_import_cycle_in_daemon_or_tools() -> None:
    nodes, edges = import_graph("daemon", "tools")
    cycles = [c for c in strongly_connected(nodes, edges) if len(c) > 1]
    report = []
    for component in cycles:
        path = a_cycle(component, edges)
        steps = " -> ".join(f"{e.source} ({e.where()})" for e in path)
        report.append(
            f"{len(component)} modules import each other: {', '.join(component)}\n  {steps} -> {path[0].source}"
        )
    assert not cycles, "import cycles:\n" + "\n".join(report)


# The daemon modules tools/ (the lab) may import: one `seam` per room, which only re-exports what the lab
# uses of it (each says what in its docstring), and `daemon.app` for the `Daemon` a bench starts. Every other
# daemon module is the daemon's own. import-linter's second contract in pyproject.toml keeps the same list.
PUBLIC_SEAMS = (
    "daemon.app",
    "daemon.batching.seam",
    "daemon.bridge.seam",
    "daemon.config.seam",
    "daemon.core.seam",
    "daemon.inference.seam",
    "daemon.ingest.seam",
    "daemon.ops.seam",
    "daemon.publish.seam",
    "daemon.thermal.seam",
    "daemon.tracking.seam",
)


def daemon_imports_outside_seams(path: Path, daemon_modules: Collection[str]) -> Iterator[str]:
    """Each import in `path` that reaches a daemon module not in PUBLIC_SEAMS: `import daemon.x.y`,
    `from daemon.x import y` (the module daemon.x.y where it is one, else daemon.x) and a bare
    `import daemon` / `from daemon import x` alike."""
    tree = ast.parse(path.read_text(), str(path))
    for target, line, scope in imported_names(tree, module_name(path), path.name == "__init__.py"):
        if target != "daemon" and not target.startswith("daemon."):
            continue
        known = longest_module(target, daemon_modules) or target
        if known not in PUBLIC_SEAMS:
            yield f"{path.relative_to(REPO)}:{line} ({scope}) imports {known}"


def test_public_seams_exist_and_only_re_export() -> None:
    """PUBLIC_SEAMS is `daemon.app` and every room's `seam.py` (the docs' layout page lists them from the
    files), and a seam module says what it is for and holds imports and `__all__`, nothing else."""
    modules = {module_name(p): p for p in python_files("daemon")}
    found = {"daemon.app", *(m for m in modules if m.rpartition(".")[2] == "seam")}
    assert found == set(PUBLIC_SEAMS), f"seam modules {sorted(found)} != PUBLIC_SEAMS {sorted(PUBLIC_SEAMS)}"
    for seam in PUBLIC_SEAMS:
        if not seam.endswith(".seam"):
            continue
        tree = ast.parse(modules[seam].read_text())
        assert ast.get_docstring(tree), f"{seam} says what the lab uses it for in its docstring"
        body = tree.body[1:]
        assert all(isinstance(n, ast.ImportFrom | ast.Import | ast.Assign) for n in body), f"{seam} only re-exports"
        assigned = [t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
        assert assigned == ["__all__"], f"{seam} assigns only __all__, got {assigned}"


def test_tools_import_the_daemon_through_its_seams() -> None:
    """No tools/ module imports a daemon module outside PUBLIC_SEAMS, at module level or in a function."""
    daemon_modules = {module_name(p) for p in python_files("daemon")}
    bad = [where for path in python_files("tools") for where in daemon_imports_outside_seams(path, daemon_modules)]
    assert not bad, (
        "tools/ importing daemon modules outside the public seams (import from daemon.<room>.seam; add"
        " the name to that seam's __all__ if the lab needs it):\n" + "\n".join(bad)
    )


# A module name in a string: `python -m tests.x`, `pytest_plugins`, import_module, or Python source
# run in a child process (`from tests.x import y`).
NAMED_MODULE = re.compile(r"^(tests(?:\.\w+)+)$")
SOURCE_IMPORT = re.compile(r"\b(?:from|import)\s+(tests(?:\.\w+)+)")


def imports_of_tests(path: Path) -> Iterator[tuple[str, int]]:
    name = module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    for target, line, _scope in imported_names(tree, name, path.name == "__init__.py"):
        if target == "tests" or target.startswith("tests."):
            yield target, line
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = NAMED_MODULE.findall(node.value.strip()) + SOURCE_IMPORT.findall(node.value)
            for target in named:
                yield target, node.lineno


def allowed_test_import(target: str) -> bool:
    """tests.support and what is in it; `tests` itself (a package with nothing in it)."""
    return target in ("tests", "tests.support") or target.startswith("tests.support.")


def test_tests_import_only_tests_support() -> None:
    """A helper two test modules need lives in tests/support/, never in one of them."""
    files = python_files("tests")
    modules = {module_name(p) for p in files}
    bad: set[str] = set()
    for path in files:
        for target, line in imports_of_tests(path):
            known = longest_module(target, modules) or target
            if not allowed_test_import(known):
                bad.add(f"{path.relative_to(REPO)}:{line} imports {known}")
    assert not bad, "test modules importing other test modules (move the helper to tests/support/):\n" + "\n".join(
        sorted(bad)
    )


def function_spans(tree: ast.AST) -> Iterator[tuple[str, int, int]]:
    """(qualified name, first line, length in lines) of every function, nested ones too."""

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                yield name, child.lineno, end - child.lineno + 1
                yield from visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")
            else:
                yield from visit(child, prefix)

    return visit(tree, "")


@pytest.mark.parametrize("root", ["daemon", "tools"])
def test_modules_are_at_most_400_lines(root: str) -> None:
    long = sorted(
        (n, str(p.relative_to(REPO)))
        for p in python_files(root)
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    )
    assert not long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(f"{path}: {n}" for n, path in long)


@pytest.mark.parametrize("root", ["daemon", "tools"])
def test_functions_are_at_most_60_lines(root: str) -> None:
    long = []
    for path in python_files(root):
        tree = ast.parse(path.read_text(), str(path))
        long += [
            f"{path.relative_to(REPO)}:{line} {name}: {n} lines"
            for name, line, n in function_spans(tree)
            if n > MAX_FUNCTION_LINES
        ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


TASK_STARTERS = frozenset({"create_task", "ensure_future", "TaskGroup"})
"""The calls that start a task or own a group of them (`asyncio.create_task`, `loop.create_task`,
`group.create_task`, `asyncio.ensure_future`, `asyncio.TaskGroup()`)."""
BRIDGE_GROUP = "daemon/bridge/service.py"
"""The one module of daemon/bridge that owns a task group (`Bridge.serving`)."""


def task_starters(root: str) -> list[tuple[str, int, str]]:
    """Each call under `root` that starts a task or owns a group of them: (module, line, call)."""
    found = []
    for path in python_files(root):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in TASK_STARTERS:
                found.append((str(path.relative_to(REPO)), node.lineno, name))
    return found


def test_the_bridge_starts_its_tasks_only_in_its_one_task_group() -> None:
    """daemon/bridge starts no task of its own (no bare `create_task`): every long-lived task runs in
    the one `asyncio.TaskGroup` of `Bridge.serving` (daemon.core.tasks.spawner, the daemon's helper),
    declared by a protocol's or the reconciliation's `tasks()`; a fan-out a task waits for goes
    through daemon.core.tasks.run_together."""
    found = [
        f"{where}:{line} {name}"
        for where, line, name in task_starters("daemon/bridge")
        if not (name == "TaskGroup" and where == BRIDGE_GROUP)
    ]
    assert not found, "tasks started outside the bridge's task group:\n" + "\n".join(found)


TASKS_STARTED_HERE = {
    ("daemon/core/tasks.py", "create_task"): "the helpers every owner starts its tasks through: `spawner` (its"
    " task group's), `run_together` (a fan-out its caller waits for), `Tracked` (short-lived tasks started on"
    " request: kept, their exceptions handed on, ended and awaited by the owner's close)",
    ("daemon/app.py", "TaskGroup"): "the daemon's one task group (`Daemon.run`): every long-lived task",
    (BRIDGE_GROUP, "TaskGroup"): "the bridge's one task group (`Bridge.serving`): every long-lived task",
}
"""The only places in daemon/ that start a task or own a task group, each with its reason."""


def test_the_daemon_starts_tasks_only_through_its_task_groups_and_tracked_sets() -> None:
    """No bare `create_task` / `ensure_future` in daemon/ (a task nobody owns is orphaned at shutdown
    and its exception lost): a long-lived task is spawned in its process's task group (the `Spawn`
    handed in at start-up), a short-lived one per request (a camera change's apply, a TLS handshake,
    a snapshot's render, a try of the held cameras) is started in its owner's `daemon.core.tasks.Tracked`.
    The allowed places are `TASKS_STARTED_HERE`, each with its reason."""
    found = [
        f"{where}:{line} {name}"
        for where, line, name in task_starters("daemon")
        if (where, name) not in TASKS_STARTED_HERE
    ]
    assert not found, "tasks started outside a task group or a Tracked set:\n" + "\n".join(found)
    used = {(where, name) for where, _line, name in task_starters("daemon")}
    assert set(TASKS_STARTED_HERE) <= used, f"allowed but no longer there: {set(TASKS_STARTED_HERE) - used}"


def test_every_daemon_subpackage_says_what_it_is_for() -> None:
    """Each subpackage's `__init__.py` has a docstring (what the room is for, what it may import,
    its entry points)."""
    missing = sorted(
        str(init.relative_to(REPO))
        for init in (REPO / "daemon").rglob("__init__.py")
        if init.parent != REPO / "daemon"
        and "__pycache__" not in init.parts
        and not ast.get_docstring(ast.parse(init.read_text(), str(init)))
    )
    assert not missing, "subpackages without a docstring in __init__.py:\n" + "\n".join(missing)


def repository_files() -> list[Path]:
    """The files the repository holds: git's index where this is a checkout (what a commit carries,
    not a stray run's ignored output), else every file under tools/ and docs/."""
    git = shutil.which("git")
    if git is not None and (REPO / ".git").exists():
        listed = subprocess.run(
            [git, "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
        ).stdout
        return [path for rel in listed.split("\0") if rel and (path := REPO / rel).is_file()]
    return [p for top in ("tools", "docs") for p in (REPO / top).rglob("*") if p.is_file()]


def test_the_repository_holds_no_run_output() -> None:
    """Run output goes outside the repository (tools/kit/run_output.py): nothing under tools/reports, and
    every figure is a curated copy under docs/ (`python -m tools.docs.figure`) of under 200 KB."""
    files = repository_files()
    assert any(REPO / "docs" in p.parents for p in files), "no docs found: the listing is wrong"
    reports = [str(p.relative_to(REPO)) for p in files if REPO / "tools" / "reports" in p.parents]
    figures = [p for p in files if p.suffix.lower() in FIGURE_SUFFIXES]
    outside_docs = [str(p.relative_to(REPO)) for p in figures if REPO / "docs" not in p.parents]
    heavy = [f"{p.relative_to(REPO)}: {n} bytes" for p in figures if (n := p.stat().st_size) >= MAX_FIGURE_BYTES]
    assert reports == [], f"run output committed under tools/reports: {reports}"
    assert outside_docs == [], f"figures outside docs/: {outside_docs}"
    assert heavy == [], (
        f"figures of {MAX_FIGURE_BYTES} bytes or more (python -m tools.docs.figure shrinks a PNG): {heavy}"
    )
