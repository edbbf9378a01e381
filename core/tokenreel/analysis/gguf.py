"""A GGUF file's weights in bytes and its attention shape, read from its header alone.

The bytes a llama.cpp decode step reads are its tensors' data: each tensor's element count over
its type's block size times the block's bytes (llama.cpp's own `llama_model_size`, the
/v1/models `meta.size`). The header is parsed here (magic, version 2 or 3, key-values, tensor
infos) so no tensor data is read and no GGUF package is needed.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

# ggml_type -> (elements per block, bytes per block), as ggml's type traits (gguf-py GGML_QUANT_SIZES).
QK_K = 256
BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
    10: (QK_K, 2 + 2 + QK_K // 16 + QK_K // 4), 11: (QK_K, 2 + QK_K // 4 + QK_K // 8 + 12),
    12: (QK_K, 2 + 2 + QK_K // 2 + 12), 13: (QK_K, 2 + 2 + QK_K // 2 + QK_K // 8 + 12),
    14: (QK_K, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16), 15: (QK_K, 4 + QK_K + QK_K // 8),
    16: (QK_K, 2 + QK_K // 4), 17: (QK_K, 2 + QK_K // 4 + QK_K // 32), 18: (QK_K, 2 + QK_K // 4 + QK_K // 8),
    19: (QK_K, 2 + QK_K // 8 + QK_K // 16), 20: (32, 18), 21: (QK_K, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4),
    22: (QK_K, 2 + QK_K // 4 + QK_K // 16), 23: (QK_K, 2 + 2 + QK_K // 2 + QK_K // 64),
    24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),
    30: (1, 2), 34: (QK_K, 2 + 4 * 13), 35: (QK_K, 2 + 64), 39: (32, 17), 40: (64, 36), 41: (128, 18), 42: (64, 18),
}
# GGUF metadata value types: struct format of the scalar ones; 8 is a string, 9 an array.
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class GGUFError(ValueError):
    """The file is not a GGUF this reader knows (the message names the file and what is wrong)."""


@dataclass(frozen=True)
class GGUFInfo:
    """The tensors' data bytes and the metadata keys the KV cache's size needs."""

    tensor_bytes: int
    tensors: int
    metadata: dict[str, Any]

    def kv_shape(self) -> tuple[int, float, int] | None:
        """(layers, KV heads, K + V head dims) from the architecture's keys; None when absent."""
        arch = self.metadata.get("general.architecture")

        def get(key: str) -> Any:
            return self.metadata.get(f"{arch}.{key}")

        layers, heads, embd = get("block_count"), get("attention.head_count"), get("embedding_length")
        kv_heads = get("attention.head_count_kv") or heads
        if isinstance(kv_heads, list):  # per-layer counts (some architectures): their mean
            kv_heads = sum(kv_heads) / len(kv_heads) if kv_heads else None
        if isinstance(heads, list):
            heads = max(heads) if heads else None
        key_dim = get("attention.key_length") or (embd // heads if embd and heads else None)
        value_dim = get("attention.value_length") or key_dim
        if not (layers and kv_heads and key_dim and value_dim):
            return None
        return int(layers), kv_heads, int(key_dim) + int(value_dim)


def _read(f: IO[bytes], fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise EOFError
    return struct.unpack(fmt, data)[0]


def _string(f: IO[bytes]) -> str:
    n = _read(f, "<Q")
    data = f.read(n)
    if len(data) != n:
        raise EOFError
    return data.decode("utf-8", "replace")


def _value(f: IO[bytes], kind: int) -> Any:
    if kind in SCALARS:
        return _read(f, SCALARS[kind])
    if kind == 8:
        return _string(f)
    if kind == 9:
        item, n = _read(f, "<I"), _read(f, "<Q")
        return [_value(f, item) for _ in range(n)]
    raise GGUFError(f"metadata value type {kind} unknown")


def read_gguf(path: Path) -> GGUFInfo:
    """The header of `path`; GGUFError (or OSError) names what stops it."""
    try:
        with path.open("rb") as f:
            if f.read(4) != b"GGUF":
                raise GGUFError(f"{path}: not a GGUF file (no GGUF magic)")
            version = _read(f, "<I")
            if version not in (2, 3):
                raise GGUFError(f"{path}: GGUF version {version}; this reader knows versions 2 and 3")
            tensors, keys = _read(f, "<Q"), _read(f, "<Q")
            metadata = {}
            for _ in range(keys):
                key = _string(f)
                metadata[key] = _value(f, _read(f, "<I"))
            total = 0
            for _ in range(tensors):
                _string(f)
                dims = [_read(f, "<Q") for _ in range(_read(f, "<I"))]
                kind = _read(f, "<I")
                _read(f, "<Q")  # the data's offset: not needed for its size
                if kind not in BLOCKS:
                    raise GGUFError(f"{path}: tensor type {kind} unknown to tokenreel's GGUF reader")
                block, size = BLOCKS[kind]
                total += math.prod(dims) // block * size
    except EOFError:
        raise GGUFError(f"{path}: the GGUF header ends early (a truncated file)") from None
    except GGUFError as error:
        raise GGUFError(str(error) if str(error).startswith(str(path)) else f"{path}: {error}") from None
    return GGUFInfo(total, tensors, {k: v for k, v in metadata.items() if not isinstance(v, list) or len(v) <= 1024})
