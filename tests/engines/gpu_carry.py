"""What a GPU machine without network needs for the GPU ladder, in one git-ignored folder.

`python -m tests.engines.gpu_carry` fills `.gpu-carry/` at the repository root (under 60 MiB, so
it travels with the checkout): `wheels/`, the cp312 manylinux x86_64 wheels of the runtime
dependencies such a machine usually lacks for `record` and `report` (versions from
constraints.txt, plus setuptools to install tokenreel itself from the checkout), and the pinned llama.cpp source (the
llama-cpp-python sdist's vendor/llama.cpp, laid out like the sdist so `build.build(source=...)`
takes it) trimmed to what a CUDA build of llama-server and llama-quantize reads: no tests,
examples, sample models, media or other GPU backends; the docs' markdown stays (the generated
models' tokenizer is trained on it), and so does gguf-py (it writes them).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tests.engines import build

REPO = Path(__file__).resolve().parents[2]
CARRY_DIR = REPO / ".gpu-carry"
# What an H200 machine with Python 3.12 lacked of tokenreel's dependencies (it had the rest), but
# imageio-ffmpeg: only `render` reads it and its wheel alone is 65 MiB, over the limit; render the
# session where it was fetched to.
WHEELS = ("orjson", "uharfbuzz", "freetype-py", "python-bidi", "setuptools")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
LIMIT_MIB = 60
# Paths under vendor/llama.cpp/ that a CUDA build of the two programs never reads.
DROPPED = (
    "models/", "tests/", "examples/", "pocs/", "benches/", "media/", "ci/", "skills/", ".devops/",
    ".github/", "conversion/", "requirements/", "tools/ui/tests/",
    *(f"ggml/src/ggml-{backend}/" for backend in (
        "vulkan", "metal", "sycl", "opencl", "cann", "hexagon", "webgpu", "openvino", "et", "virtgpu",
        "zdnn", "zendnn", "rpc", "blas", "musa", "hip")),
)


def source_name() -> str:
    return f"llama.cpp-{build.LLAMA_CPP_PYTHON_VERSION}-cuda-src.tar.gz"


def pinned(name: str, constraints: Path = REPO / "constraints.txt") -> str:
    """NAME==VERSION as the lock has it (one clear error when it is not there)."""
    for line in constraints.read_text().splitlines():
        match = re.fullmatch(rf"({re.escape(name)})==(\S+)", line.split("#")[0].strip(), re.IGNORECASE)
        if match:
            return f"{name}=={match[2]}"
    raise SystemExit(f"{constraints}: no pin for {name}; run make lock")


def download_wheels(dest: Path) -> list[Path]:
    """The cp312 manylinux x86_64 wheels, no dependencies (the machine has the rest)."""
    dest.mkdir(parents=True, exist_ok=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(dest),
           *(pinned(name) for name in WHEELS)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"pip download failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return sorted(dest.glob("*.whl"))


def kept(relative: str) -> bool:
    """True for a path under vendor/llama.cpp/ that the CUDA build or the model generator reads."""
    if relative.startswith("docs/"):
        return relative.endswith(".md")
    return not any(relative.startswith(prefix) for prefix in DROPPED)


def trim_source(sdist: Path, dest: Path) -> Path:
    """Rewrite the sdist as a tar.gz of its kept vendor/llama.cpp paths, same member names."""
    prefix = f"llama_cpp_python-{build.LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist) as src, tarfile.open(dest, "w:gz", compresslevel=9) as out:
        for member in src:
            if not member.name.startswith(prefix) or not kept(member.name[len(prefix):]):
                continue
            out.addfile(member, src.extractfile(member) if member.isfile() else None)
    return dest


def size_mib(paths: list[Path]) -> float:
    return sum(p.stat().st_size for p in paths) / 2**20


def main() -> int:
    """`python -m tests.engines.gpu_carry [--out DIR]`: fill the folder, print what it holds."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=CARRY_DIR, help="folder to fill (default: .gpu-carry/)")
    args = parser.parse_args()
    for stale in (args.out / "wheels").glob("*.whl"):  # a wheel no longer listed would travel too
        stale.unlink()
    wheels = download_wheels(args.out / "wheels")
    source = args.out / source_name()
    if not source.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            sdist = build._download(Path(tmp), Path(tmp) / "download.log")
            trim_source(sdist, source)
    for path in [*wheels, source]:
        print(f"  {path.relative_to(args.out)}  {path.stat().st_size / 2**20:.1f} MiB")
    total = size_mib([*wheels, source])
    print(f"{args.out}: {total:.1f} MiB in all (limit {LIMIT_MIB} MiB)")
    return 0 if total < LIMIT_MIB else 2


if __name__ == "__main__":
    raise SystemExit(main())
