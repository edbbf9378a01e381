"""Acceptance rate per draft position: pooled on handmade counts, read from vLLM's per-request
histograms, and recorded end to end through the simulator's vLLM shape over loopback HTTP (its
/metrics counter `vllm:spec_decode_num_accepted_tokens_per_pos`, its usage chunk's histogram)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.test_recorder_support import arm_for, fast_settings, seed
from tests.test_vllm_figures import PROMPTS, _vllm_ladder
from tokenreel.analysis.acceptance import pool
from tokenreel.analysis.selection import DEFAULT_SELECTION
from tokenreel.recorder.client.response_stats import accepted_by_position, histogram_positions
from tokenreel.recorder.engines.engine_metrics import parse_metrics, positions_between
from tokenreel.recorder.runner import new_session, record
from tokenreel.report.charts import write_charts
from tokenreel.report.csv_format import to_csv
from tokenreel.report.data import build_report
from tokenreel.report.markdown import to_markdown
from tokenreel.session.archive import dumps, loads
from tokenreel.session.model import Acceptance


def _run(drafts: float, accepted: list[float], drafted: list[float] | None = None) -> Acceptance:
    total = sum(accepted)
    return Acceptance(1 + total / drafts, None, drafts, None, total, "metrics", accepted_per_position=accepted,
                      drafted_per_position=drafted)


def test_per_position_rates_pool_the_counts_over_runs() -> None:
    """10 drafts accepting [8, 5, 2] and 30 accepting [12, 6, 3]: position i's rate is Σ accepted
    at i / Σ drafts, not the mean of the runs' rates; the rates sum to the length minus one."""
    pooled = pool([_run(10, [8, 5, 2]), _run(30, [12, 6, 3])])
    assert pooled.per_position is not None and pooled.per_position.basis == "drafts"
    assert pooled.per_position.rates == [20 / 40, 11 / 40, 5 / 40]
    assert sum(r or 0 for r in pooled.per_position.rates) == pytest.approx((pooled.length or 0) - 1)
    counted = pool([_run(10, [8, 5, 2], [10, 9, 4]), _run(30, [12, 6, 3], [30, 20, 10])])
    assert counted.per_position is not None and counted.per_position.basis == "drafted"
    assert counted.per_position.rates == [20 / 40, 11 / 29, 5 / 14]  # over the drafts that reached i
    mixed = pool([_run(10, [8, 5, 2], [10, 9, 4]), _run(30, [12, 6, 3])])
    assert mixed.per_position is not None and mixed.per_position.basis == "drafts"  # one denominator for all
    assert mixed.per_position.reached == (40, 40, 40)
    assert pool([_run(10, [8, 5, 2]), Acceptance(1.5, None, 4, None, 2)]).per_position is None  # a run without
    assert pool([_run(10, [8, 5, 2]), _run(10, [8, 5])]).per_position is None  # different k


def test_vllms_histograms_give_the_counts_per_position() -> None:
    """vLLM's documented example: histogram [39, 1, 0, 3] (steps that accepted exactly j)."""
    spec: dict[str, Any] = {"acceptance_histogram": [39, 1, 0, 3], "acceptance_histogram_by_draft_length": {"3": [39, 1, 0, 3]}}
    assert histogram_positions(spec) == ([4.0, 3.0, 3.0], [43.0, 43.0, 43.0])
    short = {"acceptance_histogram": [2, 1, 1], "per_step_drafted": [2, 1, 2, 0]}
    assert histogram_positions(short) == ([2.0, 1.0], [3.0, 2.0])
    assert histogram_positions({"acceptance_histogram": [2, 1, 1]}) == ([2.0, 1.0], None)
    assert histogram_positions({"acceptance_histogram": [2, -1]}) == (None, None)


def test_counters_per_position_are_summed_over_engines_and_differenced() -> None:
    head = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
    def text(a: list[int], b: list[int]) -> str:
        return head + "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter\n" + "".join(
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",model_name="m",position="{i}"}} {v}\n'
            for e, row in (("0", a), ("1", b)) for i, v in enumerate(row))
    before, after = parse_metrics(text([5, 2], [1, 0])), parse_metrics(text([9, 4], [2, 1]))
    assert positions_between(before, after) == ([5.0, 3.0], None)
    assert positions_between(after, before) == (None, None)  # went back: a restart


@pytest.mark.parametrize("request_metrics", [True, False], ids=["per-request histogram", "metrics counters"])
def test_recorded_positions_agree_with_the_simulators_counts(make_sim: Any, tmp_path: Path, request_metrics: bool) -> None:
    """Per run, Σ accepted over positions is the accepted total the engine counted separately
    (vLLM's num_accepted_draft_tokens or vllm:spec_decode_num_accepted_tokens), accepted never
    grows with the position; the arm's rates are Σ accepted at i / Σ drafts of its counted runs."""
    session, _ = _vllm_ladder(make_sim, tmp_path, metrics=request_metrics)
    drafter = [r for r in session.runs if r.arm == "nvfp4-dflash2"]
    k = seed("nvfp4-dflash2").spec_k
    for run in drafter:
        a = run.acceptance
        assert a is not None and a.accepted_per_position is not None, run.acceptance_note
        assert a.source.startswith("metrics.speculative_decoding" if request_metrics else "metrics")
        assert len(a.accepted_per_position) == k and sum(a.accepted_per_position) == a.accepted
        assert all(x >= y for x, y in zip(a.accepted_per_position, a.accepted_per_position[1:], strict=False))
        assert a.drafted_per_position is None  # vLLM 0.32's summary counts no drafts per position
    counted = [r.acceptance for r in drafter if DEFAULT_SELECTION.counts(r) and r.acceptance]
    drafts = sum(a.drafts or 0 for a in counted)
    truth = [sum((a.accepted_per_position or [])[i] for a in counted) / drafts for i in range(k)]
    report = build_report(session)
    [entry] = report["acceptance_positions"]  # the plain arm drafts nothing: no entry
    assert entry["arm"] == "nvfp4-dflash2" and entry["rates"] == pytest.approx(truth)
    assert entry["basis"] == "drafts"
    markdown = to_markdown(report, session)
    assert "Acceptance rate per draft position:" in markdown and "| Arm | Position 1 | Position 2 |" in markdown
    assert f"{entry['rates'][0]!r}" in to_csv(report)  # full precision
    written = write_charts(session, tmp_path / "charts", ["svg"])
    assert (tmp_path / "charts" / "positions.svg") in written


def test_a_drafter_without_counts_is_said_and_older_files_save_the_same(make_sim: Any, tmp_path: Path) -> None:
    session, _ = _vllm_ladder(make_sim, tmp_path, metrics=True)
    data = orjson.loads(dumps(session))
    for run in data["runs"]:
        if run["acceptance"]:
            del run["acceptance"]["accepted_per_position"]
            assert "drafted_per_position" not in run["acceptance"]  # written only when set
    older = orjson.dumps(data)
    again = loads(older)
    assert dumps(again) == older  # written only when set
    assert build_report(again)["acceptance_positions"] == []  # no arm has it: nothing
    assert "per draft position" not in to_markdown(build_report(again), again)
    assert not any(p.name.startswith("positions") for p in write_charts(again, tmp_path / "c", ["svg"]))
    # Two drafter arms, one without counts: a line says why and what gives them.
    second = dataclasses.replace(session.arms[1], id="other", label="Other drafter")
    session.arms.append(second)
    for run in [r for r in session.runs if r.arm == "nvfp4-dflash2"]:
        copy = dataclasses.replace(run, arm="other", acceptance=dataclasses.replace(
            run.acceptance, accepted_per_position=None, drafted_per_position=None) if run.acceptance else None)
        session.runs.append(copy)
    report = build_report(session)
    missing = next(e for e in report["acceptance_positions"] if e["arm"] == "other")
    assert missing["rates"] is None and "--per-request-spec-decode-metrics summary" in missing["missing"]
    assert "Other drafter: no per-position counts; vLLM counts them" in to_markdown(report, session)


def _sglang_run(drafts: float, histogram: list[int]) -> Acceptance:
    accepted = accepted_by_position(histogram)
    total = sum(accepted or [])
    return Acceptance(1 + total / drafts, None, drafts, None, total, "sglext.spec_tokens_details",
                      accepted_per_position=accepted)


def test_sglangs_grown_histograms_pool_with_zeros_past_their_end() -> None:
    """SGLang's histogram ends at the most drafts one step accepted: [2, 1, 3] (4 accepted at
    position 1, 3 at 2) and [4, 2] (2 at 1) pool over all 12 steps as [6, 3] / 12; a shorter vLLM
    list is another draft window, not a histogram that stopped growing, and does not pool."""
    assert accepted_by_position([2, 1, 3]) == [4.0, 3.0] and accepted_by_position([5]) is None
    pooled = pool([_sglang_run(6, [2, 1, 3]), _sglang_run(6, [4, 2])])
    assert pooled.per_position is not None and pooled.per_position.basis == "drafts"
    assert pooled.per_position.rates == [6 / 12, 3 / 12]
    assert pool([pooled, _sglang_run(4, [1, 1, 1, 1])]).per_position is not None  # a cell's pool widens too
    assert pool([_sglang_run(6, [1, 1, 1, 3]), _run(10, [8, 5])]).per_position is None  # vLLM's k is fixed


def test_recorded_sglang_positions_agree_with_its_histograms(make_sim: Any, tmp_path: Path) -> None:
    """Through the simulator's SGLang shape over loopback: every run's per-position counts sum to
    the accepted total SGLang counts separately (spec_num_correct_drafts), and the arm's rates are
    Σ accepted at i / Σ verify steps of its counted runs, the runs' lists widened to the longest."""
    profiles = [dataclasses.replace(seed(p), engine="sglang") for p in ("nvfp4", "nvfp4-dflash2")]
    cluster = make_sim(profiles, time_scale=0.2)
    session = new_session("sglang", fast_settings(warmup=1, repeats=2, max_tokens=64), list(PROMPTS),
                          [arm_for(cluster, "nvfp4"), arm_for(cluster, "nvfp4-dflash2")])
    asyncio.run(record(session, tmp_path / "sglang.json"))
    drafter = [r for r in session.runs if r.arm == "nvfp4-dflash2"]
    assert [r.status for r in drafter] == ["ok"] * len(drafter), [r.error for r in drafter]
    k = seed("nvfp4-dflash2").spec_k
    for run in drafter:
        a = run.acceptance
        assert a is not None and a.source == "sglext.spec_tokens_details" and a.accepted_per_position, run.acceptance_note
        assert 1 <= len(a.accepted_per_position) <= k and sum(a.accepted_per_position) == a.accepted
    counted = [r.acceptance for r in drafter if DEFAULT_SELECTION.counts(r) and r.acceptance]
    width = max(len(a.accepted_per_position or []) for a in counted)
    drafts = sum(a.drafts or 0 for a in counted)
    truth = [sum((a.accepted_per_position or [])[i] for a in counted if i < len(a.accepted_per_position or [])) / drafts
             for i in range(width)]
    [entry] = build_report(session)["acceptance_positions"]
    assert entry["arm"] == "nvfp4-dflash2" and entry["basis"] == "drafts" and entry["rates"] == pytest.approx(truth)
