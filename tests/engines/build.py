"""Build llama-server and llama-quantize from the pinned llama.cpp once, into a reusable cache.

The source is the llama.cpp vendored by the llama-cpp-python sdist on PyPI: PyPI is the one
registry this machine (and CI) can reach, and an sdist version is an immutable pin. The build
happens in a temporary directory next to the cache and is renamed into place at the end, so an
interrupted build never leaves a half-installed engine that later runs would trust.

Portable: the engine is built for a named instruction-set level, not for the CPU that happens
to build it (`-march=native`: a build made on an AVX-512 host died with SIGILL on one without).
The level is x86-64-v3 (AVX2, FMA, F16C: every x86-64 server and laptop CPU since 2013-2015,
and what keeps the f16 model fast; without F16C f16 decoding took minutes a run) when this CPU
has it, else the plain x86-64 baseline (every optional instruction set off); other
architectures get their generic baseline. The cache key names machine and level
(`llama.cpp-<pin>-x86_64-x86-64-v3`), so a cache copied between machines of different levels is
not used, and a cached build is probed (each program started once) before it is trusted: one
that cannot start here is rebuilt. Measured on this project's 2-core machine: a first build
takes about 10 min (x86-64 baseline: 10.1 min; `-march=native` before: 20.6 min), then reused.

The GPU ladder's CUDA variant (`build(cuda="90")`) adds `-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES`
and is cached under its own key (`...-x86-64-v3-cuda-sm90`); `source=` builds from a carried
tarball (`tests.engines.gpu_carry`) on a machine without network.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.engines.cli import main_of

# The one pin: llama-cpp-python's sdist version fixes the llama.cpp commit it vendors. The sdist
# has no git history (a shallow submodule), so cmake cannot find the build number and commit, and
# the server would say "b0-unknown": both are passed at configure time. The commit is the sdist's
# own `.git/modules/vendor/llama.cpp/HEAD` (its CHANGELOG: "update llama.cpp to
# ggml-org/llama.cpp@0c1e57098"); upstream's release of that commit is b11312 (its build info
# "b11312-0c1e57098"). A new pin must update all three. The cache key (`engine_dir`) leaves them
# out: a build cached before them still says b0-unknown until it is rebuilt.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LLAMA_CPP_BUILD_NUMBER = 11312
LLAMA_CPP_COMMIT = "0c1e57098"
TARGETS = ("llama-server", "llama-quantize")
# x86-64-v3 as ggml names its instruction sets (with the /proc/cpuinfo flag that says each).
X86_64_V3 = {"SSE42": "sse4_2", "AVX": "avx", "AVX2": "avx2", "BMI2": "bmi2", "FMA": "fma", "F16C": "f16c"}
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    f"-DLLAMA_BUILD_NUMBER={LLAMA_CPP_BUILD_NUMBER}",
    f"-DLLAMA_BUILD_COMMIT={LLAMA_CPP_COMMIT}",
)
REQUIRED_TOOLS = {"cmake": "cmake", "g++": "g++", "make": "make"}
# The CUDA variant (the GPU ladder, issue 29): same flags plus these; the architecture is the GPU's
# compute capability (nvidia-smi), else Hopper's (the H200 the ladder was first recorded on).
DEFAULT_CUDA_ARCH = "90"


@contextmanager
def published(final: Path) -> Iterator[Path]:
    """A temporary folder beside `final` to build into, renamed onto `final` (readable by all) when
    the block ends, removed when it fails: an interrupted build never leaves a half-made folder."""
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield work
        os.chmod(work, 0o755)
        if final.exists():
            shutil.rmtree(final)
        os.replace(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


class BuildError(RuntimeError):
    """A build failure, already phrased as the one line to show."""


def cache_root() -> Path:
    """Where engines and models are kept between runs (TOKENREEL_CACHE overrides)."""
    env = os.environ.get("TOKENREEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "tokenreel"


def cpu_flags() -> set[str]:
    """This CPU's feature flags (Linux); empty where /proc/cpuinfo says nothing."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def instruction_level() -> str:
    """The level the build targets: x86-64-v3 where this CPU has it, else the plain baseline."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "baseline"
    return "x86-64-v3" if set(X86_64_V3.values()) <= cpu_flags() else "x86-64"


def isa_flags(level: str) -> tuple[str, ...]:
    """cmake's switches for the level: every x86-64-v3 set on for v3, all off for the baseline."""
    if level == "baseline":
        return ()
    state = "ON" if level == "x86-64-v3" else "OFF"
    return tuple(f"-DGGML_{isa}={state}" for isa in X86_64_V3)


def cuda_arch() -> str:
    """The first GPU's compute capability as CMake names it ("9.0" -> "90"), else the default."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return DEFAULT_CUDA_ARCH
    first = (done.stdout.split() or [""])[0].replace(".", "")
    return first if done.returncode == 0 and first.isdigit() else DEFAULT_CUDA_ARCH


def cuda_flags(arch: str) -> tuple[str, ...]:
    """cmake's switches for a CUDA build of one architecture (GGML_NATIVE is off for every build)."""
    return ("-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={arch}")


def build_target(cuda: str | None = None) -> str:
    """What a build runs on: this machine's architecture, the instruction-set level, the CUDA arch."""
    gpu = f"-cuda-sm{cuda}" if cuda else ""
    return f"{platform.machine().lower() or 'unknown'}-{instruction_level()}{gpu}"


def engine_dir(cuda: str | None = None) -> Path:
    """The finished install: bin/ with the two programs, src/ with the vendored llama.cpp.
    A CUDA build (`cuda` = its architecture) is cached apart from the CPU build."""
    return cache_root() / f"llama.cpp-{LLAMA_CPP_PYTHON_VERSION}-{build_target(cuda)}"


def binary(name: str, root: Path | None = None) -> Path:
    """Path of one built program (llama-server or llama-quantize) of the install at root (default: CPU)."""
    return (root or engine_dir()) / "bin" / name


def gguf_py_dir(root: Path | None = None) -> Path:
    """The gguf-py package of the same llama.cpp, imported from here rather than installed."""
    return (root or engine_dir()) / "src" / "gguf-py"


def is_built(root: Path | None = None) -> bool:
    """True when a previous run finished the install (the rename is the last step)."""
    return all(binary(t, root).is_file() for t in TARGETS) and (gguf_py_dir(root) / "gguf").is_dir()


def probe(bin_dir: Path) -> str | None:
    """Start each program once; None when both run here, else why not. llama-server --version
    must exit 0 and llama-quantize --help print its usage: a build for another CPU dies with
    SIGILL, one for a newer C library exits at once naming the missing symbol version."""
    for target, arg, sign in (("llama-server", "--version", "version:"), ("llama-quantize", "--help", "usage:")):
        try:
            done = subprocess.run([str(bin_dir / target), arg], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{target} did not start ({exc})"
        said = (done.stdout + done.stderr).decode(errors="replace")
        if done.returncode < 0:
            return f"{target} died with {signal.Signals(-done.returncode).name}"
        if sign not in said:
            last = said.strip().splitlines()[-1:] or ["no output"]
            return f"{target} {arg} exited {done.returncode}: {last[0][:200]}"
    return None


def _check_tools(cuda: bool) -> None:
    missing = [name for name in REQUIRED_TOOLS if shutil.which(name) is None]
    if missing:
        raise BuildError(
            f"building llama.cpp needs {', '.join(missing)}: install them "
            f"(Debian/Ubuntu: sudo apt-get install cmake g++ make)"
        )
    if cuda and shutil.which("nvcc") is None:
        raise BuildError("a CUDA build of llama.cpp needs nvcc on PATH: install the CUDA toolkit "
                         "(or add its bin/ to PATH)")


def _run(cmd: list[str], cwd: Path, log: Path) -> None:
    with log.open("ab") as out:
        out.write(("\n$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise BuildError(f"{cmd[0]} failed (exit {done.returncode}); see {log}: {tail[0][:200]}")


def _download(dest: Path, log: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d", str(dest), "-q"]
    _run(cmd, dest, log)
    found = sorted(dest.glob("llama_cpp_python-*.tar.gz"))
    if not found:
        raise BuildError(f"pip download gave no llama-cpp-python sdist in {dest}")
    return found[0]


def _extract_vendor(sdist: Path, dest: Path) -> Path:
    """Extract only vendor/llama.cpp (the sdist also carries a .git directory we do not need)."""
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        for m in members:
            m.name = m.name[len(prefix):]
        tar.extractall(dest, members=[m for m in members if m.name], filter="data")
    if not (dest / "CMakeLists.txt").is_file():
        raise BuildError(f"{sdist.name} has no vendor/llama.cpp/CMakeLists.txt")
    return dest


def build(jobs: int | None = None, cuda: str | None = None, source: Path | None = None) -> Path:
    """Build and install the engine unless a finished install is already cached; return its dir.

    `cuda`: build the CUDA variant for that architecture (e.g. "90"). `source`: a tarball laid out
    like the pinned sdist (the trimmed one `tests.engines.gpu_carry` makes, for a machine without
    network) instead of downloading the sdist."""
    final = engine_dir(cuda)
    if is_built(final):
        broken = probe(final / "bin")
        if broken is None:
            print(f"llama.cpp {LLAMA_CPP_PYTHON_VERSION}: reusing the cached build in {final}", flush=True)
            return final
        print(f"llama.cpp {LLAMA_CPP_PYTHON_VERSION}: the cached build in {final} cannot run here "
              f"({broken}): rebuilding", flush=True)
    _check_tools(cuda is not None)
    final.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.building-", dir=final.parent))
    log = work / "build.log"
    n = str(jobs or os.cpu_count() or 2)
    expect = "about 4-5 min on 16 cores" if cuda else "about 10 min on 2 cores"
    print(f"llama.cpp {LLAMA_CPP_PYTHON_VERSION}: building {', '.join(TARGETS)} "
          f"for {build_target(cuda)} with {n} jobs ({expect}; log {log})", flush=True)
    try:
        sdist = source if source is not None else _download(work, log)
        src = _extract_vendor(sdist, work / "src")
        if source is None:
            sdist.unlink()
        bdir = work / "build"
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        gpu = cuda_flags(cuda) if cuda else ()
        _run(["cmake", "-S", str(src), "-B", str(bdir), *gen, *CMAKE_FLAGS, *isa_flags(instruction_level()), *gpu],
             work, log)
        _run(["cmake", "--build", str(bdir), "--config", "Release", "-j", n,
              "--target", *TARGETS], work, log)
        (work / "bin").mkdir()
        for t in TARGETS:
            built = next((p for p in (bdir / "bin" / t, bdir / t) if p.is_file()), None)
            if built is None:
                raise BuildError(f"cmake finished but {t} is not in {bdir}/bin")
            shutil.copy2(built, work / "bin" / t)
        shutil.rmtree(bdir)
        broken = probe(work / "bin")
        if broken is not None:
            raise BuildError(f"the fresh build cannot run here: {broken}")
        os.chmod(work, 0o755)  # mkdtemp made it private; the cache is shared like any build output
        if final.exists():  # a stale, unfinished install: replace it
            shutil.rmtree(final)
        os.replace(work, final)
    except BaseException:
        print(f"llama.cpp build failed; partial work left in {work}", file=sys.stderr)
        raise
    minutes = (time.monotonic() - started) / 60
    print(f"llama.cpp {LLAMA_CPP_PYTHON_VERSION}: built in {minutes:.1f} min ({n} jobs) into {final}", flush=True)
    return final


def main() -> int:
    """`python -m tests.engines.build`: build (or reuse) the engine, one line on failure."""
    return main_of(build, "tokenreel engine build", (BuildError,))


if __name__ == "__main__":
    raise SystemExit(main())
