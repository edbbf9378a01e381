"""The distribution: one wheel and one sdist that hold the whole program under the one name `tokenreel`.

Each top-level code folder of the checkout (core/, recorder/, renderer/, simulator/, report/, cli/,
assets/) is a source root holding its part of the `tokenreel` namespace package. These tests build
the sdist and the wheel (`python -m build --no-isolation`: the venv's locked setuptools, nothing
fetched) from a copy of the checkout, so no stale build/ or
*.egg-info can add or hide files, and check them against the source tree file by file.
(.ci/wheel goes on from there: it installs the wheel into a fresh venv and runs it.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# The source roots: ROOT/tokenreel/... is tokenreel/... in the wheel.
SOURCE_ROOTS = ("core", "recorder", "renderer", "simulator", "report", "cli", "assets")
# What a checkout holds that is no part of a build (as .gitignore has it), so the copy skips it.
NOT_SOURCE_TOP = {".git", ".venv", "build", "dist", "out", "tokenreel-demo", ".pytest_cache", ".hypothesis"}
RENDERED = (".mp4", ".webm", ".gif", ".png")


def not_source(directory: str, names: list[str]) -> set[str]:
    """shutil.copytree's ignore: caches and generated files anywhere, outputs at the top and in sessions/."""
    skip = {name for name in names if name == "__pycache__" or name.endswith((".pyc", ".egg-info"))}
    if Path(directory) == REPO:
        skip |= NOT_SOURCE_TOP & set(names)
    if Path(directory) == REPO / "sessions":
        skip |= {name for name in names if name.endswith(RENDERED)}
    return skip


@dataclass(frozen=True)
class Built:
    wheel: dict[str, bytes]  # member name -> bytes
    sdist: dict[str, bytes]  # member name, without the leading tokenreel-VERSION/, -> bytes
    log: str  # what the build printed (stdout and stderr)


def source_files(folder: str) -> list[Path]:
    """The files of one checkout folder, without caches."""
    return sorted(
        path for path in (REPO / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )


def in_wheel(path: Path) -> str:
    """Where the wheel should hold a checkout file: recorder/tokenreel/recorder/runner.py -> tokenreel/recorder/runner.py."""
    rel = path.relative_to(REPO)
    assert rel.parts[0] in SOURCE_ROOTS and rel.parts[1] == "tokenreel", rel
    return str(PurePosixPath(*rel.parts[1:]))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    src = tmp_path_factory.mktemp("checkout") / "tokenreel"
    shutil.copytree(REPO, src, ignore=not_source)
    out = tmp_path_factory.mktemp("dist")
    # Warnings shown as they are for a person building (PYTHONWARNINGS may hide them in a test run).
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    result = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    (wheel_path,) = out.glob("*.whl")
    (sdist_path,) = out.glob("*.tar.gz")
    with zipfile.ZipFile(wheel_path) as z:
        wheel = {info.filename: z.read(info) for info in z.infolist() if not info.is_dir()}
    prefix = f"{PROJECT['name']}-{PROJECT['version']}/"
    sdist: dict[str, bytes] = {}
    with tarfile.open(sdist_path) as tar:
        for member in tar.getmembers():
            if member.isfile():
                assert member.name.startswith(prefix), member.name
                data = tar.extractfile(member)
                assert data is not None
                sdist[member.name.removeprefix(prefix)] = data.read()
    return Built(wheel=wheel, sdist=sdist, log=log)


def test_the_build_warns_of_no_deprecation(built: Built) -> None:
    warned = [line for line in built.log.splitlines() if "deprecat" in line.lower()]
    assert not warned, "the build prints deprecation warnings:\n" + "\n".join(warned)


def assert_in_wheel(built: Built, sources: list[Path], what: str, configured_by: str) -> None:
    """Every source file is in the wheel under tokenreel/, byte for byte."""
    missing = [in_wheel(path) for path in sources if in_wheel(path) not in built.wheel]
    differ = [in_wheel(path) for path in sources
              if in_wheel(path) in built.wheel and built.wheel[in_wheel(path)] != path.read_bytes()]
    assert not missing, f"{what} missing from the wheel ({configured_by}):\n" + "\n".join(missing)
    assert not differ, f"{what} that differ in the wheel:\n" + "\n".join(differ)


def test_the_wheel_holds_every_asset_byte_for_byte(built: Built) -> None:
    assets = [path for path in source_files("assets") if path.name != "__init__.py"]
    assert any(path.suffix == ".ttf" for path in assets), "the checkout's assets/ has no fonts?"
    assert_in_wheel(built, assets, "assets", "pyproject.toml's packages/package-data")


def test_the_wheel_holds_every_module_under_tokenreel(built: Built) -> None:
    modules = [path for root in SOURCE_ROOTS for path in source_files(f"{root}/tokenreel") if path.suffix == ".py"]
    assert len(modules) > 20
    assert_in_wheel(built, modules, "modules", "pyproject.toml's packages")


def test_the_wheel_has_one_top_level_name_and_nothing_but_the_source(built: Built) -> None:
    dist_info = f"{PROJECT['name']}-{PROJECT['version']}.dist-info"
    tops = {name.split("/", 1)[0] for name in built.wheel}
    assert tops == {"tokenreel", dist_info}, f"top-level names in the wheel: {sorted(tops)}"
    # And nothing under tokenreel/ that the checkout does not have (stale or generated files).
    expected = {in_wheel(path) for root in SOURCE_ROOTS for path in source_files(f"{root}/tokenreel")}
    extra = sorted(name for name in built.wheel if name.startswith("tokenreel/") and name not in expected)
    assert not extra, "files in the wheel that the checkout does not have:\n" + "\n".join(extra)
    top_level = built.wheel.get(f"{dist_info}/top_level.txt")
    assert top_level is None or top_level.decode().split() == ["tokenreel"]


def test_the_wheel_metadata_names_the_licences_and_the_command(built: Built) -> None:
    dist_info = f"{PROJECT['name']}-{PROJECT['version']}.dist-info"
    metadata = built.wheel[f"{dist_info}/METADATA"].decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    for licence in source_files("assets/tokenreel/assets/fonts/licenses"):
        rel = licence.relative_to(REPO).as_posix()
        assert f"License-File: {rel}" in metadata.splitlines(), rel
        assert built.wheel[f"{dist_info}/licenses/{rel}"] == licence.read_bytes(), rel
    entry_points = built.wheel[f"{dist_info}/entry_points.txt"].decode()
    assert "tokenreel = tokenreel.cli:app" in entry_points.splitlines()


def test_the_sdist_holds_every_asset_and_what_the_build_needs(built: Built) -> None:
    needed = [*source_files("assets"), REPO / "pyproject.toml", REPO / "README.md"]
    needed += [path for root in SOURCE_ROOTS for path in source_files(f"{root}/tokenreel") if path.suffix == ".py"]
    missing = sorted({path.relative_to(REPO).as_posix() for path in needed} - set(built.sdist))
    assert not missing, "files missing from the sdist:\n" + "\n".join(missing)
    differ = [path.relative_to(REPO).as_posix() for path in needed
              if built.sdist[path.relative_to(REPO).as_posix()] != path.read_bytes()]
    assert not differ, "files that differ in the sdist:\n" + "\n".join(differ)
