"""Record a real AIPerf `profile_export.jsonl` against a real vLLM into
tests/data/vllm-cpu/aiperf-profile_export.jsonl, the file `tokenreel import aiperf` is held to
(tests/test_import_aiperf.py).

    python3.11 -m venv /tmp/aiperf-venv && /tmp/aiperf-venv/bin/pip install aiperf==0.13.0
    .venv/bin/python -m tests.engines.aiperf_capture /tmp/aiperf-venv

starts the pinned vLLM CPU build (the bf16 arm, served as "tiny") and profiles it with AIPerf
in that venv: chat, streamed, one warm-up request then 4 at concurrency 1, synthetic prompts of
32 tokens, 48 output tokens with ignore_eos, greedy, the server's token counts
(`--use-server-token-count`: without it AIPerf counts by re-tokenizing the reply text). The
default export level (records) writes each request's `inter_chunk_latency`. The tokenizer is
the model's local folder; HF_HUB_OFFLINE stays unset because AIPerf 0.13 in offline mode looks
every tokenizer up in the hub cache, local folders included, and fails (a local path never
reaches the hub). Rerun it when the vLLM or AIPerf pin changes and commit the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.engines import vllm_build
from tests.engines.servers import free_port
from tests.engines.vllm_servers import SERVED_NAME, VllmServer, arm_args

OUT = Path(__file__).resolve().parents[1] / "data" / "vllm-cpu" / "aiperf-profile_export.jsonl"
ARM = "bf16"
PROFILE_TIMEOUT_S = 600


def profile_args(url: str, tokenizer: Path, artifacts: Path) -> list[str]:
    """`aiperf profile`'s arguments (after the command)."""
    return ["--model-names", SERVED_NAME, "--url", url, "--endpoint-type", "chat", "--streaming",
            "--tokenizer", str(tokenizer), "--use-server-token-count",
            "--warmup-request-count", "1", "--request-count", "4", "--concurrency", "1",
            "--prompt-input-tokens-mean", "32", "--prompt-input-tokens-stddev", "0",
            "--prompt-output-tokens-mean", "48", "--prompt-output-tokens-stddev", "0",
            "--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0", "--random-seed", "7",
            "--export-level", "records", "--output-artifact-dir", str(artifacts),
            "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry"]


def capture(aiperf_venv: Path) -> None:
    models = vllm_build.prepare()
    with tempfile.TemporaryDirectory() as tmp:
        server = VllmServer(ARM, arm_args(models, ARM), free_port(), Path(tmp) / "vllm.log").start()
        try:
            env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
            subprocess.run([str(aiperf_venv / "bin" / "aiperf"), "profile",
                            *profile_args(server.root, models.target, Path(tmp) / "artifacts")],
                           check=True, env=env, timeout=PROFILE_TIMEOUT_S)
        finally:
            server.stop()
        text = (Path(tmp) / "artifacts" / "profile_export.jsonl").read_text()
    # Records name no path today; should one appear, TARGET stands for this machine's model folder.
    OUT.write_text(text.replace(str(models.target), "TARGET"))


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m tests.engines.aiperf_capture AIPERF_VENV", file=sys.stderr)
        return 2
    capture(Path(sys.argv[1]))
    print(f"aiperf capture: written to {OUT}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
