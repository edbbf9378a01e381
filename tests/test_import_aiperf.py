"""`tokenreel import aiperf`: profile_export.jsonl records built here from AIPerf's documented
record schema (metadata, metrics as {value, unit}, error), and a real file AIPerf 0.13 wrote
against the vLLM CPU build (tests/engines/aiperf_capture.py), then report on the session."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tokenreel.analysis.metrics import run_metrics
from tokenreel.cli import app
from tokenreel.session import archive


def invoke(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def record(n: int, ttft_ms: float, latency_ms: float, osl: int, chunks_ms: list[float] | None = None,
           error: bool = False, phase: str = "profiling") -> dict[str, Any]:
    meta = {"session_num": n, "x_request_id": f"id-{n}", "conversation_id": f"c-{n}", "turn_index": 0,
            "request_start_ns": 1_759_813_207_532_900_363 + n * 10**9, "request_ack_ns": None,
            "request_end_ns": None, "worker_id": "worker_1", "benchmark_phase": phase, "was_cancelled": False}
    if error:
        return {"metadata": meta, "metrics": {"error_isl": {"value": 550, "unit": "tokens"}},
                "error": {"code": 500, "type": "InternalServerError", "message": "Server error"}}
    metrics = {"input_sequence_length": {"value": 550, "unit": "tokens"},
               "time_to_first_token": {"value": ttft_ms, "unit": "ms"},
               "request_latency": {"value": latency_ms, "unit": "ms"},
               "output_sequence_length": {"value": osl, "unit": "tokens"},
               "inter_token_latency": {"value": (latency_ms - ttft_ms) / (osl - 1), "unit": "ms"}}
    if chunks_ms is not None:
        metrics["inter_chunk_latency"] = {"value": chunks_ms, "unit": "ms"}
    return {"metadata": meta, "metrics": metrics, "error": None}


def export(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_per_request_figures_only_two_events_and_aiperfs_own_decode(tmp_path: Path) -> None:
    source = export(tmp_path / "profile_export.jsonl",
                    [record(0, 40.0, 40.0 + 99 * 5.0, 100, phase="warmup")]
                    + [record(i, 40.0 + i, 40.0 + i + 99 * 5.0, 100) for i in range(4)] + [record(4, 0, 0, 0, error=True)])
    result = invoke("import", "aiperf", source, "--arm", "ai", "--model", "tiny", "--tool-version", "0.5.0",
                    "--out", tmp_path / "s.json")
    assert result.exit_code == 0, result.output
    assert "no per-token arrival times" in result.output
    session = archive.load(tmp_path / "s.json")
    arm = session.arm("ai")
    assert arm.model == "tiny" and arm.imported is not None and arm.imported.version == "0.5.0"
    assert "token_times" in arm.imported.lacks
    ok = [run for run in session.runs if run.status == "ok" and not run.warmup]
    assert len(ok) == 4 and sum(run.warmup for run in session.runs) == 1
    assert [run.status for run in session.runs].count("failed") == 1
    for i, run in enumerate(ok):
        assert run.chunks.tokens == [1, 99] and run.chunks.t_ns == [round((40.0 + i) * 1e6), round((40.0 + i + 495.0) * 1e6)]
        assert math.isclose(run_metrics(run).decode_tok_s or 0, 1000 / 5.0, rel_tol=1e-9)
    report = invoke("report", tmp_path / "s.json", "--format", "json")
    assert report.exit_code == 0, report.output
    assert invoke("import", "aiperf", source, "--arm", "ai2", "--into", tmp_path / "s.json").exit_code == 0
    rendered = invoke("render", tmp_path / "s.json", "--prompt", "c-0", "--out", tmp_path / "c.mp4")
    assert rendered.exit_code == 2 and "no per-token arrival times" in rendered.output


REAL = Path(__file__).parent / "data" / "vllm-cpu" / "aiperf-profile_export.jsonl"
NS_PER = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def ns(metric: dict[str, Any]) -> list[float]:
    """A duration metric of the file, its value (or values) in ns."""
    values = metric["value"] if isinstance(metric["value"], list) else [metric["value"]]
    return [v * NS_PER[metric["unit"]] for v in values]


def test_real_aiperf_file_from_vllm(tmp_path: Path) -> None:
    records = [json.loads(line) for line in REAL.read_text().splitlines() if line.strip()]
    result = invoke("import", "aiperf", REAL, "--arm", "aiperf", "--model", "tiny", "--tool-version", "0.13.0",
                    "--out", tmp_path / "s.json")
    assert result.exit_code == 0, result.output
    session = archive.load(tmp_path / "s.json")
    runs = session.runs
    assert len(runs) == len(records)
    phases = [rec["metadata"]["benchmark_phase"] for rec in records]
    assert "warmup" in phases and "profiling" in phases  # the file exercises both
    assert sum(not run.warmup for run in runs) == phases.count("profiling")
    for rec, run in zip(records, runs, strict=True):
        meta, metrics = rec["metadata"], rec["metrics"]
        assert run.warmup == (meta["benchmark_phase"] != "profiling")
        assert run.prompt == meta["conversation_id"]  # the data set entry, not session_num
        assert run.status == ("failed" if rec.get("error") else "ok")
        if rec.get("error"):
            continue
        m = run_metrics(run)
        ttft_ns = ns(metrics["time_to_first_token"])[0]
        assert abs(run.chunks.t_ns[0] - ttft_ns) <= 1
        assert m.output_tokens == metrics["output_sequence_length"]["value"]
        assert run.usage is not None and run.usage["completion_tokens"] == metrics["output_sequence_length"]["value"]
        if "inter_chunk_latency" in metrics:
            expected = [ttft_ns]
            for gap in ns(metrics["inter_chunk_latency"]):
                expected.append(expected[-1] + gap)
            assert len(run.chunks.t_ns) == len(expected)
            assert all(abs(t - e) <= 1 for t, e in zip(run.chunks.t_ns, expected, strict=True))
        assert abs(run.chunks.t_ns[-1] - ns(metrics["request_latency"])[0]) <= 1
        if "inter_token_latency" in metrics:
            itl_s = ns(metrics["inter_token_latency"])[0] / 1e9
            assert math.isclose(m.decode_tok_s or 0, 1 / itl_s, rel_tol=1e-6)
    # the warm-up took a data set entry: one session_num names two entries across the phases
    pairs = {(rec["metadata"]["session_num"], rec["metadata"]["conversation_id"]) for rec in records}
    assert len(pairs) > len({n for n, _ in pairs})
    report = invoke("report", tmp_path / "s.json", "--format", "json")
    assert report.exit_code == 0, report.output
    json.loads(report.output)


def test_inter_chunk_latency_gives_each_chunk(tmp_path: Path) -> None:
    gaps = [5.0, 6.0, 4.0]
    source = export(tmp_path / "p.jsonl", [record(0, 30.0, 45.0, 4, chunks_ms=gaps)])
    assert invoke("import", "aiperf", source, "--out", tmp_path / "s.json").exit_code == 0
    run = archive.load(tmp_path / "s.json").runs[0]
    assert run.chunks.t_ns == [30_000_000, 35_000_000, 41_000_000, 45_000_000]
    assert run.token_source == "chunk_count" and run.chunks.tokens == [1, 1, 1, 1]
    # every chunk's time, but no text to place over them: render refuses in one line
    assert invoke("import", "aiperf", source, "--arm", "ai2", "--into", tmp_path / "s.json").exit_code == 0
    rendered = invoke("render", tmp_path / "s.json", "--size", "320x180", "--out", tmp_path / "c.mp4")
    assert rendered.exit_code == 2 and "AIPerf keeps no reply text" in rendered.output, rendered.output
    assert "no per-token arrival times" not in rendered.output and len(rendered.output.strip().splitlines()) == 1
    assert not (tmp_path / "c.mp4").exists()


@pytest.mark.parametrize(("line", "field"), [
    ("{not json", "line 1"),
    (json.dumps({"metadata": {}, "metrics": {"time_to_first_token": {"value": "x", "unit": "ms"}}, "error": None}),
     "time_to_first_token.value"),
    (json.dumps(record(0, -3.0, 10.0, 4)), "time_to_first_token.value"),
    (json.dumps(record(0, 30.0, 10.0, 4)), "before the first token"),
    (json.dumps(record(0, 3.0, 10.0, 4)).replace('"unit": "ms"', '"unit": "fortnights"', 1), "unit"),
    (json.dumps(record(0, 3.0, 10.0, 4, chunks_ms=[1.0, math.nan])), "inter_chunk_latency.value[1]"),
    ("[1, 2]", "line 1"),
])
def test_hostile_record_gets_one_line_and_exit_2(tmp_path: Path, line: str, field: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    result = invoke("import", "aiperf", path, "--out", tmp_path / "s.json")
    assert result.exit_code == 2
    text = result.output.strip()
    assert "\n" not in text and "bad.jsonl" in text and field in text, text
