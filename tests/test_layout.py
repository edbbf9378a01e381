"""The house (issue 22): every import points down the floors, and no module imports itself back.

Floors: the core (`tokenreel/`: the session model and archive, metrics, ladder, latency, answers,
run selection) at the bottom; the rooms on it (`recorder/`, `renderer/`, `simulator/`, `report/`),
which never import each other; the CLI (`cli/`) on top, the only floor that sees them all. The
check reads every module's imports (function bodies included) with `ast`, so it needs no import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOMS = ("recorder", "renderer", "simulator", "report")
FLOORS = {"core": 0, **{room: 1 for room in ROOMS}, "cli": 2}
CORE_MAX_LINES = 500


def modules() -> dict[str, Path]:
    """Installed module name -> file, for every module of the package (the pyproject mapping)."""
    found: dict[str, Path] = {}
    for folder, package in (("tokenreel", "tokenreel"), *((room, f"tokenreel.{room}") for room in (*ROOMS, "cli"))):
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            name = ".".join((package, *parts))
            found[name.removesuffix(".__init__")] = path
    return found


def floor(module: str) -> str:
    """'core', a room's name, or 'cli' (`python -m tokenreel` is the CLI's door)."""
    if module == "tokenreel.__main__":
        return "cli"
    part = module.split(".")[1] if module.count(".") else ""
    return part if part in (*ROOMS, "cli") else "core"


def imports(path: Path, known: dict[str, Path]) -> list[tuple[str, bool, int]]:
    """(imported tokenreel module, inside a function body?, line) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(child) for child in ast.walk(node) if child is not node)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                       for alias in node.names]
        else:
            continue
        found += [(t, id(node) in in_function, node.lineno) for t in targets if t == "tokenreel" or t.startswith("tokenreel.")]
    return found


def test_every_import_points_down_and_rooms_do_not_meet() -> None:
    known = modules()
    offenders = []
    for name, path in known.items():
        for target, _, line in imports(path, known):
            here, there = floor(name), floor(target)
            if FLOORS[there] > FLOORS[here] or (there in ROOMS and here in ROOMS and there != here):
                offenders.append(f"{path.relative_to(REPO)}:{line} ({here}) imports {target} ({there})")
    assert offenders == []


def test_no_import_cycle() -> None:
    known = modules()
    graph = {name: sorted({t for t, inside, _ in imports(path, known) if not inside and t in known and t != name})
             for name, path in known.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[str] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_only_the_cli_imports_tokenreel_inside_functions() -> None:
    """The structure the code shows is the one it runs: no import hidden in a function body,
    but in the CLI, which imports a command's room when it runs so that `--help` starts fast,
    and in the package's own `__getattr__` (its exports, loaded on first use: `import tokenreel`
    loads nothing, so the CLI's Ctrl-C handler is in place before anything slow)."""
    known = modules()
    hidden = [f"{path.relative_to(REPO)}:{line} imports {target}"
              for name, path in known.items() if floor(name) != "cli" and name != "tokenreel"
              for target, inside, line in imports(path, known) if inside]
    assert hidden == []


def test_the_core_reads_in_five_minutes() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items() if floor(name) == "core"}
    assert max(sizes.values()) < CORE_MAX_LINES, sorted(sizes.items(), key=lambda item: -item[1])[:3]


def test_bench_uses_only_public_names() -> None:
    private = []
    for path in sorted((REPO / "bench").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tokenreel"):
                private += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert private == []


@pytest.mark.parametrize(("source", "bad"), [
    ("from tokenreel.renderer.plan import RenderOptions\n", True),  # a room reaching into another
    ("from tokenreel.cli import app\n", True),  # a room reaching up
    ("from tokenreel.archive import Session\n", False),
    ("def f():\n    from tokenreel.archive import Session\n", True),  # hidden in a function
])
def test_the_check_sees_a_bad_import(tmp_path: Path, source: str, bad: bool) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(source)
    known = modules()
    found = imports(sample, known)
    here = "recorder"
    wrong = any(
        inside or FLOORS[floor(t)] > FLOORS[here] or (floor(t) in ROOMS and floor(t) != here)
        for t, inside, _ in found
    )
    assert wrong is bad, found
