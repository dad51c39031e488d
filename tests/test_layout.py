"""The house as README.md's "Code layout" draws it: each folder of kvplan/ imports only the
folders below it, no module imports itself back through others, and nothing stands alone at
the top that belongs to a folder.

Every import counts: at module level, inside a function (run on first use) and under
``TYPE_CHECKING`` (read by mypy), since each ties two modules together for a reader.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kvplan"

#: The floors, from the ground up: a module may import its own floor or one below it.
FLOORS = (
    "ground",
    "model",
    "hardware",
    "importers",
    "catalog",
    "speed",
    "engines",
    "planner",
    "cache_sim",
    "answers",
    "gate",
    "logs",
    "probe",
    "views",
    "cli",
    "face",
)
#: The modules that stand at the top of kvplan/: the ground floor and the package's face.
GROUND = {"units", "errors", "files", "validation", "arguments", "progress", "programs"}
FACE = {"__init__", "__main__"}
#: The imports that run up a floor, and why: ``kvplan.estimate("llama-3.1-8b", ...)`` takes a
#: name from a library caller and reads it through the catalog, at call time; ``--version``
#: prints ``kvplan.__version__``, the one constant the package's face defines.
UPWARD = {
    ("kvplan.model.estimator", "kvplan.catalog.lookup"),
    ("kvplan.cli.common", "kvplan"),
}


@cache
def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str) -> str | None:
    modules = _modules()
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


@cache
def _imports() -> dict[str, frozenset[str]]:
    """Each module -> the kvplan modules it imports, anywhere in its text."""
    modules = _modules()
    edges: dict[str, frozenset[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                full = [f"{node.module}.{a.name}" for a in node.names]
                names = [name if name in modules else node.module for name in full]
            for name in names:
                resolved = _resolve(name) if name.startswith("kvplan") else None
                if resolved and resolved != module:
                    targets.add(resolved)
        edges[module] = frozenset(targets)
    return edges


def _floor(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__init__":
        return "face"
    if len(parts) == 2 and parts[1] in GROUND:
        return "ground"
    if len(parts) == 2 and parts[1] in FACE:
        return "face"
    return parts[1]


def _cycles() -> list[list[str]]:
    """Strongly connected sets of two modules or more (Tarjan)."""
    edges, index, low, stack, on, found = _imports(), {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_back() -> None:
    assert _cycles() == []


def test_every_folder_has_a_floor_and_nothing_else_stands_at_the_top() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(FLOORS) - {"ground", "face"}
    tops = {p.stem for p in PACKAGE.glob("*.py")}
    assert tops == GROUND | FACE


@pytest.mark.parametrize("module", sorted(_modules()))
def test_imports_point_down(module: str) -> None:
    here = FLOORS.index(_floor(module))
    upward = sorted(
        t
        for t in _imports()[module]
        if FLOORS.index(_floor(t)) > here and (module, t) not in UPWARD
    )
    assert upward == [], f"{module} ({FLOORS[here]}) imports a floor above it"


def test_the_upward_exception_still_exists() -> None:
    # When the estimator stops reading names, the exception goes too.
    for module, target in UPWARD:
        assert target in _imports()[module]


def test_readme_layout_names_every_folder_in_floor_order() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Code layout", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"^- `kvplan/([a-z_]+)/`", section, re.M)
    assert named == [f for f in FLOORS if f not in {"ground", "face"}]
    for module in sorted(GROUND):
        assert f"`{module}.py`" in section


def _third_party(module: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(_modules()[module].read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize(
    ("libraries", "allowed"),
    [
        pytest.param({"typer", "rich", "click"}, {"views", "cli"}, id="typer and rich: views, cli"),
        pytest.param({"torch", "transformers"}, {"probe"}, id="torch: the probe"),
    ],
)
def test_heavy_libraries_stay_in_their_rooms(libraries: set[str], allowed: set[str]) -> None:
    found = sorted(
        m for m in _modules() if _third_party(m) & libraries and _floor(m) not in allowed
    )
    assert found == []
