"""The bytes a decode step of an arm reads besides its KV cache: its weights, and its drafter's.

Where the model files are on this machine (a GGUF, or a checkpoint folder with safetensors) they
are measured: a GGUF's tensor bytes (`tokenreel.analysis.gguf`), a checkpoint's safetensors index
`metadata.total_size` or its safetensors headers summed. Else llama.cpp's /v1/models `meta.size`
(the GGUF's tensor bytes as the server loaded them). A size declared in [arms.settings]
(`weights_gb`, `draft_weights_gb`) wins over both: it is how a user corrects or supplies one.
The KV cache's bytes per token of context come from the same files (GGUF metadata, config.json).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenreel.analysis.gguf import GGUFError, read_gguf
from tokenreel.analysis.serving_config import launch_argv
from tokenreel.session.model import Arm

GB = 1e9
WEIGHTS_KEY = "[arms.settings] weights_gb"
DRAFT_KEY = "[arms.settings] draft_weights_gb"
MODEL_FLAGS = ("-m", "--model", "--model-path")  # llama.cpp, vLLM, SGLang
DRAFT_FLAGS = ("-md", "--model-draft", "--speculative-draft-model-path")  # llama.cpp, SGLang
# Bytes per cached element of a KV cache type (llama.cpp -ctk/-ctv, vLLM --kv-cache-dtype, a model's dtype).
KV_ELEMENT_BYTES = {
    "f32": 4.0, "float32": 4.0, "f16": 2.0, "float16": 2.0, "half": 2.0, "bf16": 2.0, "bfloat16": 2.0,
    "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32, "q5_0": 22 / 32, "q5_1": 24 / 32, "iq4_nl": 18 / 32,
    "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "fp8_inc": 1.0,
}


@dataclass(frozen=True)
class Size:
    """Bytes with where they came from; `bytes` None with `missing` saying why and the key to set."""

    bytes: float | None
    source: str = ""
    missing: str = ""


def _flag_values(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """The values given to any of `flags` (`-m X`, `--model=X`)."""
    values = []
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in flags:
            values.append(value if eq else (argv[i + 1] if i + 1 < len(argv) else ""))
    return [v for v in values if v]


def _served_model(argv: list[str]) -> list[str]:
    """`vllm serve MODEL`: the positional model after `serve`."""
    if "serve" in argv[:-1] and not argv[argv.index("serve") + 1].startswith("-"):
        return [argv[argv.index("serve") + 1]]
    return []


def _endpoint_models(arm: Arm) -> list[dict[str, Any]]:
    models = arm.fingerprint.get("models") if isinstance(arm.fingerprint, dict) else None
    data = models.get("data") if isinstance(models, dict) else None
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def _local(candidates: list[str]) -> list[Path]:
    """The candidates that are files or folders on this machine, each once."""
    paths = []
    for name in dict.fromkeys(c for c in candidates if c):
        try:
            path = Path(name).expanduser()
            if path.exists():
                paths.append(path)
        except (OSError, ValueError):
            continue
    return paths


def model_paths(arm: Arm) -> tuple[list[str], list[Path]]:
    """(every path the arm's launch command or endpoint names for its model, those readable here)."""
    argv = launch_argv(arm)
    props = arm.fingerprint.get("props") if isinstance(arm.fingerprint, dict) else None
    named = [*_flag_values(argv, MODEL_FLAGS), *_served_model(argv),
             *(str(m.get(k)) for m in _endpoint_models(arm) for k in ("root", "id") if m.get(k)),
             *([str(props["model_path"])] if isinstance(props, dict) and props.get("model_path") else []), arm.model]
    named = [n for n in dict.fromkeys(named) if "/" in n or n.endswith(".gguf")]
    return named, _local(named)


def draft_paths(arm: Arm) -> tuple[list[str], list[Path]]:
    """(the paths naming the arm's draft model, those readable here): llama.cpp -md, SGLang's
    --speculative-draft-model-path, vLLM's --speculative-config "model"."""
    argv = launch_argv(arm)
    named = _flag_values(argv, DRAFT_FLAGS)
    for text in _flag_values(argv, ("--speculative-config", "--speculative_config", "-sc")):
        try:
            spec = json.loads(text)
        except ValueError:
            continue
        if isinstance(spec, dict) and isinstance(spec.get("model"), str):
            named.append(spec["model"])
    return named, _local(named)


def safetensors_bytes(path: Path) -> int:
    """The tensors' data bytes of one safetensors file, from its header (8-byte length, JSON)."""
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    return sum(int(t["data_offsets"][1]) - int(t["data_offsets"][0]) for k, t in header.items() if k != "__metadata__")


def file_bytes(path: Path) -> Size:
    """A GGUF file's tensor bytes or a checkpoint folder's (safetensors index total_size, else its
    safetensors files' headers); missing when the path is neither."""
    try:
        if path.is_file() and path.suffix == ".gguf":
            return Size(read_gguf(path).tensor_bytes, f"GGUF tensors of {path.name}")
        index = path / "model.safetensors.index.json"
        if index.is_file():
            total = json.loads(index.read_text(encoding="utf-8")).get("metadata", {}).get("total_size")
            if isinstance(total, int | float):
                return Size(float(total), f"{path.name}/{index.name} metadata.total_size")
        files = sorted(path.glob("*.safetensors")) if path.is_dir() else []
        if files:
            return Size(sum(safetensors_bytes(f) for f in files), f"safetensors headers of {path.name}")
    except (OSError, ValueError, KeyError, TypeError, struct.error, GGUFError) as error:
        return Size(None, missing=f"{path}: cannot read its size ({error})")
    return Size(None, missing=f"{path}: neither a GGUF file nor a folder with safetensors")


def _declared(arm: Arm, key: str, where: str) -> Size | None:
    value = arm.settings.get(key)
    if not value:
        return None
    try:
        return Size(float(value) * GB, f"declared ({where} = {value})")
    except ValueError:
        return Size(None, missing=f"{where} = {value!r} is not a number of GB; write it as {key} = \"54\"")


def _from_files(paths: list[Path]) -> Size | None:
    sizes = [file_bytes(p) for p in paths]
    return next((s for s in sizes if s.bytes is not None), sizes[0] if sizes else None)


def _declared_or_file(
    arm: Arm, key: str, config_key: str, paths: tuple[list[str], list[Path]]
) -> tuple[Size | None, Size | None, list[str]]:
    """(the declared size or the first readable local file's, None; else None and the files' own
    miss), and the files named."""
    if (declared := _declared(arm, key, config_key)) is not None:
        return declared, None, []
    named, local = paths
    found = _from_files(local)
    return (found, None, named) if found is not None and found.bytes is not None else (None, found, named)


def target_weights(arm: Arm) -> Size:
    """The arm's model weights in bytes: declared, else its local model file, else the endpoint's
    /v1/models meta.size (llama.cpp); missing with the key to set."""
    size, found, named = _declared_or_file(arm, "weights_gb", WEIGHTS_KEY, model_paths(arm))
    if size is not None:
        return size
    sizes = [m["meta"]["size"] for m in _endpoint_models(arm)
             if isinstance(m.get("meta"), dict) and isinstance(m["meta"].get("size"), int | float)]
    if sizes:
        return Size(float(sizes[0]), "the endpoint's /v1/models meta.size (llama.cpp's model size)")
    why = found.missing if found is not None else (
        f"its model file ({named[0]}) is not readable here" if named else "no model file is named")
    return Size(None, missing=f"{why} and the endpoint gave no size; set {WEIGHTS_KEY}")


def draft_weights(arm: Arm) -> Size:
    """A drafter arm's draft model weights in bytes: declared, else its local draft model file."""
    size, found, named = _declared_or_file(arm, "draft_weights_gb", DRAFT_KEY, draft_paths(arm))
    if size is not None:
        return size
    why = found.missing if found is not None else (
        f"the draft model file ({named[0]}) is not readable here" if named else "no draft model file is named")
    return Size(None, missing=f"the drafter's size is unknown: {why}; set {DRAFT_KEY}")


def _kv_type(argv: list[str], default: str) -> str:
    """The KV cache element type the launch command sets, else `default`."""
    said = _flag_values(argv, ("-ctk", "--cache-type-k", "--kv-cache-dtype"))
    return said[-1].lower() if said and said[-1].lower() != "auto" else default


def kv_bytes_per_token(arm: Arm) -> Size:
    """Bytes of K and V cached per token of context over every layer (layers x KV heads x (K + V
    head dims) x element bytes), from the local model's GGUF metadata or config.json."""
    argv = launch_argv(arm)
    _, local = model_paths(arm)
    for path in local:
        shape, dtype, source = _shape(path)
        if shape is None:
            continue
        kind = _kv_type(argv, dtype)
        if kind not in KV_ELEMENT_BYTES:
            return Size(None, missing=f"KV cache type {kind!r} has no known element size")
        layers, kv_heads, dims = shape
        return Size(layers * kv_heads * dims * KV_ELEMENT_BYTES[kind], f"{source}, KV cache {kind}")
    return Size(None, missing="the model's shape (layers, KV heads, head dim) is unknown: its GGUF or config.json"
                              " is not readable here")


def _shape(path: Path) -> tuple[tuple[int, float, int] | None, str, str]:
    """((layers, KV heads, K + V head dims), the cache's default element type, where it was read)."""
    try:
        if path.is_file() and path.suffix == ".gguf":
            return read_gguf(path).kv_shape(), "f16", f"GGUF metadata of {path.name}"
        config = path / "config.json"
        if not config.is_file():
            return None, "", ""
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError, GGUFError):
        return None, "", ""
    data = data.get("text_config", data) if isinstance(data.get("text_config"), dict) else data
    layers, heads = data.get("num_hidden_layers"), data.get("num_attention_heads")
    kv_heads = data.get("num_key_value_heads") or heads
    head_dim = data.get("head_dim") or (data["hidden_size"] // heads if data.get("hidden_size") and heads else None)
    if not (layers and kv_heads and head_dim):
        return None, "", ""
    dtype = str(data.get("torch_dtype") or data.get("dtype") or "bfloat16")
    return (int(layers), kv_heads, 2 * int(head_dim)), dtype, f"{path.name}/config.json"
