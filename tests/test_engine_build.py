"""The real-engine build is portable and its cache is checked before it is trusted (issue 21).

A `-march=native` build (or its cache) made on one CPU died with SIGILL on another. The build now
targets the x86-64 baseline, its cache key names the target, and a cached build that cannot start
here is rebuilt. The mismatch is faked with programs that die of SIGILL or fail to load, as a
binary built for another CPU or C library does.
"""

from __future__ import annotations

import platform
import stat
from pathlib import Path

import pytest

from tests.engines import build

SIGILL_PROGRAM = "#!/bin/sh\nkill -ILL $$\n"
LOADER_FAILURE = "#!/bin/sh\necho \"$0: /lib/x86_64-linux-gnu/libc.so.6: version \\`GLIBC_2.38' not found\" >&2\nexit 1\n"


def fake_install(root: Path, program: str) -> Path:
    """A finished-looking install in the cache whose programs behave like `program`."""
    engine = root / build.engine_dir().name
    (engine / "bin").mkdir(parents=True)
    (engine / "src" / "gguf-py" / "gguf").mkdir(parents=True)
    for target in build.TARGETS:
        path = engine / "bin" / target
        path.write_text(program)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return engine


def test_the_build_passes_its_build_number_and_commit() -> None:
    """The sdist has no git history: without these the server says "b0-unknown" (issue 29)."""
    assert f"-DLLAMA_BUILD_NUMBER={build.LLAMA_CPP_BUILD_NUMBER}" in build.CMAKE_FLAGS
    assert f"-DLLAMA_BUILD_COMMIT={build.LLAMA_CPP_COMMIT}" in build.CMAKE_FLAGS
    assert build.LLAMA_CPP_BUILD_NUMBER > 0 and len(build.LLAMA_CPP_COMMIT) >= 7 and int(build.LLAMA_CPP_COMMIT, 16) >= 0


def test_the_build_targets_a_named_level_and_the_cache_key_names_it(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOKENREEL_CACHE", str(tmp_path))
    assert "-DGGML_NATIVE=OFF" in build.CMAKE_FLAGS and not any("NATIVE=ON" in f for f in build.CMAKE_FLAGS)
    assert set(build.isa_flags("x86-64")) == {f"-DGGML_{isa}=OFF" for isa in ("SSE42", "AVX", "AVX2", "BMI2", "FMA", "F16C")}
    assert set(build.isa_flags("x86-64-v3")) == {f"-DGGML_{isa}=ON" for isa in ("SSE42", "AVX", "AVX2", "BMI2", "FMA", "F16C")}
    if platform.machine().lower() in ("x86_64", "amd64"):
        # A CPU without F16C (say) gets the plain baseline, in a cache folder of its own.
        monkeypatch.setattr(build, "cpu_flags", lambda: {"sse4_2", "avx", "avx2", "bmi2", "fma"})
        assert build.instruction_level() == "x86-64"
        baseline = build.engine_dir()
        monkeypatch.setattr(build, "cpu_flags", lambda: {"sse4_2", "avx", "avx2", "bmi2", "fma", "f16c", "avx512f"})
        assert build.instruction_level() == "x86-64-v3"  # AVX-512 is never used: the level stops at v3
        assert baseline != build.engine_dir() == tmp_path / f"llama.cpp-{build.LLAMA_CPP_PYTHON_VERSION}-x86_64-x86-64-v3"


@pytest.mark.parametrize(("program", "said"), [
    (SIGILL_PROGRAM, "llama-server died with SIGILL"),
    (LOADER_FAILURE, "llama-server --version exited 1: "),
])
def test_a_cached_build_that_cannot_start_here_is_rebuilt(monkeypatch, tmp_path: Path, capsys, program: str, said: str) -> None:
    monkeypatch.setenv("TOKENREEL_CACHE", str(tmp_path))
    engine = fake_install(tmp_path, program)
    assert build.is_built()
    problem = build.probe(engine / "bin")
    assert problem is not None and problem.startswith(said), problem
    # With no build tools on PATH the rebuild stops at its first step: the point is that it was tried.
    empty = tmp_path / "no-tools"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(build.BuildError, match="building llama.cpp needs cmake"):
        build.build()
    out = capsys.readouterr().out
    assert f"the cached build in {engine} cannot run here ({said}" in out and "rebuilding" in out


@pytest.mark.engine
def test_the_real_cached_build_passes_its_probe() -> None:
    """The engine `make test` built (or reused) starts here."""
    if not build.is_built():
        pytest.fail(f"no engine in {build.engine_dir()}: run `make engine` (make test does)")
    assert build.probe(build.engine_dir() / "bin") is None
