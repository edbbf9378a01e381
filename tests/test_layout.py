"""The one-way dependencies of the design: recorder, renderer and simulator depend on tokenreel's
core, never on each other; only the CLI (cli.py and its console.py) sees them all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PARTS = ("recorder", "renderer", "simulator")
CLI_MODULES = ("tokenreel.cli", "tokenreel.console", "tokenreel.__main__")


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def forbidden_for(folder: str) -> tuple[str, ...]:
    if folder == "tokenreel":
        return (*(f"tokenreel.{part}" for part in PARTS), *CLI_MODULES)
    return (*(f"tokenreel.{part}" for part in PARTS if part != folder), *CLI_MODULES, *PARTS)


@pytest.mark.parametrize("folder", ["tokenreel", *PARTS])
def test_dependencies_point_one_way(folder: str) -> None:
    forbidden = forbidden_for(folder)
    offenders = []
    for path in sorted((REPO / folder).glob("*.py")):
        module = f"tokenreel.{path.stem}" if folder == "tokenreel" else f"tokenreel.{folder}.{path.stem}"
        if module in CLI_MODULES:
            continue
        bad = [name for name in imported_modules(path) if any(name == f or name.startswith(f"{f}.") for f in forbidden)]
        offenders += [f"{path.relative_to(REPO)} imports {name}" for name in sorted(bad)]
    assert offenders == []


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from tokenreel.renderer.plan import RenderOptions\nimport recorder.runner\n")
    assert {"tokenreel.renderer.plan", "recorder.runner"} <= imported_modules(sample)
    assert any(name.startswith("tokenreel.renderer") for name in forbidden_for("recorder"))
