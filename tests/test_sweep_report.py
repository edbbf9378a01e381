"""A sweep's report (issue 27, item 2): per-level ratios with intervals and the crossovers,
held against the simulator's batching model, whose truth is known (`profiles.crossover`),
over real HTTP; the markdown view leads with the one-line crossover."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.test_cli import invoke, run_cli, write_config
from tokenreel.analysis.metrics import run_metrics
from tokenreel.analysis.verdicts import runs_interval
from tokenreel.report.sweep_compare import OFF_BELOW
from tokenreel.session import archive
from tokenreel.simulator.profiles import Profile, crossover
from tokenreel.simulator.server import SimCluster
from tokenreel.simulator.truth import fetch_sent, pair, run_truth

SCALE = 0.5  # as tests/test_sim_batching.py: a 100 tok/s step lasts 5 ms, long beside the loop's jitter
LEVELS = (1, 2, 4, 8)
CATEGORIES = ("code", "conversation", "reasoning", "summarization", "math", "translation", "extraction")
# a short TTFT: a request in prefill is out of the decode batch, so a long one would leave fewer than N
# decoding (the model's truth assumes N), more so for the drafter, whose requests take fewer steps.
# SLACK: measured against the model, the per-request ratio at 4 ran 3 % high in every try (1.19-1.20
# against 1.158, 16 to 48 requests): a slot stands empty between a request's end and the next one's
# start, more often for the drafter's shorter requests, so it decodes in a smaller batch than N; a
# drafter's last step cut by max_tokens pulls the other way. Systematic, not sampling error: more
# requests narrow the interval and leave it. The test allows 5 % beyond the interval for it.
SLACK = 1.05
# true per-request speed-ups 2.0, 2.0, 1.16, 0.63 at 1, 2, 4, 8: the crossover is 5
BASE = Profile(id="base", label="Base", model="m", decode_tok_s=100, ttft_s=0.002, batch_flat_tokens=8, batch_slope=0.1)
DRAFTER = replace(BASE, id="draft", label="Drafter", spec_k=3, acceptance={c: 2.2 for c in CATEGORIES}, draft_cost=0.1)


def _sweep(tmp_path: Path, make_sim, profiles: list[Profile], requests: int, levels: tuple[int, ...] = LEVELS) -> dict[str, Any]:
    cluster = make_sim(profiles, time_scale=SCALE)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=64)
    out = tmp_path / "sweep.json"
    # the sweep in a process of its own: in this one, a pause of the test process's collector after a
    # thousand tests once held the client ~0.35 s while the simulator (here, in a thread) kept
    # sending, and three requests' tokens were read in a burst (decode 4,000-20,000 tok/s)
    result = run_cli("sweep", "--config", config, "--concurrency", ",".join(map(str, levels)),
                     "--requests", str(requests), "--out", out)
    assert result.returncode == 0, result.stderr
    report = invoke("report", out, "--format", "json")
    assert report.exit_code == 0, report.output
    return {"json": orjson.loads(report.output), "out": out, "cluster": cluster}


def _sent_ratios(out: Path, cluster: SimCluster) -> dict[int, float]:
    """Per level, the drafter's per-request ratio over the base (the report's statistic, a ratio of
    means over the runs with a decode figure) of what the simulator itself sent: each run's decode
    over the same tokens as the recorder's, from its own log of its writes (GET /sim/sent; truth.py's
    `decode_vs_after_pct`)."""
    session = archive.load(out)
    rates: dict[tuple[str, int | None], list[float]] = {}
    for profile in (BASE, DRAFTER):
        for run, stream in pair(profile.id, session.runs, fetch_sent(cluster.root_url(profile.id), cluster.control_headers)):
            truth, recorded = run_truth(run, stream), run_metrics(run).decode_tok_s
            if not run.warmup and recorded is not None and truth.decode_vs_after_pct is not None:
                rates.setdefault((profile.id, run.level), []).append(recorded / (1 + truth.decode_vs_after_pct / 100))
    return {n: runs_interval(rates[(BASE.id, n)], rates[(DRAFTER.id, n)]).ratio for n in LEVELS}


def test_crossover_and_intervals_hold_the_models_truth(tmp_path: Path, make_sim) -> None:
    truth = crossover(BASE, DRAFTER, "code")
    assert truth == 5
    sweep = _sweep(tmp_path, make_sim, [BASE, DRAFTER], requests=24)
    report, sent = sweep["json"], _sent_ratios(sweep["out"], sweep["cluster"])
    [crossing] = report["crossovers"]
    assert (crossing["arm"], crossing["vs"]) == ("draft", "base")
    assert crossing["drafting_off_level"] is None
    # A request whose first read held its whole reply (a starved simulator's burst) has no decode
    # interval, so no rate to pair: the interval counts the others, and at most a quarter may be so.
    whole = Counter((run.arm, run.level) for run in archive.load(sweep["out"]).runs
                    if not run.warmup and run_metrics(run).decode_tokens == 0)
    assert all(count <= 24 // 4 for count in whole.values()), whole
    # A level is held to the model and to what the simulator sent where the simulator kept the
    # model (its own ratio within SLACK): starved by a loaded box (it serves from this process), it
    # falls behind and sends the rest of a reply in a burst (beside two CPU hogs, 4 base requests at
    # 8 read 14,000-31,000 tok/s), and a burst's microsecond spans make both its sent and its
    # recorded rates noise (once 0.005 sent against a recorded 0.011-0.15 at 8). At most half the
    # levels may be set aside, so a misreading recorder still fails.
    aside = []
    for compared in crossing["levels"]:
        n = compared["level"]
        true_ratio = DRAFTER.expected_tok_s("code", n) / BASE.expected_tok_s("code", n)
        low, high = compared["per_request"]["ci95"]
        if true_ratio / SLACK <= sent[n] <= true_ratio * SLACK:
            # SLACK: the closed loop's own bias, which no interval over requests covers (module note)
            assert low / SLACK <= sent[n] <= high * SLACK, (n, sent[n], compared)
            assert low / SLACK <= true_ratio <= high * SLACK, (n, true_ratio, compared)
        else:
            aside.append((n, sent[n], true_ratio))
        assert compared["per_request"]["requests"] == min(24 - whole[(arm, n)] for arm in ("base", "draft"))
    assert len(aside) <= len(LEVELS) // 2, aside
    if not aside:
        # the lowest level at or above the truth (8), or the one below it (4) if the interval there holds 1
        for key in ("per_request_level", "aggregate_level"):
            assert crossing[key] in (4, 8), crossing
    rows = {(row["arm"], row["level"]): row for row in report["levels"]}
    for n in LEVELS:
        assert rows[("base", n)]["drafts_per_step"] in (0, None)  # no spec-decode counters: None
        assert 0.9 < rows[("draft", n)]["drafts_per_step"] <= 1.05  # one draft a step of each request
        assert rows[("draft", n)]["acceptance_length"] == pytest.approx(2.2, rel=0.15)
        for arm in ("base", "draft"):
            row = rows[(arm, n)]
            assert row["ttft_ms"]["p50"] <= row["ttft_ms"]["p90"] <= row["ttft_ms"]["p99"]
            assert row["tpot_ms"]["p50"] > 0 and row["peak_waiting"] is not None
            assert "decode_tok_s" not in row  # the per-request sample stays out of the json
    assert report["summary"] == [crossing["sentence"]]
    if not aside:
        level = crossing["per_request_level"]
        assert crossing["sentence"].startswith(f"Drafter pays over Base up to {LEVELS[LEVELS.index(level) - 1]}")


def test_drafting_off_level_and_the_markdown_view(tmp_path: Path, make_sim) -> None:
    # plain above 2 running, on a 25 % slower target (its drafter's memory): slower than the base there.
    # The aggregate's interval is the per-request one scaled (sweep_compare), about +-0.5 % at 4 here,
    # blind to a stall between requests, which on a loaded box can lengthen one arm's window by a tenth
    # (a 10 % slower target read as paying in aggregate). 25 % at 4, and 1.5x at 2 (drafting), leave
    # about a third either way: a stall of 0.3 s in an arm's 1 s window of 12 requests.
    off = replace(DRAFTER, drafting_off_above=2, decode_tok_s=75)
    sweep = _sweep(tmp_path, make_sim, [BASE, off], requests=12, levels=(1, 2, 4))
    [pair] = sweep["json"]["crossovers"]
    assert pair["drafting_off_level"] == 4, sweep["json"]["levels"]
    assert pair["per_request_level"] == pair["aggregate_level"] == 4
    at_4 = pair["levels"][-1]["per_request"]
    assert at_4["ci95"][1] < 1 and at_4["ratio"] == pytest.approx(0.75, rel=0.05), at_4
    assert set(pair) >= {"arm", "vs", "per_request_level", "aggregate_level", "drafting_off_level", "levels"}
    rows = {(row["arm"], row["level"]): row for row in sweep["json"]["levels"]}
    assert rows[("draft", 4)]["drafts_per_step"] < OFF_BELOW < 0.9 < rows[("draft", 2)]["drafts_per_step"]
    md = invoke("report", sweep["out"], "--format", "md")
    assert md.exit_code == 0, md.output
    lines = md.output.splitlines()
    assert lines[2] == ("**Drafter pays over Base up to 2 concurrent requests; from 4 on it is slower"
                        " (per request; aggregate: from 4 on); the engine stopped drafting at 4.**")
    assert "| 4 | ok | 12 |" in md.output and "## Drafter vs Base" in md.output
    # the base's dashes say why (no drafter: no spec-decode counters); the drafter's table has none to explain
    base_part, drafter_part = md.output.split("## Base", 1)[1].split("## Drafter", 1)
    assert "drafts per step –: the engine's /metrics has no spec-decode counters" in " ".join(base_part.split())
    assert "drafts per step –" not in drafter_part.split("## Drafter vs Base")[0]
    csv = invoke("report", sweep["out"], "--format", "csv")
    assert csv.exit_code == 2 and len(csv.output.strip().splitlines()) == 1


def test_a_level_with_one_timed_request_a_side_is_not_shown_to_pay() -> None:
    """A ratio without an interval (a starved client merged all but one request's tokens into one
    read) shows nothing: the crossover is there, not "pays at every level"."""
    from tokenreel.recorder.runner import new_session
    from tokenreel.report.sweep_compare import crossovers
    from tokenreel.session.model import Arm, Settings

    arms = [Arm(id=a, label=a, base_url="http://x/v1", model="m") for a in ("base", "draft")]
    session = new_session("s", Settings(max_tokens=8), [], arms)

    def row(arm: str, level: int, decode: list[float]) -> dict[str, Any]:
        return {"arm": arm, "level": level, "decode_tok_s": decode, "aggregate_output_tok_s": sum(decode) * level,
                "drafts_per_step": None}

    rows = [row("base", 1, [100, 101, 99]), row("draft", 1, [200, 203, 198]),
            row("base", 2, [100]), row("draft", 2, [300, 290, 310])]
    [pair] = crossovers(session, rows)
    assert pair["levels"][0]["per_request"]["ci95"][0] > 1 and pair["levels"][1]["per_request"]["ci95"] is None
    assert pair["levels"][1]["per_request"]["ratio"] == pytest.approx(3.0)
    assert pair["per_request_level"] == pair["aggregate_level"] == 2
