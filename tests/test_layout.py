"""The house: every module's file is where its name says, imports point down the floors, no circles.

The floors (pyproject.toml's import-linter contract, checked by `make lint`): the core at the bottom
(tokenreel.base, then tokenreel.session, then tokenreel.analysis); the rooms on it (recorder,
renderer, simulator, report), which never import each other; the CLI on top. These tests hold
what that contract does not: the graph has no circle, modules stay short, and no file name means
two things. The graph is grimp's (the library import-linter is built on), read from the source roots.
"""

from __future__ import annotations

import ast
import collections
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE_ROOTS = ("core", "recorder", "renderer", "simulator", "report", "cli", "assets")
MAX_LINES = 500
# One name, one meaning: the CLI's modules are named after their commands (cli/render.py is
# `tokenreel render`, which renderer/render.py carries out), so these pairs mean the same thing.
SAME_THING = {"render.py", "verify.py", "compare.py"}


def module_files() -> dict[str, Path]:
    """Module name -> file, read from the source roots alone (ROOT/tokenreel/a/b.py is tokenreel.a.b)."""
    found = {}
    for root in SOURCE_ROOTS:
        for path in sorted((REPO / root / "tokenreel").rglob("*.py")):
            parts = path.relative_to(REPO / root).with_suffix("").parts
            found[".".join(parts).removesuffix(".__init__")] = path
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("tokenreel", cache_dir=None)


def test_every_module_is_where_its_name_says(graph: grimp.ImportGraph) -> None:
    """The installed package and the source roots hold the same modules, so a tool that reads the
    repository (mypy, an IDE, an import graph) sees every module and every arrow between them."""
    assert graph.modules - {"tokenreel"} == set(module_files())


def test_the_import_graph_has_no_circle(graph: grimp.ImportGraph) -> None:
    circles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                circles.append(" -> ".join((importer, *back)))
    assert circles == []


def test_the_layers_contract_passes() -> None:
    """import-linter's layers contract (pyproject.toml), as `make lint` runs it."""
    result = subprocess.run([str(Path(sys.executable).with_name("lint-imports")), "--no-cache"], capture_output=True, text=True,
                            cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "1 kept, 0 broken" in result.stdout


def test_no_module_over_500_lines() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in module_files().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_no_file_name_means_two_things() -> None:
    names = collections.Counter(path.name for path in module_files().values() if path.name != "__init__.py")
    assert sorted(name for name, count in names.items() if count > 1 and name not in SAME_THING) == []


def test_bench_uses_only_public_names() -> None:
    private = []
    for path in sorted((REPO / "bench").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tokenreel"):
                private += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert private == []
