"""A real GPU ladder in one command (issue 29): build, generate, record three launched arms.

`python -m tests.engines.gpu_ladder` (`make gpu-ladder`) on a Linux machine with nvcc and an NVIDIA
GPU: builds the pinned llama.cpp with CUDA for the GPU's architecture (cached apart from the CPU
build; from `.gpu-carry/`'s trimmed source when there is one, so no network is needed), generates
the GPU shape (`models.GPU_SPEC`, 1.14 B parameters: f16, Q4_0 and a 1-layer Q4_0 drafter; seeded
random weights, so the answers are gibberish and only the speed means anything), fills
`examples/llamacpp-gpu.toml` with those paths and records it with `tokenreel record`: each arm's
llama-server is started for its turn and stopped after it. `--model/--quant/--draft` use your own
GGUF files instead; `--cpu` runs the same path on the CPU build and the tiny models (a check on a
machine without a GPU). The output folder gets the filled config, the session and the engine logs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.engines import build, gpu_carry, models

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "examples" / "llamacpp-gpu.toml"


def hardware(cpu: bool) -> str:
    """What the arms ran on, as the session's `hardware` says it (no endpoint says it)."""
    if cpu:
        return f"CPU ({os.cpu_count()} threads)"
    done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                          capture_output=True, text=True, check=False)
    names = done.stdout.strip().splitlines() if done.returncode == 0 else []
    return f"1x {names[0].strip()}" if names else "NVIDIA GPU (nvidia-smi did not say which)"


def fill(template: Path, values: dict[str, str]) -> str:
    """The template with every @name@ replaced; one left over is an error naming it."""
    text = template.read_text(encoding="utf-8")
    for name, value in values.items():
        text = text.replace(f"@{name}@", value.replace("\\", "\\\\").replace('"', '\\"'))
    left = sorted({part for part in text.split("@")[1::2] if part.isidentifier()})
    if left:
        raise SystemExit(f"{template}: no value for @{left[0]}@")
    return text


def user_models(args: argparse.Namespace, out: Path, engine: Path) -> models.Models | None:
    """The user's own files (--model, --quant, --draft), the quantized one made from --model
    when --quant is not given; None when none is given (generate them)."""
    if args.model is None and args.quant is None and args.draft is None:
        return None
    if args.model is None or args.draft is None:
        raise SystemExit("--model and --draft go together (the drafter must share the model's vocabulary); "
                         "--quant is optional")
    for flag, path in (("--model", args.model), ("--quant", args.quant), ("--draft", args.draft)):
        if path is not None and not path.is_file():
            raise SystemExit(f"{flag} {path}: no such file")
    quant = args.quant
    if quant is None:
        quant = out / f"{args.model.stem}-q4_0.gguf"
        if not quant.is_file():
            models.quantize(args.model, quant, engine)
    return models.Models(args.model.resolve(), quant.resolve(), args.draft.resolve())


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.engines.gpu_ladder", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "out" / "gpu-ladder",
                        help="folder for the filled config, the session and the engine logs (default: out/gpu-ladder)")
    parser.add_argument("--model", type=Path, help="your f16 (or bf16) target GGUF instead of the generated one")
    parser.add_argument("--quant", type=Path, help="your quantized target GGUF (default: --model quantized to Q4_0)")
    parser.add_argument("--draft", type=Path, help="your drafter GGUF (same vocabulary as --model)")
    parser.add_argument("--cpu", action="store_true", help="the CPU build and the tiny models: check the path without a GPU")
    parser.add_argument("--cuda-arch", help="CUDA architecture to build for (default: the GPU's, else 90)")
    parser.add_argument("--source", type=Path, help="llama.cpp source tarball (default: .gpu-carry's, else download the pin)")
    parser.add_argument("--config", type=Path, default=TEMPLATE, help="the template to fill (default: examples/llamacpp-gpu.toml)")
    parser.add_argument("--jobs", type=int, help="build jobs and generator threads (default: every core)")
    parser.add_argument("--force", action="store_true", help="replace a session already in --out")
    parser.add_argument("--prepare", action="store_true",
                        help="build and generate only (the cache keeps both), e.g. within a command time limit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    out = args.out.resolve()
    session = out / "session.json"
    if session.exists() and not args.force:
        print(f"{session} exists: pass --force to record again, or another --out", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    carried = gpu_carry.CARRY_DIR / gpu_carry.source_name()
    source = args.source or (carried if carried.is_file() else None)
    started = time.monotonic()
    try:
        if args.cpu:
            engine = build.build(args.jobs, source=source)
        else:
            if shutil.which("nvcc") is None:
                print("the GPU ladder builds llama.cpp with CUDA: nvcc is not on PATH (or pass --cpu)", file=sys.stderr)
                return 2
            engine = build.build(args.jobs, cuda=args.cuda_arch or build.cuda_arch(), source=source)
        built = time.monotonic()
        files = user_models(args, out, engine) or models.generate(models.SPEC if args.cpu else models.GPU_SPEC, engine, args.jobs)
    except build.BuildError as exc:
        print(f"gpu ladder: {exc}", file=sys.stderr)
        return 2
    generated = time.monotonic()
    if args.prepare:
        print(f"gpu ladder: engine {built - started:.0f} s, models {generated - built:.0f} s; prepared", flush=True)
        return 0
    config = out / "ladder.toml"
    config.write_text(fill(args.config, {
        "hardware": hardware(args.cpu), "llama_server": str(build.binary("llama-server", engine)),
        "target_f16": str(files.f16), "target_q4_0": str(files.q4_0), "draft_q4_0": str(files.draft),
    }), encoding="utf-8")
    record = [sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(session)]
    if args.force:
        record.append("--force")
    print("$ " + " ".join(record), flush=True)
    done = subprocess.run(record, cwd=out, check=False)
    recorded = time.monotonic()
    print(f"gpu ladder: engine {built - started:.0f} s, models {generated - built:.0f} s, "
          f"recording {recorded - generated:.0f} s; {out}", flush=True)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
