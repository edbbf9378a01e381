"""The GPU ladder's parts that run without a GPU (issue 29 item 8): the example config it fills,
the trimmed source it carries, and weights that do not depend on the generator's thread count."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from tests.engines import gpu_carry, gpu_ladder, models

VALUES = {"hardware": "1x NVIDIA H200", "llama_server": "/opt/llama-server", "target_f16": "/m/f16.gguf",
          "target_q4_0": "/m/q4.gguf", "draft_q4_0": "/m/draft.gguf"}


def test_the_filled_example_launches_three_arms_on_their_own_ports_without_the_prompt_cache() -> None:
    config = tomllib.loads(gpu_ladder.fill(gpu_ladder.TEMPLATE, VALUES))
    arms = config["arms"]
    assert [a["id"] for a in arms] == ["f16", "q4_0", "q4_0-draft"]
    assert config["session"]["hardware"] == "1x NVIDIA H200" and config["session"]["ignore_eos"] is True
    for arm in arms:
        argv = arm["launch"]
        assert argv[0] == "/opt/llama-server" and "{port}" in arm["base_url"] and argv[argv.index("--port") + 1] == "{port}"
        assert argv[argv.index("--cache-ram") + 1] == "0" and argv[argv.index("-ngl") + 1] == "99"
    assert [a["launch"][a["launch"].index("-m") + 1] for a in arms] == ["/m/f16.gguf", "/m/q4.gguf", "/m/q4.gguf"]
    drafter = arms[2]["launch"]
    assert drafter[drafter.index("-md") + 1] == "/m/draft.gguf" and drafter[drafter.index("--spec-type") + 1] == "draft-simple"
    assert "-md" not in arms[0]["launch"] + arms[1]["launch"]


def test_a_placeholder_without_a_value_is_named() -> None:
    with pytest.raises(SystemExit, match="no value for @draft_q4_0@"):
        gpu_ladder.fill(gpu_ladder.TEMPLATE, {k: v for k, v in VALUES.items() if k != "draft_q4_0"})


@pytest.mark.parametrize(("path", "keep"), [
    ("CMakeLists.txt", True), ("ggml/src/ggml-cuda/mmq.cu", True), ("ggml/src/ggml-cpu/ggml-cpu.c", True),
    ("tools/server/server.cpp", True), ("app/CMakeLists.txt", True), ("gguf-py/gguf/gguf_writer.py", True),
    ("docs/build.md", True), ("docs/backend/CUDA-FEDORA.md", True),  # the tokenizer's training text
    ("docs/ops/CUDA.csv", False), ("models/ggml-vocab-llama-bpe.gguf", False), ("tests/test-backend-ops.cpp", False),
    ("ggml/src/ggml-vulkan/ggml-vulkan.cpp", False), ("ggml/src/ggml-metal/ggml-metal.m", False),
    ("tools/ui/tests/e2e.ts", False),
])
def test_the_carried_source_keeps_what_the_cuda_build_and_the_generator_read(path: str, keep: bool) -> None:
    assert gpu_carry.kept(path) is keep


def test_weights_are_the_same_for_any_thread_count() -> None:
    spec = models.Spec(name="check", vocab=64, n_embd=32, n_ff=48, n_head=4, n_layer=3)
    one, four = models._weights(spec, jobs=1), models._weights(spec, jobs=4)
    assert list(one) == list(four) and all(np.array_equal(one[k], four[k]) for k in one)
    assert one["blk.1.ffn_down.weight"].std() < 0.05 * one["blk.0.ffn_down.weight"].std()  # later layers damped
