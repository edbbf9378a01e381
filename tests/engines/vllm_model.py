"""A tiny seeded Llama and its draft in Hugging Face format, for the real-vLLM tests.

Run with the vLLM venv's Python (it has torch, transformers and tokenizers; the test venv has
not): `python vllm_model.py OUT_DIR`. Nothing comes from a hub:

- the tokenizer is a byte-level BPE trained on the markdown files inside the pinned vLLM
  package, so its input is fixed by the pin;
- weights are seeded random (numpy, one seed per tensor), and in the target the residual writes
  (o_proj, down_proj) of every layer after the first DRAFT_LAYERS are scaled down, so the draft
  (those first layers, the same embeddings, norm and head) mostly predicts what the target
  picks: a draft model then really accelerates, as a distilled drafter would;
- both are written with transformers' `save_pretrained` (safetensors, float32), so the fp32 arm
  serves the file as written and the bf16 arms convert it (`--dtype bfloat16`).

The shape is the llama.cpp tests' (tests/engines/models.py) with fewer layers: a vLLM CPU
engine step costs milliseconds of Python whatever the model, so a smaller model buys little.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOCAB = 2048
N_EMBD = 512
N_FF = 1408
N_HEAD = 8
N_LAYER = 8
DRAFT_LAYERS = 1
LATER_SCALE = 0.01
CTX = 2048
SEED = 20261206
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# What the caller hashes into the cache key besides this file.
SHAPE = {"vocab": VOCAB, "n_embd": N_EMBD, "n_ff": N_FF, "n_head": N_HEAD, "n_layer": N_LAYER,
         "draft_layers": DRAFT_LAYERS, "later_scale": LATER_SCALE, "ctx": CTX, "seed": SEED}


def training_text() -> list[str]:
    """The pinned vLLM package's own markdown files, sorted by path."""
    import vllm  # noqa: PLC0415

    root = Path(vllm.__file__).parent
    return [p.read_text(encoding="utf-8", errors="replace") for p in sorted(root.rglob("*.md"))]


def tokenizer():
    """A PreTrainedTokenizerFast over a byte-level BPE with the three specials at ids 0..2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: PLC0415
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(SPECIAL), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    texts = training_text()
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def weights(n_layer: int) -> dict[str, object]:
    """The state dict of the first n_layer blocks: tensor i drawn with the seed (SEED, i)."""
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415

    e, f = N_EMBD, N_FF
    shapes: dict[str, tuple[tuple[int, ...], float]] = {
        "model.embed_tokens.weight": ((VOCAB, e), float(np.sqrt(e))),
        "model.norm.weight": ((e,), 0.0),
        "lm_head.weight": ((VOCAB, e), 4.0),
    }
    for i in range(N_LAYER):
        damp = 1.0 if i < DRAFT_LAYERS else LATER_SCALE
        p = f"model.layers.{i}."
        shapes |= {p + "input_layernorm.weight": ((e,), 0.0), p + "self_attn.q_proj.weight": ((e, e), 1.0),
                   p + "self_attn.k_proj.weight": ((e, e), 1.0), p + "self_attn.v_proj.weight": ((e, e), 1.0),
                   p + "self_attn.o_proj.weight": ((e, e), damp), p + "post_attention_layernorm.weight": ((e,), 0.0),
                   p + "mlp.gate_proj.weight": ((f, e), 1.0), p + "mlp.up_proj.weight": ((f, e), 1.0),
                   p + "mlp.down_proj.weight": ((e, f), damp)}
    out = {}
    for index, (name, (shape, scale)) in enumerate(shapes.items()):
        if name.startswith("model.layers.") and int(name.split(".")[2]) >= n_layer:
            continue
        if scale == 0.0:
            values = np.ones(shape, dtype=np.float32)
        else:
            values = np.random.default_rng((SEED, index)).standard_normal(shape, dtype=np.float32)
            values *= np.float32(scale / np.sqrt(shape[-1]))
        out[name] = torch.from_numpy(values)
    return out


def write(path: Path, n_layer: int, tok) -> None:
    """One model folder: config, float32 safetensors, tokenizer, generation config."""
    import torch  # noqa: PLC0415
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=N_EMBD, intermediate_size=N_FF, num_hidden_layers=n_layer,
                         num_attention_heads=N_HEAD, num_key_value_heads=N_HEAD, max_position_embeddings=CTX,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                         bos_token_id=0, eos_token_id=SPECIAL.index("<|im_end|>"), pad_token_id=0,
                         torch_dtype="float32")
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(weights(n_layer), strict=False)
    left = [m for m in missing if "rotary" not in m]
    if left or unexpected:
        raise RuntimeError(f"state dict mismatch: missing {left}, unexpected {unexpected}")
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    tok = tokenizer()
    write(out / "target", N_LAYER, tok)
    write(out / "draft", DRAFT_LAYERS, tok)
    (out / "shape.json").write_text(json.dumps(SHAPE, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
