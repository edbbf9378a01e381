"""vLLM's own figures beside tokenreel's: its per-request `metrics` (--enable-per-request-metrics)
read into each run's engine figures and the report's engine agreement, the flag named where it was
off, a fresh prefill as a per-run `cache_salt`, and acceptance pooled as vLLM's tools pool it.

Against the simulator's vLLM shape over real HTTP (its fields are vLLM 0.32's PerRequestMetrics
and SpeculativeDecodingMetrics) and the stream parser fed real bytes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.test_engine_figures import parse_stream
from tests.test_recorder_support import arm_for, chat_prompt, fast_settings, seed, sent_bodies
from tokenreel.analysis.acceptance import pool
from tokenreel.analysis.ladder import build_cells, build_ladder
from tokenreel.analysis.selection import DEFAULT_SELECTION
from tokenreel.recorder.runner import new_session, record
from tokenreel.report.data import build_report
from tokenreel.report.markdown import to_markdown
from tokenreel.session.archive import dumps, loads
from tokenreel.session.model import Acceptance, ArchiveError, EngineFigures, Session

PROMPTS = [chat_prompt("Implement a Python function that merges intervals.", "code"),
           chat_prompt("Write a short story about a lighthouse keeper.", "prose")]


def test_the_usage_chunks_metrics_are_the_runs_engine_figures() -> None:
    """decode = (completion_tokens - 1) / generation_time_ms: vLLM's first output token to its last."""
    token = {"choices": [{"index": 0, "delta": {"content": "hi"}}]}
    final = {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 33},
             "metrics": {"time_to_first_token_ms": 12.5, "generation_time_ms": 400.0, "queue_time_ms": 0.25,
                         "mean_itl_ms": 12.5, "tokens_per_second": 80.0}}
    engine, note = parse_stream(token, final)
    assert engine == EngineFigures(80.0, 40, None, "vllm metrics", 12.5, 0.25, 400.0) and note == ""
    engine, note = parse_stream(token, {**final, "metrics": {**final["metrics"], "generation_time_ms": 1e-6}})
    assert engine is not None and engine.decode_tok_s is None and "decode of" in note  # beyond any engine
    engine, _ = parse_stream(token, {**final, "metrics": {"time_to_first_token_ms": 3.0}})
    assert engine == EngineFigures(None, 40, None, "usage")  # no generation time: no decode figure


def _vllm_ladder(make_sim: Any, tmp_path: Path, metrics: bool, **settings: Any) -> tuple[Session, Any]:
    profiles = [dataclasses.replace(seed("nvfp4"), request_metrics=metrics),
                dataclasses.replace(seed("nvfp4-dflash2"), request_metrics=metrics)]
    cluster = make_sim(profiles, time_scale=0.2)
    session = new_session("vllm", fast_settings(warmup=1, repeats=2, max_tokens=64, **settings), list(PROMPTS),
                          [arm_for(cluster, "nvfp4"), arm_for(cluster, "nvfp4-dflash2")])
    asyncio.run(record(session, tmp_path / "vllm.json"))
    assert [r.status for r in session.runs] == ["ok"] * 12, [r.error for r in session.runs]
    return session, cluster


def test_vllm_arms_agree_with_vllms_own_timing(make_sim: Any, tmp_path: Path) -> None:
    """Every run carries vLLM's figures; the report's agreement is over every measured run; the
    archive keeps the three durations and reads them back. The bound is on each arm's median, a
    sanity bound, not a speed claim: the simulator's clock is its own, and it shares this process
    with the recorder, so one run stalled on a loaded box can read far off (a drafter run 35 %
    beside two CPU hogs, its arm's median 1.2 %)."""
    session, _ = _vllm_ladder(make_sim, tmp_path, metrics=True)
    for run in session.runs:
        assert run.engine is not None and run.engine.source == "vllm metrics", run.engine
        assert run.engine.decode_tok_s and run.engine.generation_ms and run.engine.ttft_ms is not None
    agreement = build_report(session)["engine_agreement"]
    assert [(row["arm"], row["runs"]) for row in agreement] == [("nvfp4", 4), ("nvfp4-dflash2", 4)]
    assert all(0 <= row["median_pct"] <= row["worst_pct"] and row["median_pct"] < 25 for row in agreement), agreement
    again = loads(dumps(session))
    assert [r.engine for r in again.runs] == [r.engine for r in session.runs]


def test_without_per_request_metrics_the_flag_is_named(make_sim: Any, tmp_path: Path) -> None:
    session, _ = _vllm_ladder(make_sim, tmp_path, metrics=False)
    report = build_report(session)
    for row in report["engine_agreement"]:
        assert row["runs"] == 0 and row["note"].startswith(
            "vLLM sends its per-request timing only when started with --enable-per-request-metrics"), row
    assert "--enable-per-request-metrics" in to_markdown(report, session)


def test_a_fresh_prefill_on_vllm_is_a_salt_per_run(make_sim: Any, tmp_path: Path) -> None:
    """vLLM keys its prefix cache by cache_salt: one no other request shares, on every run."""
    _, cluster = _vllm_ladder(make_sim, tmp_path, metrics=False)
    salts = [body.get("cache_salt") for body in sent_bodies(cluster, "nvfp4") if body.get("stream")]
    assert len(salts) == 6 and all(salts) and len(set(salts)) == 6, salts
    engine_default, cluster = _vllm_ladder(make_sim, tmp_path / "e", metrics=False, prompt_cache="engine")
    assert not any("cache_salt" in body for body in sent_bodies(cluster, "nvfp4"))


def test_the_archive_bounds_engine_durations_and_older_files_save_the_same(make_sim: Any, tmp_path: Path) -> None:
    """A duration past a week is refused with its field; the durations are written only when
    set, so a file recorded without them loads and saves again to the same bytes."""
    session, _ = _vllm_ladder(make_sim, tmp_path, metrics=True)
    data = orjson.loads(dumps(session))
    data["runs"][0]["engine"]["generation_ms"] = 9e8
    with pytest.raises(ArchiveError, match="more than a week") as caught:
        loads(orjson.dumps(data))
    assert caught.value.field == "runs[0].engine.generation_ms"
    for run in data["runs"]:
        for name in ("ttft_ms", "queue_ms", "generation_ms"):
            del run["engine"][name]
    older = orjson.dumps(data)
    assert dumps(loads(older)) == older


# --- acceptance, pooled --------------------------------------------------------------------------


def _acceptance(drafts: float, accepted: float, k: int = 4) -> Acceptance:
    return Acceptance(1 + accepted / drafts, accepted / (drafts * k), drafts, drafts * k, accepted, "metrics.speculative_decoding")


def test_pooled_acceptance_is_one_plus_the_sums_ratio_not_a_mean_of_lengths() -> None:
    """Two requests: 10 drafts with 30 accepted (length 4.0), 90 drafts with 9 accepted (1.1).
    vllm bench: 1 + 39 / 100 = 1.39; the mean of the lengths would say 2.55."""
    pooled = pool([_acceptance(10, 30), _acceptance(90, 9)])
    assert pooled.pooled and pooled.length == pytest.approx(1.39) and pooled.rate == pytest.approx(39 / 400)
    assert (pooled.drafts, pooled.draft_tokens, pooled.accepted) == (100, 400, 39)
    only_lengths = pool([Acceptance(4.0, None), Acceptance(1.1, None)])
    assert not only_lengths.pooled and only_lengths.length == pytest.approx(2.55)  # the median stands in


def test_the_arms_acceptance_is_pooled_over_its_counted_runs(make_sim: Any, tmp_path: Path) -> None:
    """Cells and the ladder row: 1 + Σaccepted / Σdrafts over the runs the figures count, the
    per-prompt lengths' range beside it."""
    session, _ = _vllm_ladder(make_sim, tmp_path, metrics=True)
    counted = [r for r in session.runs if r.arm == "nvfp4-dflash2" and DEFAULT_SELECTION.counts(r)]
    assert len(counted) == 4 and all(r.acceptance and r.acceptance.drafts for r in counted)
    drafts = sum(r.acceptance.drafts or 0 for r in counted if r.acceptance)
    accepted = sum(r.acceptance.accepted or 0 for r in counted if r.acceptance)
    cells = build_cells(session, DEFAULT_SELECTION)
    row = next(r for r in build_ladder(session, cells) if r.arm == "nvfp4-dflash2")
    assert row.acceptance_pooled and row.acceptance_length == pytest.approx(1 + accepted / drafts)
    lengths = [c.acceptance_length for c in cells if c.arm == "nvfp4-dflash2"]
    assert row.acceptance_length_prompts == [min(lengths), max(lengths)]  # type: ignore[type-var]
    json_row = next(r for r in build_report(session)["ladder"] if r["arm"] == "nvfp4-dflash2")
    assert json_row["acceptance_length"] == row.acceptance_length and json_row["acceptance_pooled"] is True
