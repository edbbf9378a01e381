"""Tiny llama-architecture GGUF models, generated deterministically, for the real-engine tests.

Why generated: the tests may only reach PyPI, and a model that decodes in a few ms per token on
two CPU cores is what keeps a whole ladder under a few minutes. Why this shape:

- the tokenizer is a byte-level BPE trained (HF `tokenizers`) on the pinned llama.cpp's own
  docs, so its input is fixed by the pin, like everything else here;
- weights are seeded random; in the target, the residual writes (attn_output, ffn_down) of every
  layer after the first DRAFT_LAYERS are scaled down, so the draft, made of exactly those first
  layers plus the same embeddings, head and norm, mostly predicts what the target will pick:
  speculation then really accelerates, as with a real distilled drafter;
- one copy of the target is quantized to Q4_0 with the pinned llama-quantize, and so is the
  draft (an f16 draft disagreed with the Q4_0 target it drafts for: acceptance 0.30, 0.76x).

Everything is cached under a hash of the generator's inputs (this file, the spec, the engine pin).
Each tensor has its own seed (the spec's seed and the tensor's index), so the tensors are drawn in
parallel threads (numpy releases the GIL while drawing) and the bytes do not depend on the thread
count: the GPU ladder's 1.14 B-parameter shape (`GPU_SPEC`) takes seconds on 16 cores.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tests.engines import build
from tests.engines.cli import main_of


@dataclass(frozen=True)
class Spec:
    """Model shape and the knobs that set how often the draft agrees with the target."""

    name: str = "tiny"
    vocab: int = 2048
    n_embd: int = 512
    n_ff: int = 1408
    n_head: int = 8
    n_layer: int = 16
    draft_layers: int = 1
    later_scale: float = 0.01  # residual writes of layers >= draft_layers in the target
    ctx: int = 4096
    seed: int = 20261201


SPEC = Spec()
# The GPU ladder's target (issue 29): a llama of 1.14 B parameters (f16 2,172 MiB, Q4_0 ~612 MiB).
GPU_SPEC = Spec(name="gpu-1b", n_embd=2048, n_ff=5632, n_head=32, n_layer=22)
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class Models:
    """Paths of the generated files."""

    f16: Path
    q4_0: Path
    draft: Path


def _gguf(engine: Path | None = None):
    """The gguf package of the pinned llama.cpp, from its source tree (not installed in the venv)."""
    path = str(build.gguf_py_dir(engine))
    if path not in sys.path:
        sys.path.insert(0, path)
    import gguf  # noqa: PLC0415

    return gguf


def _training_text(engine: Path | None = None) -> list[Path]:
    """Fixed by the pin: the vendored llama.cpp's markdown docs, sorted."""
    src = (engine or build.engine_dir()) / "src"
    return sorted([src / "README.md", *(src / "docs").rglob("*.md")])


def _key(spec: Spec) -> str:
    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    h.update(json.dumps(asdict(spec), sort_keys=True).encode())
    h.update(build.LLAMA_CPP_PYTHON_VERSION.encode())
    return h.hexdigest()[:16]


def models_dir(spec: Spec = SPEC) -> Path:
    return build.cache_root() / f"models-{spec.name}-{_key(spec)}"


def train_tokenizer(spec: Spec, engine: Path | None = None) -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges) of a byte-level BPE; specials first, ids 0..2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab, special_tokens=list(SPECIAL), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in _training_text(engine)]
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    data = json.loads(tok.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    if len(tokens) < spec.vocab:  # a small corpus can stop early: pad with unused tokens
        tokens += [f"<|unused{i}|>" for i in range(spec.vocab - len(tokens))]
    types = [3 if t in SPECIAL else (5 if t.startswith("<|unused") else 1) for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return tokens, types, merges


def _shapes(spec: Spec) -> dict[str, tuple[tuple[int, ...], float]]:
    """Every tensor's (shape, scale) in file order; scale 0 marks a norm (ones), later layers damped."""
    e, f = spec.n_embd, spec.n_ff
    shapes: dict[str, tuple[tuple[int, ...], float]] = {
        "token_embd.weight": ((spec.vocab, e), np.sqrt(e)),  # unit normal: scale / sqrt(cols) = 1
        "output_norm.weight": ((e,), 0.0),
        "output.weight": ((spec.vocab, e), 4.0),
    }
    for i in range(spec.n_layer):
        damp = 1.0 if i < spec.draft_layers else spec.later_scale
        p = f"blk.{i}."
        shapes |= {p + "attn_norm.weight": ((e,), 0.0), p + "attn_q.weight": ((e, e), 1.0),
                   p + "attn_k.weight": ((e, e), 1.0), p + "attn_v.weight": ((e, e), 1.0),
                   p + "attn_output.weight": ((e, e), damp), p + "ffn_norm.weight": ((e,), 0.0),
                   p + "ffn_gate.weight": ((f, e), 1.0), p + "ffn_up.weight": ((f, e), 1.0),
                   p + "ffn_down.weight": ((e, f), damp)}
    return shapes


def _weights(spec: Spec, jobs: int | None = None) -> dict[str, np.ndarray]:
    """Seeded random weights, (out, in) row-major as gguf-py expects, drawn in parallel threads;
    tensor i has the seed (spec.seed, i), so the bytes are the same for any thread count."""
    shapes = _shapes(spec)

    def draw(index: int, shape: tuple[int, ...], scale: float) -> np.ndarray:
        if scale == 0.0:
            return np.ones(shape, dtype=np.float32)
        values = np.random.default_rng((spec.seed, index)).standard_normal(shape, dtype=np.float32)
        values *= np.float32(scale / np.sqrt(shape[-1]))
        return values.astype(np.float16)

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        futures = [pool.submit(draw, i, shape, scale) for i, (shape, scale) in enumerate(shapes.values())]
        return {name: future.result() for name, future in zip(shapes, futures, strict=False)}


def write_gguf(path: Path, spec: Spec, n_layer: int, weights: dict[str, np.ndarray],
               tokenizer: tuple[list[str], list[int], list[str]], name: str, engine: Path | None = None) -> None:
    """One llama-architecture GGUF with the first n_layer blocks of `weights`."""
    gguf = _gguf(engine)
    tokens, types, merges = tokenizer
    wr = gguf.GGUFWriter(str(path), "llama")
    wr.add_name(name)
    wr.add_context_length(spec.ctx)
    wr.add_embedding_length(spec.n_embd)
    wr.add_block_count(n_layer)
    wr.add_feed_forward_length(spec.n_ff)
    wr.add_head_count(spec.n_head)
    wr.add_head_count_kv(spec.n_head)
    wr.add_rope_dimension_count(spec.n_embd // spec.n_head)
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(spec.vocab)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("gpt-2")
    wr.add_token_list(tokens)
    wr.add_token_types(types)
    wr.add_token_merges(merges)
    wr.add_bos_token_id(0)
    wr.add_eos_token_id(SPECIAL.index("<|im_end|>"))
    wr.add_add_bos_token(False)
    wr.add_chat_template(CHAT_TEMPLATE)
    for key, value in weights.items():
        if key.startswith("blk.") and int(key.split(".")[1]) >= n_layer:
            continue
        wr.add_tensor(key, value)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def quantize(src: Path, dst: Path, engine: Path | None = None) -> None:
    """Q4_0 with the pinned llama-quantize (same recipe for target and draft, so they agree)."""
    done = subprocess.run([str(build.binary("llama-quantize", engine)), str(src), str(dst), "Q4_0"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"llama-quantize {src.name} failed (exit {done.returncode}): {last}")


def generate(spec: Spec = SPEC, engine: Path | None = None, jobs: int | None = None) -> Models:
    """Build (or reuse) the three files with the install at `engine` (default: the CPU build's
    gguf-py, docs and llama-quantize); atomic like the engine build."""
    final = models_dir(spec)
    out = Models(final / "target-f16.gguf", final / "target-q4_0.gguf", final / "draft-q4_0.gguf")
    if all(p.is_file() for p in (out.f16, out.q4_0, out.draft)):
        print(f"models: reusing {final}", flush=True)
        return out
    started = time.monotonic()
    with build.published(final) as work:
        tokenizer = train_tokenizer(spec, engine)
        weights = _weights(spec, jobs)
        drawn = time.monotonic()
        write_gguf(work / out.f16.name, spec, spec.n_layer, weights, tokenizer, f"tokenreel-{spec.name}-target", engine)
        write_gguf(work / "draft-f16.gguf", spec, spec.draft_layers, weights, tokenizer, f"tokenreel-{spec.name}-draft", engine)
        del weights
        written = time.monotonic()
        quantize(work / out.f16.name, work / out.q4_0.name, engine)
        quantize(work / "draft-f16.gguf", work / out.draft.name, engine)
        (work / "draft-f16.gguf").unlink()
    # This shape's earlier generators' output, and the folders named before shapes had names
    # (models-<key>: ~140 MiB each).
    for stale in final.parent.glob("models-*"):
        earlier = stale.name.startswith(f"models-{spec.name}-") or re.fullmatch(r"models-[0-9a-f]{16}", stale.name)
        if earlier and stale != final and stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    done = time.monotonic()
    sizes = ", ".join(f"{p.name} {p.stat().st_size / 2**20:.1f} MiB" for p in (out.f16, out.q4_0, out.draft))
    print(f"models: generated {sizes} in {final} ({done - started:.1f} s: weights {drawn - started:.1f} s, "
          f"writing {written - drawn:.1f} s, quantizing {done - written:.1f} s)", flush=True)
    return out


def main() -> int:
    """`python -m tests.engines.models`: generate (or reuse) the models; one line on failure."""
    return main_of(generate, "tokenreel engine models", (RuntimeError, OSError))


if __name__ == "__main__":
    raise SystemExit(main())
