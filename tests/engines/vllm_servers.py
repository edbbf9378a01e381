"""`vllm serve` (the CPU build in tests.engines.vllm_build) as the real-vLLM tests start it.

Each arm is one `vllm serve` command: the same tiny target at fp32 or bf16, bf16 plus an n-gram
drafter, bf16 plus the generated one-layer draft model. The command serves them the way
tokenreel gets every figure from vLLM: per-request timing (`--enable-per-request-metrics`),
per-request draft counts (`--per-request-spec-decode-metrics summary`), cached prompt tokens in
the usage (`--enable-prompt-tokens-details`). `--enforce-eager` fits a 2-core machine (no
torch.compile: the start takes seconds less and nothing is measured that compiling would change).
A server is three processes, as on a GPU host: the API server, its engine core and the engine
core's worker, each started fresh (the CPU backend always spawns them, whatever
`--distributed-executor-backend` says), so each imports torch and vLLM: about 21 s and 24 s of
CPU from start to ready on 2 quiet cores. vLLM's CPU backend pins its worker to core 0 and
leaves core 1 to the API server by itself (VLLM_CPU_OMP_THREADS_BIND=auto).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.engines import vllm_build
from tests.engines.servers import Server

SERVED_NAME = "tiny"
K = 4  # draft tokens per step for both drafters
# Environment of every server: KV cache size (GiB) for a 2048-token context, loopback only, no
# hub and no usage reports (this machine reaches no network).
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1",
       "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
# vLLM's start: about 21 s alone on 2 quiet cores, 25-60 s beside the other test workers, minutes
# beside heavier work (three Python processes import torch); a bound for a hang, not a speed test.
START_TIMEOUT_S = 900.0


def arm_args(models: vllm_build.VllmModels, arm: str) -> list[str]:
    """`vllm serve` arguments (model first, no host or port) of one ladder arm."""
    common = [str(models.target), "--served-model-name", SERVED_NAME, "--max-model-len", "2048",
              "--enable-per-request-metrics", "--enable-prompt-tokens-details", "--enforce-eager"]
    spec = {
        "ngram": {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 4, "prompt_lookup_min": 2},
        "draft": {"method": "draft_model", "model": str(models.draft), "num_speculative_tokens": K},
    }
    if arm == "fp32":
        return [*common, "--dtype", "float32"]
    dtype = [*common, "--dtype", "bfloat16"]
    if arm == "bf16":
        return dtype
    method = arm.removeprefix("bf16-")
    return [*dtype, "--speculative-config", json.dumps(spec[method]), "--per-request-spec-decode-metrics", "summary"]


ARMS = ("fp32", "bf16", "bf16-ngram", "bf16-draft")


def launch_argv(models: vllm_build.VllmModels, arm: str) -> list[str]:
    """The arm as `record` launches it: `env` sets the variables, `{port}` is filled at its turn."""
    env = [f"{k}={v}" for k, v in ENV.items()]
    return ["env", *env, str(vllm_build.vllm_binary()), "serve", *arm_args(models, arm),
            "--host", "127.0.0.1", "--port", "{port}"]


@dataclass
class VllmServer(Server):
    """One `vllm serve` the test starts itself (not through `launch`)."""

    health_timeout_s: float = START_TIMEOUT_S
    env: dict[str, str] | None = field(default_factory=lambda: dict(ENV))

    @property
    def engine(self) -> str:
        return "vllm serve"

    def command(self) -> list[str]:
        return [str(vllm_build.vllm_binary()), "serve", *self.args, "--host", "127.0.0.1", "--port", str(self.port)]

    def metric(self, name: str) -> float:
        """One vLLM counter or gauge summed over its label sets (engine, model_name), e.g.
        `spec_decode_num_drafts_total`."""
        found = [float(line.rsplit(" ", 1)[1]) for line in self.metrics_text().splitlines()
                 if line.startswith((f"vllm:{name}{{", f"vllm:{name} "))]
        if not found:
            raise KeyError(f"vllm:{name} not in {self.root}/metrics")
        return sum(found)


def run_bench_serve(server: VllmServer, models: vllm_build.VllmModels, result: Path) -> subprocess.CompletedProcess[str]:
    """`vllm bench serve` (the same venv) against a running server: 4 random 32-token prompts, 48
    forced output tokens, one request at a time, every request's detail saved to `result`."""
    bench = [str(vllm_build.vllm_binary()), "bench", "serve", "--backend", "openai-chat", "--base-url", server.root,
             "--endpoint", "/v1/chat/completions", "--model", SERVED_NAME, "--tokenizer", str(models.target),
             "--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "48", "--num-prompts", "4",
             "--max-concurrency", "1", "--ignore-eos", "--temperature", "0", "--seed", "7", "--save-result", "--save-detailed",
             "--result-dir", str(result.parent), "--result-filename", result.name]
    return subprocess.run(bench, capture_output=True, text=True, timeout=900, env={**ENV, "PATH": "/usr/bin:/bin"})
