"""`tokenreel import vllm-bench`: result files built here from vllm bench serve's documented
schema (vllm/benchmarks/serve.py: the result dict and --save-detailed's per-request lists), then
report, compare and render on the session. `check_import` holds any result file to the
invariants; a file written by a real `vllm bench serve` can be passed to it as well."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tokenreel.analysis.metrics import run_metrics
from tokenreel.cli import app
from tokenreel.session import archive
from tokenreel.session.model import Session


def invoke(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def bench_result(requests: int = 6, seed: int = 1, step_ms: float = 8.0, tokens_per_chunk: int = 1,
                 failed: tuple[int, ...] = (), output_len: int = 24) -> dict[str, Any]:
    """What vllm bench serve --save-result --save-detailed writes: run-level fields, then one entry
    per request in each list (seconds; a failed request has ttft 0, no itls, an error)."""
    rng = random.Random(seed)
    ttfts, itls, outputs, texts, errors, starts = [], [], [], [], [], []
    for i in range(requests):
        if i in failed:
            ttfts.append(0.0), itls.append([]), outputs.append(0), texts.append(""), errors.append("Traceback: boom")
        else:
            chunks = -(-output_len // tokens_per_chunk)
            ttfts.append(0.05 + rng.random() * 0.01)
            itls.append([step_ms * tokens_per_chunk / 1000 * (1 + 0.1 * rng.random()) for _ in range(chunks - 1)])
            outputs.append(output_len), texts.append(" word" * output_len), errors.append("")
        starts.append(1000.0 + i)
    return {"date": "20260101-120000", "endpoint_type": "openai", "backend": "openai", "label": None,
            "model_id": "tiny-llama", "tokenizer_id": "tiny-llama", "num_prompts": requests, "request_rate": "inf",
            "burstiness": 1.0, "max_concurrency": 1, "duration": 3.2, "completed": requests - len(failed),
            "failed": len(failed), "input_lens": [32] * requests, "output_lens": outputs, "ttfts": ttfts,
            "itls": itls, "start_times": starts, "generated_texts": texts, "errors": errors,
            "mean_ttft_ms": 55.0}


def write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def check_import(result_file: Path, session_file: Path, arm: str = "peer") -> Session:
    """Import `result_file` as arm `arm` and hold the session to the file: one run per request,
    failures failed, each ok run's first chunk at its ttft, its chunks at the itls' running sums,
    its completion tokens the output length, and decode (n - 1 first-chunk token) over first to last chunk."""
    result = invoke("import", "vllm-bench", result_file, "--arm", arm, "--out", session_file)
    assert result.exit_code == 0, result.output
    data = json.loads(result_file.read_text())
    session = archive.load(session_file)
    imported = session.arm(arm).imported
    assert imported is not None and imported.tool == "vllm bench serve" and imported.file == result_file.name
    assert "chunk_text" in imported.lacks and "prompts" in imported.lacks
    runs = [run for run in session.runs if run.arm == arm]
    assert len(runs) == len(data["ttfts"])
    for run, ttft, itl, n, error in zip(runs, data["ttfts"], data["itls"], data["output_lens"], data["errors"], strict=True):
        if error:
            assert run.status == "failed" and run.error
            continue
        assert run.status == "ok" and len(run.chunks) == len(itl) + 1
        assert run.chunks.t_ns[0] == round(ttft * 1e9)
        assert abs(run.chunks.t_ns[-1] - (ttft + sum(itl)) * 1e9) <= len(itl) + 1
        assert sum(run.chunks.tokens) == n == run.usage["completion_tokens"]
        assert run.token_source == ("chunk_count" if len(itl) + 1 == n else "per_event")
        figures = run_metrics(run)
        assert figures.ttft_s is not None and math.isclose(figures.ttft_s, ttft, abs_tol=1e-9)
        if len(itl) + 1 == n and n > 1:
            assert math.isclose(figures.decode_tok_s or 0, (n - 1) / sum(itl), rel_tol=1e-6)
    return session


def test_import_then_report_compare_and_render_refusal(tmp_path: Path) -> None:
    fast = write(tmp_path, "fast.json", bench_result(step_ms=5, failed=(2,)))
    slow = write(tmp_path, "slow.json", bench_result(step_ms=10, seed=2))
    session = check_import(fast, tmp_path / "a.json", arm="fast")
    assert session.arm("fast").fingerprint["summary"]["imported from"] == "vllm bench serve (fast.json)"
    added = invoke("import", "vllm-bench", slow, "--arm", "slow", "--label", "Slow", "--into", tmp_path / "a.json")
    assert added.exit_code == 0, added.output
    both = archive.load(tmp_path / "a.json")
    assert [arm.id for arm in both.arms] == ["fast", "slow"] and both.arm("slow").label == "Slow"

    report = invoke("report", tmp_path / "a.json", "--format", "json")
    assert report.exit_code == 0, report.output
    ladder = json.loads(report.output)
    assert "fast" in json.dumps(ladder) and "slow" in json.dumps(ladder)

    check_import(slow, tmp_path / "b.json", arm="fast")
    compared = invoke("compare", tmp_path / "a.json", tmp_path / "b.json", "--format", "json")
    assert compared.exit_code in (1, 3), compared.output  # the same arm id, twice as slow: not reproduced
    assert "fast" in compared.output

    rendered = invoke("render", tmp_path / "a.json", "--prompt", "request-00001", "--size", "320x180", "--fps", "10",
                      "--out", tmp_path / "clip.mp4")
    assert rendered.exit_code == 2
    assert "imported from vllm bench serve" in rendered.output and "not per chunk" in rendered.output
    assert not (tmp_path / "clip.mp4").exists()


def test_chunks_of_several_tokens_are_an_estimate_said_so(tmp_path: Path) -> None:
    path = write(tmp_path, "spec.json", bench_result(tokens_per_chunk=3, output_len=25))
    session = check_import(path, tmp_path / "s.json")
    imported = session.arm("peer").imported
    assert imported is not None and "token_counts" in imported.lacks
    assert all(run.tokens_estimated for run in session.runs)


def test_same_arm_twice_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "r.json", bench_result())
    check_import(path, tmp_path / "s.json")
    again = invoke("import", "vllm-bench", path, "--arm", "peer", "--into", tmp_path / "s.json")
    assert again.exit_code == 2 and "already in the session" in again.output


def _hostile(kind: str) -> Any:
    data = bench_result()
    if kind == "not json":
        return '{"ttfts": [0.1,'
    if kind == "no detail":
        return {k: v for k, v in data.items() if k not in ("ttfts", "itls")}
    if kind == "wrong type":
        data["itls"][1] = "fast"
    elif kind == "negative":
        data["ttfts"][0] = -0.5
    elif kind == "nan":
        data["ttfts"][0] = math.nan  # json.dumps writes NaN, as vllm bench's json.dump would
    elif kind == "lengths":
        data["output_lens"].pop()
    elif kind == "top list":
        return [data]
    return data


@pytest.mark.parametrize(("kind", "field"), [
    ("not json", "not JSON"), ("no detail", "--save-detailed"), ("wrong type", "itls[1]"), ("negative", "ttfts[0]"),
    ("nan", "ttfts[0]"), ("lengths", "output_lens"), ("top list", "expected an object"),
])
def test_hostile_file_gets_one_line_and_exit_2(tmp_path: Path, kind: str, field: str) -> None:
    path = write(tmp_path, "bad.json", _hostile(kind))
    result = invoke("import", "vllm-bench", path, "--out", tmp_path / "s.json")
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and "bad.json" in line and field in line, line
    assert not (tmp_path / "s.json").exists()


def test_gigantic_file_is_refused_unread(tmp_path: Path) -> None:
    from tokenreel.base.files import INPUTS

    path = tmp_path / "huge.json"
    with path.open("wb") as handle:
        handle.truncate(INPUTS["peer result"].limit + 1)  # sparse: no disk used
    result = invoke("import", "vllm-bench", path, "--out", tmp_path / "s.json")
    assert result.exit_code == 2 and "huge.json" in result.output and "MiB" in result.output
