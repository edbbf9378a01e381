"""Issue 10, defects 1-4: acceptance on llama.cpp, contention the counters miss, 6-digit counters,
and cells that vanish (all runs contended, or no /metrics) without a word.

Each recording goes through the real recorder or the real `tokenreel record` against a small
engine on loopback (tests/contention_engine.py) that behaves as llama.cpp or SGLang do where
the simulator does not (yet): counters added at request end, printed with six significant
digits, a decode counter per step, gauges that stay up after our stream, /metrics off (501).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from tests.contention_engine import FakeEngine, serving
from tests.test_recorder_support import chat_prompt, fast_settings
from tokenreel.cli import app
from tokenreel.recorder.engines.engine_metrics import EngineSnapshot, acceptance_between, merge_acceptance, parse_metrics
from tokenreel.recorder.events import NoMetrics, RecordEvent
from tokenreel.recorder.gates.idle_gate import contention
from tokenreel.recorder.runner import new_session, record
from tokenreel.recorder.todo import runs_todo
from tokenreel.report import build_report, render_report
from tokenreel.session import archive
from tokenreel.session.model import Acceptance, Arm, Run, Session
from tokenreel.session.validate import from_dict

TOKENS = 64
DRAFTS = {"drafts": 20.0, "draft_tokens": 80.0, "accepted": 30.0}  # per request: length 2.5, rate 0.375


def record_fake(state: FakeEngine, tmp_path: Path, repeats: int = 1, events: list[RecordEvent] | None = None) -> Session:
    """Record one arm, one prompt against the fake engine through the real recorder."""
    with serving(state) as base_url:
        arm = Arm(id="a", label="Arm A", base_url=base_url, model="m")
        settings = fast_settings(max_tokens=TOKENS, repeats=repeats, idle_wait_s=0.5)
        session = new_session("fake", settings, [chat_prompt()], [arm])
        asyncio.run(record(session, tmp_path / "s.json", on_event=None if events is None else events.append))
    return session


# --- defect 1: acceptance length on llama.cpp --------------------------------------------------


def test_llamacpp_acceptance_merges_timings_with_the_drafts_counter(tmp_path: Path) -> None:
    """timings give drafted/accepted tokens, the counter gives verify steps: 1 + 30 / 20 = 2.5.
    Before: the response 'won' and the length was None (a dash in every report)."""
    state = FakeEngine("llamacpp", six_digits=True, spec=dict(DRAFTS), timings=True,
                       counters={"generated": 5000, "drafts": 400, "draft_tokens": 1600, "accepted": 600})
    [run] = record_fake(state, tmp_path).runs
    assert run.status == "ok" and run.contended is False, run.contention_detail
    acceptance = run.acceptance
    assert acceptance is not None and acceptance.source == "timings+metrics"
    assert acceptance.mean_length == pytest.approx(2.5) and acceptance.rate == pytest.approx(30 / 80)
    assert (acceptance.drafts, acceptance.draft_tokens, acceptance.accepted) == (20, 80, 30)
    assert acceptance.approximate is False and run.acceptance_note == ""
    session = archive.load(tmp_path / "s.json")
    md = render_report(session, "md")
    assert "| 2.50 | 38 % |" in md  # the ladder row: acceptance length and, new, the rate


def test_report_says_why_an_arm_has_no_acceptance_length(tmp_path: Path) -> None:
    """A dash without a reason was the defect; each arm now names why (not speculative here)."""
    state = FakeEngine("llamacpp", six_digits=False, counters={"generated": 0, "drafts": 0, "accepted": 0})
    [run] = record_fake(state, tmp_path).runs
    assert run.acceptance is None and run.acceptance_note == "not speculative (no drafts during the run)"
    md = render_report(archive.load(tmp_path / "s.json"), "md")
    assert "- Arm A (—): not speculative (no drafts during the run)" in md
    sglang = FakeEngine("sglang", six_digits=False, counters={"generated": 0, "decode": 0})
    [run] = record_fake(sglang, tmp_path / "sg").runs
    assert run.acceptance is None and run.acceptance_note.startswith("no spec counters on this endpoint (SGLang has none)")


def test_merge_prefers_exact_response_figures_and_marks_coarse_counters() -> None:
    exact = Acceptance(mean_length=3.0, rate=0.5, drafts=10, draft_tokens=40, accepted=20, source="metrics.speculative_decoding")
    before = EngineSnapshot(drafts=1e7, accepted_tokens=2e7, quanta={"drafts": 100, "accepted_tokens": 100})
    after = EngineSnapshot(drafts=1.0001e7, accepted_tokens=2.0002e7, quanta={"drafts": 100, "accepted_tokens": 100})
    assert merge_acceptance(exact, before, after) is exact  # the response's own figures win
    timings = Acceptance(None, 0.75, None, 40, 30, "timings")
    merged = merge_acceptance(timings, before, after)
    assert merged is not None and merged.mean_length == pytest.approx(1 + 30 / 1000) and merged.approximate
    assert merged.note.startswith("approximate: counters printed in rounded steps (drafts ±100)")
    from_counters = acceptance_between(before, after)
    assert from_counters is not None and from_counters.approximate and "length between" in from_counters.note


# --- defect 2: contention the request-end counters cannot see ---------------------------------


@pytest.mark.parametrize("engine", ["llamacpp", "sglang"])
def test_overlapping_request_that_ends_after_the_run_is_contention(tmp_path: Path, engine: str) -> None:
    """Another client's request starts during ours and is still running when ours ends: its
    tokens reach no request-end counter yet, only the gauges show it. Before: contended False.
    Our own request, still counted as running for a moment after [DONE], is re-read, not flagged."""
    state = FakeEngine(engine, six_digits=False, busy_after=True, counters={"generated": 1000})
    [run] = record_fake(state, tmp_path).runs
    assert run.status == "ok" and run.contended is True, run.contention_detail
    assert run.contention_detail == (
        "1 running, 0 waiting on the endpoint after this run's stream closed (another client's request was in flight)"
    )
    lingering = FakeEngine(engine, six_digits=False, linger_s=0.12, counters={"generated": 1000})
    runs = record_fake(lingering, tmp_path / "linger", repeats=2).runs
    assert [(r.contended, r.contention_detail) for r in runs] == [(False, ""), (False, "")]


def test_sglang_decode_counter_catches_traffic_the_request_end_counter_misses(tmp_path: Path) -> None:
    """SGLang's realtime decode counter moves every step: 500 foreign tokens during the run show
    there even though generation_tokens (request end) only has ours. Before: contended False."""
    state = FakeEngine("sglang", six_digits=False, foreign_decode=500, counters={"generated": 1000, "decode": 0})
    [run] = record_fake(state, tmp_path).runs
    assert run.contended is True
    assert run.contention_detail == (
        f'sglang:realtime_tokens_total{{mode="decode"}} grew by {TOKENS - 1 + 500} during the run, this run generated {TOKENS}'
    )
    quiet = FakeEngine("sglang", six_digits=False, counters={"generated": 1000, "decode": 0})
    [run] = record_fake(quiet, tmp_path / "quiet").runs
    assert (run.contended, run.contention_detail) == (False, "")


def test_parse_reads_the_decode_counter_only_for_mode_decode() -> None:
    text = FakeEngine("sglang", six_digits=False, counters={"decode": 700, "prefill": 9000, "generated": 5}).metrics_text()
    snapshot = parse_metrics(text)
    assert (snapshot.decode_tokens, snapshot.generated_tokens, snapshot.engine) == (700, 5, "sglang")


# --- defect 3: six significant digits ----------------------------------------------------------


LLAMACPP_BIG = """\
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 2903.63
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {value}
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
"""


def test_counter_precision_comes_from_its_printed_text() -> None:
    coarse = parse_metrics(LLAMACPP_BIG.format(value="1.23457e+07"))
    assert coarse.generated_tokens == 12345700 and coarse.quantum("generated_tokens") == 100
    assert parse_metrics(LLAMACPP_BIG.format(value="1.2e+07")).quantum("generated_tokens") == 100  # %g dropped zeros
    assert parse_metrics(LLAMACPP_BIG.format(value="512")).quantum("generated_tokens") == 0
    python = 'vllm:num_requests_running 0.0\nvllm:generation_tokens_total 1.2e+07\nvllm:generation_tokens_created 1.7330284619541736e+09\n'
    assert parse_metrics(python).quantum("generated_tokens") == 0  # prometheus_client prints full digits


def test_six_digit_counters_are_not_contention_but_real_traffic_still_is() -> None:
    """True Δ 512 read as 500 or 600 (steps of 100): within the printed step, not contention.
    Before: 600 - 512 > 16 tokens of slack, so about a third of runs were dropped."""
    before = parse_metrics(LLAMACPP_BIG.format(value="1.23457e+07"))
    for shown in ("1.23462e+07", "1.23463e+07"):  # 500 and 600 more, for a true 512
        assert contention(before, parse_metrics(LLAMACPP_BIG.format(value=shown)), 512) == (False, "")
    contended, detail = contention(before, parse_metrics(LLAMACPP_BIG.format(value="1.23465e+07")), 512)
    assert contended is True and detail.endswith("this run generated 512 (counter printed in steps of 100, allowed)")


def test_long_lived_llamacpp_server_records_no_false_contention(tmp_path: Path) -> None:
    state = FakeEngine("llamacpp", six_digits=True, counters={"generated": 12_345_678})
    state.step_s = 0.0005
    runs = record_fake(state, tmp_path, repeats=6).runs
    assert [r.contended for r in runs] == [False] * 6, [r.contention_detail for r in runs]


# --- defect 4: cells that vanished and /metrics that is off -------------------------------------


def write_config(path: Path, base_url: str, repeats: int = 2) -> Path:
    path.write_text(
        '[session]\nname = "fake"\nprompts = "builtin:ladder4"\nmax_tokens = 16\nwarmup = 0\n'
        f"repeats = {repeats}\nidle_wait_s = 0.5\n"
        f'[[arms]]\nid = "a"\nlabel = "Arm A"\nbase_url = "{base_url}"\nmodel = "m"\n',
        encoding="utf-8",
    )
    return path


def invoke(*args: Any) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_record_says_which_cells_were_all_contended_and_exits_1(tmp_path: Path) -> None:
    """Before: exit 0, no line, and the report had no cells and said nothing."""
    state = FakeEngine("llamacpp", six_digits=False, foreign_tokens=5000, counters={"generated": 0})
    session_path = tmp_path / "s.json"
    with serving(state) as base_url:
        config = write_config(tmp_path / "c.toml", base_url)
        result = invoke("record", "--config", config, "--out", session_path, "--no-preflight")
        assert result.exit_code == 1, result.output
        for prompt in ("conversation-1", "reasoning-1", "prose-1", "code-1"):
            assert f"a / {prompt}: all 2 runs contended: endpoint generated 5016 tokens during the run" in result.output
        assert "`tokenreel record --resume` re-records their runs" in result.output
        session = archive.load(session_path)
        assert len(runs_todo(session, session.arms[0])) == 8  # contended runs are redone by --resume
        report = build_report(session)
        assert report["cells"] == [] and len(report["missing_cells"]) == 4
        assert report["missing_cells"][0]["reason"].startswith("all 2 runs contended: endpoint generated 5016 tokens")
        md = render_report(session, "md")
        assert "| a | code-1 | code | 2 | all 2 runs contended: endpoint generated 5016 tokens" in md
        state.foreign_tokens = 0  # the other client is gone: --resume fills the cells
        resumed = invoke("record", "--config", config, "--out", session_path, "--no-preflight", "--resume")
        assert resumed.exit_code == 0, resumed.output
    assert len(build_report(archive.load(session_path))["cells"]) == 4


def test_no_metrics_warns_once_per_arm_and_the_report_says_unknown(tmp_path: Path) -> None:
    """llama.cpp without --metrics answers 501. Before: the console was silent and the report
    said 'Contended: no'."""
    state = FakeEngine("llamacpp", metrics_status=501)
    session_path = tmp_path / "s.json"
    with serving(state) as base_url:
        config = write_config(tmp_path / "c.toml", base_url, repeats=1)
        result = invoke("record", "--config", config, "--out", session_path, "--no-preflight")
    assert result.exit_code == 0, result.output
    metrics_url = base_url.removesuffix("/v1") + "/metrics"
    warnings = [line for line in result.output.splitlines() if line.startswith("warning: a:")]
    assert len(warnings) == 1, result.output
    assert f"no /metrics at {metrics_url} (HTTP 501)" in warnings[0]
    assert "llama.cpp serves /metrics only when started with --metrics" in warnings[0]
    session = archive.load(session_path)
    cells = build_report(session)["cells"]
    assert cells and all(c["contended"] is None for c in cells)
    md = render_report(session, "md")
    assert f"| unknown (no /metrics: {metrics_url} (HTTP 501)) |" in md and "| no |" not in md
    assert orjson.loads(render_report(session, "json"))["cells"][0]["contention_note"] == f"no /metrics: {metrics_url} (HTTP 501)"


def test_no_metrics_event_is_emitted_once_per_arm(tmp_path: Path) -> None:
    events: list[RecordEvent] = []
    record_fake(FakeEngine("llamacpp", metrics_status=501), tmp_path, repeats=3, events=events)
    warnings = [e for e in events if isinstance(e, NoMetrics)]
    assert len(warnings) == 1 and warnings[0].arm == "a" and "--metrics" in warnings[0].hint


def test_old_archives_still_load_without_the_new_fields(tmp_path: Path) -> None:
    session = record_fake(FakeEngine("llamacpp", six_digits=False, counters={"generated": 0}), tmp_path)
    data = orjson.loads((tmp_path / "s.json").read_bytes())
    for run in data["runs"]:
        run.pop("acceptance_note")
        run["acceptance"] = {"mean_length": 2.0, "source": "metrics"}
    old = from_dict(data)
    assert old.runs[0].acceptance_note == "" and old.runs[0].acceptance == Acceptance(mean_length=2.0, source="metrics")
    assert isinstance(session.runs[0], Run)


def test_counters_too_coarse_for_the_run_give_no_length_and_say_why() -> None:
    """Δdrafts 100 ± 100 (steps of 100 at both ends): any length from 1.15 up; none is given."""
    before = EngineSnapshot(drafts=1.23457e7, accepted_tokens=2e5, quanta={"drafts": 100})
    after = EngineSnapshot(drafts=1.23458e7, accepted_tokens=2e5 + 30, quanta={"drafts": 100})
    merged = merge_acceptance(Acceptance(None, 0.75, None, 40, 30, "timings"), before, after)
    assert merged is not None and merged.mean_length is None and merged.rate == 0.75
    assert merged.note == "counters printed in rounded steps (drafts ±100) are too coarse for 100 drafts"
