"""Latency percentiles in every report format, on a small session whose values are computed by hand.

Arm a, prompt p1 (the percentile method is numpy's linear interpolation: p at rank p/100 * (n - 1)):
  run 0: first token at 100 ms, then 1 token +10 ms, 3 tokens +30 ms, 1 token +10 ms
         -> TTFT 100, ITL 10, 30, 0, 0, 10 (the 3-token chunk is one 30 ms wait and two 0s),
            decode 5 tokens / 50 ms = 100 tok/s, TPOT 10 ms
  run 1: first event 2 tokens at 200 ms, then 2 tokens +20 ms, 1 token +40 ms
         -> TTFT 200, ITL 20, 0, 40, decode 3 / 60 ms = 50 tok/s, TPOT 20 ms
  a contended run and a warmup run, both with absurd timings, that must not count.
Arm a on prompt p2 (which arm b lacks) counts for the cell a/p2, not for arm a's row.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import orjson
import pytest

from tests.session_factory import MS
from tests.session_factory import session as make_session
from tests.test_cli import invoke
from tokenreel.analysis.latency import build_latency, distribution, inter_token_latencies_ms
from tokenreel.report import build_report, render_report
from tokenreel.session import archive
from tokenreel.session.model import Chunks, Prompt, Run, Session


def events(*items: tuple[int, int]) -> Chunks:
    """(ms, tokens) events after a role-only chunk at 1 ms, then a usage-only tail 5 ms after the last."""
    chunks = Chunks()
    chunks.append(1 * MS, 0)
    for ms, tokens in items:
        chunks.append(ms * MS, tokens, content="x" * tokens)
    chunks.append((items[-1][0] + 5) * MS, 0)
    return chunks


RUN0 = events((100, 1), (110, 1), (140, 3), (150, 1))
RUN1 = events((200, 2), (220, 2), (260, 1))
SLOW = events((5000, 1), (9000, 1), (9500, 1))  # contended and warmup: 5 s TTFT, 4 s gaps


def constructed() -> Session:
    s = make_session([("a", "Arm A", [RUN0, RUN1]), ("b", "Arm B", [events((50, 1), (60, 1))])])
    s.prompts.append(Prompt(id="p2", category="code", messages=[{"role": "user", "content": "x"}], prompt=""))
    extra = [
        Run(arm="a", prompt="p1", index=2, warmup=False, contended=True, chunks=SLOW),
        Run(arm="a", prompt="p1", index=3, warmup=True, chunks=SLOW),
        Run(arm="a", prompt="p2", index=0, warmup=False, chunks=events((900, 1), (910, 1))),
    ]
    for run in extra:
        run.usage = {"completion_tokens": sum(run.chunks.tokens)}
        run.token_source = "usage_delta"
    s.runs.extend(extra)
    return s


def test_inter_token_latency_is_per_token_a_chunk_of_k_is_one_wait_and_k_minus_1_zeros() -> None:
    run = constructed().runs[0]
    assert inter_token_latencies_ms(run) == [(10, 1), (30, 1), (0, 2), (10, 1)]
    assert inter_token_latencies_ms(constructed().runs[1]) == [(20, 1), (0, 1), (40, 1)]


def test_percentiles_match_hand_computed_values() -> None:
    cell = next(row for row in build_latency(constructed()).cells if (row.arm, row.prompt) == ("a", "p1"))
    assert cell.runs == 2  # the contended and the warmup run are left out
    itl = cell.itl_ms  # sorted: 0 0 0 10 10 20 30 40
    assert (itl.n, itl.min, itl.max) == (8, 0, 40)
    assert (itl.p50, itl.p90, itl.p99) == pytest.approx((10, 33, 39.3))  # ranks 3.5, 6.3, 6.93
    ttft = cell.ttft_ms
    assert (ttft.n, ttft.min, ttft.max) == (2, pytest.approx(100), pytest.approx(200))
    assert (ttft.p50, ttft.p90, ttft.p99) == pytest.approx((150, 190, 199))
    tpot = cell.tpot_ms  # 10 and 20 ms
    assert (tpot.n, tpot.p50, tpot.p90, tpot.p99) == (2, pytest.approx(15), pytest.approx(19), pytest.approx(19.9))
    assert distribution([]).p50 is None and distribution([]).n == 0


def test_an_arm_covers_only_the_prompts_every_arm_has() -> None:
    latency = build_latency(constructed())
    assert latency.shared_prompts == ["p1"]
    arm_a = latency.arms[0]
    assert (arm_a.arm, arm_a.prompt, arm_a.runs, arm_a.ttft_ms.n) == ("a", None, 2, 2)
    assert arm_a.ttft_ms.max == pytest.approx(200)  # not p2's 900 ms
    cell_p2 = [row for row in latency.cells if row.prompt == "p2"]
    assert [(row.arm, row.runs, row.ttft_ms.p50) for row in cell_p2] == [("a", 1, pytest.approx(900))]


def test_json_has_the_agreed_latency_key() -> None:
    report = orjson.loads(render_report(constructed(), "json"))
    latency = report["latency"]
    assert latency["arm_prompts"] == ["p1"]
    assert [(r["arm"], r["runs"]) for r in latency["arms"]] == [("a", 2), ("b", 1)]
    cell = latency["cells"][0]
    assert (cell["arm"], cell["prompt"], cell["runs"]) == ("a", "p1", 2)
    assert cell["itl_ms"] == {"n": 8, "min": 0.0, "p50": 10.0, "p90": 33.0, "p99": 39.3, "max": 40.0}
    assert set(latency["arms"][1]["tpot_ms"]) == {"n", "min", "p50", "p90", "p99", "max"}


def test_markdown_has_percentile_tables_with_their_populations() -> None:
    text = render_report(constructed(), "md")
    assert "on the 1 prompts every arm has (p1)" in text
    assert "| Arm A | 2 | 150.0 / 190.0 / 199.0 | 100.0–200.0 |" in text
    assert "| a | p1 | 2 | 150.0 / 190.0 / 199.0 | 100.0–200.0 |" in text
    assert "| 10.00 / 33.00 / 39.30 | 0.00–40.00 | 8 |" in text
    assert "| a | p2 | 1 | 900.0 / 900.0 / 900.0 |" in text


def test_markdown_says_why_a_percentile_is_missing() -> None:
    s = make_session([("a", "Arm A", [events((100, 3))]), ("b", "Arm B", [events((50, 1), (60, 1))])])
    text = render_report(s, "md")
    assert "- a / p1: TPOT —: no run carried tokens after its first token event" in text
    assert "- a / p1: ITL —: no token arrived after the first token event" in text
    lone = make_session([("a", "Arm A", [events((100, 1), (110, 1))]), ("b", "Arm B", [])])
    lone.runs.append(Run(arm="b", prompt="p1", index=0, warmup=False, status="failed", error="HTTP 500"))  # recorded, unusable
    alone = render_report(lone, "md")
    assert "on the 0 prompts every arm has (none)" in alone
    assert "- a: every figure —: no usable run on the prompts every arm has" in alone
    assert "| a | p1 | 1 | 100.0 / 100.0 / 100.0 |" in alone  # the cell still has its own figures


def test_csv_has_per_cell_percentiles_and_true_false() -> None:
    rows = list(csv.DictReader(io.StringIO(render_report(constructed(), "csv"))))
    a_p1 = next(r for r in rows if (r["arm"], r["prompt"]) == ("a", "p1"))
    assert (a_p1["itl_ms_n"], a_p1["itl_ms_p90"], a_p1["ttft_ms_p50"], a_p1["ttft_ms_max"]) == ("8", "33.0", "150.0", "200.0")
    for row in rows:
        for key in ("like_for_like", "acceptance_approximate", "tokens_estimated"):
            assert row[key] in ("true", "false"), (key, row[key])
    assert {r["like_for_like"] for r in rows} == {"false"}  # p1: the arms differ in length; p2: one arm only
    same_length = make_session([("a", "Arm A", [events((100, 1), (110, 1))]), ("b", "Arm B", [events((50, 1), (60, 1))])])
    rows = list(csv.DictReader(io.StringIO(render_report(same_length, "csv"))))
    assert [r["like_for_like"] for r in rows] == ["true", "true"]


def test_report_out_csv_with_format_json_writes_json(tmp_path: Path) -> None:
    session = tmp_path / "s.json"
    archive.save(constructed(), session)
    target = tmp_path / "x.csv"
    result = invoke("report", session, "-o", target, "--format", "json")
    assert result.exit_code == 0, result.output
    assert orjson.loads(target.read_bytes())["latency"]["cells"][0]["itl_ms"]["p90"] == 33.0
    assert build_report(archive.load(session))["latency"]["arms"][0]["runs"] == 2
